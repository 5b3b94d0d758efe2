package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestParseWWWAuthenticate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		values []string
		want   []authChallenge
	}{
		{"bearer with params", []string{`Bearer resource_metadata="https://a.example/.well-known/x", scope="read write"`},
			[]authChallenge{{"bearer", map[string]string{"resource_metadata": "https://a.example/.well-known/x", "scope": "read write"}}}},
		{"several challenges", []string{`Basic realm="x", Bearer error="insufficient_scope", scope=admin`},
			[]authChallenge{{"basic", map[string]string{"realm": "x"}}, {"bearer", map[string]string{"error": "insufficient_scope", "scope": "admin"}}}},
		{"escapes and case", []string{`BEARER Error_Description="say \"no\", please"`},
			[]authChallenge{{"bearer", map[string]string{"error_description": `say "no", please`}}}},
		{"token68", []string{`Negotiate abc==, Bearer`},
			[]authChallenge{{"negotiate", map[string]string{"": "abc=="}}, {"bearer", map[string]string{}}}},
		{"two header values", []string{`Basic`, `Bearer scope="a"`},
			[]authChallenge{{"basic", map[string]string{}}, {"bearer", map[string]string{"scope": "a"}}}},
		{"empty", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := parseWWWAuthenticate(tt.values); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseWWWAuthenticate(%q) = %v, want %v", tt.values, got, tt.want)
			}
		})
	}
}

func TestMetadataURLs(t *testing.T) {
	t.Parallel()
	prm, _ := resourceMetadataURLs("https://mcp.example/api/mcp", "https://mcp.example/meta")
	wantPRM := []string{"https://mcp.example/meta", "https://mcp.example/.well-known/oauth-protected-resource/api/mcp", "https://mcp.example/.well-known/oauth-protected-resource"}
	if !slices.Equal(prm, wantPRM) {
		t.Errorf("resourceMetadataURLs = %q, want %q", prm, wantPRM)
	}
	tests := []struct {
		issuer string
		want   []string
	}{
		{"https://as.example", []string{"https://as.example/.well-known/oauth-authorization-server", "https://as.example/.well-known/openid-configuration"}},
		{"https://as.example/tenant1", []string{"https://as.example/.well-known/oauth-authorization-server/tenant1", "https://as.example/.well-known/openid-configuration/tenant1", "https://as.example/tenant1/.well-known/openid-configuration"}},
	}
	for _, tt := range tests {
		if got, _ := authServerMetadataURLs(tt.issuer); !slices.Equal(got, tt.want) {
			t.Errorf("authServerMetadataURLs(%q) = %q, want %q", tt.issuer, got, tt.want)
		}
	}
}

// fakeAS is an httptest authorization server whose metadata documents are
// served from a map of path to JSON (nil for 404) and that records every
// request path.
type fakeAS struct {
	srv   *httptest.Server
	docs  map[string]any
	paths []string
}

func newFakeAS(t *testing.T) *fakeAS {
	t.Helper()
	f := &fakeAS{docs: map[string]any{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.paths = append(f.paths, r.URL.Path)
		doc, ok := f.docs[r.URL.Path]
		switch {
		case !ok:
			http.NotFound(w, r)
		case doc == 500:
			http.Error(w, "boom", 500)
		default:
			json.NewEncoder(w).Encode(doc)
		}
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	type setup func(f *fakeAS, base string) (serverURL string, ch bearerChallenge)
	asDoc := func(issuer string) map[string]any {
		return map[string]any{"issuer": issuer, "authorization_endpoint": issuer + "/authorize", "token_endpoint": issuer + "/token"}
	}
	tests := []struct {
		name      string
		setup     setup
		wantErr   string
		wantRes   string
		wantPaths []string
	}{
		{"challenge metadata first", func(f *fakeAS, b string) (string, bearerChallenge) {
			f.docs["/custom.json"] = map[string]any{"resource": b + "/mcp", "authorization_servers": []string{b}}
			f.docs["/.well-known/oauth-authorization-server"] = asDoc(b)
			return b + "/mcp", bearerChallenge{ResourceMetadata: b + "/custom.json"}
		}, "", "/mcp", []string{"/custom.json", "/.well-known/oauth-authorization-server"}},
		{"path then root, then openid", func(f *fakeAS, b string) (string, bearerChallenge) {
			f.docs["/.well-known/oauth-protected-resource"] = map[string]any{"resource": b, "authorization_servers": []string{b + "/t1"}}
			f.docs["/t1/.well-known/openid-configuration"] = asDoc(b + "/t1")
			return b + "/mcp", bearerChallenge{}
		}, "", "", []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource",
			"/.well-known/oauth-authorization-server/t1", "/.well-known/openid-configuration/t1", "/t1/.well-known/openid-configuration"}},
		{"resource of another server", func(f *fakeAS, b string) (string, bearerChallenge) {
			f.docs["/.well-known/oauth-protected-resource/mcp"] = map[string]any{"resource": "https://evil.example/mcp", "authorization_servers": []string{b}}
			return b + "/mcp", bearerChallenge{}
		}, "not this server", "", nil},
		{"no authorization servers", func(f *fakeAS, b string) (string, bearerChallenge) {
			f.docs["/.well-known/oauth-protected-resource/mcp"] = map[string]any{"resource": b + "/mcp"}
			return b + "/mcp", bearerChallenge{}
		}, "no authorization_servers", "", nil},
		{"issuer mismatch", func(f *fakeAS, b string) (string, bearerChallenge) {
			f.docs["/.well-known/oauth-protected-resource/mcp"] = map[string]any{"resource": b + "/mcp", "authorization_servers": []string{b}}
			f.docs["/.well-known/oauth-authorization-server"] = asDoc("https://attacker.example")
			return b + "/mcp", bearerChallenge{}
		}, "refusing to use it", "", nil},
		{"5xx stops the search", func(f *fakeAS, b string) (string, bearerChallenge) {
			f.docs["/.well-known/oauth-protected-resource/mcp"] = map[string]any{"resource": b + "/mcp", "authorization_servers": []string{b}}
			f.docs["/.well-known/oauth-authorization-server"] = 500
			f.docs["/.well-known/openid-configuration"] = asDoc(b)
			return b + "/mcp", bearerChallenge{}
		}, "status 500", "", nil},
		{"2025-03-26 fallback endpoints", func(f *fakeAS, b string) (string, bearerChallenge) {
			return b + "/mcp", bearerChallenge{}
		}, "", "/mcp", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAS(t)
			base := f.srv.URL
			serverURL, ch := tt.setup(f, base)
			d, err := discoverAuthorization(t.Context(), http.DefaultClient, serverURL, ch)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("discover() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("discover() error = %v", err)
			}
			if d.Resource != base+tt.wantRes {
				t.Errorf("resource = %q, want %q", d.Resource, base+tt.wantRes)
			}
			if d.AS.TokenEndpoint == "" || d.AS.AuthorizationEndpoint == "" {
				t.Errorf("endpoints missing: %+v", d.AS)
			}
			if tt.wantPaths != nil && !slices.Equal(f.paths, tt.wantPaths) {
				t.Errorf("requested %q, want %q", f.paths, tt.wantPaths)
			}
		})
	}
}

func TestAuthorizationResponseIss(t *testing.T) {
	t.Parallel()
	const issuer = "https://as.example"
	tests := []struct {
		name       string
		advertised bool
		query      string
		wantErr    bool
	}{
		{"advertised, correct", true, "&iss=" + issuer, false},
		{"advertised, missing", true, "", true},
		{"advertised, wrong", true, "&iss=https://evil.example", true},
		{"advertised, normalized", true, "&iss=" + issuer + "/", true},
		{"not advertised, absent", false, "", false},
		{"not advertised, correct", false, "&iss=" + issuer, false},
		{"not advertised, wrong", false, "&iss=https://evil.example", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			as := authServerMetadata{Issuer: issuer, AuthorizationEndpoint: issuer + "/authorize", IssParameterSupported: tt.advertised}
			r := newAuthorizationRequest(as, oauthClientID{ClientID: "c"}, defaultRedirectURI, nil, "https://mcp.example/mcp")
			code, err := r.code(defaultRedirectURI + "?code=abc&state=" + r.State + tt.query)
			if (err != nil) != tt.wantErr || (err == nil && code != "abc") {
				t.Errorf("code() = %q, %v, want error %v", code, err, tt.wantErr)
			}
		})
	}
	r := newAuthorizationRequest(authServerMetadata{Issuer: issuer}, oauthClientID{}, defaultRedirectURI, nil, "")
	if _, err := r.code(defaultRedirectURI + "?code=abc&state=other"); err == nil {
		t.Error("code() accepted a foreign state")
	}
}

func TestAuthorizationURL(t *testing.T) {
	t.Parallel()
	as := authServerMetadata{Issuer: "https://as.example", AuthorizationEndpoint: "https://as.example/authorize?tenant=1"}
	r := newAuthorizationRequest(as, oauthClientID{ClientID: "cid"}, defaultRedirectURI, []string{"read", "write"}, "https://mcp.example/mcp")
	u, err := r.URL()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"tenant=1", "client_id=cid", "code_challenge_method=S256", "scope=read+write",
		"resource=https%3A%2F%2Fmcp.example%2Fmcp", "code_challenge=" + pkceChallenge(r.Verifier), "state=" + r.State} {
		if !strings.Contains(u, want) {
			t.Errorf("URL() = %s, missing %s", u, want)
		}
	}
	// RFC 7636 appendix B.
	if got := pkceChallenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"); got != "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM" {
		t.Errorf("pkceChallenge = %s", got)
	}
}

func TestSelectScopes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		configured []string
		challenge  []string
		prm, as    []string
		want       []string
	}{
		{"challenge first", nil, []string{"a"}, []string{"b"}, nil, []string{"a"}},
		{"then scopes_supported", nil, nil, []string{"b", "c"}, nil, []string{"b", "c"}},
		{"else none", nil, nil, nil, nil, nil},
		{"configured wins", []string{"x"}, []string{"a"}, nil, nil, []string{"x"}},
		{"offline_access when listed", nil, []string{"a"}, nil, []string{"a", "offline_access"}, []string{"a", "offline_access"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &oauthClient{cfg: oauthConfig{Scopes: tt.configured}}
			d := discovery{ScopesSupported: tt.prm, AS: authServerMetadata{ScopesSupported: tt.as}}
			if got := c.selectScopes(d, bearerChallenge{Scopes: tt.challenge}, grantAuthorizationCode); !slices.Equal(got, tt.want) {
				t.Errorf("selectScopes = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestChooseAuthMethod(t *testing.T) {
	t.Parallel()
	tests := []struct {
		supported []string
		secret    bool
		want      string
	}{
		{nil, true, authMethodBasic},
		{[]string{authMethodPost}, true, authMethodPost},
		{[]string{authMethodPost, authMethodBasic}, true, authMethodBasic},
		{[]string{authMethodBasic}, false, authMethodNone},
	}
	for _, tt := range tests {
		if got := chooseAuthMethod(tt.supported, tt.secret); got != tt.want {
			t.Errorf("chooseAuthMethod(%q, %v) = %s, want %s", tt.supported, tt.secret, got, tt.want)
		}
	}
}

func TestClientAssertion(t *testing.T) {
	t.Parallel()
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	tests := []struct {
		name   string
		pem    []byte
		alg    string
		verify func(signed string, sig []byte) bool
	}{
		{"ES256 PKCS8", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}), "ES256", func(signed string, sig []byte) bool {
			digest := sha256.Sum256([]byte(signed))
			return len(sig) == 64 && ecdsa.Verify(&ecKey.PublicKey, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
		}},
		{"RS256 PKCS1", pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)}), "RS256", func(signed string, sig []byte) bool {
			digest := sha256.Sum256([]byte(signed))
			return rsa.VerifyPKCS1v15(&rsaKey.PublicKey, 0x5, digest[:], sig) == nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := parseSigningKey(tt.pem, "")
			if err != nil || k.alg != tt.alg {
				t.Fatalf("parseSigningKey = %v, %v, want %s", k, err, tt.alg)
			}
			jwt, err := k.clientAssertion("client-1", "https://as.example")
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(jwt, ".")
			sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
			if !tt.verify(parts[0]+"."+parts[1], sig) {
				t.Errorf("signature of %s does not verify", tt.alg)
			}
			var claims map[string]any
			raw, _ := base64.RawURLEncoding.DecodeString(parts[1])
			json.Unmarshal(raw, &claims)
			if claims["iss"] != "client-1" || claims["sub"] != "client-1" || claims["aud"] != "https://as.example" || claims["jti"] == "" {
				t.Errorf("claims = %v", claims)
			}
		})
	}
	if _, err := parseSigningKey([]byte("junk"), ""); err == nil {
		t.Error("parseSigningKey accepted junk")
	}
	if _, err := parseSigningKey(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER}), "RS256"); err == nil {
		t.Error("parseSigningKey accepted an EC key for RS256")
	}
}

func TestTokenRequestError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(400)
		w.Write([]byte(`{"error":"invalid_grant","error_description":"revoked"}`))
	}))
	defer srv.Close()
	tr := &tokenRequestor{http: srv.Client(), endpoint: srv.URL, client: oauthClientID{ClientID: "c", AuthMethod: authMethodNone}}
	_, err := tr.refresh(context.Background(), oauthToken{RefreshToken: "secret-refresh-token"})
	var te *tokenError
	if !errors.As(err, &te) || !invalidGrant(err) {
		t.Fatalf("refresh() error = %v, want invalid_grant", err)
	}
	if strings.Contains(err.Error(), "secret-refresh-token") {
		t.Errorf("error %q shows the refresh token", err)
	}
}

func TestOAuthConfig(t *testing.T) {
	t.Parallel()
	env := map[string]string{"SECRET": "s3cr3t-value"}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tests := []struct {
		name    string
		raw     rawServer
		wantErr string
	}{
		{"client credentials", rawServer{URL: "https://mcp.example/mcp", OAuth: &rawOAuth{ClientID: "id", ClientSecret: "${SECRET}", Grant: "client_credentials", Scopes: []string{"read"}}}, ""},
		{"empty table", rawServer{URL: "https://mcp.example/mcp", OAuth: &rawOAuth{}}, ""},
		{"stdio server", rawServer{Command: "x", OAuth: &rawOAuth{}}, "oauth: only an http server"},
		{"unknown grant", rawServer{URL: "https://mcp.example/mcp", OAuth: &rawOAuth{Grant: "password"}}, `oauth.grant: "password" is not supported`},
		{"client credentials without secret", rawServer{URL: "https://mcp.example/mcp", OAuth: &rawOAuth{ClientID: "id", Grant: "client_credentials"}}, "needs client_secret or private_key_file"},
		{"relative key", rawServer{URL: "https://mcp.example/mcp", OAuth: &rawOAuth{ClientID: "id", Grant: "client_credentials", PrivateKeyFile: "key.pem"}}, "oauth.private_key_file: not an absolute path"},
		{"remote redirect", rawServer{URL: "https://mcp.example/mcp", OAuth: &rawOAuth{RedirectURI: "https://evil.example/cb"}}, "oauth.redirect_uri: must be a loopback"},
		{"scope with space", rawServer{URL: "https://mcp.example/mcp", OAuth: &rawOAuth{Scopes: []string{"a b"}}}, "oauth.scopes[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.raw.Name = "docs"
			s, err := buildServer("F", originGlobal, "F", tt.raw, getenv)
			if tt.wantErr == "" {
				if err != nil || s.OAuth == nil {
					t.Fatalf("buildServer() = %+v, %v", s.OAuth, err)
				}
				if tt.raw.OAuth.ClientSecret != "" && !slices.Contains(s.secretValues(), "s3cr3t-value") {
					t.Errorf("secretValues() = %q, want the client secret in it", s.secretValues())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("buildServer() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
