package main

import (
	"bytes"
	"encoding/json"
	"testing"
)

// encodeToolCallCases are tool names and arguments appendToolCall must
// write as the general encoding does; fast says whether it writes them
// itself.
var encodeToolCallCases = []struct {
	name, args string
	fast       bool
}{
	{"echo", `{"message":"hello"}`, true},
	{"echo", `{}`, true},
	{"a-b.c/d e<f>&", `{"html":"<b>&amp;</b>","u":"\u2028 é 😀"}`, true},
	{"echo", " {\n \"a\" : [ 1 , 2.5e-3 , true , null , \"x y\" ] ,\t\"b\":{ } } \n", true},
	{"echo", `{"s":"a\"b\\c\u0000"}`, true},
	{"echo", "{\"bad utf8\":\"\xff\"}", true},
	{"echo", `[1,2]`, true},
	{"echo", `"just a string"`, true},
	{"io.modelcontextprotocol/tool", `{}`, true},
	{"echo", `{"_meta":{"io.modelcontextprotocol/x":1}}`, true},
	{"echo", `{"_meta":{"progressToken":"mine"}}`, true},
	{"ech\"o", `{}`, false},
	{"ech\\o", `{}`, false},
	{"écho", `{}`, false},
	{"tab\tname", `{}`, false},
	{"echo", `{"a":}`, false},
	{"echo", `{"a":1`, false},
	{"echo", `{"a":1} x`, false},
	{"echo", `{"a":01}`, false},
	{"echo", `{'a':1}`, false},
}

// TestAppendToolCall checks appendToolCall against the general encoding,
// with and without a current revision's _meta.
func TestAppendToolCall(t *testing.T) {
	meta := (&conn{}).newRequestMeta("2026-07-28")
	for _, tc := range encodeToolCallCases {
		for _, m := range []*requestMeta{nil, meta} {
			fast := checkToolCallEncode(t, 42, tc.name, []byte(tc.args), m)
			wantFast := tc.fast
			if m != nil && (bytes.Contains([]byte(tc.args), []byte(`"io.modelcontextprotocol/`)) || tc.name == "io.modelcontextprotocol/tool") {
				wantFast = false // attach merges those fields itself
			}
			if fast != wantFast {
				t.Errorf("appendToolCall(%q, %q, meta %v) wrote it itself: %v, want %v", tc.name, tc.args, m != nil, fast, wantFast)
			}
		}
	}
}

// checkToolCallEncode fails t unless appendToolCall, when it writes the
// request, writes what the general encoding does; it reports whether it
// did.
func checkToolCallEncode(t *testing.T, id int64, name string, args []byte, meta *requestMeta) bool {
	t.Helper()
	got, ok := appendToolCall(id, name, args, meta)
	if !ok {
		return false
	}
	req := request{method: "tools/call", name: name, withProgress: func(token int64) any {
		return callParams{Name: name, Arguments: args, Meta: &callMeta{ProgressToken: token}}
	}}
	want, err := encodeParams(req, id, meta)
	if err != nil {
		t.Fatalf("appendToolCall(%q, %q) = %s, the general encoding fails: %v", name, args, got, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendToolCall(%q, %q) =\n%s\nthe general encoding gives\n%s", name, args, got, want)
	}
	if !json.Valid(got) {
		t.Fatalf("appendToolCall(%q, %q) = %s, not valid JSON", name, args, got)
	}
	return true
}

// FuzzToolCallEncode checks appendToolCall against the general encoding on
// any name and arguments.
func FuzzToolCallEncode(f *testing.F) {
	for _, tc := range encodeToolCallCases {
		f.Add(int64(7), tc.name, []byte(tc.args), true)
		f.Add(int64(-1), tc.name, []byte(tc.args), false)
	}
	meta := (&conn{}).newRequestMeta("2026-07-28")
	f.Fuzz(func(t *testing.T, id int64, name string, args []byte, withMeta bool) {
		if len(args) == 0 {
			return // callTool sends {} instead
		}
		m := meta
		if !withMeta {
			m = nil
		}
		checkToolCallEncode(t, id, name, args, m)
	})
}
