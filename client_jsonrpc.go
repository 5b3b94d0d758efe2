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
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternalError  = -32603
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
// already encoded (compact JSON from marshalJSON, or nil for none): what
// marshalJSON gives for its outgoingRequest, without encoding params twice.
func encodeRequest(id int64, method string, params json.RawMessage) ([]byte, error) {
	if !plainJSONString(method) {
		// Not one of ours: let the encoder escape it.
		return marshalJSON(outgoingRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	}
	msg := appendRequestStart(make([]byte, 0, requestStartBytes+len(method)+len(`","params":}`)+len(params)), id, method)
	if len(params) == 0 {
		return append(msg, `"}`...), nil
	}
	msg = append(append(msg, `","params":`...), params...)
	return append(msg, '}'), nil
}

// requestStartBytes bounds what appendRequestStart writes besides the method.
const requestStartBytes = len(`{"jsonrpc":"2.0","id":`) + 20 + len(`,"method":"`)

// appendRequestStart appends to msg the wire form of request id of method
// up to the method's closing quote; method must be a plainJSONString.
func appendRequestStart(msg []byte, id int64, method string) []byte {
	msg = strconv.AppendInt(append(msg, `{"jsonrpc":"2.0","id":`...), id, 10)
	return append(append(msg, `,"method":"`...), method...)
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
	r := jsonReader{b: data}
	if r.space(); r.i >= len(data) || data[r.i] != '[' {
		return nil, false, nil // no allocation for the common case
	}
	var batch []json.RawMessage
	if err := json.Unmarshal(data, &batch); err != nil {
		return nil, true, err
	}
	return batch, true, nil
}

// jsonrpcShape reports whether the JSON object msg has a top-level "method"
// member and returns the raw text of its "id" member (nil when absent). It
// reads only the top level: on malformed input the answer covers the
// members read before the fault.
func jsonrpcShape(msg []byte) (hasMethod bool, id []byte) {
	shape := scanMessage(msg)
	return shape.method != nil, shape.id
}

// A messageShape is the raw text of the top-level members of a JSON-RPC
// message that routing needs, each nil when absent. The slices alias the
// scanned message.
type messageShape struct {
	method, id, result, error []byte
	// complete is true when msg is one object whose members are all valid
	// JSON, result aside (it is only delimited: the call it answers
	// decodes it, which checks it), and whose keys hold no escapes (which
	// encoding/json would read as the names above).
	complete bool
}

// scanMessage reads the top-level members of the JSON object msg without
// decoding their values, so routing a message costs one pass over it. On
// malformed input it returns the members read before the fault, with
// complete false.
func scanMessage(msg []byte) (shape messageShape) {
	r := jsonReader{b: msg}
	if !r.open('{') {
		return shape
	}
	escapedKey := false
	for first := true; ; first = false {
		done, ok := r.next(first, '}')
		if !ok {
			return shape
		}
		if done {
			break
		}
		start := r.i
		escaped, ok := r.stringToken()
		if !ok {
			return shape
		}
		escapedKey = escapedKey || escaped
		key := msg[start+1 : r.i-1]
		if r.space(); r.i >= len(msg) || msg[r.i] != ':' {
			return shape
		}
		r.i++
		r.space()
		start = r.i
		if string(key) == "result" {
			if !r.delimit() {
				return shape
			}
		} else if !r.skip(1) {
			return shape
		}
		value := msg[start:r.i]
		switch string(key) {
		case "method":
			shape.method = value
		case "id":
			shape.id = value
		case "result":
			shape.result = value
		case "error":
			shape.error = value
		}
	}
	r.space()
	shape.complete = r.i == len(msg) && !escapedKey
	return shape
}
