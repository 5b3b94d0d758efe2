package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests the Streamable HTTP transport against the fake server
// (httptransport_fake_test.go): answers as JSON and as event streams,
// sessions, status errors, the GET stream, resumption, close and
// redirects. The legacy SSE transport and the SSE parser are tested in
// httptransport_legacysse_test.go and httptransport_sse_test.go.

const (
	testSecret   = "s3cr3t-token-value"
	initRequest  = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`
	initAnswer   = `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`
	listRequest  = `{"jsonrpc":"2.0","id":7,"method":"tools/list"}`
	listAnswer   = `{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`
	initialized  = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	progressNote = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}`
	pingRequest  = `{"jsonrpc":"2.0","id":"s1","method":"ping"}`
)

func testConfig(url string) serverConfig {
	return serverConfig{
		Name:      "fake",
		Transport: transportHTTP,
		URL:       url,
		Headers:   map[string]string{"Authorization": "Bearer " + testSecret, "x-api-key": testSecret},
		Timeout:   defaultTimeout,
	}
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newTestStreamable returns a Streamable HTTP transport to url, closed at cleanup.
func newTestStreamable(t *testing.T, url string) *streamableTransport {
	t.Helper()
	tr := newStreamableTransport(testConfig(url), nil, discardLogger())
	t.Cleanup(func() { tr.close() })
	return tr
}

// A recvTransport is an HTTP transport read through its channel, as its
// listen relays it.
type recvTransport interface {
	mcpTransport
	recv() <-chan []byte
}

// receive returns the next n messages of tr, failing the test after 5s.
func receive(t *testing.T, tr recvTransport, n int) []string {
	t.Helper()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	var got []string
	for len(got) < n {
		select {
		case msg, ok := <-tr.recv():
			if !ok {
				t.Fatalf("recv closed after %d messages %q, want %d", len(got), got, n)
			}
			got = append(got, string(msg))
		case <-timer.C:
			t.Fatalf("recv: got %d messages %q within 5s, want %d", len(got), got, n)
		}
	}
	return got
}

// remaining closes tr and returns what recv still held; it fails the test
// if recv is not closed within 5s.
func remaining(t *testing.T, tr recvTransport) []string {
	t.Helper()
	done := make(chan struct{})
	go func() {
		tr.close()
		close(done)
	}()
	timer := time.NewTimer(5 * time.Second)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatal("close did not return within 5s")
	}
	var got []string
	for {
		select {
		case msg, ok := <-tr.recv():
			if !ok {
				return got
			}
			got = append(got, string(msg))
		case <-timer.C:
			t.Fatal("recv not closed within 5s of close")
		}
	}
}

func TestStreamableAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		send   string
		answer func(w http.ResponseWriter)
		want   []string
	}{
		{
			name:   "json answer",
			send:   listRequest,
			answer: func(w http.ResponseWriter) { writeJSONBody(w, listAnswer) },
			want:   []string{listAnswer},
		},
		{
			name:   "json batch",
			send:   listRequest,
			answer: func(w http.ResponseWriter) { writeJSONBody(w, "["+progressNote+", "+listAnswer+"]") },
			want:   []string{progressNote, listAnswer},
		},
		{
			name: "sse with a notification and a request before the answer",
			send: listRequest,
			answer: func(w http.ResponseWriter) {
				writeSSE(w, "event: message\ndata: "+progressNote+"\n\ndata: "+pingRequest+"\n\ndata: "+listAnswer+"\n\n")
			},
			want: []string{progressNote, pingRequest, listAnswer},
		},
		{
			name: "sse multi-line data with crlf",
			send: listRequest,
			answer: func(w http.ResponseWriter) {
				writeSSE(w, "data: {\"jsonrpc\":\"2.0\",\r\ndata: \"id\":7,\"result\":{}}\r\n\r\n")
			},
			want: []string{"{\"jsonrpc\":\"2.0\",\n\"id\":7,\"result\":{}}"},
		},
		{
			name: "sse skips comments, other events and empty data",
			send: listRequest,
			answer: func(w http.ResponseWriter) {
				writeSSE(w, "\xEF\xBB\xBF: keepalive\r\rid: 1\rretry: 5\rdata:\r\revent: ping\ndata: x\n\ndata: "+listAnswer+"\n\n")
			},
			want: []string{listAnswer},
		},
		{
			name:   "202 for a notification",
			send:   initialized,
			answer: func(w http.ResponseWriter) { w.WriteHeader(http.StatusAccepted) },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) { tt.answer(w) })
			tr := newTestStreamable(t, srv.URL)
			if err := tr.send(t.Context(), []byte(tt.send)); err != nil {
				t.Fatalf("send(%q) = %v, want nil", tt.send, err)
			}
			got := receive(t, tr, len(tt.want))
			if !slices.Equal(got, tt.want) {
				t.Errorf("recv after send(%q) = %q, want %q", tt.send, got, tt.want)
			}
			if extra := remaining(t, tr); len(extra) > 0 {
				t.Errorf("recv after send(%q) also held %q, want nothing more", tt.send, extra)
			}
			req := srv.requests()[0]
			if req.method != http.MethodPost || req.body != tt.send {
				t.Errorf("request = %s %q, want POST %q", req.method, req.body, tt.send)
			}
			if got, want := req.header.Get("Accept"), "application/json, text/event-stream"; got != want {
				t.Errorf("Accept = %q, want %q", got, want)
			}
			if got, want := req.header.Get("Content-Type"), "application/json"; got != want {
				t.Errorf("Content-Type = %q, want %q", got, want)
			}
		})
	}
}

// TestStreamableSession covers the session id, the protocol version header,
// configured headers on every request, a GET stream refused with 405 and
// the DELETE on close.
func TestStreamableSession(t *testing.T) {
	t.Parallel()
	gotGet := make(chan struct{})
	var once sync.Once
	srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet:
			once.Do(func() { close(gotGet) })
			w.WriteHeader(http.StatusMethodNotAllowed)
		case r.Method == http.MethodPost && strings.Contains(r.Header.Get("Accept"), "text/event-stream") && r.Header.Get("Mcp-Session-Id") == "":
			w.Header().Set("Mcp-Session-Id", "sess-1")
			writeJSONBody(w, initAnswer)
		default:
			w.WriteHeader(http.StatusAccepted)
		}
	})
	tr := newTestStreamable(t, srv.URL)
	if err := tr.send(t.Context(), []byte(initRequest)); err != nil {
		t.Fatalf("send(initialize) = %v, want nil", err)
	}
	receive(t, tr, 1)
	tr.setProtocolVersion("2025-11-25")
	if err := tr.send(t.Context(), []byte(initialized)); err != nil {
		t.Fatalf("send(initialized) = %v, want nil", err)
	}
	select {
	case <-gotGet:
	case <-time.After(5 * time.Second):
		t.Fatal("no GET stream request within 5s of the initialized notification")
	}
	if err := tr.send(t.Context(), []byte(progressNote)); err != nil {
		t.Fatalf("send after a refused GET stream = %v, want nil", err)
	}
	remaining(t, tr)

	reqs := srv.requests()
	var methods []string
	for i, req := range reqs {
		methods = append(methods, req.method)
		for _, name := range []string{"Authorization", "X-Api-Key"} {
			if !strings.Contains(req.header.Get(name), testSecret) {
				t.Errorf("request %d (%s) header %s = %q, want the configured value", i, req.method, name, req.header.Get(name))
			}
		}
		wantSession, wantVersion := "sess-1", "2025-11-25"
		if i == 0 {
			wantSession, wantVersion = "", ""
		}
		if got := req.header.Get("Mcp-Session-Id"); got != wantSession {
			t.Errorf("request %d (%s) Mcp-Session-Id = %q, want %q", i, req.method, got, wantSession)
		}
		if got := req.header.Get("Mcp-Protocol-Version"); got != wantVersion {
			t.Errorf("request %d (%s) MCP-Protocol-Version = %q, want %q", i, req.method, got, wantVersion)
		}
		if req.method == http.MethodGet && req.header.Get("Accept") != "text/event-stream" {
			t.Errorf("GET Accept = %q, want text/event-stream", req.header.Get("Accept"))
		}
	}
	slices.Sort(methods)
	if want := []string{"DELETE", "GET", "POST", "POST", "POST"}; !slices.Equal(methods, want) {
		t.Errorf("request methods = %q, want %q", methods, want)
	}
}

func TestStreamableStatusErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 2000)
	tests := []struct {
		name        string
		status      int
		body        string
		withSession bool
		wantIs      error
		wantStatus  int
		wantText    []string
	}{
		{name: "404 on a session expires it", status: 404, withSession: true, wantIs: errSessionExpired},
		{name: "404 without a session", status: 404, wantStatus: 404},
		{name: "405 without a session", status: 405, wantStatus: 405},
		{name: "400", status: 400, body: `{"error":"bad"}`, wantStatus: 400, wantText: []string{`{"error":"bad"}`}},
		{name: "401", status: 401, body: "token " + testSecret, wantStatus: 401, wantText: []string{"authentication failed", `"headers"`}},
		{name: "403", status: 403, wantStatus: 403, wantText: []string{"forbidden", `"headers"`}},
		{name: "500 with a long body", status: 500, body: long, wantStatus: 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
				if body, _ := io.ReadAll(r.Body); tt.withSession && string(body) == initRequest {
					w.Header().Set("Mcp-Session-Id", "sess-old")
					writeJSONBody(w, initAnswer)
					return
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			})
			tr := newTestStreamable(t, srv.URL)
			if tt.withSession {
				if err := tr.send(t.Context(), []byte(initRequest)); err != nil {
					t.Fatalf("send(initialize) = %v, want nil", err)
				}
				receive(t, tr, 1)
			}
			err := tr.send(t.Context(), []byte(listRequest))
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Fatalf("send(%q) = %v, want %v", listRequest, err, tt.wantIs)
			}
			if tt.wantStatus != 0 {
				var se *httpStatusError
				if !errors.As(err, &se) || se.StatusCode != tt.wantStatus {
					t.Fatalf("send(%q) = %v, want an *httpStatusError %d", listRequest, err, tt.wantStatus)
				}
				if len(se.Body) > statusBodyLimit {
					t.Errorf("httpStatusError body has %d bytes, want at most %d", len(se.Body), statusBodyLimit)
				}
			}
			for _, text := range tt.wantText {
				if !strings.Contains(err.Error(), text) {
					t.Errorf("send(%q) = %q, want it to contain %q", listRequest, err, text)
				}
			}
			if strings.Contains(err.Error(), testSecret) {
				t.Errorf("send(%q) = %q, want no header value in it", listRequest, err)
			}
			if tt.withSession {
				tr.send(t.Context(), []byte(initRequest))
				reqs := srv.requests()
				if got := reqs[len(reqs)-1].header.Get("Mcp-Session-Id"); got != "" {
					t.Errorf("Mcp-Session-Id after expiry = %q, want none", got)
				}
			}
		})
	}
}

// TestStreamableGetStream checks that the GET stream delivers a server
// request and resumes with Last-Event-ID after the server drops it.
func TestStreamableGetStream(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		gets   int
		lastID string
	)
	srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			if body, _ := io.ReadAll(r.Body); string(body) == initRequest {
				w.Header().Set("Mcp-Session-Id", "sess-1")
				writeJSONBody(w, initAnswer)
				return
			}
			w.WriteHeader(http.StatusAccepted)
			return
		}
		if r.Method != http.MethodGet {
			return
		}
		mu.Lock()
		gets++
		n := gets
		if n == 2 {
			lastID = r.Header.Get("Last-Event-Id")
		}
		mu.Unlock()
		if n == 1 {
			writeSSE(w, "retry: 10\nid: e1\ndata: "+pingRequest+"\n\n")
			return
		}
		writeSSE(w, "id: e2\ndata: "+progressNote+"\n\n")
		<-r.Context().Done()
	})
	tr := newTestStreamable(t, srv.URL)
	if err := tr.send(t.Context(), []byte(initRequest)); err != nil {
		t.Fatalf("send(initialize) = %v, want nil", err)
	}
	receive(t, tr, 1)
	tr.setProtocolVersion("2025-11-25")
	if err := tr.send(t.Context(), []byte(initialized)); err != nil {
		t.Fatalf("send(initialized) = %v, want nil", err)
	}
	got := receive(t, tr, 2)
	if want := []string{pingRequest, progressNote}; !slices.Equal(got, want) {
		t.Errorf("GET stream messages = %q, want %q", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if lastID != "e1" {
		t.Errorf("Last-Event-ID of the reconnection = %q, want %q", lastID, "e1")
	}
}

// TestStreamableAnswerStreamBreaks checks resumption of a POST's answer
// stream and the error answer made up when it cannot be resumed.
func TestStreamableAnswerStreamBreaks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		post     string
		get      string
		wantText []string
	}{
		{
			name:     "resumed with get",
			post:     "id: p1\nretry: 10\ndata:\n\n",
			get:      "id: p2\ndata: " + listAnswer + "\n\n",
			wantText: []string{listAnswer},
		},
		{
			name:     "no event ids",
			post:     "data: " + progressNote + "\n\n",
			wantText: []string{progressNote, `"id":7,"error":{"code":-32000,"message":"response stream ended before the answer`},
		},
		{
			name:     "resumption refused",
			post:     "id: p1\nretry: 10\ndata:\n\n",
			wantText: []string{`"id":7,"error":{"code":-32000,"message":"response stream ended before the answer: resume`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodPost:
					writeSSE(w, tt.post)
				case tt.get != "" && r.Header.Get("Last-Event-Id") == "p1":
					writeSSE(w, tt.get)
				default:
					w.WriteHeader(http.StatusMethodNotAllowed)
				}
			})
			tr := newTestStreamable(t, srv.URL)
			if err := tr.send(t.Context(), []byte(listRequest)); err != nil {
				t.Fatalf("send(%q) = %v, want nil", listRequest, err)
			}
			got := receive(t, tr, len(tt.wantText))
			for i, want := range tt.wantText {
				if !strings.Contains(got[i], want) {
					t.Errorf("message %d = %q, want it to contain %q", i, got[i], want)
				}
			}
		})
	}
}

func TestStreamableClose(t *testing.T) {
	t.Parallel()
	srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			writeSSE(w, ": the answer never comes\n\n")
			<-r.Context().Done()
		}
	})
	tr := newTestStreamable(t, srv.URL)
	if err := tr.send(t.Context(), []byte(listRequest)); err != nil {
		t.Fatalf("send(%q) = %v, want nil", listRequest, err)
	}
	if got := remaining(t, tr); len(got) > 0 {
		t.Errorf("recv after close held %q, want nothing", got)
	}
	if err := tr.close(); err != nil {
		t.Errorf("second close() = %v, want nil", err)
	}
	if err := tr.send(t.Context(), []byte(listRequest)); !errors.Is(err, errTransportClosed) {
		t.Errorf("send after close = %v, want %v", err, errTransportClosed)
	}
	if err := tr.endErr(); err != nil {
		t.Errorf("err() after close = %v, want nil", err)
	}
}

func TestStreamableNoGoroutineLeak(t *testing.T) {
	baseline := runtime.NumGoroutine()
	srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet:
			writeSSE(w, "data: "+progressNote+"\n\n")
			<-r.Context().Done()
		case http.MethodPost:
			w.Header().Set("Mcp-Session-Id", "sess-1")
			writeSSE(w, "data: "+listAnswer+"\n\n")
		}
	})
	tr := newStreamableTransport(testConfig(srv.URL), nil, discardLogger())
	// A client of its own: the shared one's pool holds other tests'
	// connections, and closing its idle ones would close theirs.
	client := newHTTPClient(nil)
	tr.client = client
	tr.setProtocolVersion("2025-11-25")
	for range 3 {
		if err := tr.send(t.Context(), []byte(listRequest)); err != nil {
			t.Fatalf("send(%q) = %v, want nil", listRequest, err)
		}
	}
	receive(t, tr, 4)
	remaining(t, tr)
	srv.Close()
	client.CloseIdleConnections()
	eventually(5*time.Second, func() bool {
		runtime.Gosched()
		return runtime.NumGoroutine() <= baseline
	})
	if n := runtime.NumGoroutine(); n > baseline {
		buf := make([]byte, 1<<16)
		t.Errorf("goroutines after close = %d, want at most %d:\n%s", n, baseline, buf[:runtime.Stack(buf, true)])
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	other := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) { writeJSONBody(w, listAnswer) })
	tests := []struct {
		name    string
		target  func(srvURL string) string
		wantErr string
	}{
		{name: "same origin followed", target: func(srvURL string) string { return srvURL + "/moved" }},
		{name: "other origin refused", target: func(string) string { return other.URL + "/mcp" }, wantErr: "another origin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var srv *fakeMCP
			srv = newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/moved" {
					writeJSONBody(w, listAnswer)
					return
				}
				http.Redirect(w, r, tt.target(srv.URL), http.StatusTemporaryRedirect)
			})
			tr := newTestStreamable(t, srv.URL+"/mcp")
			err := tr.send(t.Context(), []byte(listRequest))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("send(%q) = %v, want nil", listRequest, err)
				}
				receive(t, tr, 1)
				if got := srv.requests()[1].header.Get("X-Api-Key"); got != testSecret {
					t.Errorf("redirected request X-Api-Key = %q, want the configured value", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("send(%q) = %v, want an error containing %q", listRequest, err, tt.wantErr)
			}
			if n := len(other.requests()); n != 0 {
				t.Errorf("other origin got %d requests, want 0", n)
			}
		})
	}
}

func TestJSONRPCShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		msg       string
		hasMethod bool
		id        string
	}{
		{msg: listRequest, hasMethod: true, id: "7"},
		{msg: listAnswer, id: "7"},
		{msg: initialized, hasMethod: true},
		{msg: `{"result":{"method":"x","id":9,"s":"a\"}\\"},"id":"q\"1"}`, id: `"q\"1"`},
		{msg: ` { "id" : [1, {"a":"]"}] , "method":null } `, hasMethod: true, id: `[1, {"a":"]"}]`},
		{msg: `[1]`},
		{msg: `{"id":`},
		{msg: `{"id":1,"method`},
	}
	for _, tt := range tests {
		hasMethod, id := jsonrpcShape([]byte(tt.msg))
		if hasMethod != tt.hasMethod || string(id) != tt.id {
			t.Errorf("jsonrpcShape(%q) = %v, %q, want %v, %q", tt.msg, hasMethod, id, tt.hasMethod, tt.id)
		}
	}
}

// TestStreamableAnswerOutlivesCancel checks that an SSE answer stream is
// read to its end after the caller cancels send's ctx on the answer, so
// its connection can be reused.
func TestStreamableAnswerOutlivesCancel(t *testing.T) {
	t.Parallel()
	cancelled := make(chan struct{})
	srv := newFakeHTTPServer(t, func(w http.ResponseWriter, r *http.Request) {
		writeSSE(w, "data: "+listAnswer+"\n\n")
		select {
		case <-cancelled:
		case <-r.Context().Done():
			return
		}
		writeSSE(w, "data: "+progressNote+"\n\n")
	})
	tr := newTestStreamable(t, srv.URL)
	ctx, cancel := context.WithCancel(t.Context())
	if err := tr.send(ctx, []byte(listRequest)); err != nil {
		t.Fatalf("send(%q) = %v, want nil", listRequest, err)
	}
	receive(t, tr, 1)
	cancel()
	close(cancelled)
	if got := receive(t, tr, 1); got[0] != progressNote {
		t.Errorf("message after the answer = %q, want %q", got[0], progressNote)
	}
}
