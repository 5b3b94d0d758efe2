package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file tests what harnessd does with servers whose URL the operator
// did not write (per-run servers of a non-admin key), and with HTTP servers
// whose answers are not MCP.

func TestPerRunURLOfNonAdminIsGuarded(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// bannerAddr starts a loopback TCP service that is not HTTP: it reads an
// HTTP request, answers with line, as an SSH server's banner, and hangs
// up. It returns its host:port.
func bannerAddr(t *testing.T, line string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	// Owned by the test; ends when the listener is closed at its end.
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if req, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
				io.Copy(io.Discard, req.Body)
			}
			c.Write([]byte(line + "\r\n"))
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// closedAddr returns a loopback host:port that nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUntrustedPeerErrorsAreGeneric points a non-admin key's webhook_url
// and per-run server url at a loopback service that is not HTTP, at a
// closed port and at an HTTP server answering 500 with a page: the run's
// view for that key (its error, its webhook's last_error, its servers)
// and its events give a fixed reason, the same for the banner as for the
// closed port, without the peer's bytes; an admin key's view of the same
// run gives the detail.
func TestUntrustedPeerErrorsAreGeneric(t *testing.T) {
	t.Parallel()
	const banner = "internal-banner-secret"
	const page = "internal-page-content"
	http500 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, page, http.StatusInternalServerError)
	}))
	t.Cleanup(http500.Close)
	tests := []struct {
		name       string
		kind       string // "webhook" or "server"
		addr       string
		wantReason string // in the non-admin view
		wantDetail string // in the admin view, never in the non-admin one
	}{
		{name: "webhook to a service that is not HTTP", kind: "webhook", addr: bannerAddr(t, "SSH-2.0 "+banner), wantReason: peerUnreachable, wantDetail: banner},
		{name: "webhook to a closed port", kind: "webhook", addr: closedAddr(t), wantReason: peerUnreachable, wantDetail: "connection refused"},
		{name: "webhook answered 500", kind: "webhook", addr: strings.TrimPrefix(http500.URL, "http://"), wantReason: "HTTP status 500", wantDetail: page},
		{name: "server that is not HTTP", kind: "server", addr: bannerAddr(t, "SSH-2.0 "+banner), wantReason: peerUnreachable, wantDetail: banner},
		{name: "server at a closed port", kind: "server", addr: closedAddr(t), wantReason: peerUnreachable, wantDetail: "connection refused"},
	}
	webhooks := 0
	for _, tt := range tests {
		if tt.kind == "webhook" {
			webhooks++
		}
	}
	f := newFakeModel(t, providerOpenAI, slices.Repeat([]fakeTurn{{Text: "done"}}, webhooks)...)
	m := newWebhookRuns(t, f, "", webhookTiming{MaxAttempts: 1})
	const adminToken, writerToken = "Bearer admin-token-0123456789", "Bearer writer-token-0123456789"
	a := newAPI(m, m.opts.Registry, []authKey{
		testKey("admin", strings.TrimPrefix(adminToken, "Bearer "), scopeAdmin),
		testKey("writer", strings.TrimPrefix(writerToken, "Bearer "), scopeRunsWrite),
	}, m.opts.Metrics, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client(), api: a, runs: m}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"prompt":"x","webhook_url":"http://%s/hook"}`, tt.addr)
			if tt.kind == "server" {
				body = fmt.Sprintf(`{"prompt":"x","mcp_servers":[{"name":"s","url":"http://%s/mcp"}]}`, tt.addr)
			}
			resp, data := at.do(t, "POST", "/v1/runs", writerToken, body)
			var started struct {
				RunID string `json:"run_id"`
			}
			if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &started) != nil {
				t.Fatalf("POST /v1/runs = %d %s, want 202", resp.StatusCode, data)
			}
			r := m.get(started.RunID)
			waitRun(t, r)
			if tt.kind == "webhook" {
				waitWebhook(t, r)
			}
			_, writerView := at.do(t, "GET", "/v1/runs/"+r.id, writerToken, "")
			_, adminView := at.do(t, "GET", "/v1/runs/"+r.id, adminToken, "")
			_, events := at.do(t, "GET", "/v1/runs/"+r.id+"/events", writerToken, "")
			// A webhook's outcome is in the view only; a server's failure is
			// in the events too.
			seen := map[string][]byte{"the writer's view": writerView, "the events": events}
			for what, text := range seen {
				if strings.Contains(string(text), tt.wantDetail) || (!strings.Contains(string(text), tt.wantReason) && (tt.kind == "server" || what != "the events")) {
					t.Errorf("%s = %s\nwant %q without %q", what, text, tt.wantReason, tt.wantDetail)
				}
			}
			if !strings.Contains(string(adminView), tt.wantDetail) {
				t.Errorf("the admin's view = %s\nwant the detail %q", adminView, tt.wantDetail)
			}
		})
	}
}
