package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewerGrantsJoinTheLiveRedactor runs the enterprise-managed grant
// (an ID token exchanged at the IdP for an identity assertion grant, then
// the jwt-bearer grant) with DPoP, with the OAuth clients learning into a
// daemon's live redactor: the assertion read from its file, the
// identity assertion grant, the tokens, the DPoP key and its proof header
// all join it, and a run's redactor derived from it hides them.
func TestNewerGrantsJoinTheLiveRedactor(t *testing.T) {
	t.Parallel()
	s := newDPoPTestServer(t)
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		json.NewEncoder(w).Encode(map[string]string{"access_token": "idjag-for-" + r.PostForm.Get("subject_token"),
			"issued_token_type": tokenTypeIDJAG, "token_type": "N_A"})
	}))
	t.Cleanup(idp.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "id_token")
	writeAssertion(t, file, "person-id-token-0123")
	m := newOAuthClients(newTokenStore(filepath.Join(dir, "oauth")), discardLogger())
	daemon := newLiveRedactor(newRedactor("configured-header-value"))
	m.learnInto(daemon)
	run := daemon.derive("run-own-secret")
	c := m.forServer(serverConfig{Name: "wiki", URL: s.srv.URL + "/mcp", Transport: transportHTTP, OAuth: &oauthConfig{
		Grant: grantJWTBearer, ClientID: "workload", AssertionFile: file, DPoP: dpopAlways,
		IdPTokenEndpoint: idp.URL + "/token", IdPClientID: "harnessd", IdPClientSecret: "idp-secret-value"}})
	if got := postMCP(t, c, s); got != 200 {
		t.Fatalf("status %d", got)
	}
	c.acquire(t.Context())
	rec := c.rec
	prover := c.prover
	c.release()
	if rec.Token == nil || rec.DPoPKey == "" || prover == nil {
		t.Fatalf("after the grant: token %v, DPoP key set %v, prover %v; want all three", rec.Token, rec.DPoPKey != "", prover)
	}
	for _, secret := range []string{"person-id-token-0123", "idjag-for-person-id-token-0123", rec.Token.AccessToken, rec.DPoPKey, prover.key.header} {
		text := "the server said " + secret + " back"
		if got := run.load().redact(text); strings.Contains(got, secret) {
			t.Errorf("a run's redactor leaves %q in %q", secret, got)
		}
	}
}
