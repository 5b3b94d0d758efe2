package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// This file tests what harnessd does with servers whose URL the operator
// did not write (per-run servers of a non-admin key), and with HTTP servers
// whose answers are not MCP.

func TestPerRunURLOfNonAdminIsGuarded(t *testing.T) {
	f := newFakeModel(t, providerOpenAI)
	at := newAPITest(t, f, []authKey{testKey("writer", "writer-token-0123456789", scopeRunsWrite)})
	tests := []struct {
		url        string
		allowHosts []string
		want       string
	}{
		{url: "http://169.254.169.254/latest/meta-data/", want: "link-local or metadata address"},
		{url: "http://[fd00:ec2::254]/", want: "link-local or metadata address"},
		{url: "http://[::ffff:169.254.169.254]/", want: "link-local or metadata address"},
		{url: "http://127.0.0.1:9/mcp", allowHosts: []string{"*.tools.example"}, want: `host \"127.0.0.1\" is not in [connect_mcp] allow_hosts`},
	}
	for _, tt := range tests {
		at.runs.opts.AllowHosts = tt.allowHosts
		body := fmt.Sprintf(`{"prompt":"x","mcp_servers":[{"name":"s","url":%q}]}`, tt.url)
		resp, data := at.do(t, "POST", "/v1/runs", "Bearer writer-token-0123456789", body)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(data), tt.want) {
			t.Errorf("POST /v1/runs with url %q as runs:write = %d %s, want 403 containing %q", tt.url, resp.StatusCode, data, tt.want)
		}
	}
}

func TestNonAdminServerBodiesAreNotEchoed(t *testing.T) {
	const page = "internal-page-content"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, page, http.StatusInternalServerError)
	}))
	t.Cleanup(srv.Close)
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "admin"}, fakeTurn{Text: "writer"})
	m := newTestRuns(t, f)
	servers := json.RawMessage(fmt.Sprintf(`[{"name":"s","url":%q,"required":false}]`, srv.URL))
	for _, tt := range []struct {
		admin    bool
		wantBody bool
	}{{admin: true, wantBody: true}, {admin: false, wantBody: false}} {
		r, err := m.start(runRequest{Prompt: "x", MCPServers: servers}, tt.admin)
		if err != nil {
			t.Fatal(err)
		}
		waitRun(t, r)
		events, _, _ := r.eventsAfter(0)
		b, _ := json.Marshal(events)
		if !strings.Contains(string(b), "http status 500") || strings.Contains(string(b), page) != tt.wantBody {
			t.Errorf("events of a run (admin %v) with a server answering 500 = %s; want the status, with the body %v", tt.admin, b, tt.wantBody)
		}
	}
}

func TestNonMCPAnswerFailsAtOnce(t *testing.T) {
	tests := []struct {
		name        string
		contentType string
		body        string
		want        string
	}{
		{name: "text", contentType: "text/plain; charset=utf-8", body: "hello from a web server", want: `200 with Content-Type "text/plain; charset=utf-8" and "hello from a web server"`},
		{name: "html", contentType: "text/html", body: "<html>login</html>", want: `"<html>login</html>"`},
		{name: "empty", contentType: "application/json", body: "", want: "an empty body"},
		{name: "json but not JSON-RPC", contentType: "application/json", body: `{"status":"ok"}`, want: `"{\"status\":\"ok\"}"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			cfg := serverConfig{Name: "web", Transport: transportHTTP, URL: srv.URL, Timeout: 30 * time.Second, StartupTimeout: 30 * time.Second, Enabled: true}
			start := time.Now()
			_, err := connect(t.Context(), cfg, clientOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "is the url an MCP endpoint?") {
				t.Fatalf("connect(%s answering %q) = %v, want an error containing %q", tt.name, tt.body, err, tt.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("connect(%s) failed after %v, want at once", tt.name, d)
			}
		})
	}
}
