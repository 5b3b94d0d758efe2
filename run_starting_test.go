package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// This file tests a run started while a global server is still in its
// first connection attempt: it waits for the server and says so.

// TestRunWaitsForStartingServer posts a run while the global server slow
// is held in initialize: the run says it waits for slow and calls no
// model until slow is ready, then finds and calls slow's tool.
func TestRunWaitsForStartingServer(t *testing.T) {
	t.Parallel()
	fifo := filepath.Join(t.TempDir(), "init-gate")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	slow := fakeServerConfig(t, "gate-initialize")
	slow.Name = "slow"
	slow.Env[fakeInitGateEnv] = fifo
	reg := newRegistry([]serverConfig{slow}, registryOptions{Logger: discardLogger()})
	t.Cleanup(reg.close)
	// Opening the FIFO for writing returns once the server opened it:
	// it is inside initialize, its first attempt under way.
	gate, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()

	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:mcp_slow_echo"}`)},
		fakeTurn{ToolCalls: calls("mcp_slow_echo", `{"message":"hello"}`)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", nil)
	r := startRun(t, m, runRequest{Prompt: "echo hello"})
	waiting := waitEvent(t, r, evServersWaiting).Data.(map[string]any)
	if got := waiting["servers"].([]string); len(got) != 1 || got[0] != "slow" {
		t.Errorf("%s servers = %v, want [slow]", evServersWaiting, got)
	}
	if n := len(f.requests()); n != 0 {
		t.Fatalf("the model was called %d times while slow was starting, want 0", n)
	}
	// A server of the run's own (a profile's) named slow shadows it: the
	// run would not wait for it.
	scope := reg.newScope(discardLogger())
	if got := scope.startingGlobals([]serverConfig{{Name: "slow"}}); len(got) != 0 {
		t.Errorf("starting globals with a local slow = %d servers, want none (shadowed)", len(got))
	}
	if got := scope.startingGlobals([]serverConfig{{Name: "other"}}); len(got) != 1 {
		t.Errorf("starting globals with a local other = %d servers, want slow", len(got))
	}
	gate.Close()

	v := waitRun(t, r)
	requireCompleted(t, v)
	if v.Output != "ok: hello" {
		t.Errorf("output = %q, want %q", v.Output, "ok: hello")
	}
	waited := eventData(r, evServersWaited)
	if len(waited) != 1 {
		t.Fatalf("%s events = %v, want one", evServersWaited, waited)
	}
	servers := waited[0]["servers"].([]map[string]any)
	if len(servers) != 1 || servers[0]["server"] != "slow" || servers[0]["status"] != statusReady || servers[0]["tools"] != 4 {
		t.Errorf("%s servers = %v, want slow ready with 4 tools", evServersWaited, servers)
	}
	types := strings.Join(eventTypes(r), " ")
	if !strings.Contains(types, evServersWaiting+" "+evServersWaited+" "+evModelResponse) {
		t.Errorf("events = %s, want %s then %s before the first %s", types, evServersWaiting, evServersWaited, evModelResponse)
	}
}

// TestRunDoesNotWaitForReadyServers starts a run once every server made
// its first attempt: it emits no wait.
func TestRunDoesNotWaitForReadyServers(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, fakeServerConfig(t, "normal"))
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	m := newRunsOver(t, reg, f, "", nil)
	r := startRun(t, m, runRequest{Prompt: "nothing to wait for"})
	requireCompleted(t, waitRun(t, r))
	if got := eventData(r, evServersWaiting); len(got) != 0 {
		t.Errorf("%s events = %v, want none", evServersWaiting, got)
	}
}
