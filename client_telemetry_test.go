package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// This file tests the trace context a request carries in _meta and the
// attributes of an MCP request's span.

func TestRequestTraceContextInMeta(t *testing.T) {
	t.Parallel()
	sc := spanContext{TraceID: otelTraceID{1, 2, 3}, SpanID: otelSpanID{4, 5, 6}, Flags: 1, State: "vendor=a,other=b"}
	traced := withRemoteParent(context.Background(), sc)
	current := (&conn{}).newRequestMeta("2026-07-28")
	call := rpcRequest{method: "tools/call", withProgress: func(token int64) any {
		return callParams{Name: "echo", Arguments: json.RawMessage(`{}`), Meta: &callMeta{ProgressToken: token}}
	}}
	list := rpcRequest{method: "tools/list"}
	tests := []struct {
		name string
		ctx  context.Context
		meta *requestMeta
		req  rpcRequest
		// want are the _meta keys expected, with their values when not "".
		want map[string]string
	}{
		{"older revision, no params", traced, nil, list,
			map[string]string{"traceparent": sc.traceparent(), "tracestate": "vendor=a,other=b"}},
		{"older revision, progress token", traced, nil, call,
			map[string]string{"traceparent": sc.traceparent(), "progressToken": "7"}},
		{"current revision", traced, current, call,
			map[string]string{"traceparent": sc.traceparent(), "progressToken": "7", metaProtocolVersion: "2026-07-28", metaClientInfo: ""}},
		{"untraced older revision", context.Background(), nil, list, nil},
		{"untraced current revision", context.Background(), current, list,
			map[string]string{metaProtocolVersion: "2026-07-28"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg, err := encodeParams(tt.req, 7, tt.meta.withTraceContext(tt.ctx))
			if err != nil {
				t.Fatal(err)
			}
			var wire struct {
				Params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				} `json:"params"`
			}
			if err := json.Unmarshal(msg, &wire); err != nil {
				t.Fatalf("encodeParams = %s: %v", msg, err)
			}
			for k, v := range tt.want {
				raw, ok := wire.Params.Meta[k]
				var got any
				json.Unmarshal(raw, &got)
				if !ok || v != "" && fmtJSONScalar(got) != v {
					t.Errorf("_meta[%q] = %s, want %q (message %s)", k, raw, v, msg)
				}
			}
			if _, ok := wire.Params.Meta["traceparent"]; ok != (tt.want["traceparent"] != "") {
				t.Errorf("message %s: traceparent present %v, want %v", msg, ok, !ok)
			}
		})
	}
}

// fmtJSONScalar returns a decoded JSON string or number as text.
func fmtJSONScalar(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case float64:
		b, _ := json.Marshal(v)
		return string(b)
	}
	return ""
}

// TestMCPSpanSessionID checks that an MCP request's span carries the
// session's id as mcp.session.id (OpenTelemetry's MCP conventions: when
// the request is part of a session) where the server names one, and no
// such attribute where it names none.
func TestMCPSpanSessionID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  func(t *testing.T) serverConfig
		// stateful: the server names a session (Mcp-Session-Id).
		stateful bool
	}{
		{"streamable http", func(t *testing.T) serverConfig {
			return httpPeerConfig("echo", transportHTTP, startEchoServerHTTP(t, "http"))
		}, true},
		{"stateless http", func(t *testing.T) serverConfig {
			return httpPeerConfig("echo", transportHTTP, startEchoServerHTTP(t, "http-stateless"))
		}, false},
		{"stdio", func(t *testing.T) serverConfig { return fakeServerConfig(t, "normal") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			col := newFakeCollector(t, false, 0)
			tr := newTestTracer(t, col.URL, spanBatchSize, time.Minute)
			c := connectPeer(t, tt.cfg(t), clientOptions{Tracer: tr})
			if _, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"hi"}`)); err != nil {
				t.Fatal(err)
			}
			want := ""
			if st, ok := c.t.(sessionTransport); ok {
				want, _ = st.session()
			}
			if tt.stateful && want == "" {
				t.Fatal("the server named no session")
			}
			if err := tr.shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			var found bool
			for _, s := range col.received() {
				if s.Name != "tools/call echo" {
					continue
				}
				found = true
				got, ok := "", false
				for _, a := range s.Attributes {
					if a.Key == "mcp.session.id" && a.Value.StringValue != nil {
						got, ok = *a.Value.StringValue, true
					}
				}
				if ok != tt.stateful || got != want {
					t.Errorf("span %q: mcp.session.id = %q (present %v), want %q (present %v)", s.Name, got, ok, want, tt.stateful)
				}
			}
			if !found {
				t.Fatalf("spans = %v, want a tools/call echo span", spanNames(col.received()))
			}
		})
	}
}

// TestMCPSpanToolError checks that a tools/call span whose result says
// isError is failed with error.type tool_error, and one whose result
// does not is not failed.
func TestMCPSpanToolError(t *testing.T) {
	t.Parallel()
	col := newFakeCollector(t, false, 0)
	tr := newTestTracer(t, col.URL, spanBatchSize, time.Minute)
	c := connectPeer(t, fakeServerConfig(t, "normal"), clientOptions{Tracer: tr})
	for _, tool := range []string{"echo", "fail"} {
		if _, err := c.callTool(t.Context(), tool, json.RawMessage(`{"message":"hi"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tr.shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"tools/call echo": "", "tools/call fail": "tool_error"}
	for _, s := range col.received() {
		wantType, ok := want[s.Name]
		if !ok {
			continue
		}
		delete(want, s.Name)
		got := ""
		for _, a := range s.Attributes {
			if a.Key == "error.type" && a.Value.StringValue != nil {
				got = *a.Value.StringValue
			}
		}
		if got != wantType || (s.Status.Code == 2) != (wantType != "") {
			t.Errorf("span %q: error.type %q, status %d; want %q, failed %v", s.Name, got, s.Status.Code, wantType, wantType != "")
		}
	}
	if len(want) > 0 {
		t.Fatalf("spans = %v, want also %v", spanNames(col.received()), want)
	}
}
