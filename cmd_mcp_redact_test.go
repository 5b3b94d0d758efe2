package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// quotingServer starts a Streamable HTTP MCP server whose tool "echo"
// answers with the X-Api-Key header it was sent, and whose tool "boom"
// answers a JSON-RPC error quoting it: what a careless server does.
func quotingServer(t *testing.T) string {
	t.Helper()
	s := newFakeMCP(t, fakeMCPConfig{Name: "q", Tools: []string{"echo", "boom"}, Capabilities: map[string]any{"tools": map[string]any{}},
		Script: func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
			if m.Method != "tools/call" {
				return false
			}
			var p struct {
				Name string `json:"name"`
			}
			json.Unmarshal(m.Params, &p)
			key := r.Header.Get("X-Api-Key")
			if p.Name == "echo" {
				writeRPCResult(w, m.ID, text("you sent "+key))
				return true
			}
			writeRPCError(w, m.ID, -32000, "bad key "+key)
			return true
		}})
	return s.URL + "/mcp"
}

// TestMCPCallRedacts calls tools whose results and errors quote the
// server's configured header value: mcp call prints [redacted] instead,
// in text and JSON output and on stderr.
func TestMCPCallRedacts(t *testing.T) {
	t.Parallel()
	const secret = "cli-header-secret-0123456789"
	env := map[string]string{"HARNESS_MCP_SERVERS": serversJSON(t,
		map[string]any{"name": "q", "url": quotingServer(t), "headers": map[string]string{"X-Api-Key": secret}})}
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{"text result", []string{"mcp", "call", "mcp_q_echo"}, 0},
		{"json result", []string{"mcp", "call", "--json", "mcp_q_echo"}, 0},
		{"json-rpc error", []string{"mcp", "call", "mcp_q_boom"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runHarnessd(t, env, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("%v = %d, want %d\nstdout: %s\nstderr: %s", tt.args, code, tt.wantCode, stdout, stderr)
			}
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("%v printed the secret:\nstdout: %s\nstderr: %s", tt.args, stdout, stderr)
			}
			if !strings.Contains(stdout+stderr, "[redacted]") {
				t.Errorf("%v printed no [redacted]: the server's answer was not seen:\nstdout: %s\nstderr: %s", tt.args, stdout, stderr)
			}
		})
	}
}
