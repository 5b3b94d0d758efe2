package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// This file tests the commands that look into one server: mcp list
// --verbose and --json with input schemas, mcp resources and mcp read,
// against the reference server-everything.

func TestMCPInspect(t *testing.T) {
	t.Parallel()
	everything := everythingStdioCommand(t)
	adhoc := append([]string{"--", everything.Command}, everything.Args...)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr string
	}{
		{name: "list verbose", args: []string{"mcp", "list", "--verbose"},
			wantStdout: []string{"mcp_adhoc_echo", `input: {"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"message":{"type":"string","description":"Message to echo"}},"required":["message"]}`}},
		{name: "resources", args: []string{"mcp", "resources", "ev", "--name", "ev"},
			wantStdout: []string{"demo://resource/static/document/architecture.md  architecture.md  text/markdown"}},
		{name: "read", args: []string{"mcp", "read", "ev", "demo://resource/static/document/architecture.md"},
			wantStdout: []string{"# "}},
		{name: "read of an unknown server", args: []string{"mcp", "read", "nope", "demo://x", "--url", "http://127.0.0.1:1/mcp", "--name", "other"}, wantCode: 2,
			wantStderr: `harnessd: mcp read: no server named "nope" is configured (see harnessd mcp list)`},
		{name: "read without URI", args: []string{"mcp", "read", "ev"}, wantCode: 2,
			wantStderr: `harnessd: mcp read: want 2 arguments, got 1 (see harnessd mcp read --help)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := tt.args
			if !slices.Contains(args, "--url") {
				args = append(args, adhoc...)
			}
			code, stdout, stderr := runHarnessd(t, nil, args...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("harnessd %q = %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.wantCode, tt.wantStderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("harnessd %q stdout lacks %q:\n%s", tt.args, want, stdout)
				}
			}
		})
	}

	t.Run("list json", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runHarnessd(t, nil, append([]string{"mcp", "list", "--json"}, adhoc...)...)
		if code != 0 {
			t.Fatalf("mcp list --json = %d, stderr %q", code, stderr)
		}
		var out struct {
			Servers []struct {
				Name  string     `json:"name"`
				Tools []toolView `json:"tools"`
			} `json:"servers"`
		}
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || len(out.Servers) != 1 {
			t.Fatalf("mcp list --json = %s: %v", stdout, err)
		}
		for _, tool := range out.Servers[0].Tools {
			if tool.Name == "mcp_adhoc_echo" {
				if !strings.Contains(string(tool.InputSchema), `"message"`) {
					t.Errorf("echo input_schema = %s, want its message property", tool.InputSchema)
				}
				return
			}
		}
		t.Errorf("mcp list --json has no mcp_adhoc_echo: %s", stdout)
	})
}
