package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds agent runs against the real reference MCP servers (see
// client_peers_test.go), scripted through the fake model in both wire formats.

// wires are the model wire formats the scripted runs speak.
var wires = []string{providerOpenAI, providerAnthropic}

// newPeerRegistry connects the global servers and fails the test unless
// every one is ready. The registry is closed when the test ends.
// workspace is the root the servers get from roots/list ("" for a fresh
// directory).
func newPeerRegistry(t *testing.T, workspace string, globals ...serverConfig) *registry {
	t.Helper()
	if workspace == "" {
		workspace = t.TempDir()
	}
	reg := newRegistry(globals, registryOptions{Logger: discardLogger(), Client: clientOptions{Roots: []string{workspace}}})
	t.Cleanup(reg.close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*peerStartTimeout)
	defer cancel()
	if err := reg.waitReady(ctx); err != nil {
		t.Fatalf("global servers not ready: %v", err)
	}
	for _, st := range reg.statuses() {
		if st.Status != statusReady {
			t.Fatalf("server %q = %s (%s), want ready", st.Name, st.Status, st.Error)
		}
	}
	return reg
}

// startRun starts a run and fails the test if the request is refused.
func startRun(t *testing.T, m *runManager, req runRequest) *run {
	t.Helper()
	r, err := m.start(req, true)
	if err != nil {
		t.Fatalf("start(%+v) = %v", req, err)
	}
	return r
}

// waitEvent blocks until r emits an event of type typ and returns it. It
// fails the test if the run ends first.
func waitEvent(t *testing.T, r *run, typ string) runEvent {
	t.Helper()
	for {
		events, ended, changed := r.eventsAfter(0)
		for _, ev := range events {
			if ev.Type == typ {
				return ev
			}
		}
		if ended {
			t.Fatalf("run %s ended without a %s event; events: %v", r.id, typ, eventTypes(r))
		}
		select {
		case <-changed:
		case <-t.Context().Done():
			t.Fatalf("run %s: no %s event", r.id, typ)
		}
	}
}

// eventData returns the data of r's events of type typ, in order.
func eventData(r *run, typ string) []map[string]any {
	events, _, _ := r.eventsAfter(0)
	var out []map[string]any
	for _, ev := range events {
		if data, ok := ev.Data.(map[string]any); ok && ev.Type == typ {
			out = append(out, data)
		}
	}
	return out
}

// resultsByID returns the tool results at the end of req by call id.
func resultsByID(req fakeRequest) map[string]chatMessage {
	out := map[string]chatMessage{}
	for _, m := range req.toolResults() {
		out[m.ToolCallID] = m
	}
	return out
}

// calls returns tool calls with ids call_<name>; name "x#2" gets id
// call_x#2 and calls x, so one turn may call a tool twice.
func calls(nameArgs ...string) []toolCall {
	var out []toolCall
	for i := 0; i+1 < len(nameArgs); i += 2 {
		name, _, _ := strings.Cut(nameArgs[i], "#")
		out = append(out, toolCall{ID: "call_" + nameArgs[i], Name: name, Arguments: json.RawMessage(nameArgs[i+1])})
	}
	return out
}

// answerWithResults is a final turn that answers with the last tool
// results, one "ok: text" or "error: text" line each.
var answerWithResults = fakeTurn{Reply: func(req fakeRequest) fakeTurn {
	var lines []string
	for _, res := range req.toolResults() {
		outcome := "ok"
		if res.IsError {
			outcome = "error"
		}
		lines = append(lines, outcome+": "+res.Content)
	}
	return fakeTurn{Text: strings.Join(lines, "\n")}
}}

// offersIncluding checks the request offered at least the named tools.
func offersIncluding(names ...string) func(fakeRequest) error {
	return func(req fakeRequest) error {
		got := req.toolNames()
		for _, name := range names {
			if !slices.Contains(got, name) {
				return fmt.Errorf("offered tools = %v, want %s among them", got, name)
			}
		}
		return nil
	}
}

// requireCompleted fails the test unless the run completed.
func requireCompleted(t *testing.T, v runView) {
	t.Helper()
	if v.Status != runCompleted {
		t.Fatalf("run status = %s (error %q), want completed", v.Status, v.Error)
	}
}

func TestRealFindToolActivatesAndCalls(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, "", stdioPeerConfig("everything", everythingStdioCommand(t)))
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			message := "hello over " + wire
			f := newFakeModel(t, wire,
				fakeTurn{Check: offers("find_tool"), ToolCalls: calls("find_tool", `{"query":"echo"}`)},
				fakeTurn{
					Check: func(req fakeRequest) error {
						if err := offers("find_tool", "mcp_everything_echo")(req); err != nil {
							return err
						}
						if res := req.toolResults(); len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Content, "- mcp_everything_echo: Echoes back the input string") {
							return fmt.Errorf("find_tool result = %+v, want mcp_everything_echo listed with its description", res)
						}
						return nil
					},
					ToolCalls: calls("mcp_everything_echo", fmt.Sprintf(`{"message":%q}`, message)),
				},
				answerWithResults,
			)
			m := newRunsOver(t, reg, f, "", nil)
			v := waitRun(t, startRun(t, m, runRequest{Prompt: "echo something"}))
			requireCompleted(t, v)
			if want := "ok: Echo: " + message; v.Output != want {
				t.Errorf("output = %q, want %q", v.Output, want)
			}
			if !slices.Equal(v.ActivatedTools, []string{"mcp_everything_echo"}) {
				t.Errorf("activated tools = %v, want [mcp_everything_echo]", v.ActivatedTools)
			}
		})
	}
}

// A recordingProxy forwards requests to one MCP endpoint and keeps the
// requests it forwarded. Safe for concurrent use.
type recordingProxy struct {
	URL string // the proxy's endpoint: same path as the target's

	mu sync.Mutex
	// guards seen and changed
	seen    []proxiedRequest
	changed chan struct{} // closed and replaced on every request
}

// A proxiedRequest is one request a recordingProxy forwarded, or, with
// Answering set, one write of its answer passing back, or, with Held set,
// its answer held back.
type proxiedRequest struct {
	Method    string // the HTTP method
	RPC       string // the JSON-RPC method of a POST; "" otherwise
	Body      []byte
	Answering bool
	Held      bool
}

// record appends req and wakes waitUntil.
func (p *recordingProxy) record(req proxiedRequest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen = append(p.seen, req)
	close(p.changed)
	p.changed = make(chan struct{})
}

// An answerWatcher is a ResponseWriter that calls onWrite after each
// write of the body.
type answerWatcher struct {
	http.ResponseWriter
	onWrite func()
}

func (w *answerWatcher) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.onWrite()
	return n, err
}

// Unwrap lets http.ResponseController flush the SSE answers through.
func (w *answerWatcher) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// proxiedKey is the context key under which a recordingProxy keeps the
// request it forwards.
type proxiedKey struct{}

// startRecordingProxy starts a proxy in front of target, closed when the
// test ends. The answer to a request hold accepts (nil: none) is never
// passed back: once its headers come from the server, the proxy records
// the request with Held set and waits for the client to give up.
func startRecordingProxy(t *testing.T, target string, hold func(proxiedRequest) bool) *recordingProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &recordingProxy{changed: make(chan struct{})}
	forward := &httputil.ReverseProxy{
		Rewrite:       func(pr *httputil.ProxyRequest) { pr.SetURL(&url.URL{Scheme: u.Scheme, Host: u.Host}) },
		FlushInterval: -1,
		// Requests the client abandons are expected, not worth a log line.
		ErrorLog: log.New(io.Discard, "", 0),
		ModifyResponse: func(resp *http.Response) error {
			req, _ := resp.Request.Context().Value(proxiedKey{}).(proxiedRequest)
			if hold == nil || !hold(req) {
				return nil
			}
			req.Held = true
			p.record(req)
			<-resp.Request.Context().Done()
			return resp.Request.Context().Err()
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var msg struct {
			Method string `json:"method"`
		}
		json.Unmarshal(body, &msg)
		req := proxiedRequest{Method: r.Method, RPC: msg.Method, Body: body}
		p.record(req)
		r = r.WithContext(context.WithValue(r.Context(), proxiedKey{}, req))
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		answered := req
		answered.Answering = true
		forward.ServeHTTP(&answerWatcher{ResponseWriter: w, onWrite: func() { p.record(answered) }}, r)
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL + u.Path
	return p
}

// waitUntil waits up to five seconds for done to accept the requests
// forwarded so far, and returns them.
func (p *recordingProxy) waitUntil(t *testing.T, what string, done func([]proxiedRequest) bool) []proxiedRequest {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	for {
		p.mu.Lock()
		seen, changed := slices.Clone(p.seen), p.changed
		p.mu.Unlock()
		if done(seen) {
			return seen
		}
		select {
		case <-changed:
		case <-timer.C:
			for _, req := range seen {
				t.Logf("proxy saw %s %s", req.Method, req.Body)
			}
			t.Fatalf("proxy: no %s within 5s", what)
		case <-t.Context().Done():
			t.Fatalf("proxy: no %s", what)
		}
	}
}

func TestRealConnectMCP(t *testing.T) {
	t.Parallel()
	proxy := startRecordingProxy(t, startEverythingHTTP(t, "streamableHttp"), nil)
	reg := newPeerRegistry(t, "", stdioPeerConfig("memory", memoryStdioCommand(t)))
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			connect := func(name string) string {
				if name == "" {
					return fmt.Sprintf(`{"url":%q}`, proxy.URL)
				}
				return fmt.Sprintf(`{"url":%q,"server_name":%q}`, proxy.URL, name)
			}
			f := newFakeModel(t, wire,
				fakeTurn{Check: offers("find_tool"), ToolCalls: calls("find_tool", `{"query":"select:connect_mcp"}`)},
				fakeTurn{Check: offers("find_tool", "connect_mcp"), ToolCalls: calls(
					"connect_mcp#bad-name", fmt.Sprintf(`{"url":%q,"server_name":"live srv!"}`, proxy.URL),
					"connect_mcp#ftp", `{"url":"ftp://127.0.0.1/mcp","server_name":"ftp"}`,
					"connect_mcp#file", `{"url":"file:///etc/passwd"}`,
					"connect_mcp#global", connect("memory"),
					"connect_mcp#live", connect("live-srv"),
				)},
				fakeTurn{Check: offersIncluding("find_tool", "connect_mcp", "mcp_live_srv_echo", "mcp_live_srv_get_sum"), ToolCalls: calls(
					"mcp_live_srv_echo", `{"message":"live"}`,
					"connect_mcp#duplicate", connect("live_srv"),
					"connect_mcp#derived", connect(""),
				)},
				fakeTurn{Check: offersIncluding("mcp_127_0_0_1_echo"), ToolCalls: calls(
					"mcp_127_0_0_1_echo", `{"message":"derived"}`,
					"find_tool", `{"query":"sum of two numbers","max_results":1}`,
				)},
				answerWithResults,
			)
			m := newRunsOver(t, reg, f, "", nil)
			r := startRun(t, m, runRequest{Prompt: "connect and echo"})
			v := waitRun(t, r)
			requireCompleted(t, v)

			reqs := f.requests()
			tests := []struct {
				name    string
				turn    int
				callID  string
				isError bool
				want    string
			}{
				{"bad name", 2, "call_connect_mcp#bad-name", true, `server_name: "live srv!" has invalid characters; use only letters, digits, "-" and "_"`},
				{"ftp url", 2, "call_connect_mcp#ftp", true, `url "ftp://127.0.0.1/mcp": scheme "ftp" is not supported; use http or https`},
				{"file url", 2, "call_connect_mcp#file", true, `url "file:///etc/passwd": scheme "file" is not supported; use http or https`},
				{"global name", 2, "call_connect_mcp#global", true, `a server named "memory" is already in this run`},
				{"connected", 2, "call_connect_mcp#live", false, "mcp_live_srv_echo"},
				{"call at once", 3, "call_mcp_live_srv_echo", false, "Echo: live"},
				{"duplicate", 3, "call_connect_mcp#duplicate", true, `a server named "live-srv" is already in this run`},
				{"derived name", 3, "call_connect_mcp#derived", false, `Connected to "127-0-0-1"`},
				{"derived name call", 4, "call_mcp_127_0_0_1_echo", false, "Echo: derived"},
				// find_tool sees connect_mcp tools: both connections offer
				// get-sum with the same description; ties rank by name.
				{"find_tool sees them", 4, "call_find_tool", false, "- mcp_127_0_0_1_get_sum:"},
			}
			for _, tt := range tests {
				if len(reqs) <= tt.turn {
					t.Fatalf("model got %d requests, want more than %d", len(reqs), tt.turn)
				}
				res, ok := resultsByID(reqs[tt.turn])[tt.callID]
				if !ok || res.IsError != tt.isError || !strings.Contains(res.Content, tt.want) {
					t.Errorf("%s: result of %s = %+v (found %v), want is_error %v containing %q", tt.name, tt.callID, res, ok, tt.isError, tt.want)
				}
			}

			var connected []string
			for _, data := range eventData(r, "mcp.server.connected") {
				if data["source"] == "connect_mcp" {
					connected = append(connected, fmt.Sprint(data["server"]))
				}
			}
			if want := []string{"live-srv", "127-0-0-1"}; !slices.Equal(connected, want) {
				t.Errorf("mcp.server.connected events from connect_mcp = %v, want %v", connected, want)
			}
			var closed []string
			for _, s := range v.Servers {
				if s.Status == statusClosed && s.Source == "connect_mcp" {
					closed = append(closed, s.Name)
				}
			}
			if want := []string{"live-srv", "127-0-0-1"}; len(v.Servers) != 2 || !slices.Equal(closed, want) {
				t.Errorf("run servers = %+v, want %v closed", v.Servers, want)
			}
		})
	}
	// Each run's two sessions ended with a DELETE.
	proxy.waitUntil(t, "DELETE per session", func(seen []proxiedRequest) bool {
		deletes := 0
		for _, req := range seen {
			if req.Method == http.MethodDelete {
				deletes++
			}
		}
		return deletes == 2*len(wires)
	})
}

func TestRealResources(t *testing.T) {
	t.Parallel()
	echoserver := peerCommand{Command: buildEchoServer(t), Args: []string{"stdio"}}
	reg := newPeerRegistry(t, "",
		stdioPeerConfig("everything", everythingStdioCommand(t)),
		stdioPeerConfig("memory", memoryStdioCommand(t)),
		stdioPeerConfig("echo", echoserver))
	doc, err := os.ReadFile(filepath.Join(requireNode(t), "@modelcontextprotocol", "server-everything", "dist", "docs", "features.md"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:list_mcp_resources,read_mcp_resource"}`)},
		fakeTurn{Check: offers("find_tool", "list_mcp_resources", "read_mcp_resource"), ToolCalls: calls(
			"list_mcp_resources#everything", `{"mcp_name":"everything"}`,
			"list_mcp_resources#memory", `{"mcp_name":"memory"}`,
			"list_mcp_resources#echo", `{"mcp_name":"echo"}`,
			"list_mcp_resources#missing", `{"mcp_name":"nope"}`,
			"read_mcp_resource#text", `{"mcp_name":"everything","uri":"demo://resource/dynamic/text/1"}`,
			"read_mcp_resource#blob", `{"mcp_name":"everything","uri":"demo://resource/dynamic/blob/2"}`,
			"read_mcp_resource#doc", `{"mcp_name":"everything","uri":"demo://resource/static/document/features.md"}`,
			"read_mcp_resource#graph", `{"mcp_name":"memory","uri":"memory://knowledge-graph"}`,
			"read_mcp_resource#echo", `{"mcp_name":"echo","uri":"file:///etc/hostname"}`,
			"read_mcp_resource#unknown", `{"mcp_name":"everything","uri":"demo://no/such/resource"}`,
		)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", nil)
	requireCompleted(t, waitRun(t, startRun(t, m, runRequest{Prompt: "look at the resources"})))

	results := resultsByID(f.requests()[2])
	tests := []struct {
		callID  string
		isError bool
		want    string // a regular expression
	}{
		{"list_mcp_resources#everything", false, `^\[.*\{"uri":"demo://resource/static/document/features\.md","name":"features\.md","description":"Static document file exposed from /docs: features\.md","mimeType":"text/markdown"\}.*\]$`},
		{"list_mcp_resources#memory", false, `^\[\{"uri":"memory://knowledge-graph","name":"knowledge-graph","title":"Knowledge Graph",.*"mimeType":"application/json"\}\]$`},
		{"list_mcp_resources#echo", true, `^list_mcp_resources: server "echo" does not offer resources$`},
		{"list_mcp_resources#missing", true, `^list_mcp_resources: no server "nope" in this run; servers: echo, everything, memory$`},
		{"read_mcp_resource#text", false, `^Resource 1: This is a plaintext resource created at .+$`},
		{"read_mcp_resource#blob", false, `^\[resource demo://resource/dynamic/blob/2: text/plain, \d+ bytes\]$`},
		{"read_mcp_resource#doc", false, "^" + regexp.QuoteMeta(string(doc)) + "$"},
		{"read_mcp_resource#graph", false, `"entities": \[\]`},
		{"read_mcp_resource#echo", true, `^read_mcp_resource: server "echo" does not offer resources$`},
		{"read_mcp_resource#unknown", true, `^read_mcp_resource: server "everything": .*demo://no/such/resource`},
	}
	for _, tt := range tests {
		res, ok := results["call_"+tt.callID]
		if !ok || res.IsError != tt.isError || !regexp.MustCompile(tt.want).MatchString(res.Content) {
			t.Errorf("%s = %+v (found %v), want is_error %v matching %s", tt.callID, res, ok, tt.isError, tt.want)
		}
	}
}

func TestRealToolErrorGoesBackToTheModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	note := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(note, []byte("hello file"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := newPeerRegistry(t, dir, stdioPeerConfig("filesystem", filesystemStdioCommand(t, dir)))
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire,
				fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:mcp_filesystem_read_text_file"}`)},
				fakeTurn{ToolCalls: calls(
					"mcp_filesystem_read_text_file#outside", `{"path":"/etc/hostname"}`,
					"mcp_filesystem_read_text_file#inside", fmt.Sprintf(`{"path":%q}`, note),
				)},
				fakeTurn{Reply: func(req fakeRequest) fakeTurn {
					results := resultsByID(req)
					outside := results["call_mcp_filesystem_read_text_file#outside"]
					inside := results["call_mcp_filesystem_read_text_file#inside"]
					if !outside.IsError || !strings.Contains(outside.Content, "Access denied - path outside allowed directories: /etc/hostname") {
						t.Errorf("outside read = %+v, want a tool error saying access denied", outside)
					}
					if inside.IsError || inside.Content != "hello file" {
						t.Errorf("inside read = %+v, want %q", inside, "hello file")
					}
					return fakeTurn{ToolCalls: calls("mcp_filesystem_read_text_file", fmt.Sprintf(`{"path":%q}`, note))}
				}},
				answerWithResults,
			)
			m := newRunsOver(t, reg, f, "", nil)
			r := startRun(t, m, runRequest{Prompt: "read files"})
			v := waitRun(t, r)
			requireCompleted(t, v)
			if v.Output != "ok: hello file" {
				t.Errorf("output = %q, want %q", v.Output, "ok: hello file")
			}
			errors := map[string]bool{}
			for _, data := range eventData(r, "tool.call.completed") {
				if data["step"] == 2 {
					errors[fmt.Sprint(data["call_id"])] = data["is_error"] == true
				}
			}
			want := map[string]bool{"call_mcp_filesystem_read_text_file#outside": true, "call_mcp_filesystem_read_text_file#inside": false}
			if !maps.Equal(errors, want) {
				t.Errorf("step 2 tool.call.completed is_error by call = %v, want %v", errors, want)
			}
		})
	}
}

func TestRealPerRunServer(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, "", stdioPeerConfig("everything", everythingStdioCommand(t)))
	memory := memoryStdioCommand(t)
	body, err := json.Marshal([]map[string]any{{"name": "mem", "command": memory.Command, "args": memory.Args, "env": memory.Env}})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan *run, 1)
	memTools := func(req fakeRequest) []string {
		var names []string
		for _, name := range req.toolNames() {
			if strings.HasPrefix(name, "mcp_mem_") {
				names = append(names, name)
			}
		}
		return names
	}
	f := newFakeModel(t, providerAnthropic,
		fakeTurn{
			Check: func(req fakeRequest) error {
				if err := offers("find_tool")(req); err != nil {
					return err
				}
				if desc := req.Tools[0].Description; !strings.Contains(desc, "mem (9)") || !strings.Contains(desc, "everything (") {
					return fmt.Errorf("find_tool description = %q, want the per-run server mem (9) and everything counted", desc)
				}
				return nil
			},
			ToolCalls: calls("find_tool", `{"query":"knowledge graph","max_results":20}`),
		},
		fakeTurn{
			Check: func(req fakeRequest) error {
				if got := memTools(req); len(got) != 9 || len(req.Tools) != 10 {
					return fmt.Errorf("offered tools = %v, want find_tool and the 9 tools of mem", req.toolNames())
				}
				// While the run lasts, its scope holds mem's tools.
				r := <-started
				r.mu.Lock()
				scope := r.scope
				r.mu.Unlock()
				for _, e := range scope.lookupLocal("mem").toolSet().entries {
					if !slices.Contains(e.Tags, "dynamic") || !slices.Contains(e.Tags, "mcp_server:mem") {
						return fmt.Errorf("tags of %s = %v, want dynamic and mcp_server:mem", e.Name, e.Tags)
					}
				}
				return nil
			},
			ToolCalls: calls("mcp_mem_create_entities", `{"entities":[{"name":"harnessd","entityType":"program","observations":["speaks MCP"]}]}`),
		},
		fakeTurn{ToolCalls: calls("mcp_mem_open_nodes", `{"names":["harnessd"]}`)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", nil)
	r, err := m.start(runRequest{Prompt: "remember harnessd", MCPServers: body}, true)
	if err != nil {
		t.Fatalf("start with mcp_servers %s = %v", body, err)
	}
	started <- r
	v := waitRun(t, r)
	requireCompleted(t, v)
	if !strings.HasPrefix(v.Output, "ok: ") || !strings.Contains(v.Output, `"speaks MCP"`) {
		t.Errorf("output = %q, want the node read back with its observation", v.Output)
	}
	connected := eventData(r, "mcp.server.connected")
	if len(connected) != 1 || connected[0]["server"] != "mem" || connected[0]["source"] != "run" || connected[0]["tools"] != 9 {
		t.Errorf("mcp.server.connected events = %v, want one for mem from run with 9 tools", connected)
	}
	if len(v.Servers) != 1 || v.Servers[0].Name != "mem" || v.Servers[0].Status != statusClosed {
		t.Errorf("run servers = %+v, want mem closed", v.Servers)
	}
	graph, err := os.ReadFile(memory.Env["MEMORY_FILE_PATH"])
	if err != nil || !strings.Contains(string(graph), `"name":"harnessd"`) {
		t.Errorf("memory file = %q, %v, want the entity the run created", graph, err)
	}
}

func TestRealProfileShadowsGlobal(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, "", stdioPeerConfig("everything", everythingStdioCommand(t)))
	memory := memoryStdioCommand(t)
	home := t.TempDir()
	var args []string
	for _, a := range memory.Args {
		args = append(args, strconv.Quote(a))
	}
	profile := fmt.Sprintf("[mcp_servers.everything]\ncommand = %q\nargs = [%s]\n\n[mcp_servers.everything.env]\nMEMORY_FILE_PATH = %q\n",
		memory.Command, strings.Join(args, ", "), memory.Env["MEMORY_FILE_PATH"])
	if err := os.MkdirAll(filepath.Join(home, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "profiles", "graph.toml"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}

	// Both runs send their first request before either gets an answer, so
	// they are in flight together.
	var (
		mu      sync.Mutex
		waiting = 2
		both    = make(chan struct{})
	)
	turn := fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		switch len(req.Messages) {
		case 1:
			mu.Lock()
			if waiting--; waiting == 0 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
			case <-t.Context().Done():
			}
			return fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:mcp_everything_echo,mcp_everything_read_graph"}`)}
		case 3:
			if slices.Contains(req.toolNames(), "mcp_everything_read_graph") {
				return fakeTurn{ToolCalls: calls("mcp_everything_read_graph", `{}`)}
			}
			return fakeTurn{ToolCalls: calls("mcp_everything_echo", `{"message":"global"}`)}
		}
		res := req.toolResults()
		return fakeTurn{Text: strings.Join(req.toolNames(), ",") + "\n" + res[0].Content}
	}}
	f := newFakeModel(t, providerOpenAI, turn, turn, turn, turn, turn, turn)
	m := newRunsOver(t, reg, f, home, nil)
	withProfile := startRun(t, m, runRequest{Prompt: "read the graph", Profile: "graph"})
	without := startRun(t, m, runRequest{Prompt: "echo"})

	v := waitRun(t, withProfile)
	requireCompleted(t, v)
	if want := "find_tool,mcp_everything_read_graph\n{\n  \"entities\": [],\n  \"relations\": []\n}"; v.Output != want {
		t.Errorf("profile run output = %q, want %q", v.Output, want)
	}
	if v.ProfileFound == nil || !*v.ProfileFound {
		t.Errorf("profile run profile_found = %v, want true", v.ProfileFound)
	}
	connected := eventData(withProfile, "mcp.server.connected")
	if len(connected) != 1 || connected[0]["server"] != "everything" || connected[0]["source"] != "profile graph" {
		t.Errorf("profile run mcp.server.connected = %v, want everything from profile graph", connected)
	}
	if len(v.Servers) != 1 || v.Servers[0].Status != statusClosed {
		t.Errorf("profile run servers = %+v, want its everything closed", v.Servers)
	}

	v = waitRun(t, without)
	requireCompleted(t, v)
	if want := "find_tool,mcp_everything_echo\nEcho: global"; v.Output != want {
		t.Errorf("run without profile output = %q, want %q", v.Output, want)
	}
	if st := reg.server("everything").snapshot(); st.Status != statusReady {
		t.Errorf("global everything after the profile run = %s, want ready", st.Status)
	}
}

func TestRealFindToolRanking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := newPeerRegistry(t, dir,
		stdioPeerConfig("everything", everythingStdioCommand(t)),
		stdioPeerConfig("filesystem", filesystemStdioCommand(t, dir)),
		stdioPeerConfig("memory", memoryStdioCommand(t)))
	tests := []struct {
		query   string
		first   string   // the best match
		include []string // more tools that must be activated
		prefix  string   // what every activated tool's name starts with
		count   int      // how many are activated
	}{
		{"echo", "mcp_everything_echo", nil, "mcp_everything_echo", 1},
		// read_file outranks read_text_file: the query covers all of its name.
		{"read a file", "mcp_filesystem_read_file", []string{"mcp_filesystem_read_text_file", "mcp_filesystem_read_multiple_files"}, "mcp_filesystem_", 5},
		{"knowledge graph", "mcp_memory_read_graph", nil, "mcp_memory_", 5},
		// trigger-url-elicitation "supports two mechanisms": it matches "two".
		{"add two numbers", "mcp_everything_get_sum", []string{"mcp_memory_add_observations"}, "mcp_", 3},
	}
	for _, tt := range tests {
		for _, wire := range wires {
			t.Run(tt.query+"/"+wire, func(t *testing.T) {
				f := newFakeModel(t, wire,
					fakeTurn{ToolCalls: calls("find_tool", fmt.Sprintf(`{"query":%q}`, tt.query))},
					fakeTurn{Check: func(req fakeRequest) error {
						got := req.toolNames()[1:]
						if len(got) != tt.count || got[0] != tt.first {
							return fmt.Errorf("find_tool(%q) then offered %v, want %d tools, %s first", tt.query, got, tt.count, tt.first)
						}
						listed := req.toolResults()[0].Content
						for _, name := range got {
							if !strings.HasPrefix(name, tt.prefix) || !strings.Contains(listed, "- "+name+": ") {
								return fmt.Errorf("find_tool(%q) then offered %s, listed in %q; want it to start with %s and be listed", tt.query, name, listed, tt.prefix)
							}
						}
						for _, name := range tt.include {
							if !slices.Contains(got, name) {
								return fmt.Errorf("find_tool(%q) then offered %v, want %s among them", tt.query, got, name)
							}
						}
						return nil
					}, Text: "done"},
				)
				m := newRunsOver(t, reg, f, "", nil)
				requireCompleted(t, waitRun(t, startRun(t, m, runRequest{Prompt: tt.query})))
			})
		}
	}
}

func TestRealRunLimits(t *testing.T) {
	t.Parallel()
	everythingHTTP := startEverythingHTTP(t, "streamableHttp")
	proxy := startRecordingProxy(t, everythingHTTP, nil)
	holding := startRecordingProxy(t, everythingHTTP, func(req proxiedRequest) bool {
		return req.RPC == "tools/call" && strings.Contains(string(req.Body), `"name":"trigger-long-running-operation"`)
	})
	reg := newPeerRegistry(t, "",
		stdioPeerConfig("local", everythingStdioCommand(t)),
		httpPeerConfig("remote", transportHTTP, proxy.URL),
		httpPeerConfig("held", transportHTTP, holding.URL))

	t.Run("max_steps", func(t *testing.T) {
		echo := fakeTurn{ToolCalls: calls("mcp_local_echo", `{"message":"again"}`)}
		f := newFakeModel(t, providerOpenAI, echo, echo)
		m := newRunsOver(t, reg, f, "", nil)
		v := waitRun(t, startRun(t, m, runRequest{Prompt: "loop", MaxSteps: 2}))
		if v.Status != runFailed || !strings.Contains(v.Error, "max_steps (2) reached") {
			t.Errorf("run = %s %q, want failed on max_steps", v.Status, v.Error)
		}
		if v.Steps != 2 || v.ToolCalls != 2 {
			t.Errorf("steps, tool calls = %d, %d, want 2, 2", v.Steps, v.ToolCalls)
		}
	})

	// The tool would take a minute; cancelling must end the run at once,
	// tell the server, and leave the global session usable. Over HTTP the
	// cancel comes either while the answer streams (progress events) or
	// before its first byte.
	const longCall = `{"duration":60,"steps":60}`
	tests := []struct {
		name      string
		server    string
		proxy     *recordingProxy // sees the server's side of an HTTP server
		streaming bool            // cancel only once the answer streams
	}{
		{"cancel stdio", "local", nil, false},
		{"cancel streamable http while streaming", "remote", proxy, true},
		{"cancel streamable http before the answer", "held", holding, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := mcpToolName(tt.server, "trigger-long-running-operation")
			f := newFakeModel(t, providerAnthropic, fakeTurn{ToolCalls: calls(tool, longCall)})
			m := newRunsOver(t, reg, f, "", nil)
			r := startRun(t, m, runRequest{Prompt: "wait"})
			waitEvent(t, r, "tool.call.started")
			var call proxiedRequest
			if tt.proxy == holding {
				seen := tt.proxy.waitUntil(t, "the tool call's answer held", func(seen []proxiedRequest) bool {
					return slices.ContainsFunc(seen, func(req proxiedRequest) bool { return req.Held })
				})
				call = seen[slices.IndexFunc(seen, func(req proxiedRequest) bool { return req.Held })]
			}
			if tt.streaming {
				// The second progress event: the first one's headers have
				// surely reached the client by then.
				tt.proxy.waitUntil(t, "two progress events of the tool call", func(seen []proxiedRequest) bool {
					writes := map[string]int{}
					for _, req := range seen {
						if req.Answering && req.RPC == "tools/call" && !cancelledCall(seen, req.Body) {
							if writes[string(req.Body)]++; writes[string(req.Body)] == 2 {
								call = req
								return true
							}
						}
					}
					return false
				})
			}
			cancelled := time.Now()
			r.cancel()
			v := waitRun(t, r)
			if took := time.Since(cancelled); took > 5*time.Second {
				t.Errorf("run ended %v after cancel, want well under the tool's minute", took)
			}
			if v.Status != runCancelled {
				t.Errorf("run = %s %q, want cancelled", v.Status, v.Error)
			}
			c, err := reg.server(tt.server).current()
			if err != nil {
				t.Fatalf("server %s after cancel: %v", tt.server, err)
			}
			res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"still here"}`))
			if err != nil || resultToText(res) != "Echo: still here" {
				t.Errorf("echo on %s after cancel = %v, %v, want Echo: still here", tt.server, res, err)
			}
			if tt.proxy == nil {
				return
			}
			tt.proxy.waitUntil(t, "notifications/cancelled for the tool call", func(seen []proxiedRequest) bool {
				return cancelledCall(seen, call.Body)
			})
		})
	}
}

// cancelledCall reports whether seen holds a notifications/cancelled for
// the request whose body is call.
func cancelledCall(seen []proxiedRequest, call []byte) bool {
	var request struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(call, &request) != nil || request.ID == nil {
		return false
	}
	for _, req := range seen {
		var msg struct {
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if req.RPC == "notifications/cancelled" && !req.Answering && json.Unmarshal(req.Body, &msg) == nil &&
			string(msg.Params.RequestID) == string(request.ID) {
			return true
		}
	}
	return false
}

func TestRealResultContent(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, "", stdioPeerConfig("everything", everythingStdioCommand(t)))
	source, err := os.ReadFile(filepath.Join(requireNode(t), "@modelcontextprotocol", "server-everything", "dist", "tools", "get-tiny-image.js"))
	if err != nil {
		t.Fatal(err)
	}
	image := regexp.MustCompile(`MCP_TINY_IMAGE\s*=\s*"([^"]+)"`).FindSubmatch(source)
	if image == nil {
		t.Fatal("get-tiny-image.js: no MCP_TINY_IMAGE")
	}
	png, err := base64.StdEncoding.DecodeString(string(image[1]))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		call, args string
		want       string // a regular expression for the text the model gets
	}{
		{"mcp_everything_get_tiny_image", `{}`,
			fmt.Sprintf(`^Here's the image you requested:\n\[image: image/png, %d bytes\]\nThe image above is the MCP logo\.$`, len(png))},
		{"mcp_everything_get_resource_reference#text", `{"resourceType":"Text","resourceId":1}`,
			`^Returning resource reference for Resource 1:\nResource 1: This is a plaintext resource created at .+\nYou can access this resource using the URI: demo://resource/dynamic/text/1$`},
		{"mcp_everything_get_resource_reference#blob", `{"resourceType":"Blob","resourceId":3}`,
			`^Returning resource reference for Resource 3:\n\[resource demo://resource/dynamic/blob/3: text/plain, \d+ bytes\]\nYou can access this resource using the URI: demo://resource/dynamic/blob/3$`},
		// The text block already carries the structured content: not twice.
		{"mcp_everything_get_structured_content", `{"location":"Chicago"}`,
			`^\{"temperature":36,"conditions":"Light rain / drizzle","humidity":82\}$`},
		{"mcp_everything_get_resource_links", `{"count":2}`,
			`^Here are 2 resource links to resources available in this server:\n\[resource link: demo://resource/dynamic/blob/1 Blob Resource 1\]\n\[resource link: demo://resource/dynamic/text/2 Text Resource 2\]$`},
	}
	var callArgs, names []string
	for _, tt := range tests {
		callArgs = append(callArgs, tt.call, tt.args)
		name, _, _ := strings.Cut(tt.call, "#")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire,
				fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:`+strings.Join(names, ",")+`"}`)},
				fakeTurn{Check: offers(append([]string{"find_tool"}, names...)...), ToolCalls: calls(callArgs...)},
				answerWithResults,
			)
			m := newRunsOver(t, reg, f, "", nil)
			requireCompleted(t, waitRun(t, startRun(t, m, runRequest{Prompt: "show me content"})))
			results := resultsByID(f.requests()[2])
			for _, tt := range tests {
				res, ok := results["call_"+tt.call]
				if !ok || res.IsError || !regexp.MustCompile(tt.want).MatchString(res.Content) {
					t.Errorf("%s(%s) gave the model %+v (found %v), want matching %s", tt.call, tt.args, res, ok, tt.want)
				}
			}
		})
	}
}

func TestRealConnectMCPSameNameAtOnce(t *testing.T) {
	t.Parallel()
	endpoint := startEverythingHTTP(t, "streamableHttp")
	reg := newPeerRegistry(t, "")
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:connect_mcp"}`)},
		// Two names that make the same tool prefix, in one step.
		fakeTurn{ToolCalls: calls(
			"connect_mcp#dash", fmt.Sprintf(`{"url":%q,"server_name":"twin-srv"}`, endpoint),
			"connect_mcp#underscore", fmt.Sprintf(`{"url":%q,"server_name":"twin_srv"}`, endpoint),
		)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", nil)
	v := waitRun(t, startRun(t, m, runRequest{Prompt: "connect twice"}))
	requireCompleted(t, v)
	lines := strings.Split(v.Output, "\n")
	slices.Sort(lines)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "error: connect_mcp: server_name ") || !strings.Contains(lines[0], "is already in this run") ||
		!strings.HasPrefix(lines[1], "ok: Connected to ") {
		t.Errorf("connect_mcp twin-srv and twin_srv at once = %q, want one connected and one refused", v.Output)
	}
	if len(v.Servers) != 1 {
		t.Errorf("run servers = %+v, want one", v.Servers)
	}
}

// A slow connect_mcp holds up no other: the slow server answers
// initialize only once the fast one has connected, and the fast one is
// reached only once the slow one is connecting, so the two must be in
// flight at once, whichever starts first.
func TestRealConnectMCPSlowDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	endpoint := startEverythingHTTP(t, "streamableHttp")
	target, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	slowEntered, fastEntered, release := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var slowOnce, fastOnce, releaseOnce sync.Once
	releaseSlow := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(releaseSlow)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		slowOnce.Do(func() { close(slowEntered) })
		select {
		case <-release:
		case <-req.Context().Done():
		}
		http.Error(w, "gave up", http.StatusServiceUnavailable)
	}))
	t.Cleanup(slow.Close)
	forward := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	forward.FlushInterval = -1
	forward.ErrorLog = log.New(io.Discard, "", 0)
	fast := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		fastOnce.Do(func() { close(fastEntered) })
		select {
		case <-slowEntered:
		case <-req.Context().Done():
			return
		}
		forward.ServeHTTP(w, req)
	}))
	t.Cleanup(fast.Close)

	reg := newPeerRegistry(t, "")
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:connect_mcp"}`)},
		fakeTurn{ToolCalls: calls(
			"connect_mcp#slow", fmt.Sprintf(`{"url":%q,"server_name":"slow"}`, slow.URL+"/mcp"),
			"connect_mcp#fast", fmt.Sprintf(`{"url":%q,"server_name":"fast"}`, fast.URL+target.Path),
		)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", nil)
	r := startRun(t, m, runRequest{Prompt: "connect both"})
	fastConnected := make(chan struct{})
	// Owned by the test; ends at fast's connected event, the run's end,
	// or the release of the slow server.
	go func() {
		defer close(fastConnected)
		for {
			events, ended, changed := r.eventsAfter(0)
			for _, ev := range events {
				if data, ok := ev.Data.(map[string]any); ok && ev.Type == "mcp.server.connected" && data["server"] == "fast" {
					return
				}
			}
			if ended {
				return
			}
			select {
			case <-changed:
			case <-release:
				return
			}
		}
	}()
	timer := time.NewTimer(20 * time.Second)
	defer timer.Stop()
	select {
	case <-fastConnected:
	case <-timer.C:
		t.Error("connect_mcp fast did not connect while connect_mcp slow was connecting")
	}
	select {
	case <-fastEntered:
	default:
		t.Error("the fast server got no request")
	}
	releaseSlow()
	v := waitRun(t, r)
	requireCompleted(t, v)
	lines := strings.Split(v.Output, "\n")
	slices.Sort(lines)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "error: connect_mcp: ") || !strings.Contains(lines[0], "slow") ||
		!strings.HasPrefix(lines[1], `ok: Connected to "fast"`) {
		t.Errorf("connect_mcp slow and fast at once = %q, want fast connected and slow failed", v.Output)
	}
}
