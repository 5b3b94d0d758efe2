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
// A2A 1.0 (the version the official @a2a-js/sdk client speaks) at /a2a
// that every method shares, and A2A's error codes. A task is a run
// (taskId = run id), a context a conversation (contextId = conversation
// id); the runs are the REST API's, with its auth, scopes, ownership and
// redactor. The dispatch to the methods is in a2a_serve.go, the card in
// a2a_card.go, messages in a2a_message.go, tasks in a2a_task.go, streams
// in a2a_stream.go, push configs in a2a_push.go.

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

// a2aPath is the JSON-RPC endpoint; a2aCardPath the agent card.
const (
	a2aPath     = "/a2a"
	a2aCardPath = "/.well-known/agent-card.json"
)

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
