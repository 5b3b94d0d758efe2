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
// sessions, every request carrying its revision in _meta), and the
// dispatch of requests and notifications. The sessions are in
// mcpserve_session.go, the tools in mcpserve_tools.go, the resources in
// mcpserve_resources.go, the tasks extension in mcpserve_tasks.go. Every
// check of the API applies: the Host/Origin guard, the bearer key and its
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

// An mcpInflight is one request being served: cancelling it ends the call
// and, for a held run, the run (mcpCall.hold).
type mcpInflight struct {
	cancel context.CancelCauseFunc
}

// errMCPCancelled is the cause of a call the client cancelled with
// notifications/cancelled.
var errMCPCancelled = errors.New("cancelled by the client")

func init() { apiSurfaces = append(apiSurfaces, (*api).mountMCP) }

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
		// ClientCapabilities are the request's own (the tasks
		// extension is declared there).
		ClientCapabilities mcpClientCapabilities `json:"io.modelcontextprotocol/clientCapabilities"`
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
	// tasks: the client declared the tasks extension (in initialize or
	// in this request's _meta), so run answers with a task.
	tasks bool
	// rounds: a client without a session that takes elicitation (in this
	// request's _meta), asked through input-required rounds
	// (mcpserve_rounds.go).
	rounds bool
	stream *mcpStream
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
	call := &mcpCall{srv: s, info: info, id: msg.ID, progressToken: meta.Meta.ProgressToken, tasks: meta.Meta.ClientCapabilities.declares(extTasks)}
	if len(call.progressToken) == 0 || string(call.progressToken) == "null" {
		call.progressToken = nil
	}
	if id := r.Header.Get(headerSessionID); id != "" {
		sess := s.session(id, info)
		if sess == nil {
			return nil, rpcFail(codeInvalidRequest, "session %q: not found (ended, expired, or opened with another key): send initialize again", id), http.StatusNotFound
		}
		call.sess, call.version, call.elicitation = sess, sess.version, sess.elicitation
		call.tasks = call.tasks || sess.tasks
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
	// 2026-07-28 client that takes elicitation is asked through
	// input-required rounds; without it a run's approvals wait for the API
	// or the console.
	call.version = version
	call.rounds = len(meta.Meta.ClientCapabilities.Elicitation) > 0
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
		ProtocolVersion string                `json:"protocolVersion"`
		Capabilities    mcpClientCapabilities `json:"capabilities"`
	}
	if err := json.Unmarshal(msg.Params, &p); err != nil || len(msg.ID) == 0 {
		writeRPCStatus(w, http.StatusBadRequest, msg.ID, rpcFail(codeInvalidParams, "initialize: want a request with params {protocolVersion, capabilities, clientInfo}"))
		return
	}
	version := latestProtocolVersion
	if slices.Contains(knownProtocolVersions, p.ProtocolVersion) {
		version = p.ProtocolVersion
	}
	elicitation := len(p.Capabilities.Elicitation) > 0
	sess := s.open(version, info, elicitation && version >= "2025-06-18", p.Capabilities.declares(extTasks))
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
	return map[string]any{"tools": map[string]any{"listChanged": false}, "resources": resources,
		"extensions": map[string]any{extTasks: struct{}{}}}
}

// mcpClientCapabilities are the parts of a client's capabilities the
// server reads: elicitation, and the extensions it declares.
type mcpClientCapabilities struct {
	Elicitation json.RawMessage            `json:"elicitation"`
	Extensions  map[string]json.RawMessage `json:"extensions"`
}

// declares reports whether the capabilities declare the extension name.
func (c mcpClientCapabilities) declares(name string) bool {
	_, ok := c.Extensions[name]
	return ok
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

// request serves one request and writes its response: as SSE when the
// client accepts it and the call may send messages first (a held run),
// else as JSON.
func (s *mcpServer) request(w http.ResponseWriter, r *http.Request, call *mcpCall, msg mcpMessage) {
	ctx, done := s.track(r.Context(), call)
	defer done()
	if strings.Contains(r.Header.Get("Accept"), "text/event-stream") && mcpStreams(call, msg) {
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
	case "tasks/get":
		return s.getTask(call, msg.Params)
	case "tasks/update":
		return s.updateTask(call, msg.Params)
	case "tasks/cancel":
		return s.cancelTask(ctx, call, msg.Params)
	case "subscriptions/listen":
		return s.subscriptionsListen(ctx, call, msg.Params)
	}
	return nil, rpcFail(codeMethodNotFound, "method %q: not served by harnessd's MCP server (it serves tools, resources and tasks)", msg.Method)
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

// mcpStreams reports whether msg may send messages before its response:
// the tools that hold a run (run, wait_run) send progress and ask for
// approvals; subscriptions/listen sends task and resource notifications; the other
// requests answer as JSON, and so does run when it answers with a task.
func mcpStreams(call *mcpCall, msg mcpMessage) bool {
	if msg.Method == "subscriptions/listen" {
		return true
	}
	if msg.Method != "tools/call" {
		return false
	}
	var p struct {
		Name string `json:"name"`
	}
	json.Unmarshal(msg.Params, &p)
	return p.Name == "run" && !call.tasks || p.Name == "wait_run"
}
