package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"maps"
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

// TestRootsAnswered resolves the answer to roots/list from a server's
// configured roots and its run's: what is configured, else an empty
// list, never the workspace.
func TestRootsAnswered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		origin   serverOrigin
		server   []string // the server's roots; nil: none configured
		runRoots []string // the run request's roots; nil: none
		want     string   // the result of roots/list, as JSON
	}{
		{"none configured", originGlobal, nil, nil, `{"roots":[]}`},
		{"server roots", originGlobal, []string{"/srv/b"}, nil, `{"roots":[{"uri":"file:///srv/b","name":"b"}]}`},
		{"server declares none", originGlobal, []string{}, nil, `{"roots":[]}`},
		{"a global server never gets a run's roots", originGlobal, nil, []string{"/run"}, `{"roots":[]}`},
		{"a profile server gets its run's roots", originProfile, nil, []string{"/run"}, `{"roots":[{"uri":"file:///run","name":"run"}]}`},
		{"run roots replace a profile server's", originProfile, []string{"/srv"}, []string{"/run"}, `{"roots":[{"uri":"file:///run","name":"run"}]}`},
		{"a per-run server's own roots win", originPerRun, []string{"/own"}, []string{"/run"}, `{"roots":[{"uri":"file:///own","name":"own"}]}`},
		{"a per-run server without roots in a run without roots", originPerRun, nil, nil, `{"roots":[]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serverConfig{Name: "s", Roots: tt.server, Origin: tt.origin}
			if tt.origin != originGlobal { // a run-local server: its run's roots apply
				cfg = (&runScope{roots: tt.runRoots}).withRunRoots(cfg)
			}
			res, rpcErr, handled := (&conn{cfg: cfg}).answerServerInput(t.Context(), nil, "roots/list", nil)
			if !handled || rpcErr != nil {
				t.Fatalf("answerServerInput(roots/list) = handled %v, %v", handled, rpcErr)
			}
			if got := string(mustJSON(t, res)); got != tt.want {
				t.Errorf("roots/list for roots %v in a run with roots %v = %s, want %s", tt.server, tt.runRoots, got, tt.want)
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
	reg := newPeerRegistry(t, stdioPeerConfig("files", filesystemStdioCommand(t, workspace)))
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
	// server-filesystem says on stderr each time it has taken the roots
	// it asked for: once after the handshake (none: it keeps its own
	// directory), once per list_changed.
	applied := make(chan struct{}, 4)
	logger := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		if bytes.Contains(b, []byte("Updated allowed directories from MCP roots")) || bytes.Contains(b, []byte("No valid root directories provided by client")) {
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
	reg := startRegistry(t, []serverConfig{cfg}, registryOptions{Logger: logger})
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

// TestWorkspaceVarInRoots expands ${HARNESS_WORKSPACE} in a server's
// roots to the workspace in effect: the one --workspace gave, over
// HARNESS_WORKSPACE, and the variable's own value when no workspace is
// known to the loader.
func TestWorkspaceVarInRoots(t *testing.T) {
	t.Parallel()
	workspace := t.TempDir()
	servers := `[{"name": "fs", "command": "server", "roots": ["${HARNESS_WORKSPACE}", "${HARNESS_WORKSPACE}/sub"]}]`
	tests := []struct {
		name      string
		workspace string
		env       map[string]string
		want      []string
	}{
		{"from the flag, variable unset", workspace, nil, []string{workspace, workspace + "/sub"}},
		{"the flag wins over the variable", workspace, map[string]string{"HARNESS_WORKSPACE": "/elsewhere"}, []string{workspace, workspace + "/sub"}},
		{"no workspace: the variable", "", map[string]string{"HARNESS_WORKSPACE": "/from/env"}, []string{"/from/env", "/from/env/sub"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"HARNESS_MCP_SERVERS": servers}
			maps.Copy(env, tt.env)
			cfg, err := loadConfig(loadOptions{Home: t.TempDir(), Workspace: tt.workspace, Getenv: fakeEnv(env)})
			if err != nil {
				t.Fatalf("loadConfig() = %v", err)
			}
			if got := cfg.Servers[0].Roots; !slices.Equal(got, tt.want) {
				t.Errorf("roots = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWorkspaceRootsFromFlag answers roots/list with the workspace given
// by --workspace, through roots = ["${HARNESS_WORKSPACE}"] in a config
// file, while HARNESS_WORKSPACE names another directory: the Go SDK
// server's list_roots says what it was answered.
func TestWorkspaceRootsFromFlag(t *testing.T) {
	t.Parallel()
	echo := buildEchoServer(t)
	home, workspace := t.TempDir(), t.TempDir()
	config := "[mcp_servers.sdk]\ncommand = " + string(mustJSON(t, echo)) + "\nargs = [\"stdio\", \"-full\"]\nroots = [\"${HARNESS_WORKSPACE}\"]\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HARNESS_HOME": home, "HARNESS_WORKSPACE": t.TempDir()}
	code, out, errOut := runHarnessd(t, env, "mcp", "call", "--workspace", workspace, "mcp_sdk_list_roots", "{}")
	if want := "file://" + workspace; code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("mcp call mcp_sdk_list_roots = exit %d, stdout %q, stderr %q; want %s", code, out, errOut, want)
	}
}
