package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// This file holds the tests of hostile input: secrets never leaving
// harnessd, connect_mcp's address checks, and the API's request limits.

// Secrets the secrets test configures; none may appear in any output.
const (
	secretEnvValue = "env-secret-5d1e0c"
	secretHeader   = "hdr-secret-9a77b2"
	secretAPIToken = "api-token-secret-c40f1"
)

func TestSecretsNeverLeave(t *testing.T) {
	tag := checkNoLeaks(t)
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))

	refusing := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
	exe := fakeServerConfig(t, "normal").Command
	servers, _ := json.Marshal([]any{
		map[string]any{"name": "local", "command": exe, "env": map[string]string{fakeServerEnv: "normal", faultTagEnv: tag, "SECRET": secretEnvValue}},
		map[string]any{"name": "remote", "url": refusing.URL + "/mcp", "headers": map[string]string{"Authorization": "Bearer " + secretHeader}},
	})
	keys := fmt.Sprintf(`[{"name":"ops","token":%q,"scopes":["admin"]}]`, secretAPIToken)

	modelFails := "let the model fail"
	turn := fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		if req.Messages[0].Content == modelFails {
			// A model endpoint that echoes the key it was sent.
			return fakeTurn{Status: http.StatusUnauthorized, Text: "invalid api key " + fakeModelKey}
		}
		return promptedCall.Reply(req)
	}}
	f := newFakeModel(t, providerOpenAI, turn, turn, turn, turn, turn, turn, turn)
	getenv := func(key string) (string, bool) {
		switch key {
		case "HARNESS_MCP_SERVERS":
			return string(servers), true
		case "HARNESS_API_KEYS":
			return keys, true
		}
		return f.getenv(key)
	}
	cfg, err := loadConfig(loadOptions{Home: t.TempDir(), Workspace: t.TempDir(), Getenv: getenv, Logger: logger})
	if err != nil {
		t.Fatalf("loadConfig() = %v", err)
	}
	reg := newRegistry(cfg.Servers, registryOptions{Logger: logger, Client: clientOptions{Getenv: getenv}})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	metrics := newMetrics()
	runs := newRunManager(runManagerOptions{
		Registry: reg, Logger: logger, Home: t.TempDir(), Getenv: getenv, Model: modelSpec{Provider: providerOpenAI, Model: "fake-model"}, Metrics: metrics,
		newProvider: func(spec modelSpec, getenv func(string) (string, bool), logger *slog.Logger) (modelProvider, error) {
			spec.BaseURL = f.URL()
			p, err := newModelProvider(spec, getenv, logger)
			if err == nil {
				modelEndpointOf(t, p).retry = fakeRetryPolicy
			}
			return p, err
		},
	})
	stopping := make(chan struct{})
	srv := httptest.NewServer(newAPI(runs, reg, cfg.AuthKeys, metrics, logger, stopping))
	t.Cleanup(func() {
		close(stopping)
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		runs.shutdown(ctx)
	})

	var responses strings.Builder
	do := func(method, path, token, body string) []byte {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(&responses, "%s %s -> %d %v\n%s\n", method, path, resp.StatusCode, resp.Header, b)
		return b
	}
	startRun := func(body string) string {
		t.Helper()
		var started struct {
			RunID string `json:"run_id"`
		}
		b := do(http.MethodPost, "/v1/runs", secretAPIToken, body)
		if err := json.Unmarshal(b, &started); err != nil || started.RunID == "" {
			t.Fatalf("POST /v1/runs %s = %s", body, b)
		}
		// The event stream ends after the terminal event.
		do(http.MethodGet, "/v1/runs/"+started.RunID+"/events", secretAPIToken, "")
		do(http.MethodGet, "/v1/runs/"+started.RunID, secretAPIToken, "")
		return started.RunID
	}

	do(http.MethodGet, "/v1/runs", secretAPIToken+"x", "")
	do(http.MethodGet, "/v1/runs", "", "")
	perRunRemote, _ := json.Marshal(map[string]any{"prompt": callPrompt("mcp_perrun_echo", "{}"),
		"mcp_servers": []any{map[string]any{"name": "perrun", "url": refusing.URL + "/other", "headers": map[string]string{"X-Api-Key": secretHeader}, "required": false}}})
	badEntry, _ := json.Marshal(map[string]any{"prompt": "x",
		"mcp_servers": []any{map[string]any{"name": "bad", "transport": "bogus", "url": refusing.URL, "headers": map[string]string{"X-Api-Key": secretHeader}, "env": map[string]string{"K": secretEnvValue}}}})
	do(http.MethodPost, "/v1/runs", secretAPIToken, string(badEntry))
	startRun(fmt.Sprintf(`{"prompt":%q}`, callPrompt("mcp_local_echo", `{"message":"hello"}`)))
	startRun(fmt.Sprintf(`{"prompt":%q}`, callPrompt("mcp_local_crash", `{}`)))
	startRun(string(perRunRemote))
	startRun(fmt.Sprintf(`{"prompt":%q}`, modelFails))
	do(http.MethodGet, "/v1/runs", secretAPIToken, "")
	do(http.MethodGet, "/v1/mcp/servers", secretAPIToken, "")
	do(http.MethodGet, "/metrics", secretAPIToken, "")

	var errs strings.Builder
	for _, st := range reg.statuses() {
		fmt.Fprintf(&errs, "%s %s\n", st.Error, st.StderrTail)
	}
	output := map[string]string{"logs": logs.String(), "API responses": responses.String(), "server errors": errs.String()}
	for what, text := range output {
		for _, secret := range []string{secretEnvValue, secretHeader, secretAPIToken, fakeModelKey} {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s hold the secret %q: …%s…", what, secret, text[max(0, i-300):min(len(text), i+100)])
			}
		}
	}
	// The test must have produced the failures it means to search.
	for _, want := range []string{"401", "exited with status 3", "model openai", "transport", "mcp.server.failed", "invalid bearer token"} {
		if !strings.Contains(output["API responses"], want) {
			t.Errorf("API responses lack %q: the scenario did not run as planned:\n%s", want, output["API responses"])
		}
	}
}

func TestCheckConnectHost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		host    string
		allow   []string
		wantErr string
	}{
		{name: "loopback", host: "127.0.0.1"},
		{name: "localhost", host: "localhost"},
		{name: "aws metadata", host: "169.254.169.254", wantErr: "link-local or metadata"},
		{name: "link-local v4", host: "169.254.1.1", wantErr: "link-local or metadata"},
		{name: "link-local v6", host: "fe80::1", wantErr: "link-local or metadata"},
		{name: "aws metadata v6", host: "fd00:ec2::254", wantErr: "link-local or metadata"},
		{name: "v4-mapped metadata", host: "::ffff:169.254.169.254", wantErr: "link-local or metadata"},
		{name: "allowed by glob", host: "127.0.0.1", allow: []string{"127.0.0.*"}},
		{name: "allowed case-insensitively", host: "LOCALHOST", allow: []string{"localhost"}},
		{name: "outside the allowlist", host: "127.0.0.1", allow: []string{"*.example.com"}, wantErr: "not in [connect_mcp] allow_hosts"},
		{name: "allowlisted but metadata", host: "169.254.169.254", allow: []string{"*"}, wantErr: "link-local or metadata"},
		{name: "unresolvable", host: "no-such-host.invalid", wantErr: "no-such-host.invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkConnectHost(t.Context(), tt.host, tt.allow)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("checkConnectHost(%q, %q) = %v, want error containing %q", tt.host, tt.allow, err, tt.wantErr)
			}
		})
	}
}

func TestRefuseBlockedAddress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		address string
		refused bool
	}{
		{address: "127.0.0.1:80"},
		{address: "[::1]:443"},
		{address: "10.0.0.1:80"},
		{address: "169.254.169.254:80", refused: true},
		{address: "[fe80::1]:80", refused: true},
		{address: "[fd00:ec2::254]:80", refused: true},
		{address: "[::ffff:169.254.169.254]:80", refused: true},
	}
	for _, tt := range tests {
		if err := refuseBlockedAddress("tcp", tt.address, nil); (err != nil) != tt.refused {
			t.Errorf("refuseBlockedAddress(%q) = %v, want refused %v", tt.address, err, tt.refused)
		}
	}
}

// TestUntrustedDialRefusesMetadata checks the dial-time guard on its own:
// whatever a name resolved to when it was checked, the connection to a
// metadata address of an untrusted server is refused when it is made. The
// guard follows serverConfig.Untrusted, whatever the display label says.
func TestUntrustedDialRefusesMetadata(t *testing.T) {
	t.Parallel()
	for _, url := range []string{"http://169.254.169.254:9/mcp", "http://[fd00:ec2::254]:9/mcp", "http://[::ffff:169.254.169.254]:9/mcp"} {
		cfg := serverConfig{Name: "meta", Transport: transportHTTP, URL: url, Timeout: 2 * time.Second,
			StartupTimeout: 2 * time.Second, Enabled: true, Untrusted: true, Source: "any label"}
		_, err := connect(t.Context(), cfg, clientOptions{Logger: slog.New(slog.DiscardHandler)})
		if err == nil || !strings.Contains(err.Error(), "metadata address") {
			t.Errorf("connect(%q) of an untrusted server = %v, want the dial refused", cfg.URL, err)
		}
	}
}

func TestConnectMCPRefusedThroughARun(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, promptedCall, promptedCall, promptedCall, promptedCall)
	m, _ := runsOver(t, f, registryOptions{}, fakeServerConfig(t, "normal"))
	tests := []struct {
		url  string
		want string
	}{
		{url: "http://169.254.169.254/latest/meta-data/", want: "link-local or metadata"},
		{url: "file:///etc/passwd", want: `scheme "file" is not supported; use http or https`},
	}
	for _, tt := range tests {
		r, err := m.start(runRequest{Prompt: callPrompt(toolConnectMCP, fmt.Sprintf(`{"url":%q}`, tt.url))}, false)
		if err != nil {
			t.Fatal(err)
		}
		if v := waitRun(t, r); !strings.Contains(v.Output, "error: ") || !strings.Contains(v.Output, tt.want) {
			t.Errorf("connect_mcp(%q) = %q, want a tool error containing %q", tt.url, v.Output, tt.want)
		}
	}
}

func TestAPIRequestLimits(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI)
	m, reg := runsOver(t, f, registryOptions{}, fakeServerConfig(t, "normal"))
	srv := httptest.NewServer(newAPI(m, reg, nil, newMetrics(), slog.New(slog.DiscardHandler), make(chan struct{})))
	t.Cleanup(srv.Close)
	tests := []struct {
		name       string
		method     string
		path       string
		body       string
		wantStatus int
		want       string
	}{
		{name: "body over 1 MiB", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"` + strings.Repeat("a", maxRequestBody) + `"}`, wantStatus: 400, want: "over the 1048576 byte limit"},
		{name: "unknown field", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x","promt":"y"}`, wantStatus: 400, want: `unknown field \"promt\"`},
		{name: "two values", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x"}{"prompt":"y"}`, wantStatus: 400, want: "data after the JSON object"},
		{name: "empty body", method: http.MethodPost, path: "/v1/runs", body: ``, wantStatus: 400, want: "empty"},
		{name: "not an object", method: http.MethodPost, path: "/v1/runs", body: `[1]`, wantStatus: 400, want: "request body"},
		{name: "unknown server field", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x","mcp_servers":[{"name":"a","url":"http://127.0.0.1:1","hedaers":{}}]}`, wantStatus: 400, want: "hedaers"},
		{name: "profile traversal", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x","profile":"../../etc/passwd"}`, wantStatus: 400, want: "profile"},
		{name: "profile with a slash", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x","profile":"a/b"}`, wantStatus: 400, want: "profile"},
		{name: "profile dot dot", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x","profile":".."}`, wantStatus: 400, want: "profile"},
		{name: "profile with a dot", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x","profile":"a.toml"}`, wantStatus: 400, want: "profile"},
		{name: "profile with NUL", method: http.MethodPost, path: "/v1/runs", body: `{"prompt":"x","profile":"a\u0000b"}`, wantStatus: 400, want: "profile"},
		{name: "run id traversal", method: http.MethodGet, path: "/v1/runs/..%2f..%2fetc%2fpasswd", wantStatus: 404, want: "not_found"},
		{name: "dot segments", method: http.MethodGet, path: "/v1/runs/../../etc/passwd", wantStatus: 404, want: "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, srv.URL+tt.path, strings.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus || !strings.Contains(string(b), tt.want) {
				t.Errorf("%s %s = %d %s, want %d containing %q", tt.method, tt.path, resp.StatusCode, b, tt.wantStatus, tt.want)
			}
		})
	}
}

func TestCommandServersNeedAdmin(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI)
	m, reg := runsOver(t, f, registryOptions{})
	keys, _, err := parseAuthKeysJSON([]byte(`[{"name":"writer","token":"writer-token-0123456789","scopes":["runs:write"]},{"name":"reader","token":"reader-token-0123456789","scopes":["runs:read"]}]`))
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(newAPI(m, reg, keys, newMetrics(), slog.New(slog.DiscardHandler), make(chan struct{})))
	t.Cleanup(srv.Close)
	command := `{"prompt":"x","mcp_servers":[{"name":"sh","command":"/bin/sh","args":["-c","touch /tmp/pwned"]}]}`
	tests := []struct {
		name       string
		token      string
		body       string
		wantStatus int
	}{
		{name: "no token", body: command, wantStatus: http.StatusUnauthorized},
		{name: "wrong token", token: "nope", body: command, wantStatus: http.StatusUnauthorized},
		{name: "read scope", token: "reader-token-0123456789", body: `{"prompt":"x"}`, wantStatus: http.StatusForbidden},
		{name: "write scope, command server", token: "writer-token-0123456789", body: command, wantStatus: http.StatusForbidden},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/runs", strings.NewReader(tt.body))
			req.Header.Set("Content-Type", "application/json")
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("POST /v1/runs as %q = %d %s, want %d", tt.token, resp.StatusCode, b, tt.wantStatus)
			}
		})
	}
	if runs := m.list(); len(runs) != 0 {
		t.Errorf("runs started = %d, want 0", len(runs))
	}
}

// A refusingModel answers every request with an error, at once.
type refusingModel struct{}

func (refusingModel) name() string { return "fake/refusing" }

func (refusingModel) complete(ctx context.Context, req modelRequest) (*modelResponse, error) {
	return nil, errors.New("model fake: refusing")
}

// FuzzRunStart feeds request bodies through decodeBody and the run
// manager's synchronous validation: every refusal is a *requestError and
// no program starts without the admin scope.
func FuzzRunStart(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"hello"}`,
		`{"prompt":"x","max_steps":3,"system_prompt":"be brief","model":"openai/gpt-4o"}`,
		`{"prompt":"x","profile":"../etc"}`,
		`{"prompt":"x","mcp_servers":[{"name":"a","url":"http://127.0.0.1:1/mcp","headers":{"k":"v"},"timeout":"1s"}]}`,
		`{"prompt":"x","mcp_servers":[{"name":"b","command":"/bin/sh","args":["-c","id"]}]}`,
		`{"prompt":"x","mcp_servers":[{"name":"a","url":"http://127.0.0.1:1"},{"name":"A","url":"http://127.0.0.1:2"}]}`,
		`{"prompt":"","max_steps":-1}`,
		`{"prompt":"x","unknown":1}`,
		`[]`, `null`, `{"prompt":"x"} {}`,
	} {
		f.Add([]byte(seed))
	}
	// A disabled global: never started, but its name is reserved.
	global := serverConfig{Name: "global", Transport: transportHTTP, URL: "http://127.0.0.1:1/mcp"}
	reg := newRegistry([]serverConfig{global}, registryOptions{Logger: slog.New(slog.DiscardHandler)})
	f.Cleanup(reg.close)
	m := newRunManager(runManagerOptions{
		Registry: reg, Logger: slog.New(slog.DiscardHandler), Home: f.TempDir(), Model: modelSpec{Provider: providerOpenAI, Model: "fake-model"},
		Getenv: func(string) (string, bool) { return "", false },
		newProvider: func(spec modelSpec, getenv func(string) (string, bool), logger *slog.Logger) (modelProvider, error) {
			return refusingModel{}, nil
		},
	})
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		m.shutdown(ctx)
	})
	f.Fuzz(func(t *testing.T, body []byte) {
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/v1/runs", bytes.NewReader(body))
		var req runRequest
		if err := decodeBody(w, r, &req); err != nil {
			return
		}
		run, err := m.start(req, false)
		if err != nil {
			var reqErr *requestError
			if !errors.As(err, &reqErr) {
				t.Fatalf("start(%s) = %v, want a *requestError", body, err)
			}
			return
		}
		// No program may start without the admin scope; cancelling at once
		// keeps per-run HTTP servers from being dialled.
		run.cancel()
		select {
		case <-run.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("run of %s did not end after cancel", body)
		}
		if v := run.view(); !isTerminal(v.Status) {
			t.Fatalf("run of %s ended %q", body, v.Status)
		}
	})
}

// TestServerOutputIsRedactedAtTheSource checks that what servers print or
// answer is scrubbed of their configured env and header values before it
// reaches errors, statuses and logs (at debug level).
func TestServerOutputIsRedactedAtTheSource(t *testing.T) {
	t.Parallel()
	const secret = "tok-3f9a1c77e2"
	echoing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "bad credentials: "+r.Header.Get("Authorization"), http.StatusBadRequest)
	}))
	t.Cleanup(echoing.Close)
	servers := []serverConfig{
		{
			Name: "printer", Transport: transportStdio, Command: "/bin/sh",
			Args:    []string{"-c", `echo "starting with token $SECRET_TOKEN" >&2; exit 3`},
			Env:     map[string]string{"SECRET_TOKEN": secret},
			Timeout: 5 * time.Second, StartupTimeout: 5 * time.Second, Enabled: true,
		},
		{
			Name: "echoing", Transport: transportHTTP, URL: echoing.URL,
			Headers: map[string]string{"Authorization": "Bearer " + secret},
			Timeout: 5 * time.Second, StartupTimeout: 5 * time.Second, Enabled: true,
		},
	}
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := newRegistry(servers, registryOptions{Logger: logger})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	statuses, err := json.Marshal(reg.statuses())
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []struct{ name, text string }{{"statuses", string(statuses)}, {"logs", logs.String()}} {
		if strings.Contains(out.text, secret) {
			t.Errorf("%s contain the secret:\n%s", out.name, out.text)
		}
		if !strings.Contains(out.text, "[redacted]") {
			t.Errorf("%s lack the redacted marker, so the test saw no server output:\n%s", out.name, out.text)
		}
	}
}

// TestAPIDropsSlowHeaders opens a connection to the API's real server and
// never finishes its request headers: the server closes it once its header
// timeout has passed, not before.
func TestAPIDropsSlowHeaders(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const headerTimeout = 500 * time.Millisecond
	srv := newHTTPServer(http.NotFoundHandler(), slog.New(slog.DiscardHandler), headerTimeout)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	if _, err := io.WriteString(conn, "GET /healthz HTTP/1.1\r\nHost: harnessd\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(start.Add(headerTimeout + 5*time.Second))
	_, err = io.ReadAll(conn)
	elapsed := time.Since(start)
	var netErr net.Error
	if errors.As(err, &netErr) && netErr.Timeout() {
		t.Fatalf("connection still open %s after a partial header, want it closed after %s", elapsed, headerTimeout)
	}
	// The server's clock starts when it reads the request, a moment before
	// start: half the timeout is the margin.
	if elapsed < headerTimeout/2 {
		t.Errorf("connection closed after %s, before the header timeout %s", elapsed, headerTimeout)
	}
}
