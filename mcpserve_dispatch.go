package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// This file holds the MCP server's endpoint, /mcp mounted on the API (POST
// a message, GET a session's stream, DELETE a session), and the dispatch
// of what a client POSTs: initialize, the call each request makes, its
// requests to the tools, resources and tasks, and its notifications.

// mcpServerInstructions tell a host's model what harnessd is for.
const mcpServerInstructions = "harnessd runs agent tasks: an LLM with harnessd's own MCP servers, approvals and budgets. " +
	"Use run to hand it a task and get the answer; start_run and wait_run for long ones; decide_approval and answer_input when a run waits."

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
