package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// This file tests how the console is served (headers, compression,
// ETags, its size budget, the text-only rule of its scripts) and
// GET /v1/whoami. The pages themselves are tested in a browser
// (api_console_browser_test.go).

// consoleBudget is the most the console's files may weigh before
// compression (the README's figure).
const consoleBudget = 150 << 10

// consoleGet serves GET path with headers (name, value pairs) through the
// API's handler into a recorder, as from a loopback client that neither
// follows redirects nor decompresses, and returns the answer and body.
func consoleGet(t *testing.T, at *apiTest, path string, header ...string) (*http.Response, []byte) {
	t.Helper()
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, at.url+path, nil)
	req.RemoteAddr = "127.0.0.1:50000"
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	at.api.ServeHTTP(w, req)
	return w.Result(), w.Body.Bytes()
}

func TestConsoleServing(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	index := consoleFiles()["index.html"]
	tests := []struct {
		name     string
		path     string
		header   []string
		status   int
		want     map[string]string // response headers
		wantBody []byte            // nil: not checked
	}{
		{"root redirects", "/", nil, http.StatusFound, map[string]string{"Location": "/ui/"}, nil},
		{"index plain", "/ui/", nil, http.StatusOK, map[string]string{
			"Content-Type":            "text/html; charset=utf-8",
			"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"Content-Encoding":        "",
			"ETag":                    index.etag,
		}, index.plain},
		{"index gzipped", "/ui/index.html", []string{"Accept-Encoding", "br, gzip;q=0.8"}, http.StatusOK,
			map[string]string{"Content-Encoding": "gzip", "Vary": "Accept-Encoding"}, index.plain},
		{"gzip refused", "/ui/", []string{"Accept-Encoding", "gzip;q=0"}, http.StatusOK, map[string]string{"Content-Encoding": ""}, index.plain},
		{"script type", "/ui/app.js", nil, http.StatusOK, map[string]string{"Content-Type": "text/javascript; charset=utf-8"}, consoleFiles()["app.js"].plain},
		{"etag matches", "/ui/", []string{"If-None-Match", index.etag}, http.StatusNotModified, map[string]string{"ETag": index.etag}, []byte{}},
		{"weak etag matches", "/ui/", []string{"If-None-Match", `"x", W/` + index.etag}, http.StatusNotModified, nil, []byte{}},
		{"stale etag", "/ui/", []string{"If-None-Match", `"stale"`}, http.StatusOK, nil, index.plain},
		{"unknown file", "/ui/nope.js", nil, http.StatusNotFound, map[string]string{"Content-Type": "application/json"}, nil},
		{"dot-dot leaves the console", "/ui/../config.toml", nil, http.StatusTemporaryRedirect, map[string]string{"Location": "/config.toml"}, nil},
		{"no directory", "/ui/ui/", nil, http.StatusNotFound, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := consoleGet(t, at, tt.path, tt.header...)
			if resp.StatusCode != tt.status {
				t.Fatalf("GET %s = %d %s, want %d", tt.path, resp.StatusCode, body, tt.status)
			}
			for k, v := range tt.want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("GET %s: %s = %q, want %q", tt.path, k, got, v)
				}
			}
			if resp.Header.Get("Content-Encoding") == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatalf("GET %s: gzip: %v", tt.path, err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatalf("GET %s: gunzip: %v", tt.path, err)
				}
			}
			if tt.wantBody != nil && !bytes.Equal(body, tt.wantBody) {
				t.Errorf("GET %s: body of %d bytes, want the %d bytes of the file", tt.path, len(body), len(tt.wantBody))
			}
		})
	}
	if resp, body := at.do(t, http.MethodPost, "/ui/", "", "{}", "Content-Type", "application/json"); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/ = %d %s, want 405", resp.StatusCode, body)
	}
}

func TestConsoleBudgetAndTextOnly(t *testing.T) {
	t.Parallel()
	total := 0
	// Script sinks that would parse text as HTML or code.
	sinks := regexp.MustCompile(`\.innerHTML|\.outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|createContextualFragment|srcdoc`)
	imports := regexp.MustCompile(`from '\./([a-z]+\.js)'`)
	for name, f := range consoleFiles() {
		total += len(f.plain)
		if strings.HasSuffix(name, ".js") {
			if m := sinks.Find(f.plain); m != nil {
				t.Errorf("ui/%s uses %s: insert text with textContent or dom.js's h()", name, m)
			}
			for _, m := range imports.FindAllSubmatch(f.plain, -1) {
				if consoleFiles()[string(m[1])] == nil {
					t.Errorf("ui/%s imports %s, which is not embedded", name, m[1])
				}
			}
		}
	}
	if total > consoleBudget {
		t.Errorf("the console weighs %d bytes before compression, over its budget of %d", total, consoleBudget)
	}
	html := string(consoleFiles()["index.html"].plain)
	for _, bad := range []string{"<style", " style=", "javascript:"} {
		if strings.Contains(strings.ToLower(html), bad) {
			t.Errorf("index.html has %q: the CSP allows no inline style or script", bad)
		}
	}
	if m := regexp.MustCompile(`(?i)\son[a-z]+=`).FindString(html); m != "" {
		t.Errorf("index.html has an inline handler %q: the CSP refuses it", m)
	}
	for _, m := range regexp.MustCompile(`<script[^>]*>`).FindAllString(html, -1) {
		if !strings.Contains(m, `src="`) {
			t.Errorf("index.html has an inline script %s: the CSP refuses it", m)
		}
	}
	for _, m := range regexp.MustCompile(`(?:src|href)="([a-z.]+)"`).FindAllStringSubmatch(html, -1) {
		if consoleFiles()[m[1]] == nil {
			t.Errorf("index.html names %s, which is not embedded", m[1])
		}
	}
}

func TestWhoami(t *testing.T) {
	t.Parallel()
	keys := []authKey{testKey("ops", "ops-token-0123456789", scopeAdmin), testKey("viewer", "viewer-token-0123456789", scopeRunsRead)}
	on := newAPITest(t, newFakeModel(t, providerOpenAI), keys)
	off := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	tests := []struct {
		name   string
		at     *apiTest
		auth   string
		status int
		want   string
	}{
		{"auth off", off, "", http.StatusOK, `{"auth":false,"key":"","tenant":"","scopes":["runs:read","runs:write","admin"]}`},
		{"admin", on, "Bearer ops-token-0123456789", http.StatusOK, `{"auth":true,"key":"ops","tenant":"ops","scopes":["admin"]}`},
		{"viewer", on, "Bearer viewer-token-0123456789", http.StatusOK, `{"auth":true,"key":"viewer","tenant":"viewer","scopes":["runs:read"]}`},
		{"no key", on, "", http.StatusUnauthorized, ""},
		{"wrong key", on, "Bearer nope-0123456789", http.StatusUnauthorized, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := tt.at.do(t, http.MethodGet, "/v1/whoami", tt.auth, "")
			if resp.StatusCode != tt.status {
				t.Fatalf("GET /v1/whoami = %d %s, want %d", resp.StatusCode, body, tt.status)
			}
			if tt.want == "" {
				return
			}
			var got, want any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("GET /v1/whoami: %v in %s", err, body)
			}
			json.Unmarshal([]byte(tt.want), &want)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("GET /v1/whoami = %s, want %s", body, tt.want)
			}
		})
	}
}
