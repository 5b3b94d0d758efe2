package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMCPCallFilesystemDefaultRoots makes one-shot calls to the real
// server-filesystem started without directories: it asks for the roots
// (the workspace) after initialize and applies them asynchronously, and
// each call must find the workspace allowed.
func TestMCPCallFilesystemDefaultRoots(t *testing.T) {
	t.Parallel()
	fs := nodePeer(t, "server-filesystem", nil)
	workspace := t.TempDir()
	note := filepath.Join(workspace, "note.txt")
	if err := os.WriteFile(note, []byte("inside the workspace"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HARNESS_WORKSPACE": workspace}
	for i := range 3 {
		code, out, errOut := runHarnessd(t, env, append([]string{"mcp", "call", "--name", "fs", "mcp_fs_read_text_file",
			`{"path":` + string(mustJSON(t, note)) + `}`, "--", fs.Command}, fs.Args...)...)
		if code != 0 || strings.TrimSpace(out) != "inside the workspace" {
			t.Fatalf("call %d: exit %d, stdout %q, stderr %q; want the note", i+1, code, out, errOut)
		}
	}
}
