package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDiskNeverBlocksTheRun makes the runs log a pipe nobody reads,
// so that writing a large event blocks: emitting more events, reading the
// run's view and following its events must go on regardless.
func TestDiskNeverBlocksTheRun(t *testing.T) {
	t.Parallel()
	reg := newRegistry(nil, registryOptions{Logger: discardLogger()})
	t.Cleanup(reg.close)
	store, err := openRunStoreOnceFree(filepath.Join(t.TempDir(), "runs"), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.close)
	m := newRunManager(runManagerOptions{Registry: reg, Logger: discardLogger(), Home: t.TempDir(), Metrics: newMetrics(), Store: store})
	r := newRun(m.env, runRequest{Prompt: "slow disk"})
	r.provider = newGateModel()
	if err := m.persistNew(r); err != nil {
		t.Fatal(err)
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	seg := store.log.current()
	seg.f.Close()
	seg.f = pw // nothing of the run's events is written yet: the writer has not touched it

	unblocked := make(chan struct{})
	go func() {
		defer close(unblocked)
		r.emit("test.big", map[string]any{"text": strings.Repeat("x", 1<<20)})
		r.emit("test.small", map[string]any{"n": 1})
		r.view()
		r.eventsAfter(0)
	}()
	select {
	case <-unblocked:
	case <-time.After(10 * time.Second):
		t.Error("emit, view and eventsAfter waited on the disk")
	}
	// Let the writer through, then end the run as usual.
	drained := make(chan struct{})
	go func() { io.Copy(io.Discard, pr); close(drained) }()
	<-unblocked
	if events, _, _ := r.eventsAfter(0); len(events) != 2 {
		t.Errorf("events = %d, want 2", len(events))
	}
	r.finish(runCompleted, "done", "")
	pw.Close() // the pipe cannot be fsynced: the end is told as not on disk
	<-drained
	pr.Close()
}
