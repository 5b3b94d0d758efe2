package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// This file holds the errors "harnessd mcp serve" answers the host's
// requests with when it cannot forward them, each saying what to do: the
// daemon is not running, wants a token, forgot the session, or is not a
// harnessd with /mcp.

const (
	// codeBridgeError is the code of the answers the bridge makes up for
	// requests it could not forward (the JSON-RPC range for servers).
	codeBridgeError = -32000
)

// failure returns the answer to a request that t could not send because
// of err: a JSON-RPC error of the daemon's as it is, else one saying what
// went wrong and what to do.
func (b *stdioBridge) failure(err error, t *streamableTransport) *rpcError {
	if errors.Is(err, errTransportClosed) {
		if cause := t.endErr(); cause != nil {
			err = cause
		}
	}
	var (
		rpcErr *rpcError
		status *httpStatusError
		opErr  *net.OpError
	)
	var msg string
	switch {
	case errors.As(err, &rpcErr):
		return rpcErr
	case isUnreachable(err):
		cause := err
		if errors.As(err, &opErr) {
			cause = opErr
		}
		msg = fmt.Sprintf("harnessd at %s is not reachable: start it with \"harnessd serve\" or pass --addr (%v)", b.base, cause)
	case errors.Is(err, errSessionExpired):
		msg = fmt.Sprintf("harnessd at %s no longer knows this MCP session (it restarted, or the session expired): restart this MCP server in the host to start a new one", b.base)
	case errors.As(err, &status):
		if e := statusRPCError(status); e != nil {
			return e
		}
		switch status.StatusCode {
		case http.StatusUnauthorized:
			msg = tokenRefusal(b.base, b.token != "", "")
		case http.StatusForbidden:
			msg = fmt.Sprintf("harnessd at %s refused this request (HTTP 403): use a key in HARNESS_TOKEN whose scopes allow it", b.base)
		case http.StatusNotFound:
			msg = fmt.Sprintf("harnessd at %s has no MCP endpoint at %s (HTTP 404): update harnessd, or point --addr at a harnessd", b.base, b.cfg.URL)
		default:
			msg = fmt.Sprintf("harnessd at %s: %v", b.base, err)
		}
	default:
		msg = fmt.Sprintf("harnessd at %s: %v", b.base, err)
	}
	return &rpcError{Code: codeBridgeError, Message: msg}
}

// statusRPCError returns the JSON-RPC error a refusal's body holds (the
// daemon's own answer, sent with a 4xx), or nil.
func statusRPCError(status *httpStatusError) *rpcError {
	var answer struct {
		Error *rpcError `json:"error"`
	}
	if json.Unmarshal([]byte(status.Body), &answer) != nil || answer.Error == nil || answer.Error.Message == "" {
		return nil
	}
	return answer.Error
}
