package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// This file holds the mounting of the A2A endpoint on the API and the
// dispatch of each JSON-RPC request at /a2a to its method (a2a.go holds
// the binding every method shares: the request and answer, errors, and
// reading and writing them).

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
