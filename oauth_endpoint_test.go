package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheckOAuthEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		url string
		ok  bool
	}{
		{"https://as.example.com/token", true},
		{"HTTPS://as.example.com/token", true},
		{"http://127.0.0.1:8080/token", true},
		{"http://127.9.9.9/token", true},
		{"http://localhost:9000/token", true},
		{"http://[::1]:9000/token", true},
		{"http://10.9.9.9:18912/token", false},
		{"http://as.example.com/token", false},
		{"http://localhost.evil.example/token", false},
		{"http://[::ffff:10.0.0.1]/token", false},
		{"ftp://as.example.com/token", false},
		{"/token", false},
	}
	for _, tt := range tests {
		err := checkOAuthEndpoint("token_endpoint", tt.url)
		if (err == nil) != tt.ok {
			t.Errorf("checkOAuthEndpoint(%q) = %v, want ok %v", tt.url, err, tt.ok)
		}
		if err != nil && (!strings.Contains(err.Error(), "token_endpoint") || !strings.Contains(err.Error(), tt.url)) {
			t.Errorf("checkOAuthEndpoint(%q) = %v, want the field and the url named", tt.url, err)
		}
	}
}

// TestLoginRefusesCleartextEndpoints serves authorization server metadata
// whose endpoints are plain http to another host: the login must fail
// naming the field and the url, before anything is sent there.
func TestLoginRefusesCleartextEndpoints(t *testing.T) {
	t.Parallel()
	tests := []struct{ field, url string }{
		{"token_endpoint", "http://10.9.9.9:18912/token"},
		{"authorization_endpoint", "http://10.9.9.9:18912/authorize"},
		{"registration_endpoint", "http://10.9.9.9:18912/register"},
		{"jwks_uri", "http://10.9.9.9:18912/jwks"},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			var srv *httptest.Server
			srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/.well-known/oauth-protected-resource/mcp":
					json.NewEncoder(w).Encode(map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{srv.URL}})
				case "/.well-known/oauth-authorization-server":
					meta := map[string]any{"issuer": srv.URL, "authorization_endpoint": srv.URL + "/authorize", "token_endpoint": srv.URL + "/token",
						"registration_endpoint": srv.URL + "/register", "code_challenge_methods_supported": []string{"S256"}}
					meta[tt.field] = tt.url
					json.NewEncoder(w).Encode(meta)
				case "/mcp":
					w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
					w.WriteHeader(http.StatusUnauthorized)
				default:
					t.Errorf("unexpected request %s %s", r.Method, r.URL.Path)
					w.WriteHeader(http.StatusNotFound)
				}
			}))
			t.Cleanup(srv.Close)
			c := newOAuthClient(serverConfig{Name: "docs", URL: srv.URL + "/mcp", Transport: transportHTTP}, nil, srv.Client(), discardLogger())
			_, err := c.startLogin(t.Context(), nil)
			if err == nil || !strings.Contains(err.Error(), tt.field) || !strings.Contains(err.Error(), tt.url) || !strings.Contains(err.Error(), "https") {
				t.Errorf("startLogin = %v, want a refusal naming %s and %s", err, tt.field, tt.url)
			}
		})
	}
}
