package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file holds the tests of runs kept on disk by the run manager: what
// a run produced is on disk before it shows as ended, a finished run's
// events and bodies are read back from disk, a second manager on the same
// directory serves the same history, and retention removes files.

// newStoredRuns returns a run manager whose model is f, keeping runs in
// dir with keep (nil for the default), over an empty registry.
func newStoredRuns(t testing.TB, f *fakeModel, dir string, keep *retention) *runManager {
	t.Helper()
	return newStoredRunsOver(t, nil, f, dir, keep)
}

// newStoredRunsOver is newStoredRuns over a registry of globals.
func newStoredRunsOver(t testing.TB, globals []serverConfig, f *fakeModel, dir string, keep *retention) *runManager {
	t.Helper()
	store, err := openRunStoreOnceFree(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.close)
	return newRunsOnStore(t, globals, f, store, keep)
}

// newRunsOnStore is newStoredRunsOver on a store the test opened.
func newRunsOnStore(t testing.TB, globals []serverConfig, f *fakeModel, store *runStore, keep *retention) *runManager {
	t.Helper()
	reg := newRegistry(globals, registryOptions{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(reg.close)
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.Store = store
	opts.Retention = keep
	return newRunsWith(t, opts)
}

// stopRuns shuts m down and closes its store, as harnessd does on exit.
func stopRuns(t *testing.T, m *runManager) {
	t.Helper()
	if err := m.shutdown(t.Context()); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	m.opts.Store.close()
}

// viewJSON encodes a run's view and events, as the API would show them.
func viewJSON(t *testing.T, r *run) (string, string) {
	t.Helper()
	events, _, _ := r.eventsAfter(0)
	return string(mustJSON(t, r.view())), string(mustJSON(t, events))
}

func TestRunsOnDisk(t *testing.T) {
	t.Parallel()
	bigPrompt := strings.Repeat("p", 3*bodyInMemory)
	bigAnswer := strings.Repeat("a", 3*bodyInMemory)
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"anything"}`)}},
		fakeTurn{Text: bigAnswer},
	)
	dir := filepath.Join(t.TempDir(), "runs")
	m := newStoredRuns(t, f, dir, nil)
	r := startRun(t, m, runRequest{Prompt: bigPrompt})
	store := m.opts.Store

	// The moment the run shows as ended, its terminal event and final
	// record are on disk.
	deadline := time.Now().Add(10 * time.Second)
	for !isTerminal(r.summary().Status) {
		if time.Now().After(deadline) {
			t.Fatal("the run did not end")
		}
	}
	rec, err := store.readRecord(r.id)
	if err != nil || rec.Status != runCompleted || rec.Output != bigAnswer {
		t.Fatalf("record on disk when the run showed ended: status %q, output of %d bytes, %v; want completed with the answer",
			rec.Status, len(rec.Output), err)
	}
	logged, _ := store.readEvents(r.id)
	if n := len(logged); n == 0 || logged[n-1].Type != "run.completed" {
		t.Fatalf("event log when the run showed ended: %+v, want it to end with run.completed", logged)
	}

	v := waitRun(t, r)
	// Without servers of its own, closing them changes nothing in the
	// record: it is not written again.
	if b := runLinesOnDisk(t, dir, r.id); bytes.Count(b, recordLinePrefix) != 2 {
		t.Errorf("the run's lines hold %d records, want the one it was accepted with and the one written at the end", bytes.Count(b, recordLinePrefix))
	}
	if v.Prompt != bigPrompt || v.Output != bigAnswer || v.Steps != 2 || v.ToolCalls != 1 {
		t.Errorf("view = prompt of %d bytes, output of %d, steps %d, tool_calls %d; want %d, %d, 2, 1",
			len(v.Prompt), len(v.Output), v.Steps, v.ToolCalls, len(bigPrompt), len(bigAnswer))
	}
	r.mu.Lock()
	inMemory := len(r.events) + len(r.req.Prompt) + len(r.output) + len(r.final.Prompt) + len(r.final.Output)
	r.mu.Unlock()
	if inMemory != 0 {
		t.Errorf("an ended run keeps %d events and body bytes in memory, want 0: they are on disk", inMemory)
	}
	if s := r.summary(); s.Status != runCompleted || s.Output != "" {
		t.Errorf("summary = status %q, output of %d bytes; want completed without reading the output back", s.Status, len(s.Output))
	}
	wantTypes := []string{"run.started", "model.response", "tool.call.started", "tool.call.completed", "model.response", "run.completed"}
	if got := eventTypes(r); strings.Join(got, " ") != strings.Join(wantTypes, " ") {
		t.Errorf("events read back = %v, want %v", got, wantTypes)
	}
	if after, _, _ := r.eventsAfter(4); len(after) != 2 || after[0].Seq != 5 {
		t.Errorf("eventsAfter(4) = %+v, want seq 5 and 6", after)
	}
	view1, events1 := viewJSON(t, r)

	// A second manager on the same directory, once the first has stopped,
	// serves the same run.
	stopRuns(t, m)
	m2 := newStoredRuns(t, f, dir, nil)
	r2 := m2.get(r.id)
	if r2 == nil {
		t.Fatalf("run %s not found after a restart", r.id)
	}
	view2, events2 := viewJSON(t, r2)
	if view2 != view1 {
		t.Errorf("view after a restart:\n%s\nwant\n%s", view2, view1)
	}
	if events2 != events1 {
		t.Errorf("events after a restart:\n%s\nwant\n%s", events2, events1)
	}
	select {
	case <-r2.done:
	default:
		t.Error("a loaded run's done channel is open: followers would wait forever")
	}
}

func TestRunsRetentionRemovesFiles(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, "openai", fakeTurn{Text: "one"}, fakeTurn{Text: "two"}, fakeTurn{Text: "three"})
	dir := filepath.Join(t.TempDir(), "runs")
	m := newStoredRuns(t, f, dir, &retention{MaxRuns: 2})
	var ids []string
	for _, p := range []string{"first", "second", "third"} {
		r := startRun(t, m, runRequest{Prompt: p})
		waitRun(t, r)
		ids = append(ids, r.id)
	}
	// Retention runs once the run's goroutine is done with it.
	store := m.opts.Store
	if !eventually(waitLimit, func() bool {
		return len(m.list()) == 2 && m.get(ids[0]) == nil && !store.log.holds(ids[0])
	}) {
		t.Fatalf("kept runs = %d, the first in the log: %v; want 2 runs without the first, removed from the log", len(m.list()), store.log.holds(ids[0]))
	}
	for _, id := range ids[1:] {
		if _, err := store.readRecord(id); err != nil {
			t.Errorf("record of kept run %s: %v", id, err)
		}
	}
	// A restart with a lower bound drops more at once.
	stopRuns(t, m)
	m2 := newStoredRuns(t, f, dir, &retention{MaxRuns: 1})
	if got := m2.list(); len(got) != 1 || got[0].id != ids[2] {
		t.Errorf("after a restart with max 1: %d runs, want only the newest", len(got))
	}
}

func TestRunsOnDiskRedacted(t *testing.T) {
	t.Parallel()
	const secret = "planted-secret-0123456789"
	f := newFakeModel(t, "openai", fakeTurn{Text: "the token is " + secret})
	dir := filepath.Join(t.TempDir(), "runs")
	global := serverConfig{Name: "g", Transport: transportHTTP, URL: "http://127.0.0.1:1/mcp", Headers: map[string]string{"Authorization": secret}}
	m := newStoredRunsOver(t, []serverConfig{global}, f, dir, nil)
	store := m.opts.Store
	r := startRun(t, m, runRequest{Prompt: "say it"})
	waitRun(t, r)
	b := logOnDisk(t, dir)
	if bytes.Contains(b, []byte(secret)) {
		t.Errorf("the runs log holds a server's secret")
	}
	if !bytes.Contains(runLinesOnDisk(t, dir, r.id), []byte("[redacted]")) {
		t.Errorf("the run's lines: no [redacted] where the secret was")
	}
	if rec, err := store.readRecord(r.id); err != nil || rec.ID != r.id {
		t.Errorf("record = %+v, %v; want the run's", rec, err)
	}
}
