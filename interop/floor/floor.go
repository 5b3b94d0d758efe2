// Package floor is the least an MCP client can do to call a tool: one
// goroutine, a fixed request, and no decoding of the answer beyond finding
// its id. It is the floor harnessd's client and the Go SDK's are measured
// against, at revision 2025-11-25 (with its initialize handshake) and
// 2026-07-28 (no handshake: each request carries its _meta), over stdio
// and over Streamable HTTP.
package floor

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
)

// The revisions the floor speaks.
const (
	Rev2025 = "2025-11-25"
	Rev2026 = "2026-07-28"
)

// A Client calls echo({"message":"hello"}) on one server, one call at a
// time. It is not safe for concurrent use.
type Client interface {
	// Call sends one tools/call and returns once the answer with its id
	// has arrived (its content is not read).
	Call(ctx context.Context) error
	// Close ends the connection (and the server, over stdio).
	Close() error
}

// request returns the tools/call request with id at version: at 2026-07-28
// with the _meta every request of that revision carries.
func request(id int, version string) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.WriteString(strconv.Itoa(id))
	b.WriteString(`,"method":"tools/call","params":{`)
	if version == Rev2026 {
		b.WriteString(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"floor","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},`)
	}
	b.WriteString(`"name":"echo","arguments":{"message":"hello"}}}`)
	return b.Bytes()
}

const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"floor","version":"1"}}}`
const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// hasID reports whether msg is the answer with id: it holds "id":id
// followed by a delimiter, the only decoding the floor does.
func hasID(msg []byte, id int) bool {
	key := `"id":` + strconv.Itoa(id)
	for i := bytes.Index(msg, []byte(key)); i >= 0; {
		end := i + len(key)
		if end < len(msg) && (msg[end] == ',' || msg[end] == '}' || msg[end] == ' ') {
			return true
		}
		next := bytes.Index(msg[end:], []byte(key))
		if next < 0 {
			return false
		}
		i = end + next
	}
	return false
}

// A stdioClient talks to a server subprocess, one JSON message a line.
type stdioClient struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	out     *bufio.Reader
	version string
	next    int
}

// Stdio starts cmd and, at 2025-11-25, runs the initialize handshake.
func Stdio(ctx context.Context, cmd *exec.Cmd, version string) (Client, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	c := &stdioClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), version: version, next: 1}
	if version == Rev2025 {
		if err := c.roundTrip([]byte(initialize), 0); err != nil {
			c.Close()
			return nil, fmt.Errorf("initialize: %w", err)
		}
		if _, err := c.in.Write([]byte(initialized + "\n")); err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *stdioClient) roundTrip(msg []byte, id int) error {
	if _, err := c.in.Write(append(msg, '\n')); err != nil {
		return err
	}
	for {
		line, err := c.out.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: read the rest whole, then look at it.
			rest, err := c.out.ReadBytes('\n')
			if err != nil {
				return err
			}
			line = append(append([]byte(nil), line...), rest...)
		} else if err != nil {
			return err
		}
		if hasID(line, id) {
			return nil
		}
	}
}

func (c *stdioClient) Call(context.Context) error {
	id := c.next
	c.next++
	return c.roundTrip(request(id, c.version), id)
}

func (c *stdioClient) Close() error {
	c.in.Close()
	return c.cmd.Wait()
}

// An httpClient posts each request to a Streamable HTTP endpoint.
type httpClient struct {
	url     string
	http    *http.Client
	version string
	session string
	next    int
}

// HTTP connects to a Streamable HTTP endpoint: at 2025-11-25 with the
// initialize handshake and its session, at 2026-07-28 without either.
func HTTP(ctx context.Context, url string, client *http.Client, version string) (Client, error) {
	c := &httpClient{url: url, http: client, version: version, next: 1}
	if version == Rev2025 {
		resp, err := c.post(ctx, []byte(initialize), 0, "initialize", "")
		if err != nil {
			return nil, fmt.Errorf("initialize: %w", err)
		}
		c.session = resp.Header.Get("Mcp-Session-Id")
		if _, err := c.post(ctx, []byte(initialized), -1, "notifications/initialized", ""); err != nil {
			return nil, fmt.Errorf("notifications/initialized: %w", err)
		}
	}
	return c, nil
}

// post sends msg and reads the whole answer (JSON or an event stream),
// which must hold the answer with id unless id is negative (a
// notification); name is the tool's, for the 2026-07-28 headers.
func (c *httpClient) post(ctx context.Context, msg []byte, id int, method, name string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", c.version)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version == Rev2026 {
		req.Header.Set("Mcp-Method", method)
		if name != "" {
			req.Header.Set("Mcp-Name", name)
		}
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s: %s: %s", method, resp.Status, strings.TrimSpace(string(body)))
	}
	if id >= 0 && !hasID(body, id) {
		return nil, errors.New(method + ": no answer with id " + strconv.Itoa(id) + ": " + string(body))
	}
	return resp, nil
}

func (c *httpClient) Call(ctx context.Context) error {
	id := c.next
	c.next++
	_, err := c.post(ctx, request(id, c.version), id, "tools/call", "echo")
	return err
}

func (c *httpClient) Close() error { return nil }
