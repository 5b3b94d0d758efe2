package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// This file holds harnessd's MCP server at /mcp over Streamable HTTP, as
// every part of it shares it: the server, its limits and error codes, the
// messages it reads and writes, one call (a request with the revision it
// came with: initialize with Mcp-Session-Id sessions up to 2025-11-25,
// and 2026-07-28 without sessions, every request carrying its revision in
// _meta), and the SSE streams it answers on. The endpoint (POST, GET,
// DELETE) and the dispatch of requests and notifications are in
// mcpserve_dispatch.go, the sessions in mcpserve_session.go, the tools in
// mcpserve_tools.go, the resources in mcpserve_resources.go, the tasks
// extension in mcpserve_tasks.go. Every check of the API applies: the
// Host/Origin guard, the bearer key and its scopes, and a key sees only
// its tenant's runs.

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

// An mcpMessage is a JSON-RPC message a client sends: a wireMessage whose
// error is kept raw, as the server only needs to know that a client's
// answer to its request is an error, whatever the error's shape.
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

// encodeJSON encodes v, which cannot fail to encode.
func encodeJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
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
