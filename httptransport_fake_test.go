package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// This file holds the one fake Streamable HTTP MCP server of the tests,
// fakeMCP: it records every request, lets a test script any answer, and
// answers the rest as a plain MCP server of the 2025-11-25 revision.

// A fakeMCPConfig says how a fakeMCP behaves. The zero value is a server
// with one echo tool that answers every request.
type fakeMCPConfig struct {
	// Script sees every request first (GET and DELETE too, with a zero
	// message) and answers it by writing the response and returning true;
	// returning false leaves the request to the default answers. The
	// request's body can be read again.
	Script func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool
	// Name is the serverInfo name the handshake answers; "scripted" if empty.
	Name string
	// Capabilities are the server capabilities the handshake answers;
	// tools (with listChanged) and resources if nil.
	Capabilities map[string]any
	// Tools names the tools of the default tools/list answer; echo if empty.
	Tools []string
	// Sessions refuses, with 404 and before Script sees it, every POST but
	// initialize whose session id the server did not hand out or has ended.
	Sessions bool
}

// An mcpExchange is one JSON-RPC message POSTed to a fakeMCP.
type mcpExchange struct {
	Method    string
	ID        json.RawMessage
	Params    json.RawMessage
	SessionID string
}

// A recordedRequest is what a fakeMCP saw of one HTTP request.
type recordedRequest struct {
	method string // the HTTP method
	path   string
	header http.Header
	body   string
	msg    mcpExchange // the JSON-RPC message of a POST; zero otherwise
}

// A fakeMCP is the Streamable HTTP MCP server of the tests. Its default
// answers: 405 to anything but POST, 400 to a body that is not one
// JSON-RPC message, initialize with a new session id ("session-1",
// "session-2", ...), 202 to notifications and answers, tools/list with
// the configured tools, tools/call echoing its "message" argument, and
// -32601 to any other method. Safe for concurrent use; closed at cleanup.
type fakeMCP struct {
	*httptest.Server
	cfg fakeMCPConfig

	mu sync.Mutex
	// guards reqs, sessions and handedOut
	reqs      []recordedRequest
	sessions  map[string]bool // the live session ids
	handedOut int
	changed   chan struct{} // 1-buffered: a request arrived since the last wait
}

// text is a tools/call result holding one text block.
func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

// newFakeMCP starts a fake server configured by cfg, closed at cleanup.
func newFakeMCP(t testing.TB, cfg fakeMCPConfig) *fakeMCP {
	t.Helper()
	s := fakeMCPHandler(cfg)
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

// fakeMCPHandler returns a fake server configured by cfg without starting
// it (its Server is nil), for a test whose own server hands it requests
// through ServeHTTP.
func fakeMCPHandler(cfg fakeMCPConfig) *fakeMCP {
	if cfg.Name == "" {
		cfg.Name = "scripted"
	}
	if cfg.Capabilities == nil {
		cfg.Capabilities = map[string]any{"tools": map[string]any{"listChanged": true}, "resources": map[string]any{}}
	}
	if len(cfg.Tools) == 0 {
		cfg.Tools = []string{"echo"}
	}
	return &fakeMCP{cfg: cfg, sessions: map[string]bool{}, changed: make(chan struct{}, 1)}
}

// newScriptedMCP starts a fake server whose answers script scripts (see
// fakeMCPConfig.Script).
func newScriptedMCP(t testing.TB, script func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool) *fakeMCP {
	t.Helper()
	return newFakeMCP(t, fakeMCPConfig{Script: script})
}

// newFakeHTTPServer starts a fake server whose every answer is handler's,
// for the transport tests that script the bytes on the wire.
func newFakeHTTPServer(t testing.TB, handler http.HandlerFunc) *fakeMCP {
	t.Helper()
	return newFakeMCP(t, fakeMCPConfig{Script: func(w http.ResponseWriter, r *http.Request, _ mcpExchange) bool {
		handler(w, r)
		return true
	}})
}

// ServeHTTP records the request and answers it: by the script if it
// answers, else by the default answers.
func (s *fakeMCP) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m mcpExchange
	var msg wireMessage
	parsed := r.Method == http.MethodPost && json.Unmarshal(body, &msg) == nil
	if parsed {
		m = mcpExchange{Method: msg.Method, ID: msg.ID, Params: msg.Params, SessionID: r.Header.Get(headerSessionID)}
	}
	s.mu.Lock()
	s.reqs = append(s.reqs, recordedRequest{method: r.Method, path: r.URL.Path, header: r.Header.Clone(), body: string(body), msg: m})
	known := s.sessions[m.SessionID]
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
	if s.cfg.Sessions && parsed && m.Method != "initialize" && !known {
		http.Error(w, "unknown session", http.StatusNotFound)
		return
	}
	if s.cfg.Script != nil && s.cfg.Script(w, r, m) {
		return
	}
	switch {
	case r.Method != http.MethodPost:
		w.WriteHeader(http.StatusMethodNotAllowed)
	case !parsed:
		http.Error(w, "bad json", http.StatusBadRequest)
	case m.Method == "initialize":
		s.mu.Lock()
		s.handedOut++
		sid := "session-" + strconv.Itoa(s.handedOut)
		s.sessions[sid] = true
		s.mu.Unlock()
		w.Header().Set(headerSessionID, sid)
		writeRPCResult(w, m.ID, map[string]any{
			"protocolVersion": latestProtocolVersion,
			"capabilities":    s.cfg.Capabilities,
			"serverInfo":      map[string]any{"name": s.cfg.Name, "version": "1"},
		})
	case len(m.ID) == 0:
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/list":
		var tools []any
		for _, name := range s.cfg.Tools {
			tools = append(tools, map[string]any{"name": name, "inputSchema": map[string]any{"type": "object"}})
		}
		writeRPCResult(w, m.ID, map[string]any{"tools": tools})
	case m.Method == "tools/call":
		var p struct {
			Arguments struct {
				Message string `json:"message"`
			} `json:"arguments"`
		}
		json.Unmarshal(m.Params, &p)
		writeRPCResult(w, m.ID, text(p.Arguments.Message))
	default:
		writeRPCError(w, m.ID, codeMethodNotFound, "no such method "+m.Method)
	}
}

// endSession forgets the session id sid: with Sessions set, its next
// requests are refused with 404.
func (s *fakeMCP) endSession(sid string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.sessions, sid)
}

// requests returns a copy of the requests seen so far, in order.
func (s *fakeMCP) requests() []recordedRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// received returns the messages seen so far with the given method.
func (s *fakeMCP) received(method string) []mcpExchange {
	var out []mcpExchange
	for _, r := range s.requests() {
		if r.msg.Method == method {
			out = append(out, r.msg)
		}
	}
	return out
}

// methods returns the JSON-RPC methods (or, for other HTTP methods, the
// HTTP method) of the requests received, in order.
func (s *fakeMCP) methods() []string {
	var out []string
	for _, r := range s.requests() {
		m := r.msg.Method
		if r.method != http.MethodPost {
			m = r.method
		}
		out = append(out, m)
	}
	return out
}

// count returns how many requests of the JSON-RPC method s received.
func (s *fakeMCP) count(method string) int {
	return len(s.received(method))
}

// waitFor waits until the server has received a message with method that
// satisfies match, and returns it; it fails the test after waitLimit.
func (s *fakeMCP) waitFor(t *testing.T, method string, match func(mcpExchange) bool) mcpExchange {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for {
		for _, m := range s.received(method) {
			if match(m) {
				return m
			}
		}
		select {
		case <-s.changed:
		case <-timer.C:
			t.Fatalf("waiting for %s: not received within %v", method, waitLimit)
		}
	}
}

// scriptedConfig returns the config of an inferred http server at s.
func scriptedConfig(name string, s *fakeMCP) serverConfig {
	cfg := httpPeerConfig(name, transportHTTP, s.URL)
	cfg.TransportInferred = true
	cfg.Timeout = 5 * time.Second
	cfg.StartupTimeout = 5 * time.Second
	return cfg
}

// writeRPCResult writes a JSON answer with result for id. <, > and & go
// out unescaped, as servers in other languages send them.
func writeRPCResult(w http.ResponseWriter, id json.RawMessage, result any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

// writeRPCError writes a JSON answer with the error code and message for id.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": message}})
}

// writeSSE writes a 200 event-stream answer made of the given raw text.
func writeSSE(w http.ResponseWriter, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, text)
	w.(http.Flusher).Flush()
}

// writeJSONBody writes a 200 JSON answer.
func writeJSONBody(w http.ResponseWriter, body string) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, body)
}
