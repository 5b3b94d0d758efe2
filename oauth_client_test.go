package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// testAS is an authorization server and protected MCP endpoint in one
// httptest server: it publishes metadata, registers clients, approves
// every authorization at once, issues rotating refresh tokens and counts
// token requests per grant. The MCP endpoint at /mcp answers 200 to a
// valid access token and 401 otherwise.
type testAS struct {
	srv *httptest.Server

	mu        sync.Mutex
	grants    map[string]int
	valid     map[string]bool // access tokens
	refresh   map[string]bool // live refresh tokens
	revokeAll bool            // refresh answers invalid_grant
	expiresIn int
	codes     map[string]string // code -> code_challenge
	issuedSeq int
}

func newTestAS(t *testing.T) *testAS {
	t.Helper()
	a := &testAS{grants: map[string]int{}, valid: map[string]bool{}, refresh: map[string]bool{}, codes: map[string]string{}, expiresIn: 3600}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"resource": a.srv.URL + "/mcp", "authorization_servers": []string{a.srv.URL}, "scopes_supported": []string{"mcp"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		u := a.srv.URL
		json.NewEncoder(w).Encode(map[string]any{"issuer": u, "authorization_endpoint": u + "/authorize", "token_endpoint": u + "/token",
			"registration_endpoint": u + "/register", "token_endpoint_auth_methods_supported": []string{"client_secret_basic"},
			"code_challenge_methods_supported": []string{"S256"}, "authorization_response_iss_parameter_supported": true})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(201)
		json.NewEncoder(w).Encode(map[string]any{"client_id": "registered-client", "client_secret": "registered-client-secret-value"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		a.mu.Lock()
		a.issuedSeq++
		code := fmt.Sprintf("authorization-code-%d", a.issuedSeq)
		a.codes[code] = q.Get("code_challenge")
		a.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?"+url.Values{"code": {code}, "state": {q.Get("state")}, "iss": {a.srv.URL}}.Encode(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		a.mu.Lock()
		defer a.mu.Unlock()
		grant := r.PostForm.Get("grant_type")
		a.grants[grant]++
		fail := func(code string) {
			w.WriteHeader(400)
			json.NewEncoder(w).Encode(map[string]string{"error": code})
		}
		if id, secret, ok := r.BasicAuth(); !ok || id != "registered-client" || secret != "registered-client-secret-value" {
			fail("invalid_client")
			return
		}
		if r.PostForm.Get("resource") != a.srv.URL+"/mcp" {
			fail("invalid_target")
			return
		}
		switch grant {
		case "authorization_code":
			challenge, ok := a.codes[r.PostForm.Get("code")]
			if !ok || pkceChallenge(r.PostForm.Get("code_verifier")) != challenge {
				fail("invalid_grant")
				return
			}
			delete(a.codes, r.PostForm.Get("code"))
		case "refresh_token":
			rt := r.PostForm.Get("refresh_token")
			if a.revokeAll || !a.refresh[rt] {
				fail("invalid_grant")
				return
			}
			delete(a.refresh, rt) // rotation
		default:
			fail("unsupported_grant_type")
			return
		}
		a.issuedSeq++
		access, rt := fmt.Sprintf("access-token-value-%d", a.issuedSeq), fmt.Sprintf("refresh-token-value-%d", a.issuedSeq)
		a.valid[access] = true
		a.refresh[rt] = true
		json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": a.expiresIn, "refresh_token": rt, "scope": "mcp"})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		ok := a.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		a.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+a.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(200)
	})
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testAS) grantCount(grant string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.grants[grant]
}

// newTestOAuthClient returns an OAuth client of a's /mcp that stores in
// dir and logs at debug level to logs.
func newTestOAuthClient(t *testing.T, a *testAS, dir string, logs *bytes.Buffer, interactive bool) *oauthClient {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newOAuthClient(serverConfig{Name: "docs", URL: a.srv.URL + "/mcp", Transport: transportHTTP}, newTokenStore(dir), a.srv.Client(), logger)
	if interactive {
		noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		c.authorize = func(ctx context.Context, u string) (string, error) { return readRedirect(ctx, noRedirects, u) }
	}
	return c
}

// post sends one request to a's /mcp through c.
func post(t *testing.T, c *oauthClient, a *testAS) (*http.Response, error) {
	t.Helper()
	return c.do(t.Context(), a.srv.Client(), func() (*http.Request, error) {
		return http.NewRequest(http.MethodPost, a.srv.URL+"/mcp", strings.NewReader("{}"))
	})
}

func TestOAuthLoginRefreshAndReuse(t *testing.T) {
	t.Parallel()
	a := newTestAS(t)
	dir := t.TempDir()
	var logs bytes.Buffer
	c := newTestOAuthClient(t, a, dir, &logs, true)
	resp, err := post(t, c, a)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("first request: %v, %v", resp, err)
	}
	if n := a.grantCount("authorization_code"); n != 1 {
		t.Errorf("authorization_code grants = %d, want 1", n)
	}

	// A new client (a restarted daemon) with no person reuses the login.
	daemon := newTestOAuthClient(t, a, dir, &logs, false)
	if resp, err := post(t, daemon, a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("request after restart: %v, %v", resp, err)
	}

	// Expire the stored token: the next request refreshes first.
	daemon.rec.Token.Expiry = time.Now().Add(-time.Second)
	if resp, err := post(t, daemon, a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("request after expiry: %v, %v", resp, err)
	}
	if n := a.grantCount("refresh_token"); n != 1 {
		t.Errorf("refresh grants = %d, want 1", n)
	}
	stored, _ := newTokenStore(dir).load("docs", a.srv.URL+"/mcp")
	if stored.Token == nil || stored.Token.AccessToken != daemon.rec.Token.AccessToken || !a.refresh[stored.Token.RefreshToken] {
		t.Errorf("stored token %+v is not the rotated one", stored.Token)
	}
	for _, secret := range []string{"access-token-value", "refresh-token-value", "authorization-code-", "registered-client-secret-value"} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("debug logs show %q:\n%s", secret, logs.String())
		}
	}
}

func TestOAuthConcurrentRefresh(t *testing.T) {
	t.Parallel()
	a := newTestAS(t)
	dir := t.TempDir()
	var logs bytes.Buffer
	if _, err := post(t, newTestOAuthClient(t, a, dir, &logs, true), a); err != nil {
		t.Fatal(err)
	}
	c := newTestOAuthClient(t, a, dir, &logs, false)
	c.reload()
	c.rec.Token.Expiry = time.Now().Add(-time.Second)
	const callers = 8
	tokens := make([]string, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := c.accessToken(t.Context())
			if err != nil {
				t.Error(err)
			}
			tokens[i] = tok
		}()
	}
	wg.Wait()
	if n := a.grantCount("refresh_token"); n != 1 {
		t.Errorf("refresh grants = %d, want 1", n)
	}
	for i, tok := range tokens {
		if tok == "" || tok != tokens[0] || !a.valid[tok] {
			t.Errorf("caller %d got %q, want the one new token %q", i, tok, tokens[0])
		}
	}
}

func TestOAuthRevokedRefreshNeedsLogin(t *testing.T) {
	t.Parallel()
	a := newTestAS(t)
	dir := t.TempDir()
	var logs bytes.Buffer
	if _, err := post(t, newTestOAuthClient(t, a, dir, &logs, true), a); err != nil {
		t.Fatal(err)
	}
	a.mu.Lock()
	a.revokeAll = true
	a.valid = map[string]bool{} // the server forgets the access token too
	a.mu.Unlock()
	c := newTestOAuthClient(t, a, dir, &logs, false)
	for range 3 {
		_, err := post(t, c, a)
		if !errors.Is(err, errNeedsAuth) || !strings.Contains(err.Error(), "harnessd mcp login docs") {
			t.Fatalf("request error = %v, want needs authorization naming the command", err)
		}
	}
	if n := a.grantCount("refresh_token"); n != 1 {
		t.Errorf("refresh grants = %d, want 1 (no loop)", n)
	}
	stored, _ := newTokenStore(dir).load("docs", a.srv.URL+"/mcp")
	if stored.Token != nil {
		t.Errorf("the revoked token is still stored: %+v", stored.Token)
	}
	// A login by another process is picked up without restart.
	a.mu.Lock()
	a.revokeAll = false
	a.mu.Unlock()
	if _, err := post(t, newTestOAuthClient(t, a, dir, &logs, true), a); err != nil {
		t.Fatal(err)
	}
	if resp, err := post(t, c, a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("request after a new login: %v, %v", resp, err)
	}
}

func TestTokenStoreFiles(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	dir := filepath.Join(home, "oauth")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	s := newTokenStore(dir)
	rec := oauthRecord{ServerURL: "https://mcp.example/mcp", Token: &oauthToken{AccessToken: "a"}}
	for range 2 {
		if err := s.save("docs", rec); err != nil {
			t.Fatal(err)
		}
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("store directory mode = %v, want 0700", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 || entries[0].Name() != "docs.json" {
		t.Errorf("store holds %v, want only docs.json (no temporary files)", entries)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "docs.json")); fi.Mode().Perm() != 0o600 {
		t.Errorf("token file mode = %v, want 0600", fi.Mode().Perm())
	}
	got, err := s.load("docs", "https://mcp.example/mcp")
	if err != nil || got.Token == nil || got.Token.AccessToken != "a" {
		t.Errorf("load = %+v, %v", got, err)
	}
	if got, _ := s.load("docs", "https://other.example/mcp"); got.Token != nil {
		t.Errorf("load for another url = %+v, want empty", got)
	}
	if err := s.remove("docs"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.load("docs", "https://mcp.example/mcp"); got.Token != nil {
		t.Errorf("load after remove = %+v", got)
	}
	if err := s.remove("docs"); err != nil {
		t.Errorf("second remove: %v", err)
	}
}

// TestMCPLoginPastedAndLogout runs "mcp login" with the redirected URL
// pasted on stdin (the authorization server approves at once), then
// "mcp logout".
func TestMCPLoginPastedAndLogout(t *testing.T) {
	t.Parallel()
	a := newTestAS(t)
	home := t.TempDir()
	redirect := "http://127.0.0.1:1/callback" // nothing listens there: the URL is pasted
	servers := fmt.Sprintf(`[{"name":"docs","url":%q,"oauth":{"redirect_uri":%q}}]`, a.srv.URL+"/mcp", redirect)
	env := map[string]string{"HARNESS_HOME": home, "HOME": home, "HARNESS_WORKSPACE": t.TempDir(), "HARNESS_MCP_SERVERS": servers}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	stdinR, stdinW := io.Pipe()
	stdoutR, stdoutW := io.Pipe()
	var stderr lockedBuffer
	app := &app{stdin: stdinR, stdout: stdoutW, stderr: &stderr, getenv: getenv}
	done := make(chan error, 1)
	go func() {
		done <- app.run(t.Context(), []string{"mcp", "login", "docs"})
		stdoutW.Close()
	}()
	lines := bufio.NewScanner(stdoutR)
	if !lines.Scan() {
		t.Fatalf("mcp login printed nothing; stderr: %s", stderr.String())
	}
	authURL := lines.Text()
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirected, err := readRedirect(t.Context(), noRedirects, authURL)
	if err != nil {
		t.Fatalf("approve %q: %v", authURL, err)
	}
	fmt.Fprintln(stdinW, "  "+redirected+"  ")
	for lines.Scan() {
	}
	if err := <-done; err != nil {
		t.Fatalf("mcp login: %v; stderr: %s", err, stderr.String())
	}
	store := newTokenStore(oauthDir(home))
	if rec, _ := store.load("docs", a.srv.URL+"/mcp"); rec.Token == nil || !a.valid[rec.Token.AccessToken] {
		t.Fatalf("after login the store holds %+v", rec.Token)
	}
	if code, _, errOut := runHarnessd(t, env, "mcp", "logout", "docs"); code != 0 {
		t.Fatalf("mcp logout = %d: %s", code, errOut)
	}
	if rec, _ := store.load("docs", a.srv.URL+"/mcp"); rec.Token != nil {
		t.Errorf("after logout the store holds %+v", rec.Token)
	}
}

// TestAPILogin logs in to a server through POST
// /v1/mcp/servers/{name}/login: start, approve, complete.
func TestAPILogin(t *testing.T) {
	t.Parallel()
	a := newTestAS(t)
	store := newTokenStore(t.TempDir())
	cfg := serverConfig{Name: "docs", URL: a.srv.URL + "/mcp", Transport: transportHTTP, Enabled: true}
	reg := newRegistry([]serverConfig{cfg}, registryOptions{Client: clientOptions{OAuth: newOAuthClients(store, discardLogger())}})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	if st := reg.statuses()[0]; st.Status != statusNeedsAuth || !strings.Contains(st.Error, "harnessd mcp login docs") {
		t.Errorf("status before login = %s (%s), want needs_auth naming the command", st.Status, st.Error)
	}
	srv := httptest.NewServer(newAPI(nil, reg, nil, nil, nil, nil))
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client()}
	if resp, data := at.do(t, http.MethodPost, "/v1/mcp/servers/docs/login", "", `{"redirected_url":"http://127.0.0.1:8788/callback?code=x"}`); resp.StatusCode != http.StatusConflict {
		t.Errorf("complete before start = %d %s, want 409", resp.StatusCode, data)
	}
	resp, data := at.do(t, http.MethodPost, "/v1/mcp/servers/docs/login", "", `{}`)
	var started struct {
		AuthorizationURL string `json:"authorization_url"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(data, &started) != nil || started.AuthorizationURL == "" {
		t.Fatalf("start = %d %s", resp.StatusCode, data)
	}
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirected, err := readRedirect(t.Context(), noRedirects, started.AuthorizationURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"redirected_url": redirected})
	if resp, data := at.do(t, http.MethodPost, "/v1/mcp/servers/docs/login", "", string(body)); resp.StatusCode != 200 || !strings.Contains(string(data), "logged_in") {
		t.Fatalf("complete = %d %s", resp.StatusCode, data)
	}
	if strings.Contains(string(data), "access-token-value") {
		t.Errorf("the answer shows the token: %s", data)
	}
	if rec, _ := store.load("docs", cfg.URL); rec.Token == nil || !a.valid[rec.Token.AccessToken] {
		t.Errorf("after the API login the store holds %+v", rec.Token)
	}
	if resp, _ := at.do(t, http.MethodPost, "/v1/mcp/servers/nope/login", "", `{}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("login to an unknown server = %d, want 404", resp.StatusCode)
	}
}

// TestOAuthClientsPerServer checks which servers share an OAuth client: a
// configured server keeps one across reconnections, while each per-run
// server gets its own, so a run never sees another run's tokens for a
// server of the same name, and an untrusted server gets none.
func TestOAuthClientsPerServer(t *testing.T) {
	t.Parallel()
	clients := newOAuthClients(newTokenStore(t.TempDir()), discardLogger())
	server := func(origin serverOrigin, untrusted bool) serverConfig {
		return serverConfig{Name: "docs", Origin: origin, Source: "config", URL: "http://127.0.0.1:1/mcp", Transport: transportHTTP, Untrusted: untrusted}
	}
	if a, b := clients.forServer(server(originGlobal, false)), clients.forServer(server(originGlobal, false)); a == nil || a != b {
		t.Errorf("forServer(configured) = %p then %p, want one client", a, b)
	}
	a, b := clients.forServer(server(originPerRun, false)), clients.forServer(server(originPerRun, false))
	if a == nil || b == nil || a == b {
		t.Errorf("forServer(per-run) = %p then %p, want two clients", a, b)
	}
	if a != nil && a.store != nil {
		t.Error("a per-run server's client keeps its tokens in the token store, want memory only")
	}
	if c := clients.forServer(server(originPerRun, true)); c != nil {
		t.Errorf("forServer(untrusted) = %p, want nil", c)
	}
	if n := len(clients.byName); n != 1 {
		t.Errorf("clients kept = %d, want 1 (the configured server's)", n)
	}
}
