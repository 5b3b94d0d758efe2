package main

import (
	"context"
	"encoding/json"
	"testing"
)

// This file tests the trace context a request carries in _meta.

func TestRequestTraceContextInMeta(t *testing.T) {
	t.Parallel()
	sc := spanContext{TraceID: otelTraceID{1, 2, 3}, SpanID: otelSpanID{4, 5, 6}, Flags: 1, State: "vendor=a,other=b"}
	traced := withRemoteParent(context.Background(), sc)
	current := (&conn{}).newRequestMeta("2026-07-28")
	call := request{method: "tools/call", withProgress: func(token int64) any {
		return callParams{Name: "echo", Arguments: json.RawMessage(`{}`), Meta: &callMeta{ProgressToken: token}}
	}}
	list := request{method: "tools/list"}
	tests := []struct {
		name string
		ctx  context.Context
		meta *requestMeta
		req  request
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
