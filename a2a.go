package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// This file holds harnessd's A2A agent endpoint: the JSON-RPC binding of
// A2A 1.0 (the version the official @a2a-js/sdk client speaks) at /a2a,
// its dispatch to the methods, and A2A's error codes. A task is a run
// (taskId = run id), a context a conversation (contextId = conversation
// id); the runs are the REST API's, with its auth, scopes, ownership and
// redactor. The card is in a2a_card.go, messages in a2a_message.go, tasks
// in a2a_task.go, streams in a2a_stream.go, push configs in a2a_push.go.

// a2aProtocolVersion is the A2A version /a2a speaks.
const a2aProtocolVersion = "1.0"

// JSON-RPC and A2A error codes (A2A 1.0 §5.4, §9.5) beside the standard
// ones of client_jsonrpc.go.
const (
	rpcParseError              = -32700
	a2aTaskNotFound            = -32001
	a2aTaskNotCancelable       = -32002
	a2aUnsupportedOperation    = -32004
	a2aContentTypeNotSupported = -32005
	a2aVersionNotSupported     = -32009
)

// rpcErrorf returns an *rpcError with code and a formatted message.
func rpcErrorf(code int, format string, args ...any) *rpcError {
	return &rpcError{Code: code, Message: fmt.Sprintf(format, args...)}
}

// An a2aRPCRequest is one JSON-RPC request as /a2a reads it.
type a2aRPCRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// An a2aRPCResponse is one JSON-RPC response (or, in a stream, one event).
type a2aRPCResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// An a2aAgent serves the A2A routes of one api and holds the tasks' push
// configs. Safe for concurrent use.
type a2aAgent struct {
	api  *api
	push *a2aPushStore
}

// An a2aMethod is one JSON-RPC method: the scope it needs and its
// handler, which returns the result or an *rpcError. stream handlers
// answer w themselves (SSE) and return a nil result when they did.
type a2aMethod struct {
	scope   string
	stream  bool
	handler func(w http.ResponseWriter, r *http.Request, info authInfo, id json.RawMessage, params json.RawMessage) (any, error)
}

// a2aLegacyMethods maps the method names of A2A 0.3 to 1.0's, to say what
// to call instead.
var a2aLegacyMethods = map[string]string{
	"message/send":                        "SendMessage",
	"message/stream":                      "SendStreamingMessage",
	"tasks/get":                           "GetTask",
	"tasks/cancel":                        "CancelTask",
	"tasks/resubscribe":                   "SubscribeToTask",
	"tasks/pushNotificationConfig/set":    "CreateTaskPushNotificationConfig",
	"tasks/pushNotificationConfig/get":    "GetTaskPushNotificationConfig",
	"tasks/pushNotificationConfig/list":   "ListTaskPushNotificationConfigs",
	"tasks/pushNotificationConfig/delete": "DeleteTaskPushNotificationConfig",
	"agent/getAuthenticatedExtendedCard":  "GetExtendedAgentCard",
}

func init() { apiSurfaces = append(apiSurfaces, (*api).mountA2A) }

// mountA2A registers the agent card and the JSON-RPC endpoint on a's mux.
func (a *api) mountA2A() {
	g := &a2aAgent{api: a, push: newA2APushStore()}
	a.route(a2aCardPath, map[string]route{http.MethodGet: {"", g.serveCard}})
	// runs:read lets a key in; each method checks its own scope.
	a.route(a2aPath, map[string]route{http.MethodPost: {scopeRunsRead, g.serve}})
}

// a2aPath is the JSON-RPC endpoint; a2aCardPath the agent card.
const (
	a2aPath     = "/a2a"
	a2aCardPath = "/.well-known/agent-card.json"
)

// methods returns the JSON-RPC methods /a2a serves.
func (g *a2aAgent) methods() map[string]a2aMethod {
	return map[string]a2aMethod{
		"SendMessage":                      {scopeRunsWrite, false, g.sendMessage},
		"SendStreamingMessage":             {scopeRunsWrite, true, g.sendStreamingMessage},
		"GetTask":                          {scopeRunsRead, false, g.getTask},
		"CancelTask":                       {scopeRunsWrite, false, g.cancelTask},
		"SubscribeToTask":                  {scopeRunsRead, true, g.subscribeToTask},
		"CreateTaskPushNotificationConfig": {scopeRunsWrite, false, g.createPushConfig},
		"GetTaskPushNotificationConfig":    {scopeRunsRead, false, g.getPushConfig},
		"ListTaskPushNotificationConfigs":  {scopeRunsRead, false, g.listPushConfigs},
		"DeleteTaskPushNotificationConfig": {scopeRunsWrite, false, g.deletePushConfig},
		"ListTasks":                        {scopeRunsRead, false, unsupported("ListTasks: not served: GET /v1/runs?q=&cursor=&limit= lists this key's runs, whose ids are the task ids")},
		"GetExtendedAgentCard":             {scopeRunsRead, false, unsupported("GetExtendedAgentCard: the card at " + a2aCardPath + " is the whole card (capabilities.extendedAgentCard is false)")},
	}
}

// unsupported returns the handler of a method A2A defines that /a2a does
// not serve: UnsupportedOperation saying what to use instead.
func unsupported(msg string) func(http.ResponseWriter, *http.Request, authInfo, json.RawMessage, json.RawMessage) (any, error) {
	return func(http.ResponseWriter, *http.Request, authInfo, json.RawMessage, json.RawMessage) (any, error) {
		return nil, &rpcError{Code: a2aUnsupportedOperation, Message: msg}
	}
}

// serve answers POST /a2a: one JSON-RPC request (no batches), its answer
// JSON, or SSE for the streaming methods. JSON-RPC errors are answered
// with 200, as the binding has it; a key without the method's scope gets
// 403 with the error in the body.
func (g *a2aAgent) serve(w http.ResponseWriter, r *http.Request, info authInfo) {
	var req a2aRPCRequest
	body, err := readA2ABody(w, r)
	if err != nil {
		writeRPC(w, http.StatusOK, nil, nil, err)
		return
	}
	if err := json.Unmarshal(body, &req); err != nil {
		writeRPC(w, http.StatusOK, nil, nil, rpcErrorf(codeInvalidRequest, "request: %v: send one JSON-RPC 2.0 request object (batches are not served)", strings.TrimPrefix(err.Error(), "json: ")))
		return
	}
	if req.JSONRPC != "2.0" || req.Method == "" || len(req.ID) == 0 || bytes.Equal(req.ID, []byte("null")) {
		writeRPC(w, http.StatusOK, req.ID, nil, rpcErrorf(codeInvalidRequest, "request: want \"jsonrpc\": \"2.0\", a \"method\" and an \"id\" (A2A has no notifications)"))
		return
	}
	if v := strings.TrimSpace(r.Header.Get("A2A-Version")); v != "" && !a2aVersionMatches(v) {
		writeRPC(w, http.StatusOK, req.ID, nil, rpcErrorf(a2aVersionNotSupported, "A2A-Version %q: this agent speaks A2A %s only; send A2A-Version: %s", v, a2aProtocolVersion, a2aProtocolVersion))
		return
	}
	m, ok := g.methods()[req.Method]
	if !ok {
		msg := fmt.Sprintf("method %q: not found: this agent speaks A2A %s (SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask and the TaskPushNotificationConfig methods)", req.Method, a2aProtocolVersion)
		if now := a2aLegacyMethods[req.Method]; now != "" {
			msg = fmt.Sprintf("method %q: an A2A 0.3 name; this agent speaks A2A %s: call %s", req.Method, a2aProtocolVersion, now)
		}
		writeRPC(w, http.StatusOK, req.ID, nil, &rpcError{Code: codeMethodNotFound, Message: msg})
		return
	}
	if !info.has(m.scope) {
		writeRPC(w, http.StatusForbidden, req.ID, nil, rpcErrorf(codeInvalidRequest, "method %s: key %q lacks the %s scope it needs (it has %s); grant %s or admin in [[auth.keys]] or HARNESS_API_KEYS",
			req.Method, info.key, m.scope, strings.Join(info.scopes, ", "), m.scope))
		return
	}
	if len(req.Params) == 0 || bytes.Equal(req.Params, []byte("null")) {
		req.Params = json.RawMessage("{}")
	}
	result, err := m.handler(w, r, info, req.ID, req.Params)
	if m.stream && err == nil && result == nil {
		return // answered as a stream
	}
	writeRPC(w, http.StatusOK, req.ID, result, err)
}

// a2aVersionMatches reports whether an A2A-Version value names the
// version /a2a speaks (Major.Minor; a patch is ignored).
func a2aVersionMatches(v string) bool {
	parts := strings.SplitN(v, ".", 3)
	return len(parts) >= 2 && parts[0]+"."+parts[1] == a2aProtocolVersion
}

// readA2ABody reads a request body of at most maxRequestBody bytes within
// bodyReadTimeout; its errors are *rpcError (parse error).
func readA2ABody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	// As decodeBody: the server has no ReadTimeout (it would cut streams).
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	var buf bytes.Buffer
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxRequestBody))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, rpcErrorf(rpcParseError, "request body: over the %d byte limit (1 MiB): send a smaller message", maxRequestBody)
	case err != nil:
		return nil, rpcErrorf(rpcParseError, "request body: %v", err)
	case !json.Valid(buf.Bytes()):
		return nil, rpcErrorf(rpcParseError, "request body: not JSON: send one JSON-RPC 2.0 request object")
	}
	return buf.Bytes(), nil
}

// writeRPC answers a JSON-RPC response with status: result, or err as an
// error object (an error that is not an *rpcError is an internal error).
// The body is marshalled without redaction: callers pass results already
// redacted (a2aAgent.redacted).
func writeRPC(w http.ResponseWriter, status int, id json.RawMessage, result any, err error) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := a2aRPCResponse{JSONRPC: "2.0", ID: id}
	if err != nil {
		var re *rpcError
		if !errors.As(err, &re) {
			re = &rpcError{Code: codeInternalError, Message: err.Error()}
		}
		resp.Error = re
	} else {
		if result == nil {
			result = struct{}{}
		}
		resp.Result = result
	}
	writeBody(w, status, (*redactor)(nil).marshal(resp, false))
}

// decodeParams decodes a method's params strictly into v; its errors are
// -32602 naming the field.
func decodeParams(method string, params json.RawMessage, v any) error {
	if err := decodeStrict(bytes.NewReader(params), v); err != nil {
		return rpcErrorf(codeInvalidParams, "%s params: %v", method, strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// findTask returns run id when info sees it (a key of its tenant, an admin
// key, or auth off), else a TaskNotFound error that says the same for a
// run of another tenant as for no run, like GET /v1/runs/{id}'s 404.
func (g *a2aAgent) findTask(field, id string, info authInfo) (*run, error) {
	if id == "" {
		return nil, rpcErrorf(codeInvalidParams, "%s: missing: name the task (its id is the run id)", field)
	}
	run := g.api.visibleRun(id, info)
	if run == nil {
		return nil, rpcErrorf(a2aTaskNotFound, "%s %q: task not found (tasks are runs: GET /v1/runs lists those of this key)", field, id)
	}
	return run, nil
}

// redacted returns v as JSON with run's secrets cut out, for a result.
func redacted(run *run, v any) json.RawMessage {
	return run.redactor().marshal(v, false)
}
