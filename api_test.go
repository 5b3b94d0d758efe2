package main

import (
	"bytes"
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
	"slices"
	"strings"
	"testing"
	"time"
)

// This file holds the API test client (apiTest) and tests the HTTP API's
// routes, readiness, error shapes and request decoding; the runs, auth,
// metrics and servers parts are tested in api_runs_test.go,
// api_auth_test.go, api_metrics_test.go and api_servers_test.go.

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
func newAPITest(t testing.TB, f *fakeModel, keys []authKey, globals ...serverConfig) *apiTest {
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
func (at *apiTest) do(t testing.TB, method, path, auth, body string, header ...string) (*http.Response, []byte) {
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
	t.Parallel()
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
	t.Parallel()
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

func TestAPIErrorShapes(t *testing.T) {
	t.Parallel()
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
	existing, err := at.runs.start(runRequest{Prompt: "setup", Owner: "writer"}, false)
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
		{name: "unknown field", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","temprature":1}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `unknown field "temprature"; valid fields are prompt, profile`},
		{name: "unknown server field", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x","mcp_servers":[{"name":"a","url":"http://127.0.0.1:1/mcp","token":"t"}]}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: `unknown field "token"`},
		{name: "two values", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x"} {"prompt":"y"}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "request body: data after the JSON object: send exactly one JSON object"},
		{name: "trailing text", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x"} tail`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "request body: data after the JSON object: send exactly one JSON object"},
		{name: "trailing brace", method: "POST", path: "/v1/runs", auth: auth, body: `{"prompt":"x"}}`, wantStatus: 400, wantCode: "invalid_request", wantMessage: "request body: data after the JSON object: send exactly one JSON object"},
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
	t.Parallel()
	f := newFakeModel(t, "openai")
	at := newAPITest(t, f, nil)
	at.runs.opts.Model = modelSpec{}
	resp, data := at.do(t, http.MethodPost, "/v1/runs", "", `{"prompt":"x"}`)
	e, err := decodeAPIError(data)
	if resp.StatusCode != http.StatusBadRequest || err != nil || !strings.Contains(e.Error.Message, "set HARNESS_MODEL") {
		t.Errorf("POST /v1/runs without a model = %d %s (%v), want 400 saying to set HARNESS_MODEL", resp.StatusCode, data, err)
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
