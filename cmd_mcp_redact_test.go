package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// quotingServer starts a Streamable HTTP MCP server whose tool "echo"
// answers with the X-Api-Key header it was sent, and whose tool "boom"
// answers a JSON-RPC error quoting it: what a careless server does.
func quotingServer(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &msg)
		key := r.Header.Get("X-Api-Key")
		reply := map[string]any{"jsonrpc": "2.0", "id": msg.ID}
		switch {
		case msg.Method == "initialize":
			reply["result"] = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}}, "serverInfo": map[string]any{"name": "q", "version": "1"}}
		case msg.Method == "tools/list":
			reply["result"] = map[string]any{"tools": []any{
				map[string]any{"name": "echo", "inputSchema": map[string]any{"type": "object"}},
				map[string]any{"name": "boom", "inputSchema": map[string]any{"type": "object"}}}}
		case msg.Method == "tools/call" && msg.Params.Name == "echo":
			reply["result"] = map[string]any{"content": []any{map[string]any{"type": "text", "text": "you sent " + key}}}
		case msg.Method == "tools/call":
			reply["error"] = map[string]any{"code": -32000, "message": "bad key " + key}
		case len(msg.ID) == 0:
			w.WriteHeader(http.StatusAccepted)
			return
		default:
			reply["error"] = map[string]any{"code": -32601, "message": "method not found"}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(reply)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/mcp"
}

// TestMCPCallRedacts calls tools whose results and errors quote the
// server's configured header value: mcp call prints [redacted] instead,
// in text and JSON output and on stderr.
func TestMCPCallRedacts(t *testing.T) {
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
