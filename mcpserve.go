package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file holds harnessd's MCP server: the /mcp endpoint over Streamable
// HTTP (POST, GET, DELETE), the revisions it speaks (initialize with
// Mcp-Session-Id sessions up to 2025-11-25, and 2026-07-28 without
// sessions, every request carrying its revision in _meta), the sessions,
// and the dispatch of requests and notifications. The tools are in
// mcpserve_tools.go, the resources in mcpserve_resources.go. Every check
// of the API applies: the Host/Origin guard, the bearer key and its
// scopes, and a key sees only its tenant's runs.

// MCP server limits.
const (
	// maxMCPSessions bounds the open sessions; beyond it the session idle
	// longest is ended to make room.
	maxMCPSessions = 1024
	// mcpSessionIdle ends a session nobody used for that long.
	mcpSessionIdle = time.Hour
	// mcpStreamBuffer bounds the messages waiting for a session's GET
	// stream; beyond it notifications are dropped (the client re-reads).
	mcpStreamBuffer = 64
)

// MCP error codes the server sends beyond JSON-RPC's own.
const (
	// codeResourceNotFound: resources/read of an unknown (or not visible)
	// resource.
	codeResourceNotFound = -32002
	// codeParseError: the body is not one JSON-RPC message.
	codeParseError = -32700
)

// mcpServerInstructions tell a host's model what harnessd is for.
const mcpServerInstructions = "harnessd runs agent tasks: an LLM with harnessd's own MCP servers, approvals and budgets. " +
	"Use run to hand it a task and get the answer; start_run and wait_run for long ones; decide_approval and answer_input when a run waits."

// An mcpServer serves /mcp for one api: its sessions, and the calls in
// flight of clients without a session. Safe for concurrent use.
type mcpServer struct {
	api *api

	mu sync.Mutex
	// guards sessions and stateless
	sessions map[string]*mcpSession
	// stateless are the calls in flight of 2026-07-28 clients, by their
	// key's name and request id, so notifications/cancelled finds them.
	stateless map[string]*mcpInflight
}

// An mcpSession is one client's session (revisions up to 2025-11-25): the
// revision and capabilities initialize settled, the key it belongs to,
// its calls in flight, the server requests waiting for the client's
// answer, its subscriptions and its GET stream. Safe for concurrent use.
type mcpSession struct {
	id      string
	version string
	key     string // the name of the key that opened it; "" with auth off
	// elicitation: the client declared the elicitation capability.
	elicitation bool
	// ctx ends when the session does (DELETE, expiry, shutdown of /mcp).
	ctx    context.Context
	cancel context.CancelFunc
	// stream carries server messages to the GET stream.
	stream chan []byte

	mu sync.Mutex
	// guards everything below
	lastUsed  time.Time
	listening bool                            // a GET stream is open
	inflight  map[string]*mcpInflight         // by request id
	pending   map[string]chan json.RawMessage // server requests, by id
	nextID    int
	subs      map[string]context.CancelFunc // resource subscriptions, by URI
}

// An mcpInflight is one request being served: cancelling it ends the call
// and, for a held run, the run (mcpCall.hold).
type mcpInflight struct {
	cancel context.CancelCauseFunc
}

// errMCPCancelled is the cause of a call the client cancelled with
// notifications/cancelled.
var errMCPCancelled = errors.New("cancelled by the client")

// mountMCP serves the MCP server at /mcp. Every method needs the runs:read
// scope; the tools that start or change runs need runs:write.
func (a *api) mountMCP() {
	s := &mcpServer{api: a, sessions: map[string]*mcpSession{}, stateless: map[string]*mcpInflight{}}
	a.route("/mcp", map[string]route{
		http.MethodPost:   {scopeRunsRead, s.post},
		http.MethodGet:    {scopeRunsRead, s.listen},
		http.MethodDelete: {scopeRunsRead, s.end},
	})
}

// An mcpMessage is a JSON-RPC message a client sends.
type mcpMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// An mcpOutgoing is a JSON-RPC message the server sends.
type mcpOutgoing struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  any             `json:"params,omitempty"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// The params every request may carry: its _meta (progress token, and at
// 2026-07-28 the revision).
type mcpRequestMeta struct {
	Meta struct {
		ProgressToken   json.RawMessage `json:"progressToken,omitempty"`
		ProtocolVersion string          `json:"io.modelcontextprotocol/protocolVersion,omitempty"`
	} `json:"_meta"`
}

// An mcpCall is one request being served: who sent it, at which revision,
// in which session (nil at 2026-07-28), and where its answer goes. Its
// stream is set when the answer is SSE, so the call can send progress and
// requests before its response.
type mcpCall struct {
	srv     *mcpServer
	info    authInfo
	sess    *mcpSession
	version string
	id      json.RawMessage
	// progressToken is the request's, or nil.
	progressToken json.RawMessage
	// elicitation: the client takes elicitation/create on this call's
	// stream.
	elicitation bool
	stream      *mcpStream
}

// rpcFail returns a JSON-RPC error with code and message.
func rpcFail(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// post answers POST /mcp: one JSON-RPC message. A response (to a server
// request) and a notification are 202; a request is answered as JSON, or
// as SSE when it may send progress or requests first.
func (s *mcpServer) post(w http.ResponseWriter, r *http.Request, info authInfo) {
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		writeRPCStatus(w, http.StatusBadRequest, nil, rpcFail(codeParseError, "request body: over the %d byte limit (1 MiB) or unreadable: send a smaller message", maxRequestBody))
		return
	}
	var msg mcpMessage
	if err := json.Unmarshal(data, &msg); err != nil {
		hint := ""
		if bytes.HasPrefix(bytes.TrimSpace(data), []byte("[")) {
			hint = " (batches are not supported: send one message per POST)"
		}
		writeRPCStatus(w, http.StatusBadRequest, nil, rpcFail(codeParseError, "request body: not one JSON-RPC message%s: %v", hint, err))
		return
	}
	if msg.JSONRPC != "2.0" {
		writeRPCStatus(w, http.StatusBadRequest, msg.ID, rpcFail(codeInvalidRequest, `jsonrpc %q: want "2.0"`, msg.JSONRPC))
		return
	}
	if msg.Method == "initialize" {
		s.initialize(w, msg, info)
		return
	}
	call, rpcErr, status := s.callFor(r, msg, info)
	if rpcErr != nil {
		writeRPCStatus(w, status, msg.ID, rpcErr)
		return
	}
	switch {
	case msg.Method == "" && len(msg.ID) > 0:
		if call.sess != nil {
			call.sess.deliver(msg)
		}
		w.WriteHeader(http.StatusAccepted)
	case msg.Method == "":
		writeRPCStatus(w, http.StatusBadRequest, nil, rpcFail(codeInvalidRequest, "a message needs a method (a request or notification) or an id (a response)"))
	case len(msg.ID) == 0:
		s.notification(call, msg)
		w.WriteHeader(http.StatusAccepted)
	default:
		s.request(w, r, call, msg)
	}
}

// callFor returns the call msg makes: in the session Mcp-Session-Id names
// (404 for an unknown one or another key's), or without a session at
// 2026-07-28. Anything else is a 400 saying what to send.
func (s *mcpServer) callFor(r *http.Request, msg mcpMessage, info authInfo) (*mcpCall, *rpcError, int) {
	var meta mcpRequestMeta
	if len(msg.Params) > 0 {
		json.Unmarshal(msg.Params, &meta) // lenient: a bad _meta is no _meta
	}
	call := &mcpCall{srv: s, info: info, id: msg.ID, progressToken: meta.Meta.ProgressToken}
	if len(call.progressToken) == 0 || string(call.progressToken) == "null" {
		call.progressToken = nil
	}
	if id := r.Header.Get(headerSessionID); id != "" {
		sess := s.session(id, info)
		if sess == nil {
			return nil, rpcFail(codeInvalidRequest, "session %q: not found (ended, expired, or opened with another key): send initialize again", id), http.StatusNotFound
		}
		call.sess, call.version, call.elicitation = sess, sess.version, sess.elicitation
		return call, nil, 0
	}
	version := meta.Meta.ProtocolVersion
	if version == "" {
		version = r.Header.Get(headerProtocolVersion)
	}
	switch {
	case isSessionlessVersion(version):
	case msg.Method == "server/discover" && version == "":
		version = sessionlessProtocolVersion
	case version == "" || slices.Contains(knownProtocolVersions, version):
		return nil, rpcFail(codeInvalidRequest, "no Mcp-Session-Id: send initialize first and then the session id it gives, or speak %s and put io.modelcontextprotocol/protocolVersion in every request's _meta", sessionlessProtocolVersion), http.StatusBadRequest
	default:
		return nil, &rpcError{Code: codeUnsupportedVersion, Message: fmt.Sprintf("protocol version %q: not supported; harnessd speaks %s without sessions, and %s with initialize", version, sessionlessProtocolVersion, strings.Join(knownProtocolVersions, ", ")),
			Data: encodeJSON(map[string]any{"supported": sessionlessProtocolVersions, "requested": version})}, http.StatusBadRequest
	}
	// Without a session a request to the client has no way back: a
	// 2026-07-28 client is asked nothing (elicitation stays false), and
	// a run's approvals wait for the API or the console.
	call.version = version
	return call, nil, 0
}

// encodeJSON encodes v, which cannot fail to encode.
func encodeJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// initialize answers initialize: it opens a session at the revision the
// client asks for when harnessd speaks it, else at the newest it speaks,
// and names it in Mcp-Session-Id.
func (s *mcpServer) initialize(w http.ResponseWriter, msg mcpMessage, info authInfo) {
	var p struct {
		ProtocolVersion string         `json:"protocolVersion"`
		Capabilities    map[string]any `json:"capabilities"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || len(msg.ID) == 0 {
		writeRPCStatus(w, http.StatusBadRequest, msg.ID, rpcFail(codeInvalidParams, "initialize: want a request with params {protocolVersion, capabilities, clientInfo}"))
		return
	}
	version := latestProtocolVersion
	if slices.Contains(knownProtocolVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	_, elicitation := p.Capabilities["elicitation"]
	sess := s.open(version, info, elicitation && version >= "2025-06-18")
	w.Header().Set(headerSessionID, sess.id)
	s.api.logger.Info("mcp session opened", "session", sess.id, "version", version, "key", info.key)
	writeRPCStatus(w, http.StatusOK, msg.ID, nil, map[string]any{
		"protocolVersion": version,
		"capabilities":    mcpCapabilities(version),
		"serverInfo":      implementation{Name: "harnessd", Version: buildVersion},
		"instructions":    mcpServerInstructions,
	})
}

// mcpCapabilities returns the server's capabilities at version:
// resource subscriptions need a session.
func mcpCapabilities(version string) map[string]any {
	resources := map[string]any{"listChanged": false}
	if !isSessionlessVersion(version) {
		resources["subscribe"] = true
	}
	return map[string]any{"tools": map[string]any{"listChanged": false}, "resources": resources}
}

// open starts a session for info's key, ending the one idle longest when
// maxMCPSessions are open, and those idle over mcpSessionIdle.
func (s *mcpServer) open(version string, info authInfo, elicitation bool) *mcpSession {
	ctx, cancel := context.WithCancel(context.Background())
	sess := &mcpSession{id: newID("mcp_"), version: version, key: info.key, elicitation: elicitation, ctx: ctx, cancel: cancel,
		stream: make(chan []byte, mcpStreamBuffer), lastUsed: time.Now(),
		inflight: map[string]*mcpInflight{}, pending: map[string]chan json.RawMessage{}, subs: map[string]context.CancelFunc{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest *mcpSession
	for _, other := range s.sessions {
		used := other.used()
		if time.Since(used) > mcpSessionIdle {
			s.closeLocked(other)
			continue
		}
		if oldest == nil || used.Before(oldest.used()) {
			oldest = other
		}
	}
	if len(s.sessions) >= maxMCPSessions && oldest != nil {
		s.closeLocked(oldest)
	}
	s.sessions[sess.id] = sess
	return sess
}

// used returns when the session last served a message.
func (sess *mcpSession) used() time.Time {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.lastUsed
}

// session returns session id when info's key opened it, marking it used;
// else nil.
func (s *mcpServer) session(id string, info authInfo) *mcpSession {
	s.mu.Lock()
	sess := s.sessions[id]
	s.mu.Unlock()
	if sess == nil || sess.key != info.key {
		return nil
	}
	sess.mu.Lock()
	sess.lastUsed = time.Now()
	sess.mu.Unlock()
	return sess
}

// closeLocked ends sess: its subscriptions and waits end, its calls in
// flight are cancelled (their runs go on). s.mu must be held.
func (s *mcpServer) closeLocked(sess *mcpSession) {
	delete(s.sessions, sess.id)
	sess.cancel()
}

// end answers DELETE /mcp: the session ends (204); 404 for an unknown
// one, 405 without a session.
func (s *mcpServer) end(w http.ResponseWriter, r *http.Request, info authInfo) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		w.Header().Set("Allow", "POST")
		writeRPCStatus(w, http.StatusMethodNotAllowed, nil, rpcFail(codeInvalidRequest, "DELETE /mcp ends a session: send its Mcp-Session-Id"))
		return
	}
	sess := s.session(id, info)
	if sess == nil {
		writeRPCStatus(w, http.StatusNotFound, nil, rpcFail(codeInvalidRequest, "session %q: not found", id))
		return
	}
	s.mu.Lock()
	s.closeLocked(sess)
	s.mu.Unlock()
	s.api.logger.Info("mcp session ended", "session", sess.id, "key", info.key)
	w.WriteHeader(http.StatusNoContent)
}

// listen answers GET /mcp: the session's stream of server messages
// (resource updates), as SSE, until the session ends, the client goes
// away, or harnessd shuts down. One stream per session (409 for a
// second); 405 without a session (2026-07-28 has no such stream).
func (s *mcpServer) listen(w http.ResponseWriter, r *http.Request, info authInfo) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		w.Header().Set("Allow", "POST")
		writeRPCStatus(w, http.StatusMethodNotAllowed, nil, rpcFail(codeInvalidRequest, "GET /mcp is a session's stream: send its Mcp-Session-Id"))
		return
	}
	sess := s.session(id, info)
	if sess == nil {
		writeRPCStatus(w, http.StatusNotFound, nil, rpcFail(codeInvalidRequest, "session %q: not found", id))
		return
	}
	sess.mu.Lock()
	busy := sess.listening
	sess.listening = true
	sess.mu.Unlock()
	if busy {
		writeRPCStatus(w, http.StatusConflict, nil, rpcFail(codeInvalidRequest, "session %q: a GET stream is already open: keep one", id))
		return
	}
	defer func() {
		sess.mu.Lock()
		sess.listening = false
		sess.mu.Unlock()
	}()
	st := s.openStream(w)
	if st == nil {
		return
	}
	heartbeat := time.NewTicker(s.api.heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case msg := <-sess.stream:
			if st.write(msg) != nil {
				return
			}
		case <-heartbeat.C:
			if st.comment("keep-alive") != nil {
				return
			}
		case <-sess.ctx.Done():
			return
		case <-r.Context().Done():
			return
		case <-s.api.stopping:
			return
		}
	}
}

// notify queues a notification for the session's GET stream; when the
// stream is not read fast enough, it is dropped.
func (sess *mcpSession) notify(method string, params any) {
	msg := encodeJSON(mcpOutgoing{JSONRPC: "2.0", Method: method, Params: params})
	select {
	case sess.stream <- msg:
	default:
	}
}

// notification handles a client notification: notifications/cancelled
// cancels the call it names; the others need nothing.
func (s *mcpServer) notification(call *mcpCall, msg mcpMessage) {
	if msg.Method != "notifications/cancelled" {
		return
	}
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(msg.Params, &p) != nil || len(p.RequestID) == 0 {
		return
	}
	if in := s.inflight(call, p.RequestID); in != nil {
		in.cancel(errMCPCancelled)
	}
}

// inflightKey returns where call's request id is kept: in its session, or
// by key name among the stateless calls.
func inflightKey(call *mcpCall, id json.RawMessage) string {
	if call.sess != nil {
		return string(id)
	}
	return call.info.key + "\x00" + string(id)
}

// inflight returns the call in flight that call's client names id, or nil.
func (s *mcpServer) inflight(call *mcpCall, id json.RawMessage) *mcpInflight {
	key := inflightKey(call, id)
	if call.sess != nil {
		call.sess.mu.Lock()
		defer call.sess.mu.Unlock()
		return call.sess.inflight[key]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateless[key]
}

// track records call as in flight until the returned func is called; its
// context ends when the client cancels the call (cause errMCPCancelled),
// when the request does, or when the session ends.
func (s *mcpServer) track(ctx context.Context, call *mcpCall) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	in := &mcpInflight{cancel: cancel}
	key := inflightKey(call, call.id)
	if call.sess != nil {
		stop := context.AfterFunc(call.sess.ctx, func() { cancel(errors.New("session ended")) })
		call.sess.mu.Lock()
		call.sess.inflight[key] = in
		call.sess.mu.Unlock()
		return ctx, func() {
			stop()
			call.sess.mu.Lock()
			if call.sess.inflight[key] == in {
				delete(call.sess.inflight, key)
			}
			call.sess.mu.Unlock()
			cancel(nil)
		}
	}
	s.mu.Lock()
	s.stateless[key] = in
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		if s.stateless[key] == in {
			delete(s.stateless, key)
		}
		s.mu.Unlock()
		cancel(nil)
	}
}

// request serves one request and writes its response: as SSE when the
// client accepts it and the call may send messages first (a held run),
// else as JSON.
func (s *mcpServer) request(w http.ResponseWriter, r *http.Request, call *mcpCall, msg mcpMessage) {
	ctx, done := s.track(r.Context(), call)
	defer done()
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") && mcpStreams(msg) {
		call.stream = s.openStream(w)
		if call.stream == nil {
			return
		}
	}
	result, rpcErr := s.dispatch(ctx, call, msg)
	out := mcpOutgoing{JSONRPC: "2.0", ID: msg.ID, Result: result, Error: rpcErr}
	if rpcErr != nil {
		out.Result = nil
	}
	body := s.api.globalSecrets.load().marshal(out, false)
	if call.stream != nil {
		call.stream.write(body)
		return
	}
	writeBody(w, http.StatusOK, body)
}

// writeRPCStatus answers one JSON-RPC response with status: the error
// when rpcErr is set, else result (the first of results).
func writeRPCStatus(w http.ResponseWriter, status int, id json.RawMessage, rpcErr *rpcError, results ...any) {
	out := mcpOutgoing{JSONRPC: "2.0", ID: id, Error: rpcErr}
	if rpcErr == nil && len(results) > 0 {
		out.Result = results[0]
	}
	if len(out.ID) == 0 && rpcErr != nil {
		out.ID = json.RawMessage("null")
	}
	writeBody(w, status, encodeJSON(out))
}

// dispatch serves a request by its method; the error is the JSON-RPC
// error to answer.
func (s *mcpServer) dispatch(ctx context.Context, call *mcpCall, msg mcpMessage) (any, *rpcError) {
	switch msg.Method {
	case "ping":
		return struct{}{}, nil
	case "server/discover":
		return map[string]any{
			"supportedVersions": sessionlessProtocolVersions,
			"capabilities":      mcpCapabilities(sessionlessProtocolVersion),
			"instructions":      mcpServerInstructions,
			"_meta":             map[string]any{metaServerInfo: implementation{Name: "harnessd", Version: buildVersion}},
		}, nil
	case "logging/setLevel":
		return struct{}{}, nil
	case "tools/list":
		return map[string]any{"tools": mcpTools}, nil
	case "tools/call":
		return s.callTool(ctx, call, msg.Params)
	case "resources/list":
		return s.listResources(call, msg.Params)
	case "resources/templates/list":
		return map[string]any{"resourceTemplates": mcpResourceTemplates}, nil
	case "resources/read":
		return s.readResource(call, msg.Params)
	case "resources/subscribe", "resources/unsubscribe":
		return s.subscribe(call, msg.Method == "resources/subscribe", msg.Params)
	}
	return nil, rpcFail(codeMethodNotFound, "method %q: not served by harnessd's MCP server (it serves tools and resources)", msg.Method)
}

// An mcpStream is the SSE answer of one POST or the GET stream. Safe for
// concurrent use: a call's progress and its requests to the client share
// it.
type mcpStream struct {
	mu sync.Mutex
	// guards w
	w *streamWriter
}

// openStream starts an SSE answer on w, or answers the error and returns
// nil.
func (s *mcpServer) openStream(w http.ResponseWriter) *mcpStream {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	sw := newStreamWriter(w, s.api.streamWriteTimeout)
	if sw.Flush() != nil {
		return nil
	}
	return &mcpStream{w: sw}
}

// write sends one message as an SSE event and flushes it.
func (st *mcpStream) write(msg []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := fmt.Fprintf(st.w, "event: message\ndata: %s\n\n", msg); err != nil {
		return err
	}
	return st.w.Flush()
}

// comment sends an SSE comment (a keep-alive).
func (st *mcpStream) comment(text string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, err := fmt.Fprintf(st.w, ": %s\n\n", text); err != nil {
		return err
	}
	return st.w.Flush()
}

// send writes a notification on the call's stream, when it has one.
func (call *mcpCall) send(method string, params any) {
	if call.stream != nil {
		call.stream.write(call.srv.api.globalSecrets.load().marshal(mcpOutgoing{JSONRPC: "2.0", Method: method, Params: params}, false))
	}
}

// ask sends a request to the client on the call's stream and waits for
// its answer (POSTed to the session), until ctx is done. It needs a
// session and a stream.
func (call *mcpCall) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	sess := call.sess
	if sess == nil || call.stream == nil {
		return nil, errors.New("no session to answer on")
	}
	reply := make(chan json.RawMessage, 1)
	sess.mu.Lock()
	sess.nextID++
	id := fmt.Sprintf(`"harnessd-%d"`, sess.nextID)
	sess.pending[id] = reply
	sess.mu.Unlock()
	defer func() {
		sess.mu.Lock()
		delete(sess.pending, id)
		sess.mu.Unlock()
	}()
	msg := call.srv.api.globalSecrets.load().marshal(mcpOutgoing{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: params}, false)
	if err := call.stream.write(msg); err != nil {
		return nil, err
	}
	select {
	case raw := <-reply:
		return raw, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// deliver hands a client's response to the server request waiting for it;
// one nobody waits for is dropped.
func (sess *mcpSession) deliver(msg mcpMessage) {
	sess.mu.Lock()
	reply := sess.pending[string(msg.ID)]
	sess.mu.Unlock()
	if reply == nil {
		return
	}
	result := msg.Result
	if len(msg.Error) > 0 {
		result = nil // the client refused: the question stays open
	}
	select {
	case reply <- result:
	default:
	}
}

// mcpStreams reports whether msg may send messages before its response:
// the tools that hold a run (run, wait_run) send progress and ask for
// approvals; the other requests answer as JSON.
func mcpStreams(msg mcpMessage) bool {
	if msg.Method != "tools/call" {
		return false
	}
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(msg.Params, &p)
	return p.Name == "run" || p.Name == "wait_run"
}
