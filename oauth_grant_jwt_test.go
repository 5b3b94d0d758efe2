package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
)

// TestEnterpriseManagedAuthorization exchanges the ID token at an IdP for
// an identity assertion grant (RFC 8693) and presents that grant to the
// server's authorization server (jwt-bearer): the IdP sees the exchange's
// parameters, the authorization server the grant.
func TestEnterpriseManagedAuthorization(t *testing.T) {
	t.Parallel()
	s := newDPoPTestServer(t)
	s.advertise = false
	var mu sync.Mutex
	var exchange url.Values
	var idpAuth string
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		mu.Lock()
		exchange = r.PostForm
		idpAuth, _, _ = r.BasicAuth()
		mu.Unlock()
		json.NewEncoder(w).Encode(map[string]string{"access_token": "identity-assertion-grant-for-" + r.PostForm.Get("subject_token"),
			"issued_token_type": tokenTypeIDJAG, "token_type": "N_A"})
	}))
	t.Cleanup(idp.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "id_token")
	writeAssertion(t, file, "person-id-token")
	m := newOAuthClients(newTokenStore(filepath.Join(dir, "oauth")), discardLogger())
	c := m.forServer(serverConfig{Name: "wiki", URL: s.srv.URL + "/mcp", Transport: transportHTTP, OAuth: &oauthConfig{
		Grant: grantJWTBearer, ClientID: "workload", AssertionFile: file,
		IdPTokenEndpoint: idp.URL + "/token", IdPClientID: "harnessd", IdPClientSecret: "idp-secret-value"}})
	if got := postMCP(t, c, s); got != 200 {
		t.Fatalf("status %d", got)
	}
	mu.Lock()
	defer mu.Unlock()
	want := map[string]string{
		"grant_type": tokenExchangeGrant, "requested_token_type": tokenTypeIDJAG,
		"subject_token": "person-id-token", "subject_token_type": tokenTypeIDToken,
		"audience": s.srv.URL, "resource": s.srv.URL + "/mcp",
	}
	for k, v := range want {
		if exchange.Get(k) != v {
			t.Errorf("token exchange %s = %q, want %q", k, exchange.Get(k), v)
		}
	}
	if idpAuth != "harnessd" {
		t.Errorf("IdP client authenticated as %q, want harnessd", idpAuth)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.assertions) != 1 || s.assertions[0] != "identity-assertion-grant-for-person-id-token" {
		t.Errorf("authorization server got assertions %q, want the identity assertion grant", s.assertions)
	}
	if !m.secrets.load().has("identity-assertion-grant-for-person-id-token") {
		t.Error("the identity assertion grant is not redacted")
	}
}
