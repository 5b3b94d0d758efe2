package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
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

// checkDPoPProof verifies a DPoP proof as a server does (RFC 9449 §4.3),
// with the standard library only: typ, alg, a public JWK, the ES256
// signature, htm, htu, iat, a jti, and ath when accessToken is not empty.
// It returns the claims and the JWK's thumbprint.
func checkDPoPProof(proof, method, htu, accessToken string) (map[string]any, string, error) {
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return nil, "", errors.New("not a JWS compact serialization")
	}
	dec := base64.RawURLEncoding
	var header struct {
		Typ string            `json:"typ"`
		Alg string            `json:"alg"`
		JWK map[string]string `json:"jwk"`
	}
	hb, _ := dec.DecodeString(parts[0])
	if err := json.Unmarshal(hb, &header); err != nil {
		return nil, "", fmt.Errorf("header: %v", err)
	}
	if header.Typ != "dpop+jwt" || header.Alg != "ES256" {
		return nil, "", fmt.Errorf("typ %q alg %q", header.Typ, header.Alg)
	}
	if _, ok := header.JWK["d"]; ok || header.JWK["kty"] != "EC" || header.JWK["crv"] != "P-256" {
		return nil, "", fmt.Errorf("jwk %v", header.JWK)
	}
	x, _ := dec.DecodeString(header.JWK["x"])
	y, _ := dec.DecodeString(header.JWK["y"])
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
	if err != nil {
		return nil, "", fmt.Errorf("jwk: %v", err)
	}
	sig, _ := dec.DecodeString(parts[2])
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if len(sig) != 64 || !ecdsa.Verify(pub, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:])) {
		return nil, "", errors.New("signature does not verify")
	}
	var claims map[string]any
	cb, _ := dec.DecodeString(parts[1])
	if err := json.Unmarshal(cb, &claims); err != nil {
		return nil, "", fmt.Errorf("claims: %v", err)
	}
	iat, _ := claims["iat"].(float64)
	switch {
	case claims["htm"] != method:
		return nil, "", fmt.Errorf("htm %v, want %s", claims["htm"], method)
	case claims["htu"] != htu:
		return nil, "", fmt.Errorf("htu %v, want %s", claims["htu"], htu)
	case time.Since(time.Unix(int64(iat), 0)).Abs() > time.Minute:
		return nil, "", fmt.Errorf("iat %v", claims["iat"])
	case claims["jti"] == nil || claims["jti"] == "":
		return nil, "", errors.New("no jti")
	}
	if accessToken != "" {
		sum := sha256.Sum256([]byte(accessToken))
		if claims["ath"] != dec.EncodeToString(sum[:]) {
			return nil, "", fmt.Errorf("ath %v does not match the token", claims["ath"])
		}
	} else if _, ok := claims["ath"]; ok {
		return nil, "", errors.New("ath on a token request")
	}
	thumb := sha256.Sum256(fmt.Appendf(nil, `{"crv":"P-256","kty":"EC","x":%q,"y":%q}`, header.JWK["x"], header.JWK["y"]))
	return claims, dec.EncodeToString(thumb[:]), nil
}

func TestDPoPProofFields(t *testing.T) {
	t.Parallel()
	key, err := newDPoPKey()
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://mcp.example:8443/mcp?session=1#frag")
	tests := []struct {
		name, method, token, nonce string
	}{
		{"token request", "POST", "", ""},
		{"resource request", "POST", "access-token-value", ""},
		{"with nonce", "GET", "access-token-value", "server-nonce"},
	}
	seen := map[string]bool{}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proof, err := key.proof(tt.method, u, tt.token, tt.nonce)
			if err != nil {
				t.Fatal(err)
			}
			claims, thumb, err := checkDPoPProof(proof, tt.method, "https://mcp.example:8443/mcp", tt.token)
			if err != nil {
				t.Fatalf("proof %s: %v", proof, err)
			}
			if thumb != key.thumb {
				t.Errorf("thumbprint %s, want %s", thumb, key.thumb)
			}
			if got, _ := claims["nonce"].(string); got != tt.nonce {
				t.Errorf("nonce %q, want %q", got, tt.nonce)
			}
			if jti := claims["jti"].(string); seen[jti] {
				t.Errorf("jti %s reused", jti)
			} else {
				seen[jti] = true
			}
			if !strings.HasPrefix(proof, key.header+".") {
				t.Errorf("proof does not start with the key's header segment (redaction relies on it)")
			}
		})
	}
	again, err := parseDPoPKey(key.encode())
	if err != nil || again.thumb != key.thumb {
		t.Errorf("parseDPoPKey(encode()) = %v, %v; want the same key", again, err)
	}
}

// dpopTestServer is an authorization server (jwt-bearer grant only) and a
// protected MCP endpoint in one httptest server that checks every DPoP
// proof it gets, can demand nonces from both roles, and binds the tokens
// it issues to the proof key.
type dpopTestServer struct {
	srv       *httptest.Server
	advertise bool   // dpop_signing_alg_values_supported in the metadata
	asNonce   string // nonce the token endpoint demands ("" none)
	rsNonce   string // nonce the MCP endpoint demands ("" none)
	expiresIn int

	mu         sync.Mutex
	assertions []string
	tokenReqs  int
	mcpReqs    int
	schemes    []string
	bound      map[string]string // access token -> jkt ("" for bearer)
	problems   []string
}

func newDPoPTestServer(t *testing.T) *dpopTestServer {
	t.Helper()
	s := &dpopTestServer{bound: map[string]string{}, expiresIn: 3600, advertise: true}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		json.NewEncoder(w).Encode(map[string]any{"resource": s.srv.URL + "/mcp", "authorization_servers": []string{s.srv.URL}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		meta := map[string]any{"issuer": s.srv.URL, "token_endpoint": s.srv.URL + "/token",
			"grant_types_supported": []string{jwtBearerGrantType}, "token_endpoint_auth_methods_supported": []string{"none"}}
		if s.advertise {
			meta["dpop_signing_alg_values_supported"] = []string{"ES256"}
		}
		json.NewEncoder(w).Encode(meta)
	})
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("POST /mcp", s.mcp)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(s.srv.Close)
	return s
}

func (s *dpopTestServer) problem(format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

func (s *dpopTestServer) token(w http.ResponseWriter, r *http.Request) {
	r.ParseForm()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tokenReqs++
	if r.PostForm.Get("grant_type") != jwtBearerGrantType || r.PostForm.Get("client_id") != "workload" {
		s.problem("token request %v", r.PostForm)
		w.WriteHeader(400)
		return
	}
	s.assertions = append(s.assertions, r.PostForm.Get("assertion"))
	jkt := ""
	if proof := r.Header.Get("DPoP"); proof != "" {
		claims, thumb, err := checkDPoPProof(proof, "POST", s.srv.URL+"/token", "")
		if err != nil {
			s.problem("token request proof: %v", err)
			w.WriteHeader(400)
			return
		}
		if s.asNonce != "" && claims["nonce"] != s.asNonce {
			w.Header().Set("DPoP-Nonce", s.asNonce)
			w.WriteHeader(400)
			json.NewEncoder(w).Encode(map[string]string{"error": "use_dpop_nonce"})
			return
		}
		jkt = thumb
	}
	access := fmt.Sprintf("issued-access-token-%d", s.tokenReqs)
	s.bound[access] = jkt
	typ := "Bearer"
	if jkt != "" {
		typ = "DPoP"
	}
	json.NewEncoder(w).Encode(map[string]any{"access_token": access, "token_type": typ, "expires_in": s.expiresIn})
}

func (s *dpopTestServer) mcp(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mcpReqs++
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	jkt, issued := s.bound[token]
	if !issued {
		w.Header().Set("WWW-Authenticate", `DPoP resource_metadata="`+s.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(401)
		return
	}
	s.schemes = append(s.schemes, scheme)
	if jkt == "" {
		if scheme != "Bearer" {
			s.problem("unbound token presented as %s", scheme)
		}
		w.WriteHeader(200)
		return
	}
	claims, thumb, err := checkDPoPProof(r.Header.Get("DPoP"), "POST", s.srv.URL+"/mcp", token)
	switch {
	case scheme != "DPoP":
		s.problem("bound token presented as %s", scheme)
	case err != nil:
		s.problem("resource proof: %v", err)
	case thumb != jkt:
		s.problem("proof key %s, token bound to %s", thumb, jkt)
	case s.rsNonce != "" && claims["nonce"] != s.rsNonce:
		w.Header().Set("DPoP-Nonce", s.rsNonce)
		w.Header().Set("WWW-Authenticate", `DPoP error="use_dpop_nonce"`)
		w.WriteHeader(401)
		return
	}
	w.WriteHeader(200)
}

// newDPoPTestClient returns the jwt_bearer client (assertion in
// assertionFile, oauth.dpop mode) of s's /mcp, its clients' set and its
// logs.
func newDPoPTestClient(t *testing.T, s *dpopTestServer, dir, assertionFile, mode string) (*oauthClient, *oauthClients, *bytes.Buffer) {
	t.Helper()
	logs := &bytes.Buffer{}
	m := newOAuthClients(newTokenStore(dir), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	cfg := serverConfig{Name: "workload", URL: s.srv.URL + "/mcp", Transport: transportHTTP,
		OAuth: &oauthConfig{Grant: grantJWTBearer, ClientID: "workload", AssertionFile: assertionFile, DPoP: mode}}
	return m.forServer(cfg), m, logs
}

// postMCP sends one request to s's /mcp through c and returns its status.
func postMCP(t *testing.T, c *oauthClient, s *dpopTestServer) int {
	t.Helper()
	resp, err := c.do(t.Context(), s.srv.Client(), func() (*http.Request, error) {
		return http.NewRequest(http.MethodPost, s.srv.URL+"/mcp?x=1", strings.NewReader("{}"))
	})
	if err != nil {
		t.Fatalf("do: %v", err)
	}
	drainClose(resp.Body)
	return resp.StatusCode
}

func writeAssertion(t *testing.T, path, v string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestDPoPNonceRetry(t *testing.T) {
	t.Parallel()
	s := newDPoPTestServer(t)
	s.asNonce, s.rsNonce = "as-nonce-1", "rs-nonce-1"
	dir := t.TempDir()
	file := filepath.Join(dir, "token.jwt")
	writeAssertion(t, file, "platform-issued-jwt-one")
	c, m, logs := newDPoPTestClient(t, s, filepath.Join(dir, "oauth"), file, dpopAuto)
	if got := postMCP(t, c, s); got != 200 {
		t.Fatalf("first request: status %d", got)
	}
	s.mu.Lock()
	// token: without nonce, retried with it; mcp: no token, without
	// nonce, retried with it.
	tokenReqs, mcpReqs := s.tokenReqs, s.mcpReqs
	s.mu.Unlock()
	if tokenReqs != 2 || mcpReqs != 3 {
		t.Errorf("token requests %d (want 2), mcp requests %d (want 3)", tokenReqs, mcpReqs)
	}
	if got := postMCP(t, c, s); got != 200 {
		t.Fatalf("second request: status %d", got)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mcpReqs != 4 {
		t.Errorf("the second request took %d sends, want 1 (nonce kept)", s.mcpReqs-3)
	}
	if len(s.problems) > 0 {
		t.Errorf("server found: %q", s.problems)
	}
	for _, sc := range s.schemes {
		if sc != "DPoP" {
			t.Errorf("scheme %q, want DPoP", sc)
		}
	}
	rd := m.secrets.load()
	if !rd.has("platform-issued-jwt-one") || !rd.has("issued-access-token-2") || !rd.has(c.prover.key.header) || !rd.has(c.rec.DPoPKey) {
		t.Errorf("the redactor lacks the assertion, the token or the DPoP key")
	}
	if strings.Contains(logs.String(), "platform-issued-jwt-one") {
		t.Errorf("logs quote the assertion:\n%s", logs)
	}
}

func TestDPoPModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode      string
		advertise bool
		want      string
	}{
		{dpopAuto, true, "DPoP"},
		{dpopAuto, false, "Bearer"},
		{dpopNever, true, "Bearer"},
		{dpopAlways, false, "DPoP"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s advertised %v", tt.mode, tt.advertise), func(t *testing.T) {
			s := newDPoPTestServer(t)
			s.advertise = tt.advertise
			dir := t.TempDir()
			file := filepath.Join(dir, "token.jwt")
			writeAssertion(t, file, "platform-issued-jwt")
			c, _, _ := newDPoPTestClient(t, s, filepath.Join(dir, "oauth"), file, tt.mode)
			if got := postMCP(t, c, s); got != 200 {
				t.Fatalf("status %d", got)
			}
			s.mu.Lock()
			defer s.mu.Unlock()
			if len(s.schemes) != 1 || s.schemes[0] != tt.want || len(s.problems) > 0 {
				t.Errorf("schemes %q (want %s), problems %q", s.schemes, tt.want, s.problems)
			}
		})
	}
}

func TestJWTBearerAssertionRotationAndKeyStore(t *testing.T) {
	t.Parallel()
	s := newDPoPTestServer(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "token.jwt")
	store := filepath.Join(dir, "oauth")
	c, _, _ := newDPoPTestClient(t, s, store, file, dpopAuto)
	writeAssertion(t, file, "platform-issued-jwt-one")
	if got := postMCP(t, c, s); got != 200 {
		t.Fatalf("status %d", got)
	}
	writeAssertion(t, file, "platform-issued-jwt-two") // the platform rotated it
	s.mu.Lock()
	clear(s.bound) // the authorization server no longer takes the token
	s.mu.Unlock()
	if got := postMCP(t, c, s); got != 200 {
		t.Fatalf("status %d", got)
	}
	s.mu.Lock()
	got := strings.Join(s.assertions, ",")
	s.mu.Unlock()
	if got != "platform-issued-jwt-one,platform-issued-jwt-two" {
		t.Errorf("assertions sent %q, want the file as it was at each grant", got)
	}

	path := newTokenStore(store).path("workload")
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("record %s: %v, mode %v; want 0600", path, err, fi.Mode())
	}
	rec, err := newTokenStore(store).load("workload", s.srv.URL+"/mcp")
	if err != nil || rec.DPoPKey == "" || rec.DPoPKey != c.prover.key.encode() {
		t.Fatalf("stored record has no (or another) DPoP key: %v", err)
	}
	if err := newTokenStore(store).remove("workload"); err != nil { // mcp logout
		t.Fatal(err)
	}
	os.WriteFile(file, []byte(""), 0o600)
	c2, _, _ := newDPoPTestClient(t, s, store, file, dpopAuto)
	resp, err := c2.do(t.Context(), s.srv.Client(), func() (*http.Request, error) {
		return http.NewRequest(http.MethodPost, s.srv.URL+"/mcp", nil)
	})
	if err == nil {
		drainClose(resp.Body)
		t.Fatal("an empty assertion file went unnoticed")
	}
	if !strings.Contains(err.Error(), "oauth.assertion_file") || !strings.Contains(err.Error(), "is empty") {
		t.Errorf("error %q does not name the empty assertion file", err)
	}
}

func TestOAuthConfigDPoPAndJWTBearer(t *testing.T) {
	t.Parallel()
	getenv := func(string) (string, bool) { return "", false }
	u := "https://mcp.example/mcp"
	tests := []struct {
		name    string
		oauth   rawOAuth
		wantErr string
	}{
		{"dpop always", rawOAuth{DPoP: "always"}, ""},
		{"dpop bad", rawOAuth{DPoP: "sometimes"}, `oauth.dpop: "sometimes" is not a DPoP mode`},
		{"workload file", rawOAuth{Grant: "jwt_bearer", AssertionFile: "/var/run/secrets/token"}, ""},
		{"workload env", rawOAuth{Grant: "jwt_bearer", AssertionEnv: "PLATFORM_TOKEN"}, ""},
		{"no assertion", rawOAuth{Grant: "jwt_bearer"}, "oauth.assertion_file: grant jwt_bearer needs assertion_file or assertion_env"},
		{"both", rawOAuth{Grant: "jwt_bearer", AssertionFile: "/a", AssertionEnv: "B"}, "oauth.assertion_env: set assertion_file or assertion_env, not both"},
		{"relative", rawOAuth{Grant: "jwt_bearer", AssertionFile: "token"}, "oauth.assertion_file: not an absolute path"},
		{"assertion on another grant", rawOAuth{AssertionEnv: "X"}, "oauth.assertion_env: only grant jwt_bearer takes"},
		{"enterprise", rawOAuth{Grant: "jwt_bearer", AssertionFile: "/id_token", ClientID: "c", ClientSecret: "s",
			IdPTokenEndpoint: "https://idp.example/token", IdPClientID: "harnessd"}, ""},
		{"enterprise without idp client", rawOAuth{Grant: "jwt_bearer", AssertionFile: "/id_token", IdPTokenEndpoint: "https://idp.example/token"},
			"oauth.idp_client_id"},
		{"idp client without endpoint", rawOAuth{Grant: "jwt_bearer", AssertionFile: "/id_token", IdPClientID: "x"}, "oauth.idp_token_endpoint"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := rawServer{Name: "docs", URL: u, OAuth: &tt.oauth}
			_, err := buildServer("F", originGlobal, "F", raw, getenv)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("buildServer() = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("buildServer() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
