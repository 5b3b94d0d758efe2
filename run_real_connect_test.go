package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds runs that connect servers through connect_mcp, against
// the real reference servers behind a proxy that records (and can hold)
// every request.

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
	reg := newPeerRegistry(t, stdioPeerConfig("memory", memoryStdioCommand(t)))
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

func TestRealConnectMCPSameNameAtOnce(t *testing.T) {
	t.Parallel()
	endpoint := startEverythingHTTP(t, "streamableHttp")
	reg := newPeerRegistry(t)
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

	reg := newPeerRegistry(t)
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
