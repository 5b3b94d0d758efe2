package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests a run's own roots: how they are validated, which servers
// get them, and a real server-filesystem reading through them.

func TestRootsFor(t *testing.T) {
	t.Parallel()
	uris := func(rs []root) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.URI)
		}
		return out
	}
	tests := []struct {
		name   string
		server []string
		want   []string
	}{
		{"default", nil, []string{"file:///work"}},
		{"server roots", []string{"/srv/b"}, []string{"file:///srv/b"}},
		{"server declares none", []string{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := uris(rootsFor(serverConfig{Roots: tt.server}, []string{"/work"}))
			if !slices.Equal(got, tt.want) {
				t.Errorf("rootsFor(%v) = %v, want %v", tt.server, got, tt.want)
			}
		})
	}
}

func TestWithRunRoots(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		runRoots []string
		origin   serverOrigin
		server   []string
		want     []string
	}{
		{"no run roots", nil, originProfile, []string{"/srv"}, []string{"/srv"}},
		{"run roots replace a profile server's", []string{"/run"}, originProfile, []string{"/srv"}, []string{"/run"}},
		{"run roots for a connect_mcp server", []string{"/run"}, originConnect, nil, []string{"/run"}},
		{"run roots for a per-run server naming none", []string{"/run"}, originPerRun, nil, []string{"/run"}},
		{"a per-run server's own roots win", []string{"/run"}, originPerRun, []string{"/own"}, []string{"/own"}},
		{"run declares none", []string{}, originProfile, []string{"/srv"}, []string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &runScope{roots: tt.runRoots}
			got := s.withRunRoots(serverConfig{Roots: tt.server, Origin: tt.origin}).Roots
			if !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("withRunRoots(%v, %v) with run roots %v = %#v, want %#v", tt.server, tt.origin, tt.runRoots, got, tt.want)
			}
		})
	}
}

func TestRunRootsValidated(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	tests := []struct {
		name  string
		roots []string
		want  string
	}{
		{"relative", []string{"relative"}, `roots[0]: \"relative\" is not an absolute directory path; write the full path`},
		{"missing", []string{dir, dir + "/nope"}, `roots[1]: \"` + dir + `/nope\" does not exist on the daemon's host; roots must be existing directories`},
		{"file", []string{file}, `roots[0]: \"` + file + `\" is a file; roots must be directories`},
		{"every problem", []string{"", file}, `roots[0]: \"\" is not an absolute directory path; write the full path\nroots[1]: \"` + file + `\" is a file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := json.Marshal(map[string]any{"prompt": "x", "roots": tt.roots})
			if err != nil {
				t.Fatal(err)
			}
			resp, data := at.do(t, "POST", "/v1/runs", "", string(body))
			if resp.StatusCode != 400 || !strings.Contains(string(data), tt.want) {
				t.Errorf("POST /v1/runs %s = %d %s, want 400 with %s", body, resp.StatusCode, data, tt.want)
			}
		})
	}
}

// TestRealRunRootsServerFilesystem runs with roots outside the workspace:
// the run's own server-filesystem, started on the workspace, replaces its
// directories with the run's roots and reads there; the global one keeps
// the workspace and refuses.
func TestRealRunRootsServerFilesystem(t *testing.T) {
	t.Parallel()
	workspace, outside := t.TempDir(), t.TempDir()
	note := filepath.Join(outside, "note.txt")
	if err := os.WriteFile(note, []byte("outside the workspace"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := newPeerRegistry(t, workspace, stdioPeerConfig("files", filesystemStdioCommand(t, workspace)))
	fs := filesystemStdioCommand(t, workspace)
	servers, err := json.Marshal([]map[string]any{{"name": "runfs", "command": fs.Command, "args": fs.Args}})
	if err != nil {
		t.Fatal(err)
	}
	args := `{"path":` + string(mustJSON(t, note)) + `}`
	// server-filesystem applies the roots it gets after initialize
	// asynchronously; the call waits until its stderr says it has.
	applied := make(chan struct{})
	var once sync.Once
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		if bytes.Contains(b, []byte("Updated allowed directories from MCP roots")) {
			once.Do(func() { close(applied) })
		}
		return len(b), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{Reply: func(fakeRequest) fakeTurn {
			select {
			case <-applied:
			case <-t.Context().Done():
			}
			return fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:mcp_runfs_read_text_file,mcp_files_read_text_file"}`)}
		}},
		fakeTurn{ToolCalls: calls("mcp_runfs_read_text_file", args, "mcp_files_read_text_file", args)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", logger)
	r, err := m.start(runRequest{Prompt: "read the note", MCPServers: servers, Roots: []string{outside}}, true)
	if err != nil {
		t.Fatalf("start with roots %s = %v", outside, err)
	}
	v := waitRun(t, r)
	requireCompleted(t, v)
	lines := strings.Split(v.Output, "\n")
	if len(lines) < 2 || lines[0] != "ok: outside the workspace" || !strings.HasPrefix(lines[1], "error: ") || !strings.Contains(lines[1], "outside allowed directories") {
		t.Errorf("output = %q, want the run's server to read the note and the global one to refuse it", v.Output)
	}
}

// A writerFunc is an io.Writer that calls itself.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

// TestReloadRerootsServerFilesystem changes a global server-filesystem's
// roots by a reload: the same process is told with
// notifications/roots/list_changed, asks for its roots again and then
// reads in the new directory, which it refused before.
func TestReloadRerootsServerFilesystem(t *testing.T) {
	t.Parallel()
	workspace, outside := t.TempDir(), t.TempDir()
	note := filepath.Join(outside, "note.txt")
	if err := os.WriteFile(note, []byte("outside the workspace"), 0o644); err != nil {
		t.Fatal(err)
	}
	// server-filesystem says on stderr each time it has applied the roots
	// it asked for: once after the handshake, once per list_changed.
	applied := make(chan struct{}, 4)
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		if bytes.Contains(b, []byte("Updated allowed directories from MCP roots")) {
			applied <- struct{}{}
		}
		return len(b), nil
	}), &slog.HandlerOptions{Level: slog.LevelDebug}))
	waitApplied := func(when string) {
		t.Helper()
		select {
		case <-applied:
		case <-time.After(waitLimit):
			t.Fatalf("server-filesystem did not apply its roots %s", when)
		}
	}
	cfg := stdioPeerConfig("files", filesystemStdioCommand(t, workspace))
	reg := startRegistry(t, []serverConfig{cfg}, registryOptions{Logger: logger, Client: clientOptions{Roots: []string{workspace}}})
	waitRegistryReady(t, reg)
	waitApplied("after the handshake")
	before := reg.server("files")
	read := func() (string, error) {
		scope := reg.newScope(discardLogger())
		defer scope.close()
		res, err := scope.callTool(t.Context(), "files", "read_text_file", json.RawMessage(`{"path":`+string(mustJSON(t, note))+`}`))
		if err != nil {
			return "", err
		}
		var text []string
		for _, b := range res.Content {
			text = append(text, b.Text)
		}
		return strings.Join(text, "\n"), nil
	}
	if got, err := read(); err == nil && !strings.Contains(got, "outside allowed directories") {
		t.Fatalf("read before the reload = %q, want a refusal outside the workspace", got)
	}

	rerooted := cfg
	rerooted.Roots = []string{outside}
	d, _, err := reg.reload([]serverConfig{rerooted})
	if err != nil {
		t.Fatalf("reload() = %v", err)
	}
	if !slices.Equal(d.Rerooted, []string{"files"}) || len(d.Restarted) != 0 {
		t.Fatalf("reload() = %+v, want files rerooted, nothing restarted", d)
	}
	waitApplied("after the reload")
	if reg.server("files") != before || before.snapshot().Restarts != 0 {
		t.Errorf("the rerooted server was replaced or restarted")
	}
	if got, err := read(); err != nil || got != "outside the workspace" {
		t.Errorf("read after the reload = %q, %v; want the note", got, err)
	}
	if got := reg.globals()[0].Roots; !slices.Equal(got, []string{outside}) {
		t.Errorf("globals()[0].Roots = %v, want %v (the next reload compares with it)", got, []string{outside})
	}
}
