package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
)

// This file holds one MCP session over any transport: JSON-RPC ids and
// pending calls, the handshake and its version fallback, list/call/read,
// notifications, server requests, deadlines and cancellation.

// A transport carries JSON-RPC messages between the client and one server.
// Implementations: stdioTransport (stdio.go), streamableTransport and
// sseTransport (httptransport.go).
type transport interface {
	// send delivers one JSON-RPC message. It blocks at most until ctx is
	// done; a request's answer arrives on recv, never as send's result.
	// For HTTP, ctx also bounds the reading of the response stream, so the
	// caller cancels it once the answer has arrived or the call is over.
	send(ctx context.Context, msg []byte) error
	// recv returns the channel of every message the server sends, in order.
	// It is closed when the transport has ended, after which err says why.
	recv() <-chan []byte
	// err returns why the transport ended (nil while it runs, or after a
	// clean close). For stdio it includes the exit status and stderr tail.
	err() error
	// close ends the transport. It is bounded in time and idempotent.
	close() error
}

// protocolVersionAware is implemented by transports that must learn the
// negotiated protocol version (Streamable HTTP sends it as a header).
type protocolVersionAware interface {
	setProtocolVersion(v string)
}

// Errors a transport's send returns that the client acts upon.
var (
	// errSessionExpired: the server no longer knows the HTTP session (404);
	// the client initializes again once and resends.
	errSessionExpired = errors.New("session expired")
	// errTransportClosed: send after close or after the server went away.
	errTransportClosed = errors.New("transport closed")
)

// An httpStatusError is a non-success HTTP answer to a POST. The client
// falls back to legacy SSE when an inferred "http" server answers the
// initialize request with 400, 404 or 405.
type httpStatusError struct {
	StatusCode int
	Body       string // at most a short prefix of the body
}

// Protocol versions, newest first. The client offers the first and accepts
// any of them in the server's answer.
var knownProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

const (
	latestProtocolVersion   = "2025-11-25"
	fallbackProtocolVersion = "2024-11-05"
)

// A toolInfo is one tool as a server lists it.
type toolInfo struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
}

// A contentBlock is one item of a tool result's content or of a resource's
// contents. Only the fields harnessd reads are decoded.
type contentBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Data     string          `json:"data,omitempty"`     // base64, image and audio
	MIMEType string          `json:"mimeType,omitempty"` // image, audio, resource
	Resource *resourceBody   `json:"resource,omitempty"` // embedded resource
	URI      string          `json:"uri,omitempty"`      // resource_link
	Name     string          `json:"name,omitempty"`     // resource_link
	Raw      json.RawMessage `json:"-"`
}

// A resourceBody is the contents of a resource: text or a base64 blob.
type resourceBody struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// A callResult is the result of tools/call.
type callResult struct {
	Content           []contentBlock  `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
}

// A resourceInfo is one resource as resources/list returns it.
type resourceInfo struct {
	URI         string `json:"uri"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Size        int64  `json:"size,omitempty"`
}

// A readResourceResult is the result of resources/read.
type readResourceResult struct {
	Contents []resourceBody `json:"contents"`
}

func (e *httpStatusError) Error() string {
	if e.Body == "" {
		return "http status " + strconv.Itoa(e.StatusCode)
	}
	return "http status " + strconv.Itoa(e.StatusCode) + ": " + e.Body
}
