package main

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// This file tests the legacy HTTP+SSE transport (2024-11-05) against a
// fake server: the endpoint event, relayed answers, and failures to connect.

// legacyServer is a fake 2024-11-05 server: GET /sse announces endpoint
// (built from the server's URL) and relays, as message events, the
// answer to every POST /messages. A GET ends its stream after the
// endpoint when hangUp is set.
func legacyServer(t *testing.T, endpoint func(srvURL string) string, hangUp bool) *fakeMCP {
	t.Helper()
	answers := make(chan string, 8)
	var srv *fakeMCP
	srv = newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/sse":
			writeSSE(w, "event: endpoint\ndata: "+endpoint(srv.URL)+"\n\n")
			if hangUp {
				return
			}
			for {
				select {
				case a := <-answers:
					writeSSE(w, "event: message\ndata: "+a+"\n\n")
				case <-r.Context().Done():
					return
				}
			}
		case r.Method == http.MethodPost && r.URL.Path == "/messages":
			w.WriteHeader(http.StatusAccepted)
			answers <- listAnswer
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	})
	return srv
}

func TestSSETransport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		endpoint func(srvURL string) string
		wantErr  string
	}{
		{name: "root-relative endpoint", endpoint: func(string) string { return "/messages?sessionId=abc" }},
		{name: "path-relative endpoint", endpoint: func(string) string { return "messages?sessionId=abc" }},
		{name: "absolute endpoint", endpoint: func(u string) string { return u + "/messages?sessionId=abc" }},
		{name: "cross-origin endpoint", endpoint: func(string) string { return "http://other.example/messages" }, wantErr: "another origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := legacyServer(t, tt.endpoint, false)
			tr, err := newSSETransport(t.Context(), testConfig(srv.URL+"/sse"), nil, discardLogger())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("newSSETransport = %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("newSSETransport = %v, want nil", err)
			}
			t.Cleanup(func() { tr.close() })
			if err := tr.send(t.Context(), []byte(listRequest)); err != nil {
				t.Fatalf("send(%q) = %v, want nil", listRequest, err)
			}
			if got := receive(t, tr, 1); got[0] != listAnswer {
				t.Errorf("recv = %q, want %q", got[0], listAnswer)
			}
			remaining(t, tr)
			for _, req := range srv.requests() {
				if got := req.header.Get("X-Api-Key"); got != testSecret {
					t.Errorf("%s %s X-Api-Key = %q, want the configured value", req.method, req.path, got)
				}
				if req.method == http.MethodPost && (req.path != "/messages" || req.body != listRequest) {
					t.Errorf("POST %s %q, want POST /messages %q", req.path, req.body, listRequest)
				}
			}
			if err := tr.endErr(); err != nil {
				t.Errorf("err() after close = %v, want nil", err)
			}
		})
	}
}

func TestSSETransportStreamEnds(t *testing.T) {
	t.Parallel()
	srv := legacyServer(t, func(string) string { return "/messages" }, true)
	tr, err := newSSETransport(t.Context(), testConfig(srv.URL+"/sse"), nil, discardLogger())
	if err != nil {
		t.Fatalf("newSSETransport = %v, want nil", err)
	}
	t.Cleanup(func() { tr.close() })
	select {
	case _, ok := <-tr.recv():
		if ok {
			t.Fatal("recv delivered a message, want it closed")
		}
	case <-time.After(30 * time.Second): // bounds a failure only; a loaded machine is slow
		t.Fatal("recv not closed within 30s of the stream's end")
	}
	if err := tr.endErr(); err == nil || !strings.Contains(err.Error(), "sse stream closed by server") {
		t.Errorf("err() = %v, want it to say the sse stream closed", err)
	}
	if err := tr.send(t.Context(), []byte(listRequest)); !errors.Is(err, errTransportClosed) {
		t.Errorf("send after the stream ended = %v, want %v", err, errTransportClosed)
	}
}

func TestSSETransportConnectFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{
			name: "no endpoint event",
			handler: func(w http.ResponseWriter, r *http.Request) {
				writeSSE(w, ": waiting\n\n")
				<-r.Context().Done()
			},
			wantErr: "waiting for the endpoint event",
		},
		{
			name:    "unauthorized",
			handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) },
			wantErr: "authentication failed",
		},
		{
			name:    "not an event stream",
			handler: func(w http.ResponseWriter, r *http.Request) { writeJSONBody(w, "{}") },
			wantErr: "not text/event-stream",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeHTTPServer(t, tt.handler)
			// Only "no endpoint event" waits it out; 200ms proved too short
			// for the response headers to arrive first on a loaded machine.
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			_, err := newSSETransport(ctx, testConfig(srv.URL), nil, discardLogger())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("newSSETransport = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
