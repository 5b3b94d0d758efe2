package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// This file holds the fault suite: misbehaving stdio servers, HTTP servers
// and model endpoints, driven through the registry and the run manager, each
// checked for a clear error, unaffected neighbours, and nothing left behind
// (goroutines, processes, pending calls). It also holds FuzzStdioFramer.

// faultTagEnv marks every server process a fault test starts (and, through
// the inherited environment, their children), so the test finds its own
// leftovers in /proc among the processes of other tests on the machine.
const faultTagEnv = "HARNESSD_FAULT_TAG"

// leakDeadline bounds how long a test waits for goroutines and processes
// to go away after its cleanup.
const leakDeadline = 15 * time.Second

// checkNoLeaks records the goroutine count and returns a tag to put into
// the environment of every server the test starts. At cleanup, after every
// cleanup registered later has run, it waits for the goroutine count to
// return to the baseline and for every tagged process to be gone. The test
// must not be parallel: other tests' goroutines would blur the count.
func checkNoLeaks(t *testing.T) string {
	t.Helper()
	var b [8]byte
	rand.Read(b[:])
	tag := hex.EncodeToString(b[:])
	// The thread that spawns servers lives as long as the process: start
	// it before the baseline, or the test that spawns first counts it.
	spawn := exec.Command(fakeServerBinary(t)) // stdin at EOF: it exits
	if startServerProcess(spawn) == nil {
		spawn.Wait()
	}
	base := runtime.NumGoroutine()
	t.Cleanup(func() {
		var n int
		var procs []int
		if !eventually(leakDeadline, func() bool {
			n, procs = runtime.NumGoroutine(), taggedProcesses(tag)
			return n <= base && len(procs) == 0
		}) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("after cleanup: %d goroutines (baseline %d), live processes %v; goroutines:\n%s", n, base, procs, buf)
		}
	})
	return tag
}

// taggedProcesses returns the pids of live (not zombie) processes whose
// environment holds faultTagEnv=tag.
func taggedProcesses(tag string) []int {
	want := []byte(faultTagEnv + "=" + tag + "\x00")
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append(env, 0), want) {
			continue
		}
		if processAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// pendingCalls returns how many requests of c await an answer.
func pendingCalls(c *mcpClient) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.pending)
}

// checkNoPending fails the test if a global server of reg still has calls
// waiting for an answer.
func checkNoPending(t *testing.T, reg *registry) {
	t.Helper()
	for _, s := range reg.current().servers {
		s.mu.Lock()
		c := s.client
		s.mu.Unlock()
		if c == nil {
			continue
		}
		if n := pendingCalls(c); n != 0 {
			t.Errorf("server %q: %d pending calls after the runs ended, want 0", s.cfg.Name, n)
		}
	}
}

// taggedServer returns the config of a fake stdio server named name in
// mode, tagged for checkNoLeaks.
func taggedServer(t *testing.T, name, mode, tag string) serverConfig {
	t.Helper()
	cfg := fakeServerConfig(t, mode)
	cfg.Name = name
	cfg.Env = map[string]string{fakeServerEnv: mode, faultTagEnv: tag}
	cfg.Source = "test"
	return cfg
}

// runsOver returns a run manager over the given globals (with a registry
// whose options are opts) whose model is the fake f, closed at cleanup.
func runsOver(t *testing.T, f *fakeModel, opts registryOptions, globals ...serverConfig) (*runManager, *registry) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	reg := newRegistry(globals, opts)
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	m := newRunsOver(t, reg, f, "", opts.Logger)
	return m, reg
}

// runBesideHealthy runs faulty and, at the same time, a run calling the
// healthy server "good"; it checks that the faulty run's transcript holds
// every want and that the healthy run completed with its own token.
func runBesideHealthy(t *testing.T, m *runManager, faulty runRequest, want []string) {
	t.Helper()
	bad, err := m.start(faulty, true)
	if err != nil {
		t.Fatal(err)
	}
	healthy, err := m.start(runRequest{Prompt: callPrompt("mcp_good_echo", `{"message":"token-healthy"}`)}, true)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, bad)
	got := runTranscript(bad)
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("faulty run = %s\nwant it to contain %q", got, w)
		}
	}
	if v := waitRun(t, healthy); v.Status != runCompleted || v.Output != "token-healthy" {
		t.Errorf("healthy run = %s %q %q, want completed %q", v.Status, v.Output, v.Error, "token-healthy")
	}
}

// promptedCall is a model turn for runs whose prompt is a JSON tool call
// {"name":..., "arguments":...}: the first turn makes that call, the next
// answers with the call's result, prefixed "error: " when it failed. Runs
// of any order can share a script of such turns.
var promptedCall = fakeTurn{Reply: func(req fakeRequest) fakeTurn {
	if res := req.toolResults(); len(res) > 0 {
		if res[0].IsError {
			return fakeTurn{Text: "error: " + res[0].Content}
		}
		return fakeTurn{Text: res[0].Content}
	}
	var tc toolCall
	if err := json.Unmarshal([]byte(req.Messages[0].Content), &tc); err != nil {
		return fakeTurn{Text: "bad prompt: " + err.Error()}
	}
	tc.ID = "call_1"
	return fakeTurn{ToolCalls: []toolCall{tc}}
}}

// callPrompt returns the prompt that makes promptedCall call tool with args.
func callPrompt(tool, args string) string {
	b, _ := json.Marshal(map[string]any{"name": tool, "arguments": json.RawMessage(args)})
	return string(b)
}

// runTranscript returns a run's output, error and every event, as text to
// search for an expected message.
func runTranscript(r *run) string {
	v := r.view()
	events, _, _ := r.eventsAfter(0)
	b, _ := json.Marshal(events)
	return v.Status + "\n" + v.Output + "\n" + v.Error + "\n" + string(b)
}

func TestFaultsStdioServers(t *testing.T) {
	tests := []struct {
		name string
		mode string
		// perRun starts the faulty server for the run only (it is then
		// closed when the run ends); otherwise it is a global server.
		perRun bool
		tune   func(*serverConfig)
		tool   string
		args   string
		want   []string
	}{
		{name: "crash mid-call", mode: "normal", tool: "crash", want: []string{"error: ", "exited with status 3", "panic: boom"}},
		{name: "hang", mode: "normal", tool: "hang", tune: func(c *serverConfig) { c.Timeout = 300 * time.Millisecond }, want: []string{"error: ", "timed out"}},
		{name: "line over the limit", mode: "normal", tool: "big", args: `{"size":5000}`, tune: func(c *serverConfig) { c.MaxMessageBytes = 1024 }, want: []string{"error: ", "response too large"}},
		{name: "noise on stdout", mode: "normal", tool: "noise", want: []string{"completed\nafter noise"}},
		{name: "megabytes on stderr", mode: "normal", tool: "stderr-flood", want: []string{"completed\nflooded"}},
		{name: "unsupported server requests", mode: "normal", tool: "server-requests", want: []string{"ping={}", `other={"code":-32601`}},
		{name: "unsupported notifications", mode: "normal", tool: "unknown-messages", want: []string{"completed\nstill here other={\"code\":-32601"}},
		{name: "grandchild", mode: "grandchild", perRun: true, tool: "grandchild", want: []string{"completed\n"}},
		{name: "ignores SIGTERM", mode: "ignore-term", perRun: true, tool: "echo", args: `{"message":"stubborn"}`, want: []string{"completed\nstubborn"}},
		{name: "exits during initialize", mode: "exit-in-initialize", perRun: true, tool: "echo", want: []string{"mcp.server.failed", "exited with status 7", "cannot open database", `unknown tool \"mcp_bad_echo\"`}},
		{name: "hangs in initialize", mode: "hang-initialize", perRun: true, tool: "echo", tune: func(c *serverConfig) { c.StartupTimeout = 300 * time.Millisecond }, want: []string{"mcp.server.failed", "initialize", "startup_timeout 300ms", `unknown tool \"mcp_bad_echo\"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tag := checkNoLeaks(t)
			bad := taggedServer(t, "bad", tt.mode, tag)
			if tt.tune != nil {
				tt.tune(&bad)
			}
			good := taggedServer(t, "good", "normal", tag)
			f := newFakeModel(t, providerOpenAI, promptedCall, promptedCall, promptedCall, promptedCall)
			globals := []serverConfig{good}
			var perRun json.RawMessage
			if tt.perRun {
				perRun = perRunServers(t, bad)
			} else {
				globals = append(globals, bad)
			}
			m, reg := runsOver(t, f, registryOptions{Client: clientOptions{StopGrace: testStopGrace}}, globals...)

			args := cmpOr(tt.args, "{}")
			runBesideHealthy(t, m, runRequest{Prompt: callPrompt("mcp_bad_"+sanitizeName(tt.tool), args), MCPServers: perRun}, tt.want)
			if tt.perRun {
				// The run's servers are closed before its terminal status;
				// a SIGKILL takes effect when the kernel next runs the
				// process, so allow a moment for it.
				var procs []int
				if !eventually(2*time.Second, func() bool { procs = taggedProcesses(tag); return len(procs) == 1 }) {
					t.Errorf("after the run: live server processes %v, want only the global one", procs)
				}
			}
			if st := reg.server("good").snapshot(); st.Status != statusReady {
				t.Errorf("server good = %s %q, want ready", st.Status, st.Error)
			}
			checkNoPending(t, reg)
		})
	}
}

// perRunServers returns the mcp_servers field of a run request that starts
// cfg (a fake stdio server) for the run, not required.
func perRunServers(t *testing.T, cfg serverConfig) json.RawMessage {
	t.Helper()
	entry := map[string]any{
		"name": cfg.Name, "command": cfg.Command, "env": cfg.Env,
		"timeout": cfg.Timeout.String(), "startup_timeout": cfg.StartupTimeout.String(),
		"required": false, // the run goes on and meets the fault
	}
	b, err := json.Marshal([]any{entry})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// cmpOr returns a unless it is empty, else b.
func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func TestFaultsDeadServerFailsFastWithReason(t *testing.T) {
	tag := checkNoLeaks(t)
	f := newFakeModel(t, providerOpenAI, promptedCall, promptedCall, promptedCall, promptedCall)
	m, reg := runsOver(t, f, registryOptions{}, taggedServer(t, "bad", "normal", tag))
	first, err := m.start(runRequest{Prompt: callPrompt("mcp_bad_crash", "{}")}, true)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, first)
	// Without restarts the server stays down: the next call fails at once
	// and still says why.
	start := time.Now()
	second, err := m.start(runRequest{Prompt: callPrompt("mcp_bad_echo", `{"message":"x"}`)}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := waitRun(t, second)
	for _, want := range []string{"error: ", "exited with status 3", "panic: boom"} {
		if !strings.Contains(v.Output, want) {
			t.Errorf("call to a dead server = %q, want it to contain %q", v.Output, want)
		}
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Errorf("call to a dead server took %v, want it to fail at once", elapsed)
	}
	checkNoPending(t, reg)
}

func TestFaultsCancelledCallsLeaveTheServerUsable(t *testing.T) {
	tag := checkNoLeaks(t)
	c := connectFake(t, taggedServer(t, "fake", "normal", tag), clientOptions{Logger: slog.New(slog.DiscardHandler)})
	// Calls cancelled at every moment of their write: none may leave the
	// server's stdin unusable for the calls after it.
	for i := range 300 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Duration(i%30)*time.Microsecond)
		c.callTool(ctx, "echo", json.RawMessage(`{"message":"x"}`))
		cancel()
	}
	res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"after"}`))
	if err != nil || resultText(t, res) != "after" {
		t.Fatalf("callTool(echo) after cancelled calls = %v, %v, want %q", res, err, "after")
	}
	if n := pendingCalls(c); n != 0 {
		t.Errorf("pending calls = %d, want 0", n)
	}
}

func TestFaultsModelEndpoint(t *testing.T) {
	malformed := `{"choices":[{"message":{"role":"assistant","content":`
	tests := []struct {
		name   string
		script []fakeTurn
		status string
		want   string
	}{
		{name: "429 then success", script: []fakeTurn{{Status: 429, RetryAfter: "0"}, {Text: "fine"}}, status: runCompleted, want: "fine"},
		{name: "500 until retries run out", script: []fakeTurn{{Status: 500}, {Status: 500}, {Status: 500}, {Status: 500}}, status: runFailed, want: "500"},
		{name: "malformed JSON", script: []fakeTurn{{Body: malformed}}, status: runFailed, want: "decode the answer"},
		{name: "unknown tool name", script: []fakeTurn{{ToolCalls: []toolCall{call("no_such_tool", "{}")}}, promptedCall}, status: runCompleted, want: `error: unknown tool "no_such_tool"`},
		{name: "401", script: []fakeTurn{{Status: 401, Text: "bad key"}}, status: runFailed, want: "401"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tag := checkNoLeaks(t)
			f := newFakeModel(t, providerOpenAI, tt.script...)
			m, reg := runsOver(t, f, registryOptions{}, taggedServer(t, "good", "normal", tag))
			r, err := m.start(runRequest{Prompt: "go"}, true)
			if err != nil {
				t.Fatal(err)
			}
			v := waitRun(t, r)
			if v.Status != tt.status || !strings.Contains(v.Output+v.Error, tt.want) {
				t.Errorf("run = %s %q %q, want %s containing %q", v.Status, v.Output, v.Error, tt.status, tt.want)
			}
			checkNoPending(t, reg)
		})
	}
}

func TestFaultsModelHangsUntilCancelled(t *testing.T) {
	tag := checkNoLeaks(t)
	f := newFakeModel(t, providerOpenAI, fakeTurn{Hang: true}, fakeTurn{Text: "the other run"})
	m, _ := runsOver(t, f, registryOptions{}, taggedServer(t, "good", "normal", tag))
	hung, err := m.start(runRequest{Prompt: "hang"}, true)
	if err != nil {
		t.Fatal(err)
	}
	waitForModelRequests(t, f, 1)
	other, err := m.start(runRequest{Prompt: "other"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := waitRun(t, other); v.Status != runCompleted || v.Output != "the other run" {
		t.Errorf("other run = %s %q %q, want completed", v.Status, v.Output, v.Error)
	}
	hung.cancel()
	if v := waitRun(t, hung); v.Status != runCancelled {
		t.Errorf("hung run = %s %q, want cancelled", v.Status, v.Error)
	}
}

// waitForModelRequests waits until f has received n requests.
func waitForModelRequests(t *testing.T, f *fakeModel, n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("the model has received %d requests", n), func() bool { return len(f.requests()) >= n })
}

// faultyTools are the tools of newFaultyMCP, which misbehave by name.
var faultyTools = []string{"echo", "die_mid_stream", "expire_session", "status_500", "slow", "too_slow", "malformed_sse"}

// newFaultyMCP starts a fake server for fault tests whose tools misbehave
// by name, and returns its URL (ending in /mcp). It refuses unknown
// sessions, redirects /redirected to /mcp, and ends its GET stream at once.
func newFaultyMCP(t *testing.T) string {
	t.Helper()
	var s *fakeMCP
	var expired atomic.Bool
	s = newFakeMCP(t, fakeMCPConfig{Name: "faulty", Tools: faultyTools, Capabilities: map[string]any{"tools": map[string]any{}}, Sessions: true,
		Script: func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
			switch {
			case r.URL.Path == "/redirected":
				http.Redirect(w, r, "/mcp", http.StatusTemporaryRedirect)
				return true
			case r.Method == http.MethodGet:
				// The notification stream closes at once: the client must cope.
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				return true
			case r.Method == http.MethodDelete:
				return true
			case m.Method != "tools/call" || len(m.ID) == 0:
				return false
			}
			return faultyCall(w, r, m, func() bool {
				if expired.Swap(true) {
					return false
				}
				s.endSession(m.SessionID)
				return true
			})
		}})
	return s.URL + "/mcp"
}

// faultyCall answers the tools/call m of a faulty server by the tool's
// name; expire ends the session the first time it is called and reports
// whether it did.
func faultyCall(w http.ResponseWriter, r *http.Request, m mcpExchange, expire func() bool) bool {
	answer := func(text string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":%q}]}}`, m.ID, text)
	}
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Message string `json:"message"`
		} `json:"arguments"`
	}
	json.Unmarshal(m.Params, &p)
	switch p.Name {
	case "echo":
		writeSSE(w, "event: message\ndata: "+answer(p.Arguments.Message)+"\n\n")
	case "die_mid_stream":
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",")
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler) // cuts the connection mid-event
	case "expire_session":
		if expire() {
			http.Error(w, "session expired", http.StatusNotFound)
			return true
		}
		writeJSONBody(w, answer("after re-initialize"))
	case "status_500":
		http.Error(w, "internal trouble", http.StatusInternalServerError)
	case "slow", "too_slow":
		delay := 100 * time.Millisecond
		if p.Name == "too_slow" {
			delay = 5 * time.Second
		}
		select {
		case <-time.After(delay):
			writeJSONBody(w, answer("slowly"))
		case <-r.Context().Done():
		}
	case "malformed_sse":
		writeSSE(w, "event: message\ndata: {not json\n\nretry: x\nid\n: comment\n\n")
	}
	return true
}

func TestFaultsHTTPServers(t *testing.T) {
	tests := []struct {
		name string
		tool string
		want []string
	}{
		{name: "dies mid SSE stream", tool: "die_mid_stream", want: []string{"error: ", "response stream ended before the answer"}},
		{name: "session expires", tool: "expire_session", want: []string{"completed\nafter re-initialize"}},
		{name: "answers 500", tool: "status_500", want: []string{"error: ", "500"}},
		{name: "answers slowly", tool: "slow", want: []string{"completed\nslowly"}},
		{name: "answers too slowly", tool: "too_slow", want: []string{"error: ", "no answer within timeout 500ms"}},
		{name: "malformed SSE", tool: "malformed_sse", want: []string{"error: ", "response stream ended before the answer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tag := checkNoLeaks(t)
			bad := serverConfig{Name: "bad", Transport: transportHTTP, URL: newFaultyMCP(t), Timeout: 500 * time.Millisecond,
				StartupTimeout: 5 * time.Second, Enabled: true, Source: "test"}
			good := taggedServer(t, "good", "normal", tag)
			f := newFakeModel(t, providerOpenAI, slices.Repeat([]fakeTurn{promptedCall}, 6)...)
			m, reg := runsOver(t, f, registryOptions{}, good, bad)
			runBesideHealthy(t, m, runRequest{Prompt: callPrompt("mcp_bad_"+tt.tool, "{}")}, tt.want)
			// The faulty server still serves its well-behaved tool.
			echo, err := m.start(runRequest{Prompt: callPrompt("mcp_bad_echo", `{"message":"still up"}`)}, true)
			if err != nil {
				t.Fatal(err)
			}
			if v := waitRun(t, echo); v.Status != runCompleted || v.Output != "still up" {
				t.Errorf("echo on the faulty server after the fault = %s %q %q, want completed %q", v.Status, v.Output, v.Error, "still up")
			}
			checkNoPending(t, reg)
		})
	}
}

func TestFaultsHTTPRedirect(t *testing.T) {
	checkNoLeaks(t)
	same := newFaultyMCP(t)
	other := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, same, http.StatusTemporaryRedirect)
	})
	tests := []struct {
		name    string
		url     string
		wantErr string
	}{
		{name: "same origin", url: strings.TrimSuffix(same, "/mcp") + "/redirected"},
		{name: "another origin", url: other.URL + "/mcp", wantErr: "refusing redirect to another origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serverConfig{Name: "r", Transport: transportHTTP, URL: tt.url, Timeout: 2 * time.Second, StartupTimeout: 2 * time.Second,
				Enabled: true, Headers: map[string]string{"Authorization": "Bearer " + testSecret}}
			c, err := connect(t.Context(), cfg, clientOptions{Logger: slog.New(slog.DiscardHandler)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("connect(%q) = %v, want error containing %q", tt.url, err, tt.wantErr)
				}
				if err != nil && strings.Contains(err.Error(), testSecret) {
					t.Errorf("connect(%q) error holds the bearer token: %v", tt.url, err)
				}
				if c != nil {
					c.close()
				}
				return
			}
			if err != nil {
				t.Fatalf("connect(%q) = %v", tt.url, err)
			}
			defer c.close()
			if _, err := c.listTools(t.Context()); err != nil {
				t.Errorf("listTools() after a same-origin redirect = %v", err)
			}
		})
	}
}

func TestFaultsRestartingServerRecovers(t *testing.T) {
	tag := checkNoLeaks(t)
	f := newFakeModel(t, providerOpenAI, promptedCall, promptedCall, promptedCall, promptedCall)
	m, reg := runsOver(t, f, registryOptions{Restart: true, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond},
		taggedServer(t, "bad", "normal", tag))
	crash, err := m.start(runRequest{Prompt: callPrompt("mcp_bad_crash", "{}")}, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := waitRun(t, crash); !strings.Contains(v.Output, "exited with status 3") {
		t.Errorf("crashing call = %q, want the exit status", v.Output)
	}
	waitUntil(t, "server bad is ready again after its restart", func() bool { return reg.server("bad").snapshot().Status == statusReady })
	if st := reg.server("bad").snapshot(); st.Restarts != 1 {
		t.Errorf("restarts = %d, want 1", st.Restarts)
	}
	echo, err := m.start(runRequest{Prompt: callPrompt("mcp_bad_echo", `{"message":"back"}`)}, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := waitRun(t, echo); v.Output != "back" {
		t.Errorf("call after the restart = %s %q %q, want %q", v.Status, v.Output, v.Error, "back")
	}
	checkNoPending(t, reg)
}

// framedLine is what a lineFramer returned: a line, or a rejected
// oversized line's size.
type framedLine struct {
	line     string
	rejected int
}

// frameAll runs a lineFramer over input to its end and returns its frames.
func frameAll(input []byte, bufSize, maxMessage int) []framedLine {
	var out []framedLine
	f := newLineFramer(bytes.NewReader(input), bufSize, maxMessage)
	for {
		fr, err := f.next()
		if err != nil {
			return out
		}
		if fr.rejected {
			out = append(out, framedLine{rejected: fr.size})
		} else {
			out = append(out, framedLine{line: string(fr.line)})
		}
	}
}

// referenceFrames splits input the simple way: lines with their newline,
// a line over maxMessage bytes (or maxMessage+1 without a newline at the
// end) rejected with its size.
func referenceFrames(input []byte, maxMessage int) []framedLine {
	var out []framedLine
	for len(input) > 0 {
		n := bytes.IndexByte(input, '\n') + 1
		if n == 0 {
			n = len(input)
		}
		if n > maxMessage+1 {
			out = append(out, framedLine{rejected: n})
		} else {
			out = append(out, framedLine{line: string(input[:n])})
		}
		input = input[n:]
	}
	return out
}

func TestFrameLines(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		input string
		max   int
	}{
		{name: "empty", input: "", max: 8},
		{name: "lines", input: "{}\n{\"a\":1}\n", max: 8},
		{name: "last line without newline", input: "{}\n{\"a\":1}", max: 8},
		{name: "line at the limit", input: "12345678\nx\n", max: 8},
		{name: "line over the limit", input: "123456789\nx\n", max: 8},
		{name: "long line over the buffer", input: strings.Repeat("y", 100) + "\n{}\n", max: 200},
		{name: "oversized over the buffer", input: strings.Repeat("y", 100) + "\n{}\n", max: 40},
		{name: "oversized at the end without newline", input: "{}\n" + strings.Repeat("z", 100), max: 40},
		{name: "blank lines", input: "\n\n\r\n", max: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := frameAll([]byte(tt.input), 16, tt.max)
			want := referenceFrames([]byte(tt.input), tt.max)
			if !slices.Equal(got, want) {
				t.Errorf("frames of %q, max %d = %v, want %v", tt.input, tt.max, got, want)
			}
		})
	}
}

func FuzzStdioFramer(f *testing.F) {
	f.Add([]byte("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"), uint8(64))
	f.Add([]byte("noise\n\n[{\"id\":1},{\"id\":2}]\n{\"id\":3"), uint8(8))
	f.Add([]byte(strings.Repeat("x", 300)+"\"id\":7}\n{}\n"), uint8(20))
	f.Add([]byte("\r\n\x00\xff\n"), uint8(0))
	f.Fuzz(func(t *testing.T, input []byte, limit uint8) {
		maxMessage := int(limit) + 1
		got := frameAll(input, 16, maxMessage)
		if want := referenceFrames(input, maxMessage); !slices.Equal(got, want) {
			t.Fatalf("frames of %q, max %d = %v, want %v", input, maxMessage, got, want)
		}
		// The transport's own handling of each line must not panic either.
		var delivered [][]byte
		tr := &stdioTransport{name: "fuzz", logger: slog.New(slog.DiscardHandler), maxMessage: maxMessage,
			onMessage: func(m []byte) { delivered = append(delivered, m) }, quit: make(chan struct{})}
		f := newLineFramer(bytes.NewReader(input), 16, maxMessage)
		for {
			fr, err := f.next()
			if err != nil {
				break
			}
			tr.handle(fr)
		}
		for _, m := range delivered {
			// A line is passed on when it looks like an object; a batch is
			// split into its (valid) elements.
			if (len(m) == 0 || m[0] != '{') && !json.Valid(m) {
				t.Fatalf("delivered %q: neither an object line nor a batch element", m)
			}
		}
	})
}
