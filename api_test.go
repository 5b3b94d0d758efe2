package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests the HTTP API through httptest: routes, auth, error
// shapes, event streams, metrics and the redaction of server secrets.

// An apiTest is a client of an API: one served by httptest over a run
// manager with a fake model (api and runs set), or a real harnessd.
type apiTest struct {
	url    string
	client *http.Client
	api    *api
	runs   *runManager
}

// newAPITest serves the API over newTestRuns(t, f, globals...) with keys
// (none: auth off).
func newAPITest(t *testing.T, f *fakeModel, keys []authKey, globals ...serverConfig) *apiTest {
	t.Helper()
	runs := newTestRuns(t, f, globals...)
	a := newAPI(runs, runs.opts.Registry, keys, runs.opts.Metrics, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &apiTest{url: srv.URL, client: srv.Client(), api: a, runs: runs}
}

// testKey returns an API key for token with scopes.
func testKey(name, token string, scopes ...string) authKey {
	return authKey{Name: name, TokenSHA256: sha256.Sum256([]byte(token)), Scopes: scopes, Source: "test"}
}

// do sends a request with an optional Authorization header value and
// returns the response with its whole body read.
func (at *apiTest) do(t *testing.T, method, path, auth, body string, header ...string) (*http.Response, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, at.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := at.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp, data
}

// postRun posts a run request as auth and returns the run's id, failing
// the test unless the answer is 202 with {run_id, status} and a Location.
func (at *apiTest) postRun(t *testing.T, auth, body string) string {
	t.Helper()
	resp, data := at.do(t, http.MethodPost, "/v1/runs", auth, body)
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/runs %s = %d %s, want 202", body, resp.StatusCode, data)
	}
	var out struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.RunID == "" || out.Status == "" {
		t.Fatalf("POST /v1/runs = %s (%v), want {run_id, status}", data, err)
	}
	if got := resp.Header.Get("Location"); got != "/v1/runs/"+out.RunID {
		t.Errorf("POST /v1/runs Location = %q, want /v1/runs/%s", got, out.RunID)
	}
	return out.RunID
}

// startRun posts a run request without auth and returns the run.
func (at *apiTest) startRun(t *testing.T, body string) *run {
	t.Helper()
	id := at.postRun(t, "", body)
	r := at.runs.get(id)
	if r == nil {
		t.Fatalf("run %s is not known to the run manager", id)
	}
	return r
}

// waitAllRuns waits for every run to end, so that no scripted turn is
// left unused when the test's run manager shuts down.
func (at *apiTest) waitAllRuns(t *testing.T) {
	t.Helper()
	for _, r := range at.runs.list() {
		waitRun(t, r)
	}
}

// decodeAPIError decodes an error answer strictly.
func decodeAPIError(data []byte) (apiError, error) {
	var e apiError
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return e, err
	}
	if e.Error.Code == "" || e.Error.Message == "" {
		return e, errors.New("code or message is empty")
	}
	return e, nil
}

// A streamEvent is one event of a text/event-stream.
type streamEvent struct {
	ID, Event, Data string
}

// A streamReader reads events and comments from a stream.
type streamReader struct {
	r *bufio.Reader
}

// next returns the next event, or a comment (without its colon) when the
// stream had one first. It returns io.EOF at the end of the stream.
func (s *streamReader) next() (ev streamEvent, comment string, err error) {
	started := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && (started || line != "") {
				return ev, "", io.ErrUnexpectedEOF
			}
			return ev, "", err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && started:
			return ev, "", nil
		case line == "":
		case strings.HasPrefix(line, ":"):
			if !started {
				return ev, strings.TrimSpace(line[1:]), nil
			}
		default:
			started = true
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "id":
				ev.ID = value
			case "event":
				ev.Event = value
			case "data":
				ev.Data += value
			default:
				return ev, "", fmt.Errorf("unexpected SSE line %q", line)
			}
		}
	}
}

// checkEvent checks that an SSE event agrees with its JSON data.
func checkEvent(t *testing.T, ev streamEvent) runEvent {
	t.Helper()
	var data runEvent
	if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
		t.Fatalf("event %+v: data is not a run event: %v", ev, err)
	}
	if strconv.Itoa(data.Seq) != ev.ID || data.Type != ev.Event {
		t.Errorf("event id %s type %s, data seq %d type %s: want them equal", ev.ID, ev.Event, data.Seq, data.Type)
	}
	return data
}

// readEvents reads a whole stream and returns its events.
func readEvents(t *testing.T, body io.Reader) []runEvent {
	t.Helper()
	events, err := readEventStream(body, func(ev streamEvent) (runEvent, error) { return checkEvent(t, ev), nil })
	if err != nil {
		t.Fatalf("read event stream: %v", err)
	}
	return events
}

// readEventStream reads a stream to its end, decoding each event with
// decode; comments are skipped.
func readEventStream(body io.Reader, decode func(streamEvent) (runEvent, error)) ([]runEvent, error) {
	s := &streamReader{r: bufio.NewReader(body)}
	var events []runEvent
	for {
		ev, comment, err := s.next()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		if comment != "" {
			continue
		}
		data, err := decode(ev)
		if err != nil {
			return events, err
		}
		events = append(events, data)
	}
}

// idsAndTypes returns the ids and types of events.
func idsAndTypes(events []runEvent) (ids, types []string) {
	for _, ev := range events {
		ids = append(ids, strconv.Itoa(ev.Seq))
		types = append(types, ev.Type)
	}
	return ids, types
}

// findThenEcho is a model script: find_tool, then mcp_fake_echo, then an
// answer quoting the echo.
func findThenEcho() []fakeTurn {
	return []fakeTurn{
		{ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
		{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"hello"}`)}},
		{Reply: func(req fakeRequest) fakeTurn {
			res := req.toolResults()
			if len(res) != 1 {
				return fakeTurn{Text: fmt.Sprintf("unexpected results %+v", res)}
			}
			return fakeTurn{Text: "echoed " + res[0].Content}
		}},
	}
}

func TestAPIRoutes(t *testing.T) {
	f := newFakeModel(t, "openai", findThenEcho()...)
	at := newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
	r := at.startRun(t, `{"prompt":"echo hello"}`)
	waitRun(t, r)

	runsHaving := func(want bool) func(*testing.T, []byte) {
		return func(t *testing.T, data []byte) {
			var out struct {
				Runs []runSummary `json:"runs"`
			}
			if err := json.Unmarshal(data, &out); err != nil {
				t.Fatal(err)
			}
			has := slices.ContainsFunc(out.Runs, func(s runSummary) bool { return s.ID == r.id && s.Status == runCompleted })
			if has != want {
				t.Errorf("runs = %+v: has run %s completed = %v, want %v", out.Runs, r.id, has, want)
			}
		}
	}
	tests := []struct {
		name, method, path string
		wantStatus         int
		wantType           string
		check              func(*testing.T, []byte)
	}{
		{name: "healthz", method: "GET", path: "/healthz", wantStatus: 200, wantType: "application/json"},
		{name: "readyz", method: "GET", path: "/readyz", wantStatus: 200, wantType: "application/json"},
		{name: "list runs", method: "GET", path: "/v1/runs", wantStatus: 200, wantType: "application/json", check: runsHaving(true)},
		{name: "list completed runs", method: "GET", path: "/v1/runs?status=completed", wantStatus: 200, wantType: "application/json", check: runsHaving(true)},
		{name: "list failed runs", method: "GET", path: "/v1/runs?status=failed", wantStatus: 200, wantType: "application/json", check: runsHaving(false)},
		{name: "get run", method: "GET", path: "/v1/runs/" + r.id, wantStatus: 200, wantType: "application/json", check: func(t *testing.T, data []byte) {
			var v map[string]any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Fatal(err)
			}
			for _, key := range []string{"id", "status", "output", "steps", "servers", "created_at", "started_at", "ended_at"} {
				if _, ok := v[key]; !ok {
					t.Errorf("run = %s: no %q", data, key)
				}
			}
			if v["id"] != r.id || v["status"] != runCompleted || v["output"] != "echoed hello" || v["steps"] != 3.0 {
				t.Errorf("run = %s, want %s completed with output %q after 3 steps", data, r.id, "echoed hello")
			}
		}},
		{name: "run events", method: "GET", path: "/v1/runs/" + r.id + "/events", wantStatus: 200, wantType: "text/event-stream", check: func(t *testing.T, data []byte) {
			_, types := idsAndTypes(readEvents(t, bytes.NewReader(data)))
			if len(types) == 0 || types[0] != "run.started" || types[len(types)-1] != "run.completed" {
				t.Errorf("events = %v, want run.started ... run.completed", types)
			}
		}},
		{name: "cancel an ended run", method: "POST", path: "/v1/runs/" + r.id + "/cancel", wantStatus: 409, wantType: "application/json"},
		{name: "servers", method: "GET", path: "/v1/mcp/servers", wantStatus: 200, wantType: "application/json", check: func(t *testing.T, data []byte) {
			var out struct {
				Servers []map[string]any `json:"servers"`
			}
			if err := json.Unmarshal(data, &out); err != nil {
				t.Fatal(err)
			}
			if len(out.Servers) != 1 {
				t.Fatalf("servers = %s, want one", data)
			}
			s := out.Servers[0]
			for key, want := range map[string]any{"name": "fake", "transport": "stdio", "status": "ready", "protocol_version": latestProtocolVersion} {
				if s[key] != want {
					t.Errorf("server %s = %v, want %v", key, s[key], want)
				}
			}
			info, _ := s["server_info"].(map[string]any)
			tools, _ := s["tools"].([]any)
			if info["name"] != "fake" || len(tools) != 4 {
				t.Fatalf("server = %s, want server_info fake and 4 tools", data)
			}
			tool := tools[0].(map[string]any)
			if tool["name"] != "mcp_fake_echo" || tool["server_tool"] != "echo" || tool["description"] != "fake echo" {
				t.Errorf("tool = %v, want mcp_fake_echo (echo) described", tool)
			}
		}},
		{name: "metrics", method: "GET", path: "/metrics", wantStatus: 200, wantType: "text/plain; version=0.0.4; charset=utf-8", check: func(t *testing.T, data []byte) {
			if _, err := parseMetrics(string(data)); err != nil {
				t.Error(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := at.do(t, tt.method, tt.path, "", "")
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, data, tt.wantStatus)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.wantType {
				t.Errorf("%s %s Content-Type = %q, want %q", tt.method, tt.path, got, tt.wantType)
			}
			if tt.check != nil {
				tt.check(t, data)
			}
		})
	}
}

func TestAPIReadyzWhileConnecting(t *testing.T) {
	slow := fakeServerConfig(t, "hang-initialize")
	slow.Name = "slow"
	slow.StartupTimeout = time.Minute
	reg := newRegistry([]serverConfig{slow}, registryOptions{})
	t.Cleanup(reg.close)
	srv := httptest.NewServer(newAPI(nil, reg, nil, nil, nil, nil))
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client()}
	resp, data := at.do(t, http.MethodGet, "/readyz", "", "")
	e, err := decodeAPIError(data)
	if resp.StatusCode != http.StatusServiceUnavailable || err != nil || e.Error.Code != "not_ready" || !strings.Contains(e.Error.Message, "slow") {
		t.Errorf("GET /readyz = %d %s (%v), want 503 not_ready naming slow", resp.StatusCode, data, err)
	}
	if resp, data := at.do(t, http.MethodGet, "/healthz", "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz = %d %s, want 200 while servers connect", resp.StatusCode, data)
	}
}

func TestAPIAuthMatrix(t *testing.T) {
	const (
		readToken  = "read-token-0123456789abcdef"
		writeToken = "write-token-0123456789abcdef"
		adminToken = "admin-token-0123456789abcdef"
	)
	done := fakeTurn{Text: "done"}
	// One turn for the setup run, one per 202 below.
	f := newFakeModel(t, "openai", done, done, done, done, done, done)
	at := newAPITest(t, f, []authKey{
		testKey("reader", readToken, scopeRunsRead),
		testKey("writer", writeToken, scopeRunsWrite),
		testKey("root", adminToken, scopeAdmin),
	}, fakeServerConfig(t, "normal"))
	setup, err := at.runs.start(runRequest{Prompt: "setup"}, false)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, setup)
	exe := fakeServerConfig(t, "normal").Command
	withCommand := fmt.Sprintf(`{"prompt":"x","mcp_servers":[{"name":"mine","command":%q,"env":{%q:"normal"}}]}`, exe, fakeServerEnv)

	creds := []struct{ name, header string }{
		{"no token", ""},
		{"bad token", "Bearer wrong-token-0123456789abcdef"},
		{"basic auth", "Basic " + readToken},
		{"reader", "Bearer " + readToken},
		{"writer", "Bearer " + writeToken},
		{"admin", "Bearer " + adminToken},
		{"admin lowercase scheme", "bearer " + adminToken},
	}
	routes := []struct {
		method, path, body string
		// want is the status for each of creds, in order.
		want [7]int
	}{
		{"GET", "/healthz", "", [7]int{200, 200, 200, 200, 200, 200, 200}},
		{"GET", "/readyz", "", [7]int{200, 200, 200, 200, 200, 200, 200}},
		{"GET", "/metrics", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/mcp/servers", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/runs", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/runs/" + setup.id, "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/runs/" + setup.id + "/events", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/runs/" + setup.id + "/messages", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/runs/run_missing", "", [7]int{401, 401, 401, 404, 404, 404, 404}},
		{"GET", "/v1/runs/run_missing/messages", "", [7]int{401, 401, 401, 404, 404, 404, 404}},
		{"POST", "/v1/runs/" + setup.id + "/cancel", "", [7]int{401, 401, 401, 403, 409, 409, 409}},
		{"POST", "/v1/runs", `{"prompt":"x"}`, [7]int{401, 401, 401, 403, 202, 202, 202}},
		{"POST", "/v1/runs", withCommand, [7]int{401, 401, 401, 403, 403, 202, 202}},
		{"DELETE", "/v1/runs", "", [7]int{405, 405, 405, 405, 405, 405, 405}},
	}
	for _, rt := range routes {
		for i, cred := range creds {
			t.Run(rt.method+" "+rt.path+" "+cred.name, func(t *testing.T) {
				resp, data := at.do(t, rt.method, rt.path, cred.header, rt.body)
				if resp.StatusCode != rt.want[i] {
					t.Fatalf("%s %s as %s = %d %s, want %d", rt.method, rt.path, cred.name, resp.StatusCode, data, rt.want[i])
				}
				if resp.StatusCode < 400 {
					return
				}
				e, err := decodeAPIError(data)
				if err != nil {
					t.Fatalf("%s %s as %s = %s: not an error object: %v", rt.method, rt.path, cred.name, data, err)
				}
				switch resp.StatusCode {
				case 401:
					if e.Error.Code != "unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
						t.Errorf("401 = %+v, WWW-Authenticate %q: want code unauthorized and the header", e, resp.Header.Get("WWW-Authenticate"))
					}
				case 403:
					want := "lacks the runs:write scope"
					if cred.name == "writer" {
						want = "needs the admin scope"
					}
					if e.Error.Code != "forbidden" || !strings.Contains(e.Error.Message, want) {
						t.Errorf("403 = %+v, want code forbidden and a message containing %q", e, want)
					}
				}
			})
		}
	}
	at.waitAllRuns(t)
}

func TestAPIErrorShapes(t *testing.T) {
	const writeToken = "write-token-0123456789abcdef"
	done := fakeTurn{Text: "done"}
	f := newFakeModel(t, "openai", done, done)
	at := newAPITest(t, f, []authKey{testKey("writer", writeToken, scopeRunsWrite)}, fakeServerConfig(t, "normal"))
	profiles := filepath.Join(at.runs.opts.Home, "profiles")
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profiles, "ops.toml"), []byte("[mcp_servers.prof]\nurl = \"http://127.0.0.1:1/mcp\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(profiles, "clash.toml"), []byte("[mcp_servers.FAKE]\nurl = \"http://127.0.0.1:1/mcp\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	existing, err := at.runs.start(runRequest{Prompt: "setup"}, false)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, existing)
	// A body of exactly the limit is accepted (with max_prompt_bytes
	// raised to it: the body limit is what this case tests).
	at.runs.opts.Limits.MaxPromptBytes = maxRequestBody
	fill := strings.Repeat("a", maxRequestBody-len(`{"prompt":""}`))
	atLimit := `{"prompt":"` + fill + `"}`
	overLimit := `{"prompt":"` + fill + `a"}`

	auth := "Bearer " + writeToken
	tests := []struct {
		name, method, path, auth, body string
		header                         []string
		wantStatus                     int
		wantCode, wantMessage          string
	}{
		{name: "unknown route", method: "GET", path: "/v2/nothing", auth: auth, wantStatus: 404, wantCode: "not_found", wantMessage: "no route for GET /v2/nothing"},
		{name: "unknown run", method: "GET", path: "/v1/runs/run_missing", auth: auth, wantStatus: 404, wantCode: "not_found", wantMessage: `run "run_missing": not found`},
		{name: "unknown run events", method: "GET", path: "/v1/runs/run_missing/events", auth: auth, wantStatus: 404, wantCode: "not_found", wantMessage: `run "run_missing"`},
		{name: "wrong method", method: "PUT", path: "/v1/runs", auth: auth, wantStatus: 405, wantCode: "method_not_allowed", wantMessage: "use GET or POST"},
		{name: "wrong method on cancel", method: "GET", path: "/v1/runs/x/cancel", auth: auth, wantStatus: 405, wantCode: "method_not_allowed", wantMessage: "use POST"},
		{name: "no token", method: "GET", path: "/v1/runs", wantStatus: 401, wantCode: "unauthorized", wantMessage: "missing bearer token: this route needs the runs:read scope"},
		{name: "bad token", method: "GET", path: "/v1/runs", auth: "Bearer nope-nope-nope-nope", wantStatus: 401, wantCode: "unauthorized", wantMessage: "invalid bearer token"},
		{name: "command needs admin", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","mcp_servers":[{"name":"local","command":"true"}]}`, wantStatus: 403, wantCode: "forbidden", wantMessage: `server "local" has a command: starting programs on the host needs the admin scope`},
		{name: "malformed json", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "request body:"},
		{name: "empty body", method: "POST", path: "/v1/runs", auth: auth, wantStatus: 400, wantCode: "invalid_request", wantMessage: "request body: empty"},
		{name: "not an object", method: "POST", path: "/v1/runs", auth: auth, body: `["x"]`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "request body:"},
		{name: "wrong type", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":7}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `field "prompt": a JSON number is not allowed here; write a string`},
		{name: "unknown field", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","temperature":1}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `unknown field "temperature"; valid fields are prompt, profile`},
		{name: "unknown server field", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","mcp_servers":[{"name":"a","url":"http://127.0.0.1:1/mcp","token":"t"}]}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `unknown field "token"`},
		{name: "two values", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x"} {"prompt":"y"}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "more than one JSON value"},
		{name: "over 1 MiB", method: "POST", path: "/v1/runs", auth: auth, body: overLimit, wantStatus: 400, wantCode: "invalid_request", wantMessage: "over the 1048576 byte limit"},
		{name: "empty prompt", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":" "}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "prompt: is empty"},
		{name: "bad profile name", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","profile":"../etc"}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "invalid profile name"},
		{name: "bad max_steps", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","max_steps":-1}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "max_steps: -1 is out of range"},
		{name: "collides with global", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","mcp_servers":[{"name":"fake","url":"http://127.0.0.1:1/mcp"}]}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `collides with global server "fake"`},
		{name: "collides with profile", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","profile":"ops","mcp_servers":[{"name":"prof","url":"http://127.0.0.1:1/mcp"}]}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `collides with server of the run's profile "prof"`},
		{name: "profile collides with global", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","profile":"clash"}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `profile server "FAKE" (profile clash) and global server "fake"`},
		{name: "collides with entry", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","mcp_servers":[{"name":"a-b","url":"http://127.0.0.1:1/mcp"},{"name":"a_b","url":"http://127.0.0.1:2/mcp"}]}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `collides with mcp_servers entry "a-b"`},
		{name: "bad status filter", method: "GET", path: "/v1/runs?status=done", auth: auth, wantStatus: 400, wantCode: "invalid_request", wantMessage: `status "done": want one of queued`},
		{name: "bad Last-Event-ID", method: "GET", path: "/v1/runs/" + existing.id + "/events", auth: auth, header: []string{"Last-Event-ID", "abc"}, wantStatus: 400, wantCode: "invalid_request", wantMessage: `Last-Event-ID "abc"`},
		{name: "bad after", method: "GET", path: "/v1/runs/" + existing.id + "/events?after=-1", auth: auth, wantStatus: 400, wantCode: "invalid_request", wantMessage: `after "-1"`},
		{name: "cancel ended run", method: "POST", path: "/v1/runs/" + existing.id + "/cancel", auth: auth, wantStatus: 409, wantCode: "conflict", wantMessage: "already completed"},
		{name: "body at the limit", method: "POST", path: "/v1/runs", auth: auth, body: atLimit, wantStatus: 202},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := at.do(t, tt.method, tt.path, tt.auth, tt.body, tt.header...)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d %.300s, want %d", tt.method, tt.path, resp.StatusCode, data, tt.wantStatus)
			}
			if tt.wantStatus < 400 {
				return
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("%s %s Content-Type = %q, want application/json", tt.method, tt.path, got)
			}
			e, err := decodeAPIError(data)
			if err != nil {
				t.Fatalf("%s %s = %s: want {\"error\":{\"code\",\"message\"}}: %v", tt.method, tt.path, data, err)
			}
			if e.Error.Code != tt.wantCode || !strings.Contains(e.Error.Message, tt.wantMessage) {
				t.Errorf("%s %s = %+v, want code %q and a message containing %q", tt.method, tt.path, e.Error, tt.wantCode, tt.wantMessage)
			}
		})
	}
	at.waitAllRuns(t)
}

func TestAPINoModelConfigured(t *testing.T) {
	f := newFakeModel(t, "openai")
	at := newAPITest(t, f, nil)
	at.runs.opts.Model = modelSpec{}
	resp, data := at.do(t, http.MethodPost, "/v1/runs", "", `{"prompt":"x"}`)
	e, err := decodeAPIError(data)
	if resp.StatusCode != http.StatusBadRequest || err != nil || !strings.Contains(e.Error.Message, "set HARNESS_MODEL") {
		t.Errorf("POST /v1/runs without a model = %d %s (%v), want 400 saying to set HARNESS_MODEL", resp.StatusCode, data, err)
	}
}

func TestAPIRunEvents(t *testing.T) {
	release := make(chan struct{})
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{Reply: func(fakeRequest) fakeTurn {
			select {
			case <-release:
			case <-t.Context().Done():
			}
			return fakeTurn{Text: "done"}
		}},
	)
	at := newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
	at.api.heartbeat = 10 * time.Millisecond
	r := at.startRun(t, `{"prompt":"follow me"}`)
	wantTypes := []string{"run.started", "model.response", "tool.call.started", "tool.call.completed", "model.response", "run.completed"}

	t.Run("live", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, at.url+"/v1/runs/"+r.id+"/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := at.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET events = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		s := &streamReader{r: bufio.NewReader(resp.Body)}
		var types []string
		heartbeats, released := 0, false
		for {
			ev, comment, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read events after %v: %v", types, err)
			}
			if comment != "" {
				heartbeats++
				// The run waits in its second model turn: the stream
				// is idle, so a heartbeat came; now let the run end.
				// (Under load a heartbeat may also come earlier.)
				if len(types) == 4 && !released {
					close(release)
					released = true
				}
				continue
			}
			if got := checkEvent(t, ev).Seq; got != len(types)+1 {
				t.Errorf("event %d has id %d, want ids counting from 1", len(types)+1, got)
			}
			types = append(types, ev.Event)
		}
		if !slices.Equal(types, wantTypes) {
			t.Errorf("live events = %v, want %v", types, wantTypes)
		}
		if heartbeats == 0 {
			t.Errorf("live stream had no heartbeat while the run was idle")
		}
	})
	waitRun(t, r)

	tests := []struct {
		name, query, lastEventID string
		wantFirst                int // 0: no events
	}{
		{name: "whole history", wantFirst: 1},
		{name: "Last-Event-ID", lastEventID: "4", wantFirst: 5},
		{name: "after", query: "?after=2", wantFirst: 3},
		{name: "after 0", query: "?after=0", wantFirst: 1},
		{name: "Last-Event-ID wins over after", query: "?after=1", lastEventID: "5", wantFirst: 6},
		{name: "at the end", lastEventID: "6"},
		{name: "past the end", query: "?after=99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var header []string
			if tt.lastEventID != "" {
				header = []string{"Last-Event-ID", tt.lastEventID}
			}
			resp, data := at.do(t, http.MethodGet, "/v1/runs/"+r.id+"/events"+tt.query, "", "", header...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET events%s = %d %s, want 200", tt.query, resp.StatusCode, data)
			}
			ids, types := idsAndTypes(readEvents(t, bytes.NewReader(data)))
			var wantIDs []string
			var want []string
			if tt.wantFirst > 0 {
				for i := tt.wantFirst; i <= len(wantTypes); i++ {
					wantIDs = append(wantIDs, strconv.Itoa(i))
				}
				want = wantTypes[tt.wantFirst-1:]
			}
			if !slices.Equal(ids, wantIDs) || !slices.Equal(types, want) {
				t.Errorf("events (Last-Event-ID %q, query %q) = %v %v, want %v %v", tt.lastEventID, tt.query, ids, types, wantIDs, want)
			}
		})
	}
}

func TestAPICancelRun(t *testing.T) {
	received := make(chan struct{})
	f := newFakeModel(t, "openai", fakeTurn{Hang: true, Check: func(fakeRequest) error { close(received); return nil }})
	at := newAPITest(t, f, nil)
	r := at.startRun(t, `{"prompt":"wait forever"}`)
	// Cancel once the model has the request, so the cancel interrupts it.
	select {
	case <-received:
	case <-t.Context().Done():
		t.Fatal("the run never called the model")
	}
	resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r.id+"/cancel", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"status": "cancelled"`) {
		t.Fatalf("POST cancel = %d %s, want 200 cancelled", resp.StatusCode, data)
	}
	if v := r.view(); v.Status != runCancelled || v.EndedAt == nil {
		t.Errorf("run = %s ended %v, want cancelled with an end time", v.Status, v.EndedAt)
	}
	_, events := at.do(t, http.MethodGet, "/v1/runs/"+r.id+"/events", "", "")
	if _, types := idsAndTypes(readEvents(t, bytes.NewReader(events))); len(types) == 0 || types[len(types)-1] != "run.cancelled" {
		t.Errorf("events = %v, want them to end with run.cancelled", types)
	}
	if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r.id+"/cancel", "", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("second cancel = %d %s, want 409", resp.StatusCode, data)
	}
}

func TestAPIMetricsCountToolCalls(t *testing.T) {
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"hi"}`), call("mcp_fake_fail", `{}`), call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{Text: "done"},
	)
	at := newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
	waitRun(t, at.startRun(t, `{"prompt":"call things"}`))
	resp, data := at.do(t, http.MethodGet, "/metrics", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, data)
	}
	samples, err := parseMetrics(string(data))
	if err != nil {
		t.Fatalf("GET /metrics: %v\n%s", err, data)
	}
	for series, want := range map[string]float64{
		`harnessd_mcp_server_up{server="fake"}`:                                  1,
		`harnessd_mcp_server_tools{server="fake"}`:                               4,
		`harnessd_tool_calls_total{server="fake",outcome="ok"}`:                  1,
		`harnessd_tool_calls_total{server="fake",outcome="error"}`:               1,
		`harnessd_tool_calls_total{server="builtin",outcome="ok"}`:               1,
		`harnessd_tool_call_duration_seconds_count{server="fake"}`:               2,
		`harnessd_tool_call_duration_seconds_bucket{server="fake",le="+Inf"}`:    2,
		`harnessd_tool_call_duration_seconds_bucket{server="builtin",le="+Inf"}`: 1,
		`harnessd_runs_started_total`:                                            1,
		`harnessd_runs_total{status="completed"}`:                                1,
		`harnessd_runs_total{status="failed"}`:                                   0,
		`harnessd_runs_active`:                                                   0,
	} {
		if got, ok := samples[series]; !ok || got != want {
			t.Errorf("metric %s = %v (present %v), want %v", series, got, ok, want)
		}
	}
}

// metricSample matches one sample line of the Prometheus text format.
var metricSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// metricLabel matches one label pair at the start of a label list.
var metricLabel = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)`)

// parseMetrics checks text against the Prometheus text exposition format
// (HELP and TYPE before a family's samples, label syntax, values, no
// duplicate series, cumulative histograms whose +Inf bucket is the count)
// and returns the samples by their series as written.
func parseMetrics(text string) (map[string]float64, error) {
	samples := map[string]float64{}
	types := map[string]string{}
	if !strings.HasSuffix(text, "\n") {
		return nil, errors.New("metrics: no final newline")
	}
	// By the _count series of a histogram: its last bucket, its +Inf bucket.
	lastBucket, infBuckets := map[string]float64{}, map[string]float64{}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("metrics line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kind, rest, _ := strings.Cut(rest, " ")
			name, value, _ := strings.Cut(rest, " ")
			switch kind {
			case "HELP":
				if name == "" || value == "" {
					return nil, bad("HELP without name or text")
				}
			case "TYPE":
				if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, value) {
					return nil, bad("unknown type %q", value)
				}
				if _, dup := types[name]; dup {
					return nil, bad("second TYPE for %s", name)
				}
				types[name] = value
			default:
				return nil, bad("unknown comment")
			}
			continue
		}
		m := metricSample.FindStringSubmatch(line)
		if m == nil {
			return nil, bad("not a sample")
		}
		name, labels := m[1], strings.Trim(m[2], "{}")
		value, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, bad("value: %v", err)
		}
		family := name
		if types[name] == "" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && types[base] == "histogram" {
					family = base
				}
			}
		}
		if types[family] == "" {
			return nil, bad("no TYPE before the samples of %s", family)
		}
		var le string
		var others []string
		for labels != "" {
			lm := metricLabel.FindStringSubmatch(labels)
			if lm == nil {
				return nil, bad("bad labels at %q", labels)
			}
			if lm[1] == "le" {
				le = lm[2]
			} else {
				others = append(others, lm[0])
			}
			labels = labels[len(lm[0]):]
		}
		series := name + m[2]
		if _, dup := samples[series]; dup {
			return nil, bad("duplicate series")
		}
		samples[series] = value
		if family != name && strings.HasSuffix(name, "_bucket") {
			if le == "" {
				return nil, bad("bucket without le")
			}
			count := family + "_count"
			if len(others) > 0 {
				count += "{" + strings.TrimSuffix(strings.Join(others, ""), ",") + "}"
			}
			if value < lastBucket[count] {
				return nil, bad("buckets are not cumulative")
			}
			lastBucket[count] = value
			if le == "+Inf" {
				infBuckets[count] = value
			}
		}
	}
	for count, inf := range infBuckets {
		if got, ok := samples[count]; !ok || got != inf {
			return nil, fmt.Errorf("metrics: %s = %v (present %v), want the +Inf bucket %v", count, got, ok, inf)
		}
	}
	return samples, nil
}

func TestParseMetricsRejectsBadText(t *testing.T) {
	tests := []struct{ name, text string }{
		{"no type", "a 1\n"},
		{"bad value", "# TYPE a gauge\na one\n"},
		{"bad label", "# TYPE a gauge\na{x=1} 1\n"},
		{"unterminated label", "# TYPE a gauge\na{x=\"1} 1\n"},
		{"duplicate", "# TYPE a gauge\na 1\na 2\n"},
		{"two types", "# TYPE a gauge\n# TYPE a counter\na 1\n"},
		{"not cumulative", "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
		{"count differs", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n"},
		{"no final newline", "# TYPE a gauge\na 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseMetrics(tt.text); err == nil {
				t.Errorf("parseMetrics(%q) = nil error, want one", tt.text)
			}
		})
	}
	good := "# HELP h Latency.\n# TYPE h histogram\nh_bucket{s=\"a\\\"b\",le=\"1\"} 1\nh_bucket{s=\"a\\\"b\",le=\"+Inf\"} 2\nh_sum{s=\"a\\\"b\"} 3\nh_count{s=\"a\\\"b\"} 2\n"
	if _, err := parseMetrics(good); err != nil {
		t.Errorf("parseMetrics(%q) = %v, want nil", good, err)
	}
}

func TestAPINeverShowsSecrets(t *testing.T) {
	const secret = "s3cr3t-value"
	leak := func(name, env, value string) serverConfig {
		return serverConfig{
			Name: name, Transport: transportStdio, Command: "/bin/sh",
			// It reads the initialize request before it fails, so that
			// the failure is the exit (with its stderr), not the write.
			Args:    []string{"-c", `read -r request; echo "starting with token=$` + env + ` header=hdr-` + secret + `" >&2; exit 1`},
			Env:     map[string]string{env: value},
			Headers: map[string]string{"Authorization": "Bearer hdr-" + secret},
			Timeout: 5 * time.Second, StartupTimeout: 10 * time.Second, Enabled: true, MaxMessageBytes: defaultMaxMessageBytes,
		}
	}
	good := fakeServerConfig(t, "normal")
	good.Env["SECRET"] = secret
	good.Headers = map[string]string{"X-Api-Key": "hdr-" + secret}
	f := newFakeModel(t, "openai", fakeTurn{Text: "done"})
	at := newAPITest(t, f, nil, good, leak("leaky", "SECRET", secret))
	// Per-run values are literal: "$$" is how a request writes "$".
	runLeak := leak("runleak", "RUN_SECRET", "run-"+secret)
	perRun, err := json.Marshal(map[string]any{"prompt": "x", "mcp_servers": []any{map[string]any{
		"name": runLeak.Name, "command": runLeak.Command, "env": runLeak.Env,
		"args":     []string{runLeak.Args[0], strings.ReplaceAll(runLeak.Args[1], "$", "$$")},
		"required": false,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r := at.startRun(t, string(perRun))
	waitRun(t, r)

	redacted := 0
	for _, path := range []string{"/v1/mcp/servers", "/v1/runs", "/v1/runs/" + r.id, "/v1/runs/" + r.id + "/events", "/metrics", "/healthz", "/readyz"} {
		resp, data := at.do(t, http.MethodGet, path, "", "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, resp.StatusCode, data)
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("GET %s = %s: shows the secret %q", path, data, secret)
		}
		redacted += bytes.Count(data, []byte("[redacted]"))
		if path == "/v1/mcp/servers" && !bytes.Contains(data, []byte("starting with token=[redacted]")) {
			t.Errorf("GET %s = %s: want leaky's error with the token redacted", path, data)
		}
		if strings.HasSuffix(path, "/events") && !bytes.Contains(data, []byte("token=[redacted]")) {
			t.Errorf("GET %s = %s: want runleak's failure with the token redacted", path, data)
		}
	}
	if redacted == 0 {
		t.Errorf("no answer needed redaction: the test no longer exercises it")
	}
}

func TestRedactorKeepsJSONValid(t *testing.T) {
	rd := newRedactor(`quote"d<&>value`, "12345678", "short")
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"escaped secret", map[string]string{"error": `saw quote"d<&>value here`}, `{"error":"saw [redacted] here"}`},
		{"number that looks like a secret", map[string]any{"steps": 12345678, "note": "id 12345678"}, `{"note":"id [redacted]","steps":12345678}`},
		{"short values stay", map[string]string{"error": "short"}, `{"error":"short"}`},
		{"nothing to hide keeps order", struct{ Z, A string }{"z", "a"}, `{"Z":"z","A":"a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(rd.marshal(tt.in, false))
			if got != tt.want {
				t.Errorf("marshal(%v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestServerStatusStderrTail(t *testing.T) {
	tests := []struct {
		name   string
		calls  []string // tools called before the server's crash tool
		status string
		want   string // "" wants no tail
	}{
		{name: "ready shows no tail", status: statusReady},
		{name: "restarting shows the last words", status: statusRestarting, want: "panic: boom"},
		{name: "failed shows the last words", status: statusFailed, want: "panic: boom"},
		{name: "long stderr is cut", calls: []string{"stderr-flood"}, status: statusRestarting, want: "eeee\npanic: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fakeServerConfig(t, "normal")
			c, err := connect(t.Context(), cfg, clientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.close() })
			for _, name := range tt.calls {
				if _, err := c.callTool(t.Context(), name, json.RawMessage(`{}`)); err != nil {
					t.Fatalf("call %s: %v", name, err)
				}
			}
			if tt.status != statusReady {
				c.callTool(t.Context(), "crash", json.RawMessage(`{}`))
				select {
				case <-c.ended:
				case <-t.Context().Done():
					t.Fatal("the server did not crash")
				}
			}
			ms := &managedServer{cfg: cfg, status: tt.status, client: c, lastErr: c.endErr()}
			got := ms.snapshot().StderrTail
			if len(got) > statusStderrTail {
				t.Errorf("stderr_tail is %d bytes, want at most %d", len(got), statusStderrTail)
			}
			if tt.want == "" && got != "" || !strings.HasSuffix(got, tt.want) {
				t.Errorf("stderr_tail = %.80q…, want it to end with %q", got, tt.want)
			}
		})
	}
}

// A lineWatcher is a log writer that closes seen when a line contains
// want. It is safe for concurrent use.
type lineWatcher struct {
	want string
	seen chan struct{}

	mu sync.Mutex
	// guards buf and closed
	buf    strings.Builder
	closed bool
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.closed && strings.Contains(w.buf.String(), w.want) {
		w.closed = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestServeRefusesOpenAddrWithoutAuth(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		keys    string
		wantErr string // "" wants the server to start
	}{
		{name: "all interfaces", args: []string{"--addr", "0.0.0.0:0"}, wantErr: "--addr 0.0.0.0:0 is not a loopback address and no API keys are configured"},
		{name: "empty host", args: []string{"--addr", ":0"}, wantErr: "is not a loopback address"},
		{name: "loopback", args: []string{"--addr", "127.0.0.1:0"}},
		{name: "localhost", args: []string{"--addr", "localhost:0"}},
		{name: "insecure", args: []string{"--addr", "0.0.0.0:0", "--insecure"}},
		{name: "with keys", args: []string{"--addr", "0.0.0.0:0"}, keys: `[{"name":"ops","token":"0123456789abcdef0123","scopes":["admin"]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HARNESS_HOME": home, "HOME": home}
			if tt.keys != "" {
				env["HARNESS_API_KEYS"] = tt.keys
			}
			stderr := &lineWatcher{want: "harnessd listening", seen: make(chan struct{})}
			a := &app{stdout: io.Discard, stderr: stderr, getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			args := append([]string{"serve", "--workspace", home}, tt.args...)
			// Owned by the test; exits when serve returns (cancel stops it).
			go func() { errc <- a.run(ctx, args) }()
			if tt.wantErr != "" {
				err := <-errc
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("serve %v = %v, want exit 2 with %q", args, err, tt.wantErr)
				}
				return
			}
			select {
			case <-stderr.seen:
			case err := <-errc:
				t.Fatalf("serve %v = %v before listening, want it to serve; log:\n%s", args, err, stderr)
			}
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("serve %v after cancel = %v, want nil", args, err)
			}
		})
	}
}

func TestIsLoopbackAddr(t *testing.T) {
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2:80", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
		{"192.168.1.10:8080", false},
		{"example.com:80", false},
		{"127.0.0.1", false},
	}
	for _, tt := range tests {
		if got := isLoopbackAddr(tt.addr); got != tt.want {
			t.Errorf("isLoopbackAddr(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}

// FuzzRunRequest feeds POST /v1/runs bodies to the strict decoder and the
// per-run server validation. Whatever the input: no panic, errors that
// name the body, a decoded request that survives a round trip, and
// accepted servers that are complete and never collide. Seeds are in
// testdata/fuzz/FuzzRunRequest.
func FuzzRunRequest(f *testing.F) {
	globals := []serverConfig{{Name: "fake", Transport: transportStdio, Command: "true", Enabled: true}}
	f.Fuzz(func(t *testing.T, body []byte) {
		var req runRequest
		if err := decodeStrictJSON(bytes.NewReader(body), &req); err != nil {
			if !strings.HasPrefix(err.Error(), "request body: ") {
				t.Errorf("decode(%q) = %v, want an error starting with \"request body: \"", body, err)
			}
			return
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode(%+v) = %v", req, err)
		}
		var req2 runRequest
		if err := decodeStrictJSON(bytes.NewReader(again), &req2); err != nil {
			t.Fatalf("decode(encode(%q)) = %v", body, err)
		}
		var servers1, servers2 any
		json.Unmarshal(req.MCPServers, &servers1)
		json.Unmarshal(req2.MCPServers, &servers2)
		raw := req.MCPServers
		req.MCPServers, req2.MCPServers = nil, nil
		if !reflect.DeepEqual(req, req2) || !reflect.DeepEqual(servers1, servers2) {
			t.Errorf("round trip of %q = %+v, want %+v", body, req2, req)
		}
		servers, err := parseRunServers(raw, globals, nil)
		if err != nil {
			return
		}
		seen := map[string]bool{"fake": true}
		for _, s := range servers {
			key := sanitizeName(s.Name)
			if seen[key] {
				t.Errorf("parseRunServers(%q) accepted %q, which collides", body, s.Name)
			}
			seen[key] = true
			switch {
			case s.Transport == transportStdio && s.Command == "":
				t.Errorf("parseRunServers(%q): stdio server %q without a command", body, s.Name)
			case (s.Transport == transportHTTP || s.Transport == transportSSE) && s.URL == "":
				t.Errorf("parseRunServers(%q): %s server %q without a url", body, s.Transport, s.Name)
			case s.Transport != transportStdio && s.Transport != transportHTTP && s.Transport != transportSSE:
				t.Errorf("parseRunServers(%q): server %q has transport %q", body, s.Name, s.Transport)
			}
		}
	})
}
