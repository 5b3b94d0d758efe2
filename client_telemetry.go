package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strconv"
)

// This file holds the span of each MCP request harnessd sends (a client
// span with the MCP semantic conventions' attributes: method, protocol
// version, session id, tool, request id, outcome) and the trace context the request
// carries in its params' _meta (traceparent, tracestate), so that the
// server's spans join the caller's trace. The client_trace.go next to it
// is something else: the debug log of every message.

// Keys of the trace context in a request's _meta.
const (
	metaTraceparent = "traceparent"
	metaTracestate  = "tracestate"
)

// A sessionTransport is a transport whose session the server names
// (Streamable HTTP's Mcp-Session-Id): its id is the spans' mcp.session.id.
type sessionTransport interface {
	// session returns the session's id ("" before the server named one,
	// or when it names none) and protocol version.
	session() (sessionID, version string)
}

// startMCPSpan starts the span of req, the child of ctx's span (a
// tool call's, a run's) or, for the session's own requests (the
// handshake, listings), a root span of the client's tracer.
func (c *conn) startMCPSpan(ctx context.Context, req rpcRequest) (context.Context, *traceSpan) {
	if c.opts.Tracer == nil && contextSpan(ctx) == nil {
		return ctx, nil
	}
	name := req.method
	transport := "tcp"
	if c.cfg.Transport == transportStdio {
		transport = "pipe"
	}
	var buf [8]attribute // the most a request's span starts with
	attrs := append(buf[:0],
		stringAttr("mcp.method.name", req.method),
		stringAttr("harnessd.mcp.server", c.cfg.Name),
		stringAttr("network.transport", transport))
	if v, _ := c.version.Load().(string); v != "" {
		attrs = append(attrs, stringAttr("mcp.protocol.version", v))
	}
	if st, ok := c.t.(sessionTransport); ok {
		if id, _ := st.session(); id != "" {
			attrs = append(attrs, stringAttr("mcp.session.id", id))
		}
	}
	switch req.method {
	case "tools/call":
		name += " " + req.name
		attrs = append(attrs, stringAttr("gen_ai.tool.name", req.name), stringAttr("gen_ai.operation.name", "execute_tool"))
	case "prompts/get":
		name += " " + req.name
		attrs = append(attrs, stringAttr("gen_ai.prompt.name", req.name))
	}
	return startSpan(ctx, c.opts.Tracer, name, spanClient, attrs...)
}

// endMCPSpan ends the span of a request with id that answered raw
// or failed with err: a JSON-RPC error's code, a timeout, a tool's
// isError result ("tool_error") are its error.type.
func endMCPSpan(sp *traceSpan, req rpcRequest, id int64, raw json.RawMessage, err error) {
	if sp == nil {
		return
	}
	sp.set(stringAttr("jsonrpc.request.id", strconv.FormatInt(id, 10)))
	var rpcErr *rpcError
	switch {
	case errors.As(err, &rpcErr):
		code := strconv.Itoa(rpcErr.Code)
		sp.set(stringAttr("rpc.response.status_code", code))
		sp.fail(code, rpcErr.Message)
	case errors.Is(err, errTimeout):
		sp.fail("timeout", err.Error())
	case err != nil:
		sp.failErr("", err)
	case req.method == "tools/call" && bytes.Contains(raw, []byte(`"isError"`)):
		// Decoded only when the member may be there: a result without it
		// (most servers leave it out unless true) is not decoded twice.
		var result struct {
			IsError bool `json:"isError"`
		}
		if json.Unmarshal(raw, &result) == nil && result.IsError {
			sp.fail("tool_error", "")
		}
	}
	sp.end()
}

// withTraceContext returns m (nil for a session without _meta fields)
// with ctx's trace context added to its fields, for one request; m when
// ctx has none. The fields already encoded are reused as they are.
func (m *requestMeta) withTraceContext(ctx context.Context) *requestMeta {
	sc, ok := currentSpanContext(ctx)
	if !ok {
		return m
	}
	traced := &requestMeta{}
	var encoded []byte
	if m != nil {
		traced.version = m.version
		if len(m.encoded) > 2 {
			encoded = make([]byte, 0, len(m.encoded)+len(metaTraceparent)+traceparentLen+8)
			encoded = append(append(encoded, m.encoded[:len(m.encoded)-1]...), ',')
		}
	}
	if encoded == nil {
		encoded = append(make([]byte, 0, len(metaTraceparent)+traceparentLen+8), '{')
	}
	// A traceparent is hex and dashes: quoted, it is its JSON.
	encoded = append(encoded, `"`+metaTraceparent+`":"`...)
	encoded = append(sc.appendTraceparent(encoded), '"')
	if sc.State != "" {
		ts, _ := json.Marshal(sc.State)
		encoded = append(append(encoded, `,"`+metaTracestate+`":`...), ts...)
	}
	traced.encoded = append(encoded, '}')
	return traced
}
