package main

import (
	"reflect"
	"testing"
)

// TestJSONFieldsHints checks that each body's hint of valid fields comes
// from its own struct's tags: every field the API or configuration takes
// is named, and nothing else.
func TestJSONFieldsHints(t *testing.T) {
	t.Parallel()
	type inner struct {
		Deep string `json:"deep"`
	}
	type sample struct {
		inner
		Plain   string
		Tagged  int    `json:"tagged,omitempty"`
		Skipped string `json:"-"`
		private string
	}
	_ = sample{}.private // a field json leaves out: not in the hint
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"run request", &runRequest{}, "prompt, profile, model, system_prompt, max_steps, mcp_servers, interactive, input_timeout, roots, conversation_id, webhook_url, approval, max_tokens, max_cost_usd, max_duration, temperature, top_p, reasoning_effort, title"},
		{"api key", &rawAuthKey{}, "name, token, token_sha256, scopes, tenant, tools, servers, rate"},
		{"embedded, untagged, omitempty, skipped", sample{}, "deep, Plain, tagged"},
		{"not a struct", map[string]string{}, ""},
	}
	for _, tt := range tests {
		if got := jsonFields(tt.v); got != tt.want {
			t.Errorf("%s: jsonFields = %q, want %q", tt.name, got, tt.want)
		}
	}
	if got := taggedFields(reflect.TypeFor[rawServer](), "toml"); len(got) == 0 || got[0] != "transport" {
		t.Errorf("rawServer toml keys = %v, want them starting with transport (name and type are not TOML keys)", got)
	}
}
