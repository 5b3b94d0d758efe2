package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
)

// This file holds JSON-RPC 2.0 as harnessd speaks it: the message types,
// error codes, batch splitting, and a scan of a message's top level that
// routes responses without decoding them whole.

// An rpcError is a JSON-RPC error object, returned by a request the server
// refused. Callers test its Code (for example the handshake fallback).
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message)
}

// JSON-RPC error codes harnessd sends or inspects.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
	// codeSamplingRefused is the error code of a sampling request harnessd
	// will not serve (the specification's example uses -1 for a user's
	// refusal).
	codeSamplingRefused = -1
)

// A wireMessage is any JSON-RPC message: a request (ID and Method), a
// notification (Method only) or a response (ID and Result or Error).
type wireMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// asRPCError returns the JSON-RPC error in err's chain, or nil. Unlike
// errors.As on a variable of the caller's, it costs nothing when err is
// nil, the common case on a call's path.
func asRPCError(err error) *rpcError {
	if err == nil {
		return nil
	}
	var rpcErr *rpcError
	errors.As(err, &rpcErr)
	return rpcErr
}

// An rpcResponse is a response as the conn hands it to the waiting
// call: the raw result, which the caller decodes, or the error.
type rpcResponse struct {
	Result json.RawMessage
	Error  *rpcError
}

// An outgoingRequest is the wire form of a request or notification the
// client sends.
type outgoingRequest struct {
	JSONRPC string `json:"jsonrpc"`
	ID      *int64 `json:"id,omitempty"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
}

// encodeRequest returns the wire form of a request whose params are
// already encoded (compact JSON from marshalJSON, or nil for none).
func encodeRequest(id int64, method string, params json.RawMessage) ([]byte, error) {
	if params == nil {
		return marshalJSON(outgoingRequest{JSONRPC: "2.0", ID: &id, Method: method})
	}
	return marshalJSON(outgoingRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
}

// marshalJSON encodes v like json.Marshal but without escaping <, > and
// &: what a server sent (a tool's schema, a requestState to echo, a
// model's arguments) goes back as it came, only compacted.
func marshalJSON(v any) ([]byte, error) {
	e := jsonEncoders.Get().(*jsonEncoder)
	defer jsonEncoders.Put(e)
	e.buf.Reset()
	if err := e.enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.Clone(bytes.TrimSuffix(e.buf.Bytes(), []byte("\n"))), nil
}

// A jsonEncoder is an encoder that does not escape HTML, with its buffer;
// pooled, since every request to a server is encoded with one.
type jsonEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var jsonEncoders = sync.Pool{New: func() any {
	e := &jsonEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetEscapeHTML(false)
	return e
}}

// An outgoingResponse answers a request the server sent.
type outgoingResponse struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  any             `json:"result,omitempty"`
	Error   *rpcError       `json:"error,omitempty"`
}

// parseID reads a response id the client issued: a number, or a string
// holding one (some servers stringify ids).
func parseID(raw json.RawMessage) (int64, bool) {
	s := string(raw)
	if len(s) >= 2 && s[0] == '"' {
		unq, err := strconv.Unquote(s)
		if err != nil {
			return 0, false
		}
		s = unq
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// splitBatch returns the messages of a JSON-RPC batch: the elements of
// data when it is a JSON array. isBatch is false when data is not an
// array; err reports an array that is not valid JSON.
func splitBatch(data []byte) (msgs []json.RawMessage, isBatch bool, err error) {
	if trimmed := bytes.TrimLeft(data, " \t\r\n"); len(trimmed) == 0 || trimmed[0] != '[' {
		return nil, false, nil
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(data, &batch); err != nil {
		return nil, true, err
	}
	return batch, true, nil
}

// jsonrpcShape reports whether the JSON object msg has a top-level "method"
// member and returns the raw text of its "id" member (nil when absent, or
// when msg is not a JSON object).
func jsonrpcShape(msg []byte) (hasMethod bool, id []byte) {
	var shape struct {
		Method json.RawMessage `json:"method"`
		ID     json.RawMessage `json:"id"`
	}
	if json.Unmarshal(msg, &shape) != nil {
		return false, nil
	}
	return shape.Method != nil, shape.ID
}

// Errors a transport's send returns that the client acts upon.
var (
	// errSessionExpired: the server no longer knows the HTTP session (404);
	// the client initializes again once and resends.
	errSessionExpired = errors.New("session expired")
	// errTransportClosed: send after close or after the server went away.
	errTransportClosed = errors.New("transport closed")
)
