package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// This file holds the crash test: the real harnessd binary killed with
// SIGKILL while runs are active and its servers (one with children that
// ignore SIGTERM and EOF) run, then restarted on the same home.

func TestKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	const finished, active = 5, 20
	var script []fakeTurn
	for i := range finished {
		script = append(script, fakeTurn{Text: fmt.Sprintf("answer %d", i)})
	}
	for range active {
		script = append(script, fakeTurn{Hang: true})
	}
	f := newFakeModel(t, providerOpenAI, script...)
	bin := buildHarnessd(t)
	// Room for every active run at once, whatever the machine's size.
	home, workspace, marker := fakeServerHome(t, "brood", "brood", "max_concurrent_runs = 64")
	env := fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model")
	first, at := serveHarnessd(t, bin, env, workspace)
	waitUntil(t, "the brood server and its children run", func() bool { return len(markedProcesses(t, marker)) == 1+broodSize })

	// Finished runs: their history must survive intact.
	var done []string
	for i := range finished {
		id := at.postRun(t, "", fmt.Sprintf(`{"prompt":"finished %d"}`, i))
		waitUntil(t, "run "+id+" completes", func() bool { return runStatus(t, at, id) == runCompleted })
		done = append(done, id)
	}
	before := map[string][2]string{}
	for _, id := range done {
		before[id] = [2]string{string(getOK(t, at, "/v1/runs/"+id)), string(getOK(t, at, "/v1/runs/"+id+"/events"))}
	}

	// Active runs, each with a server of its own that ignores SIGTERM and
	// EOF; the model holds every call.
	exe := fakeServerBinary(t)
	perRun := fmt.Sprintf(`[{"name":"hold","command":%q,"env":{%q:"ignore-term",%q:%q}}]`, exe, fakeServerEnv, e2eMarkerEnv, marker)
	var interrupted []string
	for i := range active {
		interrupted = append(interrupted, at.postRun(t, "", fmt.Sprintf(`{"prompt":"active %d","mcp_servers":%s}`, i, perRun)))
	}
	waitUntil(t, "every active run calls the model", func() bool { return len(f.requests()) == finished+active })
	for _, id := range interrupted {
		if s := runStatus(t, at, id); s != runRunning {
			t.Fatalf("run %s is %s before the kill, want running", id, s)
		}
	}
	procs := markedProcesses(t, marker)
	if want := 1 + broodSize + active; len(procs) != want {
		t.Fatalf("%d server processes before the kill, want %d", len(procs), want)
	}
	var leaders, orphans []int
	for _, pid := range procs {
		if parentPID(pid) == first.cmd.Process.Pid {
			leaders = append(leaders, pid)
		} else {
			orphans = append(orphans, pid)
		}
	}

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	// The servers harnessd started die with it (the parent-death signal);
	// their children outlive it until the next start.
	waitUntil(t, "the servers die with harnessd", func() bool {
		return !slices.ContainsFunc(leaders, processAlive)
	})
	if len(leaders) != 1+active || len(orphans) != broodSize {
		t.Errorf("before the kill: %d servers started by harnessd and %d children of theirs, want %d and %d",
			len(leaders), len(orphans), 1+active, broodSize)
	}

	// The second instance has no servers of its own: any marked process
	// left is the first instance's.
	if err := os.WriteFile(filepath.Join(home, "config.toml"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, at = serveHarnessd(t, bin, env, workspace)
	waitUntil(t, "no process of the first instance is left", func() bool { return len(markedProcesses(t, marker)) == 0 })
	if left, _ := os.ReadDir(filepath.Join(home, "servers")); len(left) != 0 {
		t.Errorf("process group records left after the restart: %d", len(left))
	}

	if runs := listAllRuns(t, at); len(runs) != finished+active {
		t.Errorf("GET /v1/runs after the restart lists %d runs, want %d", len(runs), finished+active)
	}
	for _, id := range done {
		view, events := string(getOK(t, at, "/v1/runs/"+id)), string(getOK(t, at, "/v1/runs/"+id+"/events"))
		if view != before[id][0] {
			t.Errorf("run %s after the restart:\n%s\nwant\n%s", id, view, before[id][0])
		}
		if events != before[id][1] {
			t.Errorf("events of run %s after the restart:\n%s\nwant\n%s", id, events, before[id][1])
		}
	}
	for _, id := range interrupted {
		var v runView
		if err := json.Unmarshal(getOK(t, at, "/v1/runs/"+id), &v); err != nil {
			t.Fatal(err)
		}
		if v.Status != runFailed || v.Error != interruptedError || v.EndedAt == nil {
			t.Errorf("run %s after the restart = %s %q (ended %v), want failed %q", id, v.Status, v.Error, v.EndedAt, interruptedError)
		}
		events := readEvents(t, bytes.NewReader(getOK(t, at, "/v1/runs/"+id+"/events")))
		ids, types := idsAndTypes(events)
		if len(types) < 2 || types[0] != "run.started" || types[len(types)-1] != "run.failed" {
			t.Errorf("events of run %s = %v, want run.started ... run.failed", id, types)
			continue
		}
		// A follower that saw all but the last event resumes with it alone.
		resp, data := at.do(t, http.MethodGet, "/v1/runs/"+id+"/events", "", "", "Last-Event-ID", ids[len(ids)-2])
		rest := readEvents(t, bytes.NewReader(data))
		if resp.StatusCode != http.StatusOK || len(rest) != 1 || rest[0].Type != "run.failed" || strconv.Itoa(rest[0].Seq) != ids[len(ids)-1] {
			t.Errorf("events of run %s after Last-Event-ID %s = %d %v, want run.failed alone", id, ids[len(ids)-2], resp.StatusCode, rest)
		}
	}
}

// getOK answers GET path, failing the test unless it is a 200.
func getOK(t *testing.T, at *apiTest, path string) []byte {
	t.Helper()
	resp, data := at.do(t, http.MethodGet, path, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s, want 200", path, resp.StatusCode, data)
	}
	return data
}

// runStatus returns the status GET /v1/runs/{id} shows.
func runStatus(t *testing.T, at *apiTest, id string) string {
	t.Helper()
	var v runView
	if err := json.Unmarshal(getOK(t, at, "/v1/runs/"+id), &v); err != nil {
		t.Fatal(err)
	}
	return v.Status
}

// listAllRuns returns every run GET /v1/runs lists, following its pages.
func listAllRuns(t *testing.T, at *apiTest) []runSummary {
	t.Helper()
	var all []runSummary
	path := "/v1/runs?limit=1000"
	for {
		var page struct {
			Runs       []runSummary `json:"runs"`
			NextCursor string       `json:"next_cursor"`
		}
		if err := json.Unmarshal(getOK(t, at, path), &page); err != nil {
			t.Fatal(err)
		}
		all = append(all, page.Runs...)
		if page.NextCursor == "" {
			return all
		}
		path = "/v1/runs?limit=1000&cursor=" + url.QueryEscape(page.NextCursor)
	}
}
