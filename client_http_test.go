package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// This file tests the client against the scripted fake Streamable HTTP
// server (httptransport_fake_test.go): session expiry, pagination limits,
// timeouts that send notifications/cancelled, and auth errors.

// TestClientSessionExpiry answers a call with 404 for its session: the
// client initializes a new session once and resends, and gives up if the
// new session is refused too.
func TestClientSessionExpiry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		expireAll  bool // every session is refused, not only the first
		wantErr    string
		wantInits  int
		wantCalled []string // the session ids the calls carried
	}{
		{name: "first session expires", wantInits: 2, wantCalled: []string{"session-1", "session-2"}},
		{name: "every session expires", expireAll: true, wantErr: "session expired", wantInits: 2, wantCalled: []string{"session-1", "session-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
				if m.Method == "tools/call" && (tt.expireAll || m.SessionID == "session-1") {
					http.Error(w, "unknown session", http.StatusNotFound)
					return true
				}
				return false
			})
			c := connectPeer(t, scriptedConfig("expiring", s), clientOptions{})
			res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"again"}`))
			switch {
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("callTool() = %v, want error containing %q", err, tt.wantErr)
				}
			case err != nil:
				t.Errorf("callTool() = %v, want success after re-initializing", err)
			case resultText(t, res) != "again":
				t.Errorf("callTool() = %q, want %q", resultText(t, res), "again")
			}
			if got := len(s.received("initialize")); got != tt.wantInits {
				t.Errorf("initialize requests = %d, want %d", got, tt.wantInits)
			}
			initialized := s.received("notifications/initialized")
			if len(initialized) != tt.wantInits || initialized[len(initialized)-1].SessionID != fmt.Sprintf("session-%d", tt.wantInits) {
				t.Errorf("notifications/initialized = %+v, want one per session, the last on session-%d", initialized, tt.wantInits)
			}
			var called []string
			for _, m := range s.received("tools/call") {
				called = append(called, m.SessionID)
			}
			if !slices.Equal(called, tt.wantCalled) {
				t.Errorf("tools/call sessions = %q, want %q", called, tt.wantCalled)
			}
		})
	}
}

// TestClientSessionExpiryConcurrentCall makes a call while another call's
// re-initialize is under way: it must wait for the new session rather than
// go out without one (which servers refuse with 400). The server answers
// the re-initialize after 300ms, or at once when a request without a
// session arrives.
func TestClientSessionExpiryConcurrentCall(t *testing.T) {
	t.Parallel()
	var inits atomic.Int32
	sessionless := make(chan struct{}, 1)
	s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
		switch {
		case m.Method == "initialize":
			if inits.Add(1) > 1 {
				timer := time.NewTimer(300 * time.Millisecond)
				defer timer.Stop()
				select {
				case <-sessionless:
				case <-timer.C:
				case <-r.Context().Done():
				}
			}
			return false
		case m.SessionID == "":
			select {
			case sessionless <- struct{}{}:
			default:
			}
			http.Error(w, "Bad Request: No valid session ID provided", http.StatusBadRequest)
			return true
		case m.SessionID == "session-1" && m.Method == "tools/call":
			http.Error(w, "session not found", http.StatusNotFound)
			return true
		}
		return false
	})
	c := connectPeer(t, scriptedConfig("expiring", s), clientOptions{})
	first := make(chan error, 1)
	// Owned by the test; ends when the call returns (bounded by the timeout).
	go func() {
		_, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"first"}`))
		first <- err
	}()
	s.waitFor(t, "initialize", func(mcpExchange) bool { return inits.Load() == 2 })
	res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"second"}`))
	if err != nil || resultText(t, res) != "second" {
		t.Errorf("callTool(second) during re-initialize = %v, %v, want %q", res, err, "second")
	}
	if err := <-first; err != nil {
		t.Errorf("callTool(first) = %v, want success after re-initializing", err)
	}
	if got := inits.Load(); got != 2 {
		t.Errorf("initialize requests = %d, want 2", got)
	}
}

// TestClientPaginationLimits lists tools and resources from servers whose
// cursors never end: a repeated cursor stops at once, fresh cursors after
// maxPages.
func TestClientPaginationLimits(t *testing.T) {
	t.Parallel()
	list := map[string]func(c *mcpClient, ctx context.Context) (int, error){
		"tools/list": func(c *mcpClient, ctx context.Context) (int, error) {
			tools, err := c.listTools(ctx)
			return len(tools), err
		},
		"resources/list": func(c *mcpClient, ctx context.Context) (int, error) {
			resources, err := c.listResources(ctx)
			return len(resources), err
		},
	}
	tests := []struct {
		name      string
		method    string
		next      func(cursor string) string
		wantPages int
	}{
		{"tools repeated cursor", "tools/list", func(string) string { return "same" }, 2},
		{"tools endless cursors", "tools/list", func(cursor string) string { return cursor + "+" }, maxPages},
		{"resources repeated cursor", "resources/list", func(string) string { return "same" }, 2},
		{"resources endless cursors", "resources/list", func(cursor string) string { return cursor + "+" }, maxPages},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
				if m.Method != tt.method {
					return false
				}
				var p struct {
					Cursor string `json:"cursor"`
				}
				json.Unmarshal(m.Params, &p)
				item := map[string]any{"name": "item" + p.Cursor, "uri": "test://item" + p.Cursor}
				key := strings.TrimSuffix(tt.method, "/list")
				writeRPCResult(w, m.ID, map[string]any{key: []any{item}, "nextCursor": tt.next(p.Cursor)})
				return true
			})
			c := connectPeer(t, scriptedConfig("paging", s), clientOptions{})
			got, err := list[tt.method](c, t.Context())
			if err != nil {
				t.Fatalf("%s = %v", tt.method, err)
			}
			if got != tt.wantPages {
				t.Errorf("%s = %d items, want %d (one per page)", tt.method, got, tt.wantPages)
			}
			if got := len(s.received(tt.method)); got != tt.wantPages {
				t.Errorf("%s requests = %d, want %d", tt.method, got, tt.wantPages)
			}
		})
	}
}

// TestClientTimeoutSendsCancelled calls a tool the server never answers,
// once holding an SSE answer open and once holding the POST itself (as a
// JSON-response server does): the call fails with errTimeout and the
// server receives notifications/cancelled for it.
func TestClientTimeoutSendsCancelled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		openStream bool
	}{
		{"sse answer never ends", true},
		{"post never answered", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
				if m.Method != "tools/call" || !strings.Contains(string(m.Params), `"slow"`) {
					return false
				}
				if tt.openStream {
					writeSSE(w, ": working\n\n")
				}
				select {
				case <-r.Context().Done():
				case <-release:
				}
				return true
			})
			t.Cleanup(func() { close(release) }) // before the server closes
			cfg := scriptedConfig("slow", s)
			cfg.Timeout = 300 * time.Millisecond
			c := connectPeer(t, cfg, clientOptions{})
			_, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"slow"}`))
			if !errors.Is(err, errTimeout) || !strings.Contains(err.Error(), "timeout 300ms") {
				t.Fatalf("callTool() = %v, want errTimeout naming the timeout 300ms", err)
			}
			call := s.received("tools/call")[0]
			s.waitFor(t, "notifications/cancelled", func(m mcpExchange) bool {
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
				}
				return json.Unmarshal(m.Params, &p) == nil && bytes.Equal(p.RequestID, call.ID)
			})
			if got, want := callText(t, c, "echo", `{"message":"afterwards"}`), "afterwards"; got != want {
				t.Errorf("echo after a timeout = %q, want %q", got, want)
			}
		})
	}
}

// TestClientAuthErrors refuses initialize with 401 and 403: connect fails
// with a distinct error naming the server and saying to check its headers,
// never showing the header's value, and does not try legacy SSE.
func TestClientAuthErrors(t *testing.T) {
	t.Parallel()
	const secret = "tok-3f9a61c2"
	tests := []struct {
		status int
		want   []string
	}{
		{http.StatusUnauthorized, []string{`server "secured"`, "authentication failed", `check the "headers"`}},
		{http.StatusForbidden, []string{`server "secured"`, "access forbidden", `check the "headers"`}},
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "go away", tt.status)
			})
			cfg := httpPeerConfig("secured", transportHTTP, srv.URL)
			cfg.TransportInferred = true
			cfg.Headers = map[string]string{"Authorization": "Bearer " + secret}
			c, err := connect(t.Context(), cfg, clientOptions{Logger: discardLogger()})
			if err == nil {
				c.close()
				t.Fatalf("connect() succeeded, want a %d error", tt.status)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("connect() = %v, want it to contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("connect() = %v, shows the Authorization header's value", err)
			}
			var methods []string
			for _, r := range srv.requests() {
				methods = append(methods, r.method)
			}
			if !slices.Equal(methods, []string{http.MethodPost}) {
				t.Errorf("requests = %q, want one POST (no legacy SSE fallback on %d)", methods, tt.status)
			}
		})
	}
}
