package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file holds the end-to-end test of SIGHUP: the real harnessd binary
// reloads its configuration while a run uses the servers it changes.

// reloadServer renders one [mcp_servers] table for the reload test.
func reloadServer(name string, peer peerCommand, env map[string]string) string {
	all := map[string]string{}
	for k, v := range peer.Env {
		all[k] = v
	}
	for k, v := range env {
		all[k] = v
	}
	var pairs []string
	for k, v := range all {
		pairs = append(pairs, fmt.Sprintf("%s = %q", k, v))
	}
	slices.Sort(pairs)
	args := make([]string, 0, len(peer.Args))
	for _, a := range peer.Args {
		args = append(args, strconv.Quote(a))
	}
	return fmt.Sprintf("[mcp_servers.%s]\ncommand = %q\nargs = [%s]\nenv = { %s }\n\n", name, peer.Command, strings.Join(args, ", "), strings.Join(pairs, ", "))
}

// logEntries returns the JSON lines of p's log whose msg is msg.
func logEntries(p *harnessdProcess, msg string) []map[string]any {
	var out []map[string]any
	scanner := bufio.NewScanner(strings.NewReader(p.log()))
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		var entry map[string]any
		if json.Unmarshal(scanner.Bytes(), &entry) == nil && entry["msg"] == msg {
			out = append(out, entry)
		}
	}
	return out
}

// waitLogEntry waits until p has logged msg n times and returns the n-th.
func waitLogEntry(t *testing.T, p *harnessdProcess, msg string, n int) map[string]any {
	t.Helper()
	var entries []map[string]any
	waitUntil(t, fmt.Sprintf("harnessd logs %q %d times", msg, n), func() bool {
		entries = logEntries(p, msg)
		return len(entries) >= n
	})
	return entries[n-1]
}

// names returns a log attribute that holds a list of names.
func names(entry map[string]any, key string) []string {
	var out []string
	list, _ := entry[key].([]any)
	for _, v := range list {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

// TestReloadEndToEnd sends SIGHUP to harnessd while a run has a call in
// flight on a server the reload restarts. The reload adds a server
// (server-everything), restarts one whose env changed, removes one and
// keeps one: the call in flight finishes, the run's later calls reach the
// restarted server's replacement and get a clear error from the removed
// one, the run completes; a run started after sees the new set. Then a
// bad configuration is refused, naming the file and field, and the
// servers of the last good one keep serving.
func TestReloadEndToEnd(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	everything := e2eServerFor(t)
	bin := buildHarnessd(t)
	fake := fakeServerConfig(t, "gate")
	gate := peerCommand{Command: fake.Command, Env: fake.Env}
	home, workspace := t.TempDir(), t.TempDir()
	fifo := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	marks := map[string]string{}
	for _, name := range []string{"keep", "change", "drop"} {
		marks[name] = fmt.Sprintf("reload-%s-%d", name, time.Now().UnixNano())
	}
	mark := func(name string, extra ...string) map[string]string {
		env := map[string]string{e2eMarkerEnv: marks[name]}
		for i := 0; i+1 < len(extra); i += 2 {
			env[extra[i]] = extra[i+1]
		}
		return env
	}
	write := func(config string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const model = "[model]\nname = \"openai/fake-model\"\n\n"
	write(model + reloadServer("keep", gate, mark("keep")) + reloadServer("change", gate, mark("change", "GENERATION", "1")) +
		reloadServer("drop", gate, mark("drop")))
	reloaded := model + reloadServer("keep", gate, mark("keep")) + reloadServer("change", gate, mark("change", "GENERATION", "2")) +
		reloadServer("added", everything.peer, nil)

	inFlight := make(chan struct{})
	f := newFakeModel(t, "openai",
		// The run started before the reload: a call that the server holds
		// until the test releases it, after the reload.
		fakeTurn{Check: func(fakeRequest) error { close(inFlight); return nil },
			ToolCalls: calls("mcp_change_gate", fmt.Sprintf(`{"message":%q}`, fifo))},
		fakeTurn{Check: func(req fakeRequest) error {
			if res := req.toolResults(); len(res) != 1 || res[0].IsError || res[0].Content != "released" {
				return fmt.Errorf("the call in flight across the reload = %+v, want released", res)
			}
			return nil
		}, ToolCalls: calls("mcp_change_echo", `{"message":"after"}`, "mcp_drop_echo", `{"message":"gone"}`,
			"mcp_keep_echo", `{"message":"kept"}`, "mcp_added_echo", `{"message":"new"}`)},
		answerWithResults,
		// The run started after the reload.
		fakeTurn{Check: offersIncluding("find_tool"), ToolCalls: calls("mcp_added_echo", `{"message":"fresh"}`, "mcp_drop_echo", `{"message":"gone"}`)},
		answerWithResults,
	)
	p, at := serveHarnessd(t, bin, fakeModelEnv(f, home), workspace)
	waitUntil(t, "every server is ready", func() bool {
		resp, _ := at.do(t, "GET", "/readyz", "", "")
		return resp.StatusCode == http.StatusOK
	})
	keepPIDs := markedProcesses(t, marks["keep"])
	if len(keepPIDs) == 0 || len(markedProcesses(t, marks["drop"])) == 0 {
		t.Fatal("the servers' processes are not found, so the checks below would prove nothing")
	}

	before := at.postRun(t, "", `{"prompt":"use the servers across a reload"}`)
	select {
	case <-inFlight:
	case <-t.Context().Done():
		t.Fatal("the run never called the model")
	}
	// Opening the FIFO returns once the server is inside the call.
	gateWriter, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}

	write(reloaded)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	entry := waitLogEntry(t, p, "configuration reloaded", 1)
	for key, want := range map[string][]string{"added_names": {"added"}, "removed_names": {"drop"}, "restarted_names": {"change"}, "unchanged_names": {"keep"}} {
		if got := names(entry, key); !slices.Equal(got, want) {
			t.Errorf("reload log %s = %v, want %v", key, got, want)
		}
	}
	took, _ := entry["took"].(float64)
	t.Logf("reload of 4 servers: the new set was in place %v after SIGHUP was taken", time.Duration(took))
	started := waitLogEntry(t, p, "servers started by the reload made their first attempt", 1)
	took, _ = started["took"].(float64)
	t.Logf("the added and restarted servers made their first attempt %v after it", time.Duration(took))

	gateWriter.Close() // the call in flight finishes on the old connection
	v := waitRunEnded(t, at, before)
	want := []string{"ok: after", "error: server \"drop\": server is not available: it was removed from the configuration by a reload (SIGHUP); runs started since do not have it",
		"ok: kept", `error: unknown tool "mcp_added_echo": use find_tool to search for tools, then call them by the names it returns`}
	if got := strings.Split(v.Output, "\n"); v.Status != runCompleted || !slices.Equal(got, want) {
		t.Errorf("run across the reload: %s with output\n%s\nwant completed with\n%s", v.Status, v.Output, strings.Join(want, "\n"))
	}

	after := at.postRun(t, "", `{"prompt":"use the servers after the reload"}`)
	v = waitRunEnded(t, at, after)
	if v.Status != runCompleted || v.Output != "ok: "+everything.echoPrefix+"fresh\n"+`error: unknown tool "mcp_drop_echo": use find_tool to search for tools, then call them by the names it returns` {
		t.Errorf("run after the reload: %s with output %q, want the added server's echo and mcp_drop_echo unknown", v.Status, v.Output)
	}

	if got := markedProcesses(t, marks["keep"]); !slices.Equal(got, keepPIDs) {
		t.Errorf("processes of the unchanged server = %v, were %v: it was restarted", got, keepPIDs)
	}
	waitUntil(t, "the removed server's process exits", func() bool { return len(markedProcesses(t, marks["drop"])) == 0 })

	// A bad configuration is refused whole; the last good one keeps serving.
	write(reloaded + "[mcp_servers.broken]\ncommand = \"x\"\nargs = \"not a list\"\n")
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	refused := waitLogEntry(t, p, "configuration reload refused; the running configuration stays", 1)
	if msg, _ := refused["err"].(string); !strings.Contains(msg, filepath.Join(home, "config.toml")) || !strings.Contains(msg, "broken") || !strings.Contains(msg, "args") {
		t.Errorf("refused reload error = %q, want the file, the server and the field named", msg)
	}
	_, data := at.do(t, "GET", "/v1/mcp/servers", "", "")
	var out struct {
		Servers []serverStatus `json:"servers"`
	}
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	var serving []string
	for _, s := range out.Servers {
		serving = append(serving, s.Name+" "+s.Status)
	}
	if want := []string{"keep ready", "change ready", "added ready"}; !slices.Equal(serving, want) {
		t.Errorf("servers after the refused reload = %v, want %v", serving, want)
	}
	_, data = at.do(t, "GET", "/metrics", "", "")
	samples, err := parseMetrics(string(data))
	if err != nil {
		t.Fatal(err)
	}
	for series, want := range map[string]float64{
		`harnessd_config_reloads_total{outcome="applied"}`:           1,
		`harnessd_config_reloads_total{outcome="refused"}`:           1,
		`harnessd_config_last_reload_successful`:                     0,
		`harnessd_config_reload_servers_total{change="added"}`:       1,
		`harnessd_config_reload_servers_total{change="removed"}`:     1,
		`harnessd_config_reload_servers_total{change="restarted"}`:   1,
		`harnessd_mcp_server_up{server="added"}`:                     1,
		`harnessd_tool_calls_total{server="change",outcome="error"}`: 0,
	} {
		if got := samples[series]; got != want {
			t.Errorf("metric %s = %v, want %v", series, got, want)
		}
	}
}

// waitRunEnded waits until the run id has ended and returns it.
func waitRunEnded(t *testing.T, at *apiTest, id string) runView {
	t.Helper()
	var v runView
	waitUntil(t, "run "+id+" ends", func() bool {
		resp, data := at.do(t, "GET", "/v1/runs/"+id, "", "")
		if err := json.Unmarshal(data, &v); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/runs/%s = %d %s (%v)", id, resp.StatusCode, data, err)
		}
		return isTerminal(v.Status)
	})
	return v
}
