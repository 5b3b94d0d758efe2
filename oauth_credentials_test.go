package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveEchoMCP makes a's /mcp a minimal MCP server for valid tokens: one
// tool, echo, whose result quotes the bearer token it was called with,
// as a careless server's "denied" message would. Requests without a valid
// token still get a's 401 challenge.
func serveEchoMCP(a *testAS) {
	inner := a.srv.Config.Handler
	mcp := fakeMCPHandler(fakeMCPConfig{Name: "echo", Capabilities: map[string]any{"tools": map[string]any{}},
		Script: func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
			if m.Method != "tools/call" {
				return false
			}
			token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			writeRPCResult(w, m.ID, text("Echo: denied for "+token))
			return true
		}})
	a.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		a.mu.Lock()
		ok := a.valid[token]
		a.mu.Unlock()
		if r.URL.Path != "/mcp" || !ok {
			inner.ServeHTTP(w, r)
			return
		}
		mcp.ServeHTTP(w, r)
	})
}

// TestOAuthTokensNeverShown logs in through the API to a test
// authorization server, then runs a tool whose answer quotes the access
// token. The token, the refresh token and the registered client's secret
// must appear nowhere: not in the run's output, events, messages or
// files, not in the logs (with message payloads on), not in API answers.
func TestOAuthTokensNeverShown(t *testing.T) {
	t.Parallel()
	a := newTestAS(t)
	serveEchoMCP(a)
	home := t.TempDir()
	var logs lockedBuffer
	root := newLiveRedactor(nil)
	logger := redactLoggerLive(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), root)
	cfg := serverConfig{Name: "docs", URL: a.srv.URL + "/mcp", Transport: transportHTTP, Enabled: true, Timeout: defaultTimeout}
	store := newTokenStore(oauthDir(home))
	reg := newRegistry([]serverConfig{cfg}, registryOptions{Logger: logger, Restart: true, BackoffMin: 10 * time.Millisecond, BackoffMax: 50 * time.Millisecond,
		Client: clientOptions{OAuth: newOAuthClients(store, logger), LogPayloads: true, Secrets: root}})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	runStore, err := openRunStoreOnceFree(filepath.Join(home, "runs"), logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(runStore.close)
	f := newFakeModel(t, providerOpenAI, promptedCall, promptedCall)
	opts := runOptionsOver(t, reg, f, home, logger)
	opts.Store = runStore
	runs := newRunsWith(t, opts)
	srv := httptest.NewServer(newAPI(runs, reg, nil, nil, logger, nil))
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client()}

	// The login, as an operator makes it through the API.
	resp, data := at.do(t, http.MethodPost, "/v1/mcp/servers/docs/login", "", `{}`)
	var started struct {
		AuthorizationURL string `json:"authorization_url"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &started) != nil || started.AuthorizationURL == "" {
		t.Fatalf("start login = %d %s", resp.StatusCode, data)
	}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirected, err := readRedirect(t.Context(), noRedirects, started.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"redirected_url": redirected})
	var answers strings.Builder
	if resp, data := at.do(t, http.MethodPost, "/v1/mcp/servers/docs/login", "", string(body)); resp.StatusCode != 200 {
		t.Fatalf("complete login = %d %s", resp.StatusCode, data)
	}
	rec, _ := store.load("docs", cfg.URL)
	if rec.Token == nil {
		t.Fatal("no token stored after the login")
	}
	waitUntil(t, "docs is ready", func() bool { return reg.statuses()[0].Status == statusReady })

	id := at.postRun(t, "", fmt.Sprintf(`{"prompt":%q}`, callPrompt("mcp_docs_echo", "{}")))
	for _, path := range []string{"/v1/runs/" + id + "/events", "/v1/runs/" + id, "/v1/runs/" + id + "/messages", "/v1/runs", "/v1/mcp/servers"} {
		_, data := at.do(t, http.MethodGet, path, "", "")
		fmt.Fprintf(&answers, "GET %s\n%s\n", path, data)
	}
	if !strings.Contains(answers.String(), "Echo: denied for [redacted]") {
		t.Errorf("the run did not show the redacted echo; the scenario did not run:\n%s", answers.String())
	}
	files := map[string]string{}
	files["runs log"] = string(logOnDisk(t, runStore.dir))
	places := map[string]string{"API answers": answers.String(), "logs": logs.String()}
	for name, text := range files {
		places["file "+filepath.Base(name)] = text
	}
	secrets := []string{rec.Token.AccessToken, rec.Token.RefreshToken, "registered-client-secret-value"}
	for where, text := range places {
		for _, secret := range secrets {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s hold the credential %q: …%s…", where, secret, text[max(0, i-200):min(len(text), i+100)])
			}
		}
	}
	if !strings.Contains(logs.String(), "payload=") {
		t.Error("the logs have no message payloads: the trace was not on")
	}
}

// TestMCPCallHidesStoredToken logs in to the test authorization server,
// then calls the tool that echoes its bearer token with "mcp call": the
// token read from the store is redacted from what it prints.
func TestMCPCallHidesStoredToken(t *testing.T) {
	t.Parallel()
	a := newTestAS(t)
	serveEchoMCP(a)
	home := t.TempDir()
	cfg := serverConfig{Name: "docs", URL: a.srv.URL + "/mcp", Transport: transportHTTP}
	store := newTokenStore(oauthDir(home))
	login := newOAuthClient(cfg, store, a.srv.Client(), discardLogger())
	authURL, err := login.startLogin(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirected, err := readRedirect(t.Context(), noRedirects, authURL)
	if err != nil {
		t.Fatal(err)
	}
	if err := login.completeLogin(t.Context(), redirected); err != nil {
		t.Fatal(err)
	}
	rec, _ := store.load("docs", cfg.URL)
	if rec.Token == nil {
		t.Fatal("no token stored")
	}
	env := map[string]string{"HARNESS_HOME": home, "HARNESS_MCP_SERVERS": serversJSON(t, map[string]any{"name": "docs", "url": cfg.URL})}
	for _, args := range [][]string{{"mcp", "call", "mcp_docs_echo"}, {"mcp", "call", "--json", "mcp_docs_echo"}} {
		code, stdout, stderr := runHarnessd(t, env, args...)
		if code != 0 || !strings.Contains(stdout, "Echo: denied for [redacted]") {
			t.Errorf("%v = %d\nstdout: %s\nstderr: %s\nwant the echo, redacted", args, code, stdout, stderr)
		}
		if strings.Contains(stdout+stderr, rec.Token.AccessToken) {
			t.Errorf("%v printed the access token:\n%s%s", args, stdout, stderr)
		}
	}
}
