package main

import (
	"strings"
	"testing"
)

// TestMCPCallFilesystemRootsSettle makes one-shot calls to the real
// server-filesystem started without directories and given the workspace
// as its roots: it asks for them after initialize and applies them
// asynchronously, and each call must find the workspace allowed.
func TestMCPCallFilesystemRootsSettle(t *testing.T) {
	t.Parallel()
	fs := nodePeer(t, "server-filesystem", nil)
	workspace := t.TempDir()
	note := writeNote(t, workspace, "inside the workspace")
	env := map[string]string{
		"HARNESS_WORKSPACE": workspace,
		"HARNESS_MCP_SERVERS": serversJSON(t, map[string]any{"name": "fs", "command": fs.Command, "args": fs.Args,
			"roots": []string{"${HARNESS_WORKSPACE}"}}),
	}
	for i := range 3 {
		code, out, errOut := runHarnessd(t, env, "mcp", "call", "mcp_fs_read_text_file", `{"path":`+string(mustJSON(t, note))+`}`)
		if code != 0 || strings.TrimSpace(out) != "inside the workspace" {
			t.Fatalf("call %d: exit %d, stdout %q, stderr %q; want the note", i+1, code, out, errOut)
		}
	}
}
