// Package floor is the least an MCP client can do to call a tool: one
// goroutine, a fixed request, and no decoding of the answer beyond finding
// its id. It is the floor harnessd's client and the Go SDK's are measured
// against, at revision 2025-11-25 (with its initialize handshake) and
// 2026-07-28 (no handshake: each request carries its _meta), over stdio
// and over Streamable HTTP. Its requests come in two shapes (see Shape):
// the least a server can be asked, and the same requests as harnessd's.
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

// A Shape is what the floor's requests ask of the server besides the call.
type Shape int

const (
	// Fixed is the floor's own shape: no client capabilities, no progress
	// token, no subscription; the least a server can be asked.
	Fixed Shape = iota
	// SameRequests makes the same protocol requests as harnessd's client,
	// so that the server does the same work for both (only the clientInfo
	// stays the floor's):
	//   - harnessd's capabilities (its features) are declared: at
	//     initialize at 2025-11-25, in every request's _meta at 2026-07-28;
	//   - every tools/call carries _meta.progressToken = its id;
	//   - the stream harnessd holds is opened after connecting and held
	//     until Close: at 2026-07-28 a subscriptions/listen for tools list
	//     changes (over stdio written and left, the calls' read loop
	//     skipping its acknowledgement; over HTTP its answer stream read on
	//     a goroutine), and over HTTP at 2025-11-25 the session's GET
	//     stream.
	//
	// harnessd's server/discover, once at connection at 2026-07-28, is left
	// out: it weighs on no call.
	SameRequests
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

// request returns the tools/call request with id at version in shape: at
// 2026-07-28 with the _meta every request of that revision carries.
func request(id int, version string, shape Shape) []byte {
	var b bytes.Buffer
	b.WriteString(`{"jsonrpc":"2.0","id":`)
	b.WriteString(strconv.Itoa(id))
	b.WriteString(`,"method":"tools/call","params":{`)
	switch {
	case shape == SameRequests:
		b.WriteString(`"_meta":{`)
		if version == Rev2026 {
			b.WriteString(sameMeta + `,`)
		}
		b.WriteString(`"progressToken":`)
		b.WriteString(strconv.Itoa(id))
		b.WriteString(`},`)
	case version == Rev2026:
		b.WriteString(`"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"floor","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},`)
	}
	b.WriteString(`"name":"echo","arguments":{"message":"hello"}}}`)
	return b.Bytes()
}

const initialize = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"floor","version":"1"}}}`
const initialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`

// The SameRequests shape's own parts, with their members in harnessd's
// order: the capabilities harnessd declares (its features), the _meta
// members every request carries at 2026-07-28, the initialize at
// 2025-11-25, and the subscriptions/listen at 2026-07-28 (id 0, which no
// call of that revision takes).
const (
	sameCapabilities = `{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},"sampling":{"tools":{}}}`
	sameMeta         = `"io.modelcontextprotocol/clientCapabilities":` + sameCapabilities + `,"io.modelcontextprotocol/clientInfo":{"name":"floor","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	sameInitialize   = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":` + sameCapabilities + `,"clientInfo":{"name":"floor","version":"1"},"protocolVersion":"2025-11-25"}}`
	sameListen       = `{"jsonrpc":"2.0","id":0,"method":"subscriptions/listen","params":{"_meta":{` + sameMeta + `},"notifications":{"toolsListChanged":true}}}`
)

// initializeRequest returns the initialize request of shape.
func initializeRequest(shape Shape) []byte {
	if shape == SameRequests {
		return []byte(sameInitialize)
	}
	return []byte(initialize)
}

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
	shape   Shape
	next    int
}

// Stdio starts cmd and, at 2025-11-25, runs the initialize handshake; in
// the SameRequests shape at 2026-07-28, it writes the subscriptions/listen
// and moves on.
func Stdio(ctx context.Context, cmd *exec.Cmd, version string, shape Shape) (Client, error) {
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
	c := &stdioClient{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 64<<10), version: version, shape: shape, next: 1}
	if version == Rev2025 {
		if err := c.roundTrip(initializeRequest(shape), 0); err != nil {
			c.Close()
			return nil, fmt.Errorf("initialize: %w", err)
		}
		if _, err := c.in.Write([]byte(initialized + "\n")); err != nil {
			c.Close()
			return nil, err
		}
	} else if shape == SameRequests {
		if _, err := c.in.Write([]byte(sameListen + "\n")); err != nil {
			c.Close()
			return nil, fmt.Errorf("subscriptions/listen: %w", err)
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
	return c.roundTrip(request(id, c.version, c.shape), id)
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
	shape   Shape
	session string
	next    int
	stop    context.CancelFunc // ends the held stream; nil if none
	held    chan struct{}      // closed once the held stream is read
}

// HTTP connects to a Streamable HTTP endpoint: at 2025-11-25 with the
// initialize handshake and its session, at 2026-07-28 without either. In
// the SameRequests shape it opens the stream harnessd holds (the session's
// GET stream before notifications/initialized, or the subscriptions/listen)
// and reads it on a goroutine until Close.
func HTTP(ctx context.Context, url string, client *http.Client, version string, shape Shape) (Client, error) {
	c := &httpClient{url: url, http: client, version: version, shape: shape, next: 1}
	if version == Rev2025 {
		resp, err := c.post(ctx, initializeRequest(shape), 0, "initialize", "")
		if err != nil {
			return nil, fmt.Errorf("initialize: %w", err)
		}
		c.session = resp.Header.Get("Mcp-Session-Id")
		if shape == SameRequests {
			if err := c.hold(ctx, http.MethodGet, nil, ""); err != nil {
				return nil, fmt.Errorf("GET stream: %w", err)
			}
		}
		if _, err := c.post(ctx, []byte(initialized), -1, "notifications/initialized", ""); err != nil {
			c.Close()
			return nil, fmt.Errorf("notifications/initialized: %w", err)
		}
	} else if shape == SameRequests {
		if err := c.hold(ctx, http.MethodPost, []byte(sameListen), "subscriptions/listen"); err != nil {
			return nil, fmt.Errorf("subscriptions/listen: %w", err)
		}
	}
	return c, nil
}

// newRequest returns the HTTP request (verb POST or GET) carrying msg,
// with the headers of the floor's revision and session; method is the
// JSON-RPC method and name the tool's, for the 2026-07-28 headers.
func (c *httpClient) newRequest(ctx context.Context, verb string, msg []byte, method, name string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, verb, c.url, bytes.NewReader(msg))
	if err != nil {
		return nil, err
	}
	if verb == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else {
		req.Header.Set("Accept", "text/event-stream")
	}
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
	return req, nil
}

// post sends msg and reads the whole answer (JSON or an event stream),
// which must hold the answer with id unless id is negative (a
// notification); name is the tool's, for the 2026-07-28 headers.
func (c *httpClient) post(ctx context.Context, msg []byte, id int, method, name string) (*http.Response, error) {
	req, err := c.newRequest(ctx, http.MethodPost, msg, method, name)
	if err != nil {
		return nil, err
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

// hold sends msg (a GET when verb says so) and returns once its answer's
// headers have arrived (ctx bounds the wait); a goroutine reads the
// answer's stream, unread, until the server ends it or Close does.
func (c *httpClient) hold(ctx context.Context, verb string, msg []byte, method string) error {
	streamCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	req, err := c.newRequest(streamCtx, verb, msg, method, "")
	if err != nil {
		stop()
		return err
	}
	unbind := context.AfterFunc(ctx, stop)
	resp, err := c.http.Do(req)
	unbind()
	if err != nil {
		stop()
		return err
	}
	if resp.StatusCode/100 != 2 {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		stop()
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	c.stop, c.held = stop, make(chan struct{})
	// Owned by the client; ends with the stream, at Close at the latest.
	go func() {
		defer close(c.held)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	return nil
}

func (c *httpClient) Call(ctx context.Context) error {
	id := c.next
	c.next++
	_, err := c.post(ctx, request(id, c.version, c.shape), id, "tools/call", "echo")
	return err
}

// Close ends the held stream, if any, and waits for its reader.
func (c *httpClient) Close() error {
	if c.stop != nil {
		c.stop()
		<-c.held
	}
	return nil
}
