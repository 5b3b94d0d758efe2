package main

import (
	"net/http"
	"strings"
	"testing"
)

func TestDuplicateKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		key  string
		dups bool
	}{
		{`{"a":1,"b":2}`, "", false},
		{`{"a":1,"a":2}`, "a", true},
		{`{"a":{"b":1,"b":2}}`, "b", true},
		{`{"a":[{"x":1},{"x":2}]}`, "", false},
		{`{"a":[{"x":1,"y":[],"x":2}]}`, "x", true},
		{`[{"k":1},{"k":1}]`, "", false},
		{`{"a":{"b":1},"c":{"b":2}}`, "", false},
		{`{"a":{},"a":[]}`, "a", true},
		{`{"a":"\u0061","\u0061":1}`, "a", true},
		{`{"a":`, "", false},
	}
	for _, tt := range tests {
		key, dups := duplicateKey([]byte(tt.in))
		if key != tt.key || dups != tt.dups {
			t.Errorf("duplicateKey(%s) = %q, %v, want %q, %v", tt.in, key, dups, tt.key, tt.dups)
		}
	}
}

// TestAPIRefusesDuplicateKeys posts run requests with a repeated key, the
// parser differential a proxy in front of harnessd could be fooled by:
// 400 naming the key, and no run.
func TestAPIRefusesDuplicateKeys(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI)
	at := newAPITest(t, f, nil)
	for _, body := range []string{
		`{"prompt":"harmless","prompt":"something else"}`,
		`{"prompt":"x","mcp_servers":[{"name":"a","url":"http://127.0.0.1:1/mcp","url":"http://169.254.169.254/"}]}`,
	} {
		resp, data := at.do(t, http.MethodPost, "/v1/runs", "", body)
		want := `duplicate key \"prompt\"`
		if strings.Contains(body, `"url":"http://169`) {
			want = `duplicate key \"url\"`
		}
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), want) {
			t.Errorf("POST %s = %d %s, want 400 naming the key", body, resp.StatusCode, data)
		}
	}
	if n := len(at.runs.list()); n != 0 {
		t.Errorf("%d runs started, want none", n)
	}
}
