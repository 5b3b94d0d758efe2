package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests the user's own first example (the seed's
// HARNESS_MCP_SERVERS: server-filesystem given /tmp): the directory the
// operator wrote is the one served, through mcp call and through a run,
// never the workspace.

// seedTmpDir returns a fresh directory under /tmp, as in the seed's
// example: t.TempDir() when it is there, else one made under /tmp and
// removed at cleanup.
func seedTmpDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if strings.HasPrefix(dir, "/tmp/") {
		return dir
	}
	dir, err := os.MkdirTemp("/tmp", "harnessd-seed-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// seedFilesystemServers returns the seed's HARNESS_MCP_SERVERS example
// with server-filesystem (started with node, as every npm peer is) given
// dir, and extra fields added to the entry.
func seedFilesystemServers(t *testing.T, dir string, extra map[string]any) string {
	t.Helper()
	fs := nodePeer(t, "server-filesystem", nil, dir)
	entry := map[string]any{"name": "filesystem", "command": fs.Command, "args": fs.Args}
	for k, v := range extra {
		entry[k] = v
	}
	return serversJSON(t, entry)
}

// writeNote writes text to dir/note.txt and returns its path.
func writeNote(t *testing.T, dir, text string) string {
	t.Helper()
	note := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(note, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return note
}

// TestSeedExampleMCPCall reads a file under /tmp through harnessd mcp call
// with the seed's HARNESS_MCP_SERVERS, run from a workspace elsewhere: the
// server keeps the directory of its command line.
func TestSeedExampleMCPCall(t *testing.T) {
	t.Parallel()
	dir := seedTmpDir(t)
	note := writeNote(t, dir, "written under /tmp")
	env := map[string]string{"HARNESS_MCP_SERVERS": seedFilesystemServers(t, dir, nil)}
	code, out, errOut := runHarnessd(t, env, "mcp", "call", "--workspace", t.TempDir(),
		"mcp_filesystem_read_text_file", `{"path":`+string(mustJSON(t, note))+`}`)
	if code != 0 || strings.TrimSpace(out) != "written under /tmp" {
		t.Fatalf("mcp call = exit %d, stdout %q, stderr %q; want the note under /tmp", code, out, errOut)
	}
}

// TestSeedExampleRun reads a file under /tmp in a run with a scripted
// model, in a harnessd (the built binary) started with the seed's
// HARNESS_MCP_SERVERS from a workspace elsewhere; the workspace, which
// the server was not given, is refused.
func TestSeedExampleRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	t.Parallel()
	dir, workspace := seedTmpDir(t), t.TempDir()
	note := writeNote(t, dir, "written under /tmp")
	inWorkspace := writeNote(t, workspace, "inside the workspace")
	servers := seedFilesystemServers(t, dir, nil)
	bin := buildHarnessd(t)
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:mcp_filesystem_read_text_file"}`)},
		fakeTurn{ToolCalls: calls(
			"mcp_filesystem_read_text_file#tmp", `{"path":`+string(mustJSON(t, note))+`}`,
			"mcp_filesystem_read_text_file#workspace", `{"path":`+string(mustJSON(t, inWorkspace))+`}`)},
		answerWithResults,
	)
	home := t.TempDir()
	_, at := serveHarnessd(t, bin, fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model", "HARNESS_MCP_SERVERS="+servers), workspace)
	waitUntil(t, "the filesystem server is ready", func() bool {
		resp, _ := at.do(t, "GET", "/readyz", "", "")
		return resp.StatusCode == http.StatusOK
	})
	v := waitRunEnded(t, at, at.postRun(t, "", `{"prompt":"read the note under /tmp"}`))
	requireCompleted(t, v)
	lines := strings.Split(v.Output, "\n")
	if len(lines) != 2 || lines[0] != "ok: written under /tmp" || !strings.HasPrefix(lines[1], "error: ") || !strings.Contains(lines[1], "outside allowed directories") {
		t.Errorf("output = %q, want the note under /tmp read and the workspace refused", v.Output)
	}
}
