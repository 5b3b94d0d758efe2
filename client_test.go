package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// This file tests the MCP client against the real peers over every
// transport they offer, and HTTP faults at the client level with scripted
// httptest servers.

// stdioPeerConfig returns the config of a stdio server run by peer.
func stdioPeerConfig(name string, peer peerCommand) serverConfig {
	return serverConfig{
		Name:            name,
		Transport:       transportStdio,
		Command:         peer.Command,
		Args:            peer.Args,
		Env:             peer.Env,
		Timeout:         defaultTimeout,
		StartupTimeout:  peerStartTimeout,
		Enabled:         true,
		MaxMessageBytes: defaultMaxMessageBytes,
		Source:          "test",
	}
}

// httpPeerConfig returns the config of an HTTP server at endpoint spoken
// to over transport (http or sse).
func httpPeerConfig(name, transport, endpoint string) serverConfig {
	return serverConfig{
		Name:            name,
		Transport:       transport,
		URL:             endpoint,
		Timeout:         defaultTimeout,
		StartupTimeout:  peerStartTimeout,
		Enabled:         true,
		MaxMessageBytes: defaultMaxMessageBytes,
		Source:          "test",
	}
}

// connectPeer connects to cfg and closes the session at cleanup.
func connectPeer(t *testing.T, cfg serverConfig, opts clientOptions) *client {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	c, err := connect(t.Context(), cfg, opts)
	if err != nil {
		t.Fatalf("connect(%q over %s) = %v", cfg.Name, cfg.Transport, err)
	}
	t.Cleanup(func() { c.close() })
	return c
}

// recordedToolNames returns the tool names in testdata/tools/<file>.
func recordedToolNames(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tools", file))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []toolInfo `json:"tools"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	names := make([]string, 0, len(list.Tools))
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// callText calls a tool, fails the test on an error or an isError result,
// and returns the result's text blocks joined by newlines.
func callText(t *testing.T, c *client, tool, args string) string {
	t.Helper()
	res, err := c.callTool(t.Context(), tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("callTool(%q, %s) = %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("callTool(%q, %s) isError, text %q", tool, args, resultText(t, res))
	}
	return resultText(t, res)
}

// everythingDocsDir is where server-everything serves its static documents
// from.
func everythingDocsDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(requireNode(t), "@modelcontextprotocol", "server-everything", "dist", "docs")
}

// checkEverything exercises server-everything: echo, every resource page,
// a text resource (compared with its file) and a blob resource.
func checkEverything(t *testing.T, c *client, _ string) {
	if got, want := callText(t, c, "echo", `{"message":"hello"}`), "Echo: hello"; got != want {
		t.Errorf("echo = %q, want %q", got, want)
	}
	resources, err := c.listResources(t.Context())
	if err != nil {
		t.Fatalf("listResources() = %v", err)
	}
	docs, err := os.ReadDir(everythingDocsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	uris := make([]string, 0, len(resources))
	for _, r := range resources {
		uris = append(uris, r.URI)
	}
	for _, doc := range docs {
		want := "demo://resource/static/document/" + url.PathEscape(doc.Name())
		if !slices.Contains(uris, want) {
			t.Errorf("listResources() = %q, want it to contain %q", uris, want)
		}
	}

	const textURI = "demo://resource/static/document/features.md"
	wantText, err := os.ReadFile(filepath.Join(everythingDocsDir(t), "features.md"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.readResource(t.Context(), textURI)
	if err != nil {
		t.Fatalf("readResource(%q) = %v", textURI, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].Text != string(wantText) || res.Contents[0].MIMEType != "text/markdown" {
		t.Errorf("readResource(%q) = %+v, want the text of features.md as text/markdown", textURI, res.Contents)
	}

	const blobURI = "demo://resource/dynamic/blob/7"
	res, err = c.readResource(t.Context(), blobURI)
	if err != nil {
		t.Fatalf("readResource(%q) = %v", blobURI, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].Blob == "" {
		t.Fatalf("readResource(%q) = %+v, want one blob", blobURI, res.Contents)
	}
	blob, err := base64.StdEncoding.DecodeString(res.Contents[0].Blob)
	if err != nil || !strings.HasPrefix(string(blob), "Resource 7: This is a base64 blob") {
		t.Errorf("readResource(%q) blob = %q (%v), want it to start with %q", blobURI, blob, err, "Resource 7: This is a base64 blob")
	}
}

// checkFilesystem reads a file of the allowed directory, which is also the
// client's root.
func checkFilesystem(t *testing.T, c *client, dir string) {
	const content = "written by the harnessd client test\n"
	file := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"path": file})
	if got := callText(t, c, "read_text_file", string(args)); got != content {
		t.Errorf("read_text_file(%q) = %q, want %q", file, got, content)
	}
	outside, _ := json.Marshal(map[string]string{"path": "/etc/hostname"})
	res, err := c.callTool(t.Context(), "read_text_file", outside)
	if err != nil || !res.IsError {
		t.Errorf("read_text_file(/etc/hostname) = %v, %v, want an isError result (outside the allowed directory)", res, err)
	}
}

// checkMemory creates an entity and reads it back from the graph.
func checkMemory(t *testing.T, c *client, _ string) {
	callText(t, c, "create_entities", `{"entities":[{"name":"harnessd","entityType":"daemon","observations":["speaks MCP over stdio"]}]}`)
	graph := callText(t, c, "read_graph", `{}`)
	for _, want := range []string{`"harnessd"`, `"daemon"`, "speaks MCP over stdio"} {
		if !strings.Contains(graph, want) {
			t.Errorf("read_graph = %q, want it to contain %q", graph, want)
		}
	}
}

// checkEchoServer calls both tools of the Go SDK's echoserver and checks it
// has no resources.
func checkEchoServer(t *testing.T, c *client, _ string) {
	if got, want := callText(t, c, "echo", `{"message":"hello, go sdk"}`), "hello, go sdk"; got != want {
		t.Errorf("echo = %q, want %q", got, want)
	}
	res, err := c.callTool(t.Context(), "add", json.RawMessage(`{"a":2,"b":3}`))
	if err != nil {
		t.Fatalf("callTool(add) = %v", err)
	}
	if string(res.StructuredContent) != `{"sum":5}` {
		t.Errorf("add structuredContent = %s, want %s", res.StructuredContent, `{"sum":5}`)
	}
	if _, err := c.listResources(t.Context()); !errors.Is(err, errNoResources) {
		t.Errorf("listResources() = %v, want errNoResources", err)
	}
}

func TestClientRealPeers(t *testing.T) {
	echoStdio := func(t *testing.T, _ string) serverConfig {
		return stdioPeerConfig("echoserver", peerCommand{Command: buildEchoServer(t), Args: []string{"stdio"}})
	}
	echoHTTP := func(mode, transport string) func(t *testing.T, _ string) serverConfig {
		return func(t *testing.T, _ string) serverConfig {
			return httpPeerConfig("echoserver", transport, startEchoServerHTTP(t, mode))
		}
	}
	everythingTools := func(t *testing.T) []string { return recordedToolNames(t, "server-everything-2026.8.31.json") }
	echoTools := func(*testing.T) []string { return []string{"echo", "add"} }
	tests := []struct {
		name       string
		config     func(t *testing.T, dir string) serverConfig
		wantServer string
		// wantVersion is the revision negotiated; empty means latestProtocolVersion.
		wantVersion string
		wantTools   func(t *testing.T) []string // each must be listed
		check       func(t *testing.T, c *client, dir string)
	}{
		{
			name: "everything stdio",
			config: func(t *testing.T, _ string) serverConfig {
				return stdioPeerConfig("everything", everythingStdioCommand(t))
			},
			wantServer: "mcp-servers/everything", wantTools: everythingTools, check: checkEverything,
		},
		{
			name: "everything streamableHttp",
			config: func(t *testing.T, _ string) serverConfig {
				return httpPeerConfig("everything", transportHTTP, startEverythingHTTP(t, "streamableHttp"))
			},
			wantServer: "mcp-servers/everything", wantTools: everythingTools, check: checkEverything,
		},
		{
			name: "everything sse",
			config: func(t *testing.T, _ string) serverConfig {
				return httpPeerConfig("everything", transportSSE, startEverythingHTTP(t, "sse"))
			},
			wantServer: "mcp-servers/everything", wantTools: everythingTools, check: checkEverything,
		},
		{
			name: "filesystem stdio",
			config: func(t *testing.T, dir string) serverConfig {
				return stdioPeerConfig("filesystem", filesystemStdioCommand(t, dir))
			},
			wantServer: "secure-filesystem-server",
			wantTools:  func(t *testing.T) []string { return recordedToolNames(t, "server-filesystem-2026.8.31.json") },
			check:      checkFilesystem,
		},
		{
			name: "memory stdio",
			config: func(t *testing.T, _ string) serverConfig {
				return stdioPeerConfig("memory", memoryStdioCommand(t))
			},
			wantServer: "memory-server",
			wantTools:  func(t *testing.T) []string { return recordedToolNames(t, "server-memory-2026.8.31.json") },
			check:      checkMemory,
		},
		{name: "echoserver stdio", config: echoStdio, wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer, wantVersion: modernProtocolVersion},
		{name: "echoserver http", config: echoHTTP("http", transportHTTP), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer},
		{name: "echoserver http-stateless", config: echoHTTP("http-stateless", transportHTTP), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer, wantVersion: modernProtocolVersion},
		{name: "echoserver http-json", config: echoHTTP("http-json", transportHTTP), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer},
		{name: "echoserver sse", config: echoHTTP("sse", transportSSE), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := tt.config(t, dir)
			c := connectPeer(t, cfg, clientOptions{Roots: []string{dir}})
			// The Go SDK server speaks the current revision, except behind
			// its stateful HTTP handler; the npm reference servers do not.
			if want := cmp.Or(tt.wantVersion, latestProtocolVersion); c.protocolVersion() != want {
				t.Errorf("protocolVersion() = %q, want %q", c.protocolVersion(), want)
			}
			if got := c.serverInfo(); got.Name != tt.wantServer || got.Version == "" {
				t.Errorf("serverInfo() = %+v, want name %q and a version", got, tt.wantServer)
			}
			if got := c.transportKind(); got != cfg.Transport {
				t.Errorf("transportKind() = %q, want %q", got, cfg.Transport)
			}
			tools, err := c.listTools(t.Context())
			if err != nil {
				t.Fatalf("listTools() = %v", err)
			}
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
				if !json.Valid(tool.InputSchema) {
					t.Errorf("tool %q inputSchema = %q, want JSON", tool.Name, tool.InputSchema)
				}
			}
			for _, want := range tt.wantTools(t) {
				if !slices.Contains(names, want) {
					t.Errorf("listTools() = %q, want it to contain %q", names, want)
				}
			}
			tt.check(t, c, dir)
		})
	}
}

// TestClientInferredHTTPFallsBackToSSE gives legacy SSE endpoints as
// inferred http servers: the initialize POST is refused and the client
// falls back to the legacy transport. An explicit http never falls back.
func TestClientInferredHTTPFallsBackToSSE(t *testing.T) {
	tests := []struct {
		name     string
		endpoint func(t *testing.T) string
		echo     string // echo's answer to "fallback"
	}{
		{"everything", func(t *testing.T) string { return startEverythingHTTP(t, "sse") }, "Echo: fallback"},
		{"echoserver", func(t *testing.T) string { return startEchoServerHTTP(t, "sse") }, "fallback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			endpoint := tt.endpoint(t)

			inferred := httpPeerConfig(tt.name, transportHTTP, endpoint)
			inferred.TransportInferred = true
			c := connectPeer(t, inferred, clientOptions{})
			if got := c.transportKind(); got != transportSSE {
				t.Errorf("transportKind() = %q, want %q", got, transportSSE)
			}
			if got := callText(t, c, "echo", `{"message":"fallback"}`); got != tt.echo {
				t.Errorf("echo = %q, want %q", got, tt.echo)
			}

			explicit := httpPeerConfig(tt.name, transportHTTP, endpoint)
			if c, err := connect(t.Context(), explicit, clientOptions{Logger: discardLogger()}); err == nil {
				c.close()
				t.Errorf("connect(explicit http to %s) succeeded, want an http status error", endpoint)
			} else if want := fmt.Sprintf("server %q", tt.name); !strings.Contains(err.Error(), want) {
				t.Errorf("connect(explicit http) = %v, want it to name %s", err, want)
			}
		})
	}
}

// TestClientProgressExtendsDeadline runs two calls with the same timeout
// against a scripted server: one kept alive by progress notifications,
// one without. The silent one times out; the other, which started first,
// is still waiting then, and gets its answer.
func TestClientProgressExtendsDeadline(t *testing.T) {
	t.Parallel()
	const timeout = time.Second
	pt := newPipeTransport()
	c := &client{conn: newConn(serverConfig{Name: "scripted", Timeout: timeout}, clientOptions{}, discardLogger(), pt)}
	t.Cleanup(func() { c.close() })

	type outcome struct {
		res *callResult
		err error
	}
	// start calls tool and returns its outcome and the request's id and
	// progress token as the server sees them.
	start := func(tool string) (<-chan outcome, string, string) {
		done := make(chan outcome, 1)
		go func() {
			res, err := c.callTool(t.Context(), tool, nil)
			done <- outcome{res, err}
		}()
		var req struct {
			ID     json.RawMessage `json:"id"`
			Params struct {
				Meta struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal(<-pt.sent, &req); err != nil {
			t.Fatal(err)
		}
		return done, string(req.ID), string(req.Params.Meta.ProgressToken)
	}
	long, longID, token := start("long")
	if token == "" {
		t.Fatal("tools/call carries no progress token")
	}
	silent, _, _ := start("silent")

	pace := time.NewTicker(timeout / 20)
	defer pace.Stop()
	for step := 0; ; step++ {
		pt.msgs <- []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, token, step))
		select {
		case o := <-long:
			t.Fatalf("callTool(long) with progress = %v, %v before the silent call timed out, want it still waiting", o.res, o.err)
		case o := <-silent:
			if !errors.Is(o.err, errTimeout) {
				t.Fatalf("callTool(silent) = %v, %v, want errTimeout", o.res, o.err)
			}
		case <-pace.C:
			continue
		}
		break
	}
	pt.msgs <- []byte(`{"jsonrpc":"2.0","id":` + longID + `,"result":{"content":[{"type":"text","text":"done"}]}}`)
	if o := <-long; o.err != nil || resultText(t, o.res) != "done" {
		t.Errorf("callTool(long) = %v, %v, want done", o.res, o.err)
	}
}

// TestHandshakeBoundedByStartupTimeout checks that the handshake waits
// for startup_timeout, not for the per-request timeout: with a timeout of
// one nanosecond, a call times out at once while the handshake, answered
// later, succeeds.
func TestHandshakeBoundedByStartupTimeout(t *testing.T) {
	t.Parallel()
	pt := newPipeTransport()
	c := newConn(serverConfig{Name: "scripted", Timeout: time.Nanosecond, StartupTimeout: time.Minute}, clientOptions{}, discardLogger(), pt)
	t.Cleanup(func() { c.close() })

	answer := func() {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(<-pt.sent, &req); err != nil {
			t.Error(err)
			return
		}
		pt.msgs <- []byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{}}`)
	}
	go answer()
	if _, err := c.roundTrip(t.Context(), request{method: "initialize", params: struct{}{}, handshake: true}); err != nil {
		t.Fatalf("handshake with a 1ns request timeout = %v, want its answer", err)
	}
	if _, err := c.roundTrip(t.Context(), request{method: "tools/list", params: struct{}{}}); !errors.Is(err, errTimeout) {
		t.Fatalf("tools/list with a 1ns request timeout = %v, want errTimeout", err)
	}
}

// A pipeTransport is a transport whose server is the test: what the
// client sends arrives on sent, and the test delivers the server's
// messages on msgs (never after close). Safe for concurrent use.
type pipeTransport struct {
	sent      chan []byte
	msgs      chan []byte
	closeOnce sync.Once
}

func newPipeTransport() *pipeTransport {
	return &pipeTransport{sent: make(chan []byte, 16), msgs: make(chan []byte)}
}

func (p *pipeTransport) send(ctx context.Context, msg []byte) error {
	select {
	case p.sent <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipeTransport) recv() <-chan []byte { return p.msgs }
func (p *pipeTransport) endErr() error       { return nil }
func (p *pipeTransport) close() error {
	p.closeOnce.Do(func() { close(p.msgs) })
	return nil
}

// A loggedRecord is one log record with its attributes as strings (those
// of the logger's With included).
type loggedRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// A logRecorder keeps every record logged through its loggers and lets a
// test wait, without polling, until the records (or anything that changes
// before a record is logged) satisfy a condition. Safe for concurrent use.
type logRecorder struct {
	mu sync.Mutex
	// guards records
	records []loggedRecord
	changed chan struct{} // 1-buffered: a record arrived since the last wait
}

func newLogRecorder() *logRecorder {
	return &logRecorder{changed: make(chan struct{}, 1)}
}

// logger returns a logger, enabled at every level, that records into l.
func (l *logRecorder) logger() *slog.Logger { return slog.New(&recordingHandler{rec: l}) }

// snapshot returns a copy of the records so far.
func (l *logRecorder) snapshot() []loggedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// waitFor waits until cond holds, testing it at once and after each new
// record; it fails the test after waitLimit.
func (l *logRecorder) waitFor(t *testing.T, what string, cond func([]loggedRecord) bool) {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for !cond(l.snapshot()) {
		select {
		case <-l.changed:
		case <-timer.C:
			t.Fatalf("waiting for %s: not within %v", what, waitLimit)
		}
	}
}

// A recordingHandler is the slog.Handler of a logRecorder.
type recordingHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{Level: r.Level, Message: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.rec.mu.Lock()
	h.rec.records = append(h.rec.records, rec)
	h.rec.mu.Unlock()
	select {
	case h.rec.changed <- struct{}{}:
	default:
	}
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingHandler{rec: h.rec, attrs: append(slices.Clone(h.attrs), attrs...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

// TestClientSessionExpiry answers a call with 404 for its session: the
// client initializes a new session once and resends, and gives up if the
// new session is refused too.
func TestClientSessionExpiry(t *testing.T) {
	tests := []struct {
		name       string
		expireAll  bool // every session is refused, not only the first
		wantErr    string
		wantInits  int
		wantCalled []string // the session ids the calls carried
	}{
		{name: "first session expires", wantInits: 2, wantCalled: []string{"session-1", "session-2"}},
		{name: "every session expires", expireAll: true, wantErr: "session expired", wantInits: 2, wantCalled: []string{"session-1", "session-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
				if m.Method == "tools/call" && (tt.expireAll || m.SessionID == "session-1") {
					http.Error(w, "unknown session", http.StatusNotFound)
					return true
				}
				return false
			})
			c := connectPeer(t, scriptedConfig("expiring", s), clientOptions{})
			res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"again"}`))
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("callTool() = %v, want error containing %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("callTool() = %v, want success after re-initializing", err)
			case resultText(t, res) != "again":
				t.Errorf("callTool() = %q, want %q", resultText(t, res), "again")
			}
			if got := len(s.received("initialize")); got != tt.wantInits {
				t.Errorf("initialize requests = %d, want %d", got, tt.wantInits)
			}
			initialized := s.received("notifications/initialized")
			if len(initialized) != tt.wantInits || initialized[len(initialized)-1].SessionID != fmt.Sprintf("session-%d", tt.wantInits) {
				t.Errorf("notifications/initialized = %+v, want one per session, the last on session-%d", initialized, tt.wantInits)
			}
			var called []string
			for _, m := range s.received("tools/call") {
				called = append(called, m.SessionID)
			}
			if !slices.Equal(called, tt.wantCalled) {
				t.Errorf("tools/call sessions = %q, want %q", called, tt.wantCalled)
			}
		})
	}
}

// TestClientSessionExpiryConcurrentCall makes a call while another call's
// re-initialize is under way: it must wait for the new session rather than
// go out without one (which servers refuse with 400). The server answers
// the re-initialize after 300ms, or at once when a request without a
// session arrives.
func TestClientSessionExpiryConcurrentCall(t *testing.T) {
	t.Parallel()
	var inits atomic.Int32
	sessionless := make(chan struct{}, 1)
	s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
		switch {
		case m.Method == "initialize":
			if inits.Add(1) > 1 {
				timer := time.NewTimer(300 * time.Millisecond)
				defer timer.Stop()
				select {
				case <-sessionless:
				case <-timer.C:
				case <-r.Context().Done():
				}
			}
			return false
		case m.SessionID == "":
			select {
			case sessionless <- struct{}{}:
			default:
			}
			http.Error(w, "Bad Request: No valid session ID provided", http.StatusBadRequest)
			return true
		case m.SessionID == "session-1" && m.Method == "tools/call":
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	})
	c := connectPeer(t, scriptedConfig("expiring", s), clientOptions{})
	first := make(chan error, 1)
	// Owned by the test; ends when the call returns (bounded by the timeout).
	go func() {
		_, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"first"}`))
		first <- err
	}()
	s.waitFor(t, "initialize", func(mcpExchange) bool { return inits.Load() == 2 })
	res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"second"}`))
	if err != nil || resultText(t, res) != "second" {
		t.Errorf("callTool(second) during re-initialize = %v, %v, want %q", res, err, "second")
	}
	if err := <-first; err != nil {
		t.Errorf("callTool(first) = %v, want success after re-initializing", err)
	}
	if got := inits.Load(); got != 2 {
		t.Errorf("initialize requests = %d, want 2", got)
	}
}

// TestClientPaginationLimits lists tools and resources from servers whose
// cursors never end: a repeated cursor stops at once, fresh cursors after
// maxPages.
func TestClientPaginationLimits(t *testing.T) {
	list := map[string]func(c *client, ctx context.Context) (int, error){
		"tools/list": func(c *client, ctx context.Context) (int, error) {
			tools, err := c.listTools(ctx)
			return len(tools), err
		},
		"resources/list": func(c *client, ctx context.Context) (int, error) {
			resources, err := c.listResources(ctx)
			return len(resources), err
		},
	}
	tests := []struct {
		name      string
		method    string
		next      func(cursor string) string
		wantPages int
	}{
		{"tools repeated cursor", "tools/list", func(string) string { return "same" }, 2},
		{"tools endless cursors", "tools/list", func(cursor string) string { return cursor + "+" }, maxPages},
		{"resources repeated cursor", "resources/list", func(string) string { return "same" }, 2},
		{"resources endless cursors", "resources/list", func(cursor string) string { return cursor + "+" }, maxPages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
				if m.Method != tt.method {
					return false
				}
				var p struct {
					Cursor string `json:"cursor"`
				}
				json.Unmarshal(m.Params, &p)
				item := map[string]any{"name": "item" + p.Cursor, "uri": "test://item" + p.Cursor}
				key := strings.TrimSuffix(tt.method, "/list")
				writeRPCResult(w, m.ID, map[string]any{key: []any{item}, "nextCursor": tt.next(p.Cursor)})
				return true
			})
			c := connectPeer(t, scriptedConfig("paging", s), clientOptions{})
			got, err := list[tt.method](c, t.Context())
			if err != nil {
				t.Fatalf("%s = %v", tt.method, err)
			}
			if got != tt.wantPages {
				t.Errorf("%s = %d items, want %d (one per page)", tt.method, got, tt.wantPages)
			}
			if got := len(s.received(tt.method)); got != tt.wantPages {
				t.Errorf("%s requests = %d, want %d", tt.method, got, tt.wantPages)
			}
		})
	}
}

// TestClientTimeoutSendsCancelled calls a tool the server never answers,
// once holding an SSE answer open and once holding the POST itself (as a
// JSON-response server does): the call fails with errTimeout and the
// server receives notifications/cancelled for it.
func TestClientTimeoutSendsCancelled(t *testing.T) {
	tests := []struct {
		name       string
		openStream bool
	}{
		{"sse answer never ends", true},
		{"post never answered", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
				if m.Method != "tools/call" || !strings.Contains(string(m.Params), `"slow"`) {
					return false
				}
				if tt.openStream {
					writeSSE(w, ": working\n\n")
				}
				select {
				case <-r.Context().Done():
				case <-release:
				}
				return true
			})
			t.Cleanup(func() { close(release) }) // before the server closes
			cfg := scriptedConfig("slow", s)
			cfg.Timeout = 300 * time.Millisecond
			c := connectPeer(t, cfg, clientOptions{})
			_, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"slow"}`))
			if !errors.Is(err, errTimeout) || !strings.Contains(err.Error(), "timeout 300ms") {
				t.Fatalf("callTool() = %v, want errTimeout naming the timeout 300ms", err)
			}
			call := s.received("tools/call")[0]
			s.waitFor(t, "notifications/cancelled", func(m mcpExchange) bool {
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				return json.Unmarshal(m.Params, &p) == nil && bytes.Equal(p.RequestID, call.ID)
			})
			if got, want := callText(t, c, "echo", `{"message":"afterwards"}`), "afterwards"; got != want {
				t.Errorf("echo after a timeout = %q, want %q", got, want)
			}
		})
	}
}

// TestClientAuthErrors refuses initialize with 401 and 403: connect fails
// with a distinct error naming the server and saying to check its headers,
// never showing the header's value, and does not try legacy SSE.
func TestClientAuthErrors(t *testing.T) {
	const secret = "tok-3f9a61c2"
	tests := []struct {
		status int
		want   []string
	}{
		{http.StatusUnauthorized, []string{`server "secured"`, "authentication failed", `check the "headers"`}},
		{http.StatusForbidden, []string{`server "secured"`, "access forbidden", `check the "headers"`}},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "go away", tt.status)
			})
			cfg := httpPeerConfig("secured", transportHTTP, srv.URL)
			cfg.TransportInferred = true
			cfg.Headers = map[string]string{"Authorization": "Bearer " + secret}
			c, err := connect(t.Context(), cfg, clientOptions{Logger: discardLogger()})
			if err == nil {
				c.close()
				t.Fatalf("connect() succeeded, want a %d error", tt.status)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("connect() = %v, want it to contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("connect() = %v, shows the Authorization header's value", err)
			}
			var methods []string
			for _, r := range srv.requests() {
				methods = append(methods, r.method)
			}
			if !slices.Equal(methods, []string{http.MethodPost}) {
				t.Errorf("requests = %q, want one POST (no legacy SSE fallback on %d)", methods, tt.status)
			}
		})
	}
}
