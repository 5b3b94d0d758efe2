package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// This file tests the registry: parallel startup, restarts, live tool
// lists, run scopes, the environment of stdio servers and shutdown.

// startRegistry starts a registry over servers, closed at cleanup.
func startRegistry(t *testing.T, servers []serverConfig, opts registryOptions) *registry {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	reg := newRegistry(servers, opts)
	t.Cleanup(reg.close)
	return reg
}

// waitRegistryReady waits for every first attempt, failing after waitLimit.
func waitRegistryReady(t *testing.T, reg *registry) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	if err := reg.waitReady(ctx); err != nil {
		t.Fatalf("waitReady() = %v", err)
	}
}

// statusOf returns the status of the global server name.
func statusOf(t *testing.T, reg *registry, name string) serverStatus {
	t.Helper()
	ms := reg.server(name)
	if ms == nil {
		t.Fatalf("server(%q) = nil", name)
	}
	return ms.snapshot()
}

// toolNames returns the mcp_ names of every tool the scope reaches, sorted.
func toolNames(s *runScope) []string {
	var names []string
	for _, ts := range s.toolSets() {
		for _, e := range ts.entries {
			names = append(names, e.Name)
		}
	}
	slices.Sort(names)
	return names
}

// namedFake returns the config of a fake stdio server in mode named name.
func namedFake(t *testing.T, name, mode string) serverConfig {
	t.Helper()
	cfg := fakeServerConfig(t, mode)
	cfg.Name = name
	return cfg
}

// TestRegistryConnectsInParallel starts ten servers and one that never
// answers initialize: the ten are ready while the hanging one still
// connects, and waitReady returns once it has timed out.
func TestRegistryConnectsInParallel(t *testing.T) {
	t.Parallel()
	var servers []serverConfig
	for i := range 10 {
		servers = append(servers, namedFake(t, fmt.Sprintf("fast%d", i), "normal"))
	}
	// hanging connects for as long as the test lasts: however slow the
	// machine, the ten are ready while it still connects. (Its
	// startup_timeout error: TestFaultsStdioServers.)
	hanging := namedFake(t, "hanging", "hang-initialize")
	hanging.StartupTimeout = time.Hour
	servers = append(servers, hanging)
	logs := newLogRecorder()
	reg := startRegistry(t, servers, registryOptions{Logger: logs.logger()})

	logs.waitFor(t, "ten servers ready", func(records []loggedRecord) bool {
		ready := 0
		for _, r := range records {
			if r.Message == "server ready" {
				ready++
			}
		}
		return ready >= 10
	})
	for _, st := range reg.statuses() {
		want := statusReady
		if st.Name == "hanging" {
			want = statusConnecting
		}
		if st.Status != want {
			t.Errorf("while %q connects: status of %q = %q (%s), want %q", "hanging", st.Name, st.Status, st.Error, want)
		}
	}
	if reg.isReady() {
		t.Errorf("isReady() = true while %q still connects, want false", "hanging")
	}
	for i := range 10 {
		name := fmt.Sprintf("fast%d", i)
		if st := statusOf(t, reg, name); st.Status != statusReady || len(st.Tools) != 4 {
			t.Errorf("status of %q = %q with %d tools, want %q with 4", name, st.Status, len(st.Tools), statusReady)
		}
	}
}

// TestRegistryRestartsCrashedServer crashes a server: a call while it is
// down fails at once with its exit status and stderr, and it comes back.
func TestRegistryRestartsCrashedServer(t *testing.T) {
	t.Parallel()
	logs := newLogRecorder()
	reg := startRegistry(t, []serverConfig{namedFake(t, "crashy", "normal")}, registryOptions{
		Logger:     logs.logger(),
		Restart:    true,
		BackoffMin: 500 * time.Millisecond,
		BackoffMax: 500 * time.Millisecond,
	})
	waitRegistryReady(t, reg)
	if st := statusOf(t, reg, "crashy"); st.Status != statusReady || st.Restarts != 0 {
		t.Fatalf("status = %q, restarts %d, want %q, 0", st.Status, st.Restarts, statusReady)
	}
	scope := reg.newScope(discardLogger())
	t.Cleanup(scope.close)

	wantDown := []string{`server "crashy"`, "exited with status 3", "panic: boom"}
	_, err := scope.callTool(t.Context(), "crashy", "crash", nil)
	for _, want := range wantDown {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("callTool(crash) = %v, want an error containing %q", err, want)
		}
	}
	_, err = scope.callTool(t.Context(), "crashy", "echo", json.RawMessage(`{"message":"anyone?"}`))
	if !errors.Is(err, errServerUnavailable) {
		t.Errorf("callTool(echo) while down = %v, want errServerUnavailable", err)
	}
	for _, want := range wantDown {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("callTool(echo) while down = %v, want an error containing %q", err, want)
		}
	}

	logs.waitFor(t, "status restarting", func([]loggedRecord) bool {
		st := statusOf(t, reg, "crashy")
		return st.Status == statusRestarting && st.Restarts == 1
	})
	if st := statusOf(t, reg, "crashy"); !strings.Contains(st.Error, "panic: boom") {
		t.Errorf("status while restarting: error %q, want the stderr tail %q", st.Error, "panic: boom")
	}
	logs.waitFor(t, "status ready again", func([]loggedRecord) bool {
		return statusOf(t, reg, "crashy").Status == statusReady
	})
	if st := statusOf(t, reg, "crashy"); st.Restarts != 1 || st.Error != "" {
		t.Errorf("status after restart: restarts %d, error %q, want 1 and none", st.Restarts, st.Error)
	}
	res, err := scope.callTool(t.Context(), "crashy", "echo", json.RawMessage(`{"message":"back"}`))
	if err != nil || resultText(t, res) != "back" {
		t.Errorf("callTool(echo) after restart = %v, %v, want %q", res, err, "back")
	}
}

// TestRegistryReconnectsHTTPServer stops a global Streamable HTTP server
// (the Go SDK echoserver) and starts it again on the same address: the
// session ends at the first refused connection, calls fail at once saying
// the server is unreachable, and the registry reconnects by itself.
func TestRegistryReconnectsHTTPServer(t *testing.T) {
	t.Parallel()
	bin := buildEchoServer(t)
	start := func(addr string) (*exec.Cmd, string) {
		cmd := exec.Command(bin, "http", "-addr", addr)
		url := startHTTPPeer(t, "echoserver http", cmd, true, func(line string) (string, bool) {
			return strings.CutPrefix(line, "listening ")
		})
		return cmd, url
	}
	first, endpoint := start("127.0.0.1:0")
	logs := newLogRecorder()
	reg := startRegistry(t, []serverConfig{httpPeerConfig("echo", transportHTTP, endpoint)}, registryOptions{
		Logger:     logs.logger(),
		Restart:    true,
		BackoffMin: 100 * time.Millisecond,
		BackoffMax: 200 * time.Millisecond,
	})
	waitRegistryReady(t, reg)
	scope := reg.newScope(discardLogger())
	t.Cleanup(scope.close)
	if _, err := scope.callTool(t.Context(), "echo", "echo", json.RawMessage(`{"message":"up"}`)); err != nil {
		t.Fatalf("callTool(echo) = %v", err)
	}

	if err := syscall.Kill(-first.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	// The first call may still go out on the kept-alive connection of the
	// dead server and fail with EOF; the next one must dial, and be refused.
	_, err := scope.callTool(t.Context(), "echo", "echo", json.RawMessage(`{"message":"down"}`))
	if err != nil && !strings.Contains(err.Error(), "connection refused") && !errors.Is(err, errServerUnavailable) {
		_, err = scope.callTool(t.Context(), "echo", "echo", json.RawMessage(`{"message":"down again"}`))
	}
	if err == nil || !strings.Contains(err.Error(), "connection refused") && !errors.Is(err, errServerUnavailable) {
		t.Fatalf("callTool(echo) with the server down = %v, want connection refused", err)
	}
	logs.waitFor(t, "the server marked down", func([]loggedRecord) bool {
		st := statusOf(t, reg, "echo")
		return st.Status != statusReady && strings.Contains(st.Error, "server unreachable")
	})
	if _, err := scope.callTool(t.Context(), "echo", "echo", nil); !errors.Is(err, errServerUnavailable) {
		t.Errorf("callTool(echo) while down = %v, want errServerUnavailable at once", err)
	}

	start(strings.TrimSuffix(strings.TrimPrefix(endpoint, "http://"), "/mcp"))
	logs.waitFor(t, "status ready again", func([]loggedRecord) bool {
		return statusOf(t, reg, "echo").Status == statusReady
	})
	res, err := scope.callTool(t.Context(), "echo", "echo", json.RawMessage(`{"message":"back"}`))
	if err != nil || resultText(t, res) != "back" {
		t.Errorf("callTool(echo) after the restart = %v, %v, want %q", res, err, "back")
	}
}

// TestRegistryWarnsOfToolNameClashes has two servers whose tools get the
// same mcp_ name (server "a" tool "b_c", server "a_b" tool "c"): the
// operator is told which tool is unreachable.
func TestRegistryWarnsOfToolNameClashes(t *testing.T) {
	t.Parallel()
	offering := func(tool string) *fakeMCP {
		return newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
			if m.Method != "tools/list" {
				return false
			}
			writeRPCResult(w, m.ID, map[string]any{"tools": []any{map[string]any{"name": tool, "inputSchema": map[string]any{"type": "object"}}}})
			return true
		})
	}
	logs := newLogRecorder()
	reg := startRegistry(t, []serverConfig{scriptedConfig("a", offering("b_c")), scriptedConfig("a_b", offering("c"))}, registryOptions{Logger: logs.logger()})
	waitRegistryReady(t, reg)
	logs.waitFor(t, "a warning naming the clash", func(records []loggedRecord) bool {
		for _, r := range records {
			if strings.HasPrefix(r.Message, "tool name also used by another server") && r.Attrs["tool"] == "mcp_a_b_c" {
				return true
			}
		}
		return false
	})
}

// TestRegistryToolsListChanged has a server add a tool and announce it:
// the registry re-lists and every scope sees the new tool.
func TestRegistryToolsListChanged(t *testing.T) {
	t.Parallel()
	var grown atomic.Bool
	s := newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
		switch m.Method {
		case "tools/list":
			tools := []any{map[string]any{"name": "grow", "inputSchema": map[string]any{"type": "object"}}}
			if grown.Load() {
				tools = append(tools, map[string]any{"name": "grown", "inputSchema": map[string]any{"type": "object"}})
			}
			writeRPCResult(w, m.ID, map[string]any{"tools": tools})
			return true
		case "tools/call":
			grown.Store(true)
			writeSSE(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"+
				"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":"+string(m.ID)+",\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"grown\"}]}}\n\n")
			return true
		}
		return false
	})
	logs := newLogRecorder()
	reg := startRegistry(t, []serverConfig{scriptedConfig("growing", s)}, registryOptions{Logger: logs.logger()})
	waitRegistryReady(t, reg)
	scope := reg.newScope(discardLogger())
	t.Cleanup(scope.close)
	if got, want := toolNames(scope), []string{"mcp_growing_grow"}; !slices.Equal(got, want) {
		t.Fatalf("tools before the change = %q, want %q", got, want)
	}
	if _, err := scope.callTool(t.Context(), "growing", "grow", nil); err != nil {
		t.Fatalf("callTool(grow) = %v", err)
	}
	want := []string{"mcp_growing_grow", "mcp_growing_grown"}
	logs.waitFor(t, "the new tool", func([]loggedRecord) bool { return slices.Equal(toolNames(scope), want) })
	if got := statusOf(t, reg, "growing").Tools; len(got) != 2 {
		t.Errorf("status tools = %+v, want both tools", got)
	}
}

// TestRunScopes checks shadowing and isolation: a profile server shadows
// a global of its name in its own scope only, a scope closes only its own
// servers, and same-named local servers of two scopes stay apart.
func TestRunScopes(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, []serverConfig{namedFake(t, "shared", "normal")}, registryOptions{})
	waitRegistryReady(t, reg)
	globalTools := []string{"mcp_shared_crash", "mcp_shared_echo", "mcp_shared_fail", "mcp_shared_hang"}
	pagedTools := func(server string) []string {
		return []string{"mcp_" + server + "_tool0", "mcp_" + server + "_tool1", "mcp_" + server + "_tool2"}
	}

	open := func(s *runScope, servers ...serverConfig) {
		t.Helper()
		for i := range servers {
			servers[i].Origin = originProfile
		}
		s.open(t.Context(), servers, func(ev scopeEvent) {
			if ev.Err != nil {
				t.Errorf("open %q in a scope: %v", ev.Server, ev.Err)
			}
		})
	}
	echo := func(s *runScope, server string) error {
		res, err := s.callTool(t.Context(), server, "echo", json.RawMessage(`{"message":"ping"}`))
		if err == nil && resultText(t, res) != "ping" {
			return fmt.Errorf("echo = %q, want %q", resultText(t, res), "ping")
		}
		return err
	}

	profiled := reg.newScope(discardLogger())
	plain := reg.newScope(discardLogger())
	t.Cleanup(plain.close)
	profile := namedFake(t, "shared", "paginate")
	profile.Source = "profile analyst"
	open(profiled, profile)
	if got, want := toolNames(profiled), pagedTools("shared"); !slices.Equal(got, want) {
		t.Errorf("tools of the profile's scope = %q, want %q (the profile server shadows the global)", got, want)
	}
	if got := toolNames(plain); !slices.Equal(got, globalTools) {
		t.Errorf("tools of another scope = %q, want %q (the global)", got, globalTools)
	}
	if profiled.server("shared") == reg.server("shared") || plain.server("shared") != reg.server("shared") {
		t.Errorf("server(%q): the profile's scope must reach its own server, the other scope the global", "shared")
	}

	profiled.close()
	if st := profiled.server("shared").snapshot(); st.Status != statusClosed {
		t.Errorf("profile server after its scope closed: status %q, want %q", st.Status, statusClosed)
	}
	if err := echo(profiled, "shared"); !errors.Is(err, errServerUnavailable) {
		t.Errorf("echo in a closed scope = %v, want errServerUnavailable", err)
	}
	if st := statusOf(t, reg, "shared"); st.Status != statusReady {
		t.Errorf("global after a scope closed: status %q, want %q", st.Status, statusReady)
	}
	if err := echo(plain, "shared"); err != nil {
		t.Errorf("echo on the global after another scope closed: %v", err)
	}

	first := reg.newScope(discardLogger())
	second := reg.newScope(discardLogger())
	t.Cleanup(second.close)
	open(first, namedFake(t, "helper", "normal"))
	open(second, namedFake(t, "helper", "paginate"))
	wantFirst := append(slices.Clone(globalTools), "mcp_helper_crash", "mcp_helper_echo", "mcp_helper_fail", "mcp_helper_hang")
	slices.Sort(wantFirst)
	if got := toolNames(first); !slices.Equal(got, wantFirst) {
		t.Errorf("tools of the first scope = %q, want %q", got, wantFirst)
	}
	wantSecond := append(slices.Clone(globalTools), pagedTools("helper")...)
	slices.Sort(wantSecond)
	if got := toolNames(second); !slices.Equal(got, wantSecond) {
		t.Errorf("tools of the second scope = %q, want %q", got, wantSecond)
	}
	first.close()
	if err := echo(second, "helper"); err != nil {
		t.Errorf("echo on the second scope's helper after the first closed: %v", err)
	}
	if st := second.server("helper").snapshot(); st.Status != statusReady {
		t.Errorf("second scope's helper after the first closed: status %q, want %q", st.Status, statusReady)
	}
}

// TestScopeServerCrash crashes a run's own server, which nothing
// restarts: its status turns failed with the exit status and stderr, and
// calls fail at once saying why.
func TestScopeServerCrash(t *testing.T) {
	t.Parallel()
	reg := startRegistry(t, nil, registryOptions{})
	scope := reg.newScope(discardLogger())
	t.Cleanup(scope.close)
	mine := namedFake(t, "mine", "normal")
	mine.Origin = originPerRun
	if err := scope.add(t.Context(), mine); err != nil {
		t.Fatalf("add(mine) = %v", err)
	}
	if _, err := scope.callTool(t.Context(), "mine", "crash", nil); err == nil {
		t.Fatal("callTool(crash) succeeded, want the lost connection")
	}
	wants := []string{"exited with status 3", "panic: boom"}
	_, err := scope.callTool(t.Context(), "mine", "echo", json.RawMessage(`{"message":"hello?"}`))
	if !errors.Is(err, errServerUnavailable) {
		t.Errorf("callTool(echo) after the crash = %v, want errServerUnavailable", err)
	}
	statuses := scope.localStatuses()
	if len(statuses) != 1 || statuses[0].Status != statusFailed {
		t.Fatalf("localStatuses() = %+v, want mine %q", statuses, statusFailed)
	}
	for _, want := range wants {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("callTool(echo) after the crash = %v, want it to contain %q", err, want)
		}
		if !strings.Contains(statuses[0].Error, want) {
			t.Errorf("status error = %q, want it to contain %q", statuses[0].Error, want)
		}
	}
}

// TestStdioServerEnvironment asks server-everything for its environment:
// it has the configured env and the inherited minimum, never the rest of
// harnessd's environment.
func TestStdioServerEnvironment(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	parent := map[string]string{
		"PATH":            os.Getenv("PATH"),
		"HOME":            home,
		"LANG":            "C.UTF-8",
		"OPENAI_API_KEY":  "sk-parent-secret",
		"HARNESS_API_KEY": "parent-secret",
	}
	cfg := stdioPeerConfig("everything", everythingStdioCommand(t))
	cfg.Env = map[string]string{"GREETING": "configured", "LANG": "en_US.UTF-8"}
	reg := startRegistry(t, []serverConfig{cfg}, registryOptions{Client: clientOptions{
		Getenv: func(k string) (string, bool) { v, ok := parent[k]; return v, ok },
	}})
	waitRegistryReady(t, reg)
	scope := reg.newScope(discardLogger())
	t.Cleanup(scope.close)
	res, err := scope.callTool(t.Context(), "everything", "get-env", nil)
	if err != nil {
		t.Fatalf("callTool(get-env) = %v", err)
	}
	var env map[string]string
	if err := json.Unmarshal([]byte(resultText(t, res)), &env); err != nil {
		t.Fatalf("get-env = %q: %v", resultText(t, res), err)
	}
	want := map[string]string{"PATH": parent["PATH"], "HOME": home, "LANG": "en_US.UTF-8", "GREETING": "configured"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("server env %s = %q, want %q", k, env[k], v)
		}
	}
	for k := range env {
		if _, ok := want[k]; !ok {
			t.Errorf("server env has %s, want only %v", k, slices.Sorted(maps.Keys(want)))
		}
	}
}

// processesInGroup returns the live (not zombie) processes of process
// group pgid, by pid, with their command lines.
func processesInGroup(t *testing.T, pgid int) map[int]string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]string{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// After the command name in parentheses: state, ppid, pgrp.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 3 || fields[0] == "Z" || fields[2] != strconv.Itoa(pgid) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		out[pid] = strings.Join(strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00"), " ")
	}
	return out
}

// TestRegistryCloseLeavesNoProcess starts server-everything through npx,
// which forks a shell and node under it, and checks that closing the
// registry leaves none of them running.
func TestRegistryCloseLeavesNoProcess(t *testing.T) {
	t.Parallel()
	modules := requireNode(t)
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Skip("npx is not on PATH")
	}
	cfg := stdioPeerConfig("everything", peerCommand{
		Command: npx,
		Args:    []string{"--no-install", "--prefix", filepath.Dir(modules), "mcp-server-everything", "stdio"},
		Env: map[string]string{
			"npm_config_cache":           t.TempDir(),
			"npm_config_offline":         "true",
			"npm_config_update_notifier": "false",
		},
	})
	reg := newRegistry([]serverConfig{cfg}, registryOptions{Logger: discardLogger()})
	closed := false
	t.Cleanup(func() {
		if !closed {
			reg.close()
		}
	})
	waitRegistryReady(t, reg)
	c, err := reg.server("everything").current()
	if err != nil {
		t.Fatalf("server(everything) = %v", err)
	}
	leader := c.t.(*stdioTransport).cmd.Process.Pid
	before := processesInGroup(t, leader)
	server := 0
	for pid, cmdline := range before {
		if pid != leader && strings.Contains(cmdline, "node") && strings.Contains(cmdline, "mcp-server-everything") {
			server = pid
		}
	}
	if len(before) < 3 || server == 0 {
		t.Fatalf("process group %d = %v, want npx, a shell and node running mcp-server-everything", leader, before)
	}

	reg.close()
	closed = true
	for pid, cmdline := range before {
		if !eventually(5*time.Second, func() bool { return !processAlive(pid) }) {
			t.Errorf("after close: process %d (%s) still runs", pid, cmdline)
		}
	}
	if left := processesInGroup(t, leader); len(left) > 0 {
		t.Errorf("after close: process group %d still has %v", leader, left)
	}
	if st := statusOf(t, reg, "everything"); st.Status != statusClosed {
		t.Errorf("status after close = %q, want %q", st.Status, statusClosed)
	}
}

// TestServerUnavailableKeepsCause checks what a call to a server that is
// not ready fails with: errServerUnavailable and the cause, both visible
// to errors.Is, and the server named once.
func TestServerUnavailableKeepsCause(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status string
		cause  error
	}{
		{"failed start timed out", statusFailed, fmt.Errorf("initialize: %w", errTimeout)},
		{"restarting after a lost session", statusRestarting, fmt.Errorf("connection lost: %w", errClientClosed)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := newManagedServer(serverConfig{Name: "x", Enabled: true}, false, discardLogger())
			ms.mu.Lock()
			ms.status, ms.lastErr = tt.status, tt.cause // set as a past of moves would leave it
			ms.mu.Unlock()
			_, err := ms.current()
			if !errors.Is(err, errServerUnavailable) || !errors.Is(err, tt.cause) {
				t.Errorf("current() = %v, want errServerUnavailable and %v", err, tt.cause)
			}
			for _, msg := range []string{err.Error(), ms.snapshot().Error} {
				if n := strings.Count(msg, `server "x"`); n != 1 {
					t.Errorf("%q names the server %d times, want once", msg, n)
				}
			}
		})
	}

	// A real failed start: the run's server exits in initialize.
	reg := startRegistry(t, nil, registryOptions{})
	scope := reg.newScope(discardLogger())
	t.Cleanup(scope.close)
	dies := namedFake(t, "dies", "exit-in-initialize")
	dies.Origin = originPerRun
	addErr := scope.add(t.Context(), dies)
	_, err := scope.callTool(t.Context(), "dies", "echo", nil)
	for _, e := range []error{addErr, err} {
		if e == nil || strings.Count(e.Error(), `server "dies"`) != 1 || !strings.Contains(e.Error(), "status 7") {
			t.Errorf("error = %v, want it to name the server once and say it exited with status 7", e)
		}
	}
	if !errors.Is(err, errServerUnavailable) {
		t.Errorf("callTool(dies) = %v, want errServerUnavailable", err)
	}
}
