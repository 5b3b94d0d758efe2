package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file tests "harnessd mcp serve": the built binary run with stdio
// pipes against server-everything over Streamable HTTP, driven by the
// test as a host and by harnessd's own MCP client, and against the fake
// Streamable HTTP server for what a daemon may do wrong.

// A bridgeProcess is a running "harnessd mcp serve" whose stdin the test
// writes and whose stdout it reads, a JSON-RPC message a line.
type bridgeProcess struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	lines  chan wireMessage // every stdout line, decoded; closed at the end of stdout
	stderr *tailBuffer
	exited chan struct{} // closed once the process has been waited for
	err    error         // the Wait error, set before exited is closed
	// backlog holds the messages read but not yet returned by next, in
	// order. Owned by the test's goroutine.
	backlog []wireMessage
}

// startBridge runs the built harnessd as "mcp serve --addr addr" with
// args, its environment holding env (HARNESS_TOKEN=...) and none of the
// test's HARNESS_ variables. Every stdout line must be one JSON-RPC
// message: the test fails otherwise. The process is killed at cleanup if
// it is still running.
func startBridge(t *testing.T, addr string, env []string, args ...string) *bridgeProcess {
	t.Helper()
	cmd := exec.Command(buildHarnessd(t), append([]string{"mcp", "serve", "--addr", addr}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HARNESS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	// The buffer holds every line a test makes, so the bridge never waits
	// for the test to read.
	p := &bridgeProcess{cmd: cmd, lines: make(chan wireMessage, 1024), stderr: newTailBuffer(8 << 10), exited: make(chan struct{})}
	cmd.Stderr = p.stderr
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bad := make(chan string, 1)
	read := make(chan struct{})
	// Owned by the test; ends at the end of stdout, when the process has
	// exited.
	go func() {
		defer close(read)
		defer close(p.lines)
		scanner := bufio.NewScanner(stdout)
		scanner.Buffer(nil, 8<<20)
		for scanner.Scan() {
			var m wireMessage
			if err := json.Unmarshal(scanner.Bytes(), &m); err != nil || (m.Method == "" && m.ID == nil) {
				select {
				case bad <- scanner.Text():
				default:
				}
				continue
			}
			p.lines <- m
		}
	}()
	// Owned by the test; ends when the process exits (killed at cleanup).
	go func() {
		<-read // Wait closes stdout: read it all first
		p.err = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			cmd.Process.Kill()
			<-p.exited
		}
		select {
		case line := <-bad:
			t.Errorf("stdout line %q is not a JSON-RPC message", line)
		default:
		}
	})
	return p
}

// send writes one line to the bridge's stdin.
func (p *bridgeProcess) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatalf("write %q to the bridge: %v", line, err)
	}
}

// call sends a request with id, method and params (JSON).
func (p *bridgeProcess) call(t *testing.T, id int, method, params string) {
	t.Helper()
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`, id, method, params))
}

// next returns the next message on stdout not yet returned, failing the
// test after waitLimit or at the end of stdout.
func (p *bridgeProcess) next(t *testing.T) wireMessage {
	t.Helper()
	if len(p.backlog) > 0 {
		m := p.backlog[0]
		p.backlog = p.backlog[1:]
		return m
	}
	return p.read(t)
}

// read reads the next line of stdout.
func (p *bridgeProcess) read(t *testing.T) wireMessage {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case m, ok := <-p.lines:
		if !ok {
			t.Fatalf("the bridge's stdout ended; stderr:\n%s", p.stderr.Bytes())
		}
		return m
	case <-timer.C:
		t.Fatalf("no message on the bridge's stdout within %v; stderr:\n%s", waitLimit, p.stderr.Bytes())
	}
	return wireMessage{}
}

// answer returns the answer to request id, and the messages not yet
// returned that came before it, which next still returns.
func (p *bridgeProcess) answer(t *testing.T, id int) (wireMessage, []wireMessage) {
	t.Helper()
	for i := 0; ; i++ {
		if i == len(p.backlog) {
			p.backlog = append(p.backlog, p.read(t))
		}
		if m := p.backlog[i]; m.Method == "" && string(m.ID) == fmt.Sprint(id) {
			before := slices.Clone(p.backlog[:i])
			p.backlog = slices.Delete(p.backlog, i, i+1)
			return m, before
		}
	}
}

// result returns the result of request id, failing the test on an error.
func (p *bridgeProcess) result(t *testing.T, id int) json.RawMessage {
	t.Helper()
	m, _ := p.answer(t, id)
	if m.Error != nil {
		t.Fatalf("request %d: error %d %q, want a result", id, m.Error.Code, m.Error.Message)
	}
	return m.Result
}

// initialize runs the handshake with the capabilities given (JSON) and
// returns the initialize result.
func (p *bridgeProcess) initialize(t *testing.T, capabilities string) json.RawMessage {
	t.Helper()
	p.call(t, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":`+capabilities+`,"clientInfo":{"name":"bridge-test","version":"1"}}`)
	res := p.result(t, 1)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return res
}

// closeAndWait closes stdin and waits for the process to exit (see wait).
func (p *bridgeProcess) closeAndWait(t *testing.T) int {
	t.Helper()
	p.stdin.Close()
	return p.wait(t)
}

// wait waits for the process to exit, failing the test after waitLimit,
// and returns its exit code.
func (p *bridgeProcess) wait(t *testing.T) int {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	select {
	case <-p.exited:
	case <-timer.C:
		t.Fatalf("the bridge did not exit within %v; stderr:\n%s", waitLimit, p.stderr.Bytes())
	}
	return p.cmd.ProcessState.ExitCode()
}

// toolText returns the text of a tools/call result's first content block.
func toolText(t *testing.T, res json.RawMessage) string {
	t.Helper()
	var r callResult
	if err := json.Unmarshal(res, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("tools/call result %s: no content (%v)", res, err)
	}
	return r.Content[0].Text
}

// TestMCPServeEverything drives server-everything over Streamable HTTP
// through the bridge, as a host would: the handshake, tools/list, echo, a
// tool's progress notifications in order before its answer, an
// elicitation the host answers while a ping goes through beside the call
// waiting for it, and a clean exit at the end of stdin.
func TestMCPServeEverything(t *testing.T) {
	t.Parallel()
	endpoint := startEverythingHTTP(t, "streamableHttp")
	p := startBridge(t, strings.TrimSuffix(endpoint, "/mcp"), nil)

	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name string `json:"name"`
		} `json:"serverInfo"`
	}
	json.Unmarshal(p.initialize(t, `{"elicitation":{}}`), &init)
	if init.ProtocolVersion != "2025-11-25" || init.ServerInfo.Name != "mcp-servers/everything" {
		t.Fatalf("initialize = %+v, want 2025-11-25 from mcp-servers/everything", init)
	}

	p.call(t, 2, "tools/list", `{}`)
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	json.Unmarshal(p.result(t, 2), &list)
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"echo", "trigger-long-running-operation", "trigger-elicitation-request"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list = %v, want it to hold %s", names, want)
		}
	}

	p.call(t, 3, "tools/call", `{"name":"echo","arguments":{"message":"through the bridge ✓"}}`)
	if got := toolText(t, p.result(t, 3)); got != "Echo: through the bridge ✓" {
		t.Errorf("echo = %q, want %q", got, "Echo: through the bridge ✓")
	}

	p.call(t, 4, "tools/call", `{"name":"trigger-long-running-operation","arguments":{"duration":0.2,"steps":3},"_meta":{"progressToken":"tok"}}`)
	res, before := p.answer(t, 4)
	var progress []string
	for _, m := range before {
		if m.Method == "notifications/progress" {
			progress = append(progress, string(m.Params))
		}
	}
	want := []string{`{"progress":1,"total":3,"progressToken":"tok"}`, `{"progress":2,"total":3,"progressToken":"tok"}`, `{"progress":3,"total":3,"progressToken":"tok"}`}
	if !slices.Equal(progress, want) || res.Error != nil {
		t.Errorf("progress before the answer = %v (answer error %v), want %v", progress, res.Error, want)
	}

	// The call waits for the host's answer to the elicitation: a ping
	// sent meanwhile is answered, so one request does not hold another.
	p.call(t, 5, "tools/call", `{"name":"trigger-elicitation-request","arguments":{}}`)
	var ask wireMessage
	for ask.Method != "elicitation/create" {
		ask = p.next(t)
	}
	p.call(t, 6, "ping", `{}`)
	p.result(t, 6)
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"action":"accept","content":{"name":"Ada Lovelace","check":true}}}`, ask.ID))
	if got := string(p.result(t, 5)); !strings.Contains(got, "Ada Lovelace") || !strings.Contains(got, "accept") {
		t.Errorf("elicitation tool result = %s, want the accepted content", got)
	}

	if code := p.closeAndWait(t); code != 0 {
		t.Errorf("exit code = %d, want 0; stderr:\n%s", code, p.stderr.Bytes())
	}
}

// TestMCPServeDrivenByHarnessdClient configures the bridge as a stdio
// server of harnessd's own registry, pointed at server-everything: the
// client's handshake (its probe of the current revision, then initialize)
// and a tool call go through it, as they would from any host.
func TestMCPServeDrivenByHarnessdClient(t *testing.T) {
	t.Parallel()
	endpoint := startEverythingHTTP(t, "streamableHttp")
	cfg := stdioPeerConfig("bridge", peerCommand{Command: buildHarnessd(t), Args: []string{"mcp", "serve", "--addr", endpoint}})
	reg := startRegistry(t, []serverConfig{cfg}, registryOptions{})
	waitRegistryReady(t, reg)
	if st := statusOf(t, reg, "bridge"); st.Status != statusReady {
		t.Fatalf("bridge status = %s (%s), want ready", st.Status, st.Error)
	}
	scope := reg.newScope(discardLogger())
	res, err := scope.callTool(t.Context(), "bridge", "echo", json.RawMessage(`{"message":"client to bridge to daemon"}`))
	if err != nil {
		t.Fatalf("callTool(echo) = %v", err)
	}
	if got := resultText(t, res); got != "Echo: client to bridge to daemon" {
		t.Errorf("echo through the bridge = %q, want %q", got, "Echo: client to bridge to daemon")
	}
}

// TestMCPServeRefusals checks the answers a host gets when the daemon
// cannot take its requests: each request gets a JSON-RPC error that says
// what to do, the bridge goes on reading, and it exits 0 at the end of
// stdin.
func TestMCPServeRefusals(t *testing.T) {
	t.Parallel()
	refuse := func(status int, body string) string {
		return newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}).URL
	}
	tokenOnly := newFakeMCP(t, fakeMCPConfig{Script: func(w http.ResponseWriter, r *http.Request, _ mcpExchange) bool {
		if r.Header.Get("Authorization") == "Bearer right" {
			return false
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="harnessd"`)
		http.Error(w, `{"error":{"code":"unauthorized","message":"missing or unknown API key"}}`, http.StatusUnauthorized)
		return true
	}})
	tests := []struct {
		name     string
		addr     string
		env      []string
		wantCode int
		want     string
		// sent, when set, is the daemon that must have seen
		// Authorization: Bearer token.
		sent  *fakeMCP
		token string
	}{
		{name: "daemon not running", addr: closedAddr(t), wantCode: codeBridgeError,
			want: `is not reachable: start it with "harnessd serve" or pass --addr (dial tcp`},
		{name: "no token", addr: tokenOnly.URL, wantCode: codeBridgeError,
			want: "needs an API key: set HARNESS_TOKEN to a key's token"},
		{name: "wrong token", addr: tokenOnly.URL, env: []string{"HARNESS_TOKEN=wrong"}, wantCode: codeBridgeError,
			want: "refused the token in HARNESS_TOKEN", sent: tokenOnly, token: "wrong"},
		{name: "forbidden", addr: refuse(http.StatusForbidden, `{}`), env: []string{"HARNESS_TOKEN=narrow"}, wantCode: codeBridgeError,
			want: "use a key in HARNESS_TOKEN whose scopes allow it"},
		{name: "no mcp endpoint", addr: refuse(http.StatusNotFound, `404 page not found`), wantCode: codeBridgeError,
			want: "has no MCP endpoint at http://"},
		{name: "the daemon's own JSON-RPC refusal", addr: refuse(http.StatusBadRequest, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"bad origin"}}`), wantCode: codeInvalidRequest,
			want: "bad origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startBridge(t, tt.addr, tt.env)
			p.call(t, 1, "initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
			p.call(t, 2, "tools/list", `{}`)
			for id := 1; id <= 2; id++ {
				m, _ := p.answer(t, id)
				if m.Error == nil || m.Error.Code != tt.wantCode || !strings.Contains(m.Error.Message, tt.want) {
					t.Errorf("request %d: answer %+v, want error %d containing %q", id, m.Error, tt.wantCode, tt.want)
				}
			}
			if code := p.closeAndWait(t); code != 0 {
				t.Errorf("exit code = %d, want 0; stderr:\n%s", code, p.stderr.Bytes())
			}
			if tt.sent != nil && !slices.ContainsFunc(tt.sent.requests(), func(r recordedRequest) bool { return r.header.Get("Authorization") == "Bearer "+tt.token }) {
				t.Errorf("the daemon never saw Authorization: Bearer %s (HARNESS_TOKEN)", tt.token)
			}
		})
	}
}

// A bridgeDaemon is the fake daemon of the forwarding tests: the fake
// Streamable HTTP server, taking only the token "good", whose tools/call
// "sse" answers with a progress notification before the result, "hang"
// holds its request until the client goes away, and whose GET stream asks
// the host one elicitation.
type bridgeDaemon struct {
	*fakeMCP
	// hangEnded receives the request id of each "hang" call whose
	// request ended.
	hangEnded chan string
}

// newBridgeDaemon starts a bridgeDaemon, closed at cleanup.
func newBridgeDaemon(t *testing.T) *bridgeDaemon {
	t.Helper()
	d := &bridgeDaemon{hangEnded: make(chan string, 8)}
	d.fakeMCP = newFakeMCP(t, fakeMCPConfig{Sessions: true, Script: func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
		if r.Header.Get("Authorization") != "Bearer good" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return true
		}
		var call struct {
			Name string `json:"name"`
		}
		json.Unmarshal(m.Params, &call)
		switch {
		case r.Method == http.MethodGet:
			writeSSE(w, `id: g1`+"\n"+`data: {"jsonrpc":"2.0","id":"ask-1","method":"elicitation/create","params":{"message":"which branch?","requestedSchema":{"type":"object","properties":{"branch":{"type":"string"}}}}}`+"\n\n")
			<-r.Context().Done()
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.Method == http.MethodPost && m.Method == "":
			w.WriteHeader(http.StatusAccepted) // the host's answer to ask-1
		case m.Method == "tools/call" && call.Name == "sse":
			writeSSE(w, fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\",\"progress\":1}}\n\n"+
				"data: {\"jsonrpc\":\"2.0\",\n"+
				"data:  \"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"after the notification\"}]}}\n\n", m.ID))
		case m.Method == "tools/call" && call.Name == "hang":
			<-r.Context().Done()
			d.hangEnded <- string(m.ID)
		default:
			return false
		}
		return true
	}})
	return d
}

// waitHangEnded waits until the "hang" call with id has ended on the
// daemon's side, failing the test after waitLimit.
func (d *bridgeDaemon) waitHangEnded(t *testing.T, id string) {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		select {
		case got := <-d.hangEnded:
			if got == id {
				return
			}
		case <-timer.C:
			t.Fatalf("the daemon's request for hang call %s did not end within %v", id, waitLimit)
		}
	}
}

// cancelledIDs returns the requestId of every notifications/cancelled
// the daemon received.
func (d *bridgeDaemon) cancelledIDs() []string {
	var ids []string
	for _, m := range d.received("notifications/cancelled") {
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		json.Unmarshal(m.Params, &p)
		ids = append(ids, string(p.RequestID))
	}
	return ids
}

// TestMCPServeForwardsBothWays runs a session through the bridge against
// the fake daemon: a line that is not JSON answered with a parse error
// without ending anything, the headers of every POST, a server request
// from the GET stream answered by the host, an SSE answer whose
// notification comes first, and a cancellation by the host that ends the
// daemon's request with no answer after it.
func TestMCPServeForwardsBothWays(t *testing.T) {
	t.Parallel()
	d := newBridgeDaemon(t)
	p := startBridge(t, d.URL, []string{"HARNESS_TOKEN=good"})

	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"initialize"`)
	if m := p.next(t); m.Error == nil || m.Error.Code != codeParseError || string(m.ID) != "null" {
		t.Fatalf("answer to a line that is not JSON = %+v, want a parse error (%d) with id null", m, codeParseError)
	}
	p.send(t, `[{"jsonrpc":"2.0","id":7,"method":"ping"}]`)
	if m := p.next(t); m.Error == nil || m.Error.Code != codeInvalidRequest || !strings.Contains(m.Error.Message, "batch") {
		t.Fatalf("answer to a batch = %+v, want an invalid request (%d) naming the batch", m, codeInvalidRequest)
	}
	p.initialize(t, `{"elicitation":{}}`)

	// The daemon's question arrives on the GET stream; the host's answer
	// goes back to it.
	ask := p.next(t)
	if ask.Method != "elicitation/create" || string(ask.ID) != `"ask-1"` {
		t.Fatalf("message after the handshake = %+v, want elicitation/create ask-1 from the GET stream", ask)
	}
	p.send(t, `{"jsonrpc":"2.0","id":"ask-1","result":{"action":"accept","content":{"branch":"main"}}}`)
	answer := d.waitFor(t, "", func(m mcpExchange) bool { return string(m.ID) == `"ask-1"` })
	if answer.SessionID != "session-1" {
		t.Errorf("the host's answer went out in session %q, want session-1", answer.SessionID)
	}

	p.call(t, 2, "tools/call", `{"name":"sse","arguments":{}}`)
	if m := p.next(t); m.Method != "notifications/progress" {
		t.Errorf("first message of the SSE answer = %+v, want its notifications/progress", m)
	}
	if m := p.next(t); string(m.ID) != "2" || toolText(t, m.Result) != "after the notification" {
		t.Errorf("second message of the SSE answer = %+v, want the result of request 2", m)
	}
	for _, r := range d.requests() {
		if r.method != http.MethodPost || r.msg.Method == "initialize" {
			continue
		}
		got := []string{r.header.Get("Accept"), r.header.Get("Content-Type"), r.header.Get("Mcp-Session-Id"), r.header.Get("Mcp-Protocol-Version"), r.header.Get("Authorization")}
		want := []string{"application/json, text/event-stream", "application/json", "session-1", "2025-11-25", "Bearer good"}
		if !slices.Equal(got, want) {
			t.Errorf("POST %s headers = %q, want %q", r.msg.Method, got, want)
		}
	}

	p.call(t, 3, "tools/call", `{"name":"hang","arguments":{}}`)
	d.waitFor(t, "tools/call", func(m mcpExchange) bool { return string(m.ID) == "3" })
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"user pressed stop"}}`)
	d.waitHangEnded(t, "3")
	if got := d.cancelledIDs(); !slices.Equal(got, []string{"3"}) {
		t.Errorf("cancellations the daemon received = %v, want [3]", got)
	}
	p.call(t, 4, "ping", `{}`)
	if m := p.next(t); string(m.ID) != "4" {
		t.Errorf("next message after cancelling request 3 = %+v, want the answer to ping 4 (nothing for 3)", m)
	}
}

// TestMCPServeStops stops the bridge with a call in flight in each way a
// host may: stdin closes (a call the daemon answers at once is still
// written within --grace, so a script that pipes calls gets its answers;
// one it holds is cancelled once --grace has passed), SIGTERM (cancelled
// at once), or stdout closes (the host died). A cancelled call is
// cancelled on the daemon (notifications/cancelled, its request ended);
// the session is deleted and the bridge exits 0 every time.
func TestMCPServeStops(t *testing.T) {
	t.Parallel()
	closeStdin := func(t *testing.T, p *bridgeProcess) { p.stdin.Close() }
	tests := []struct {
		name       string
		tool       string
		grace      string
		stop       func(t *testing.T, p *bridgeProcess)
		wantAnswer bool
	}{
		{name: "stdin ends: an answer within the grace is written", tool: "echo", grace: "1m", stop: closeStdin, wantAnswer: true},
		{name: "stdin ends: a call held past the grace is cancelled", tool: "hang", grace: "0s", stop: closeStdin},
		{name: "SIGTERM cancels without waiting for the grace", tool: "hang", grace: "1m", stop: func(t *testing.T, p *bridgeProcess) {
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "stdout closes: the host is gone", tool: "hang", grace: "1m", stop: func(t *testing.T, p *bridgeProcess) {
			p.stdout.Close()
			p.call(t, 3, "ping", `{}`) // its answer meets the closed pipe
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newBridgeDaemon(t)
			p := startBridge(t, d.URL, []string{"HARNESS_TOKEN=good"}, "--grace", tt.grace)
			p.initialize(t, `{}`)
			p.call(t, 2, "tools/call", `{"name":"`+tt.tool+`","arguments":{"message":"piped"}}`)
			d.waitFor(t, "tools/call", func(m mcpExchange) bool { return string(m.ID) == "2" })
			tt.stop(t, p)
			if code := p.wait(t); code != 0 {
				t.Errorf("exit code = %d, want 0; stderr:\n%s", code, p.stderr.Bytes())
			}
			var answered bool
			for m := range p.lines {
				answered = answered || string(m.ID) == "2"
			}
			if answered != tt.wantAnswer {
				t.Errorf("request 2 answered on stdout = %v, want %v", answered, tt.wantAnswer)
			}
			if !tt.wantAnswer {
				d.waitHangEnded(t, "2")
				if got := d.cancelledIDs(); !slices.Equal(got, []string{"2"}) {
					t.Errorf("cancellations the daemon received = %v, want [2]", got)
				}
			}
			if !slices.ContainsFunc(d.requests(), func(r recordedRequest) bool {
				return r.method == http.MethodDelete && r.header.Get("Mcp-Session-Id") == "session-1"
			}) {
				t.Errorf("the daemon saw no DELETE of session-1; methods %v", d.methods())
			}
		})
	}
}

// TestMCPServeDaemonRestarts takes the daemon away in the middle of a
// session and brings it back on the same address: meanwhile each request
// is answered that harnessd is not reachable; once it is back, the
// session goes on where it was.
func TestMCPServeDaemonRestarts(t *testing.T) {
	t.Parallel()
	d := newBridgeDaemon(t)
	addr := d.Listener.Addr().String()
	p := startBridge(t, d.URL, []string{"HARNESS_TOKEN=good"})
	p.initialize(t, `{}`)
	d.Close()
	p.call(t, 2, "tools/list", `{}`)
	if m, _ := p.answer(t, 2); m.Error == nil || !strings.Contains(m.Error.Message, "is not reachable") {
		t.Fatalf("answer while the daemon is down = %+v, want an error saying it is not reachable", m.Error)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("listen on %s again: %v", addr, err)
	}
	back := &http.Server{Handler: d.Config.Handler}
	// Owned by the test; ends when back is closed at cleanup.
	go back.Serve(l)
	t.Cleanup(func() { back.Close() })
	p.call(t, 3, "tools/call", `{"name":"echo","arguments":{"message":"back"}}`)
	if got := toolText(t, p.result(t, 3)); got != "back" {
		t.Errorf("echo after the daemon came back = %q, want %q", got, "back")
	}
	if m := d.waitFor(t, "tools/call", func(m mcpExchange) bool { return string(m.ID) == "3" }); m.SessionID != "session-1" {
		t.Errorf("call after the daemon came back went out in session %q, want session-1", m.SessionID)
	}
}

// TestMCPServeCurrentRevision sends messages of the current revision
// (2026-07-28: no session, the revision in _meta): each goes out with the
// headers the revision asks for, and without a session id.
func TestMCPServeCurrentRevision(t *testing.T) {
	t.Parallel()
	d := newFakeMCP(t, fakeMCPConfig{})
	p := startBridge(t, d.URL, nil)
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
	p.call(t, 1, "tools/call", `{"name":"echo","arguments":{"message":"stateless"},`+meta+`}`)
	if got := toolText(t, p.result(t, 1)); got != "stateless" {
		t.Errorf("echo = %q, want %q", got, "stateless")
	}
	p.call(t, 2, "resources/read", `{"uri":"harnessd://runs/r1",`+meta+`}`)
	p.answer(t, 2)
	for _, r := range d.requests() {
		got := []string{r.header.Get("Mcp-Protocol-Version"), r.header.Get("Mcp-Method"), r.header.Get("Mcp-Name"), r.header.Get("Mcp-Session-Id")}
		var want []string
		switch r.msg.Method {
		case "tools/call":
			want = []string{"2026-07-28", "tools/call", "echo", ""}
		case "resources/read":
			want = []string{"2026-07-28", "resources/read", "harnessd://runs/r1", ""}
		default:
			t.Errorf("unexpected %s %s", r.method, r.msg.Method)
			continue
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s headers (version, method, name, session) = %q, want %q", r.msg.Method, got, want)
		}
	}
}

// TestMCPServeOversizedLine sends a request over the 4 MiB message limit:
// it is answered with an error naming the limit, and the next line is
// read as usual.
func TestMCPServeOversizedLine(t *testing.T) {
	t.Parallel()
	d := newBridgeDaemon(t)
	p := startBridge(t, d.URL, []string{"HARNESS_TOKEN=good"})
	p.initialize(t, `{}`)
	p.call(t, 2, "tools/call", `{"name":"echo","arguments":{"message":"`+strings.Repeat("x", defaultMaxMessageBytes)+`"}}`)
	p.call(t, 3, "ping", `{}`)
	if m, _ := p.answer(t, 2); m.Error == nil || !strings.Contains(m.Error.Message, "request too large: over 4194304 bytes") {
		t.Errorf("answer to an oversized request = %+v, want an error naming the limit", m.Error)
	}
	if m, _ := p.answer(t, 3); m.Error != nil && m.Error.Code != codeMethodNotFound {
		t.Errorf("answer to the ping after it = %+v, want the daemon's", m.Error)
	}
	if n := d.count("tools/call"); n != 0 {
		t.Errorf("the daemon received %d tools/call, want 0", n)
	}
}

// TestMCPServeSessionExpired checks the answer when the daemon no longer
// knows the session: an error saying to restart the server in the host.
func TestMCPServeSessionExpired(t *testing.T) {
	t.Parallel()
	d := newBridgeDaemon(t)
	p := startBridge(t, d.URL, []string{"HARNESS_TOKEN=good"})
	p.initialize(t, `{}`)
	d.endSession("session-1")
	p.call(t, 2, "tools/list", `{}`)
	m, _ := p.answer(t, 2)
	if m.Error == nil || !strings.Contains(m.Error.Message, "no longer knows this MCP session") || !strings.Contains(m.Error.Message, "restart this MCP server in the host") {
		t.Errorf("answer after the session ended = %+v, want an error saying to restart the server in the host", m.Error)
	}
}
