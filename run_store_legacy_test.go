package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRunStoreConvertsLegacy opens a runs directory an older harnessd
// kept (three files a run): an ended run with its events and transcript,
// a run a crash interrupted (its log torn), and an event log without a
// record. Each run becomes one file that reads as the three did, the old
// files go, and the interrupted run is ended at load.
func TestRunStoreConvertsLegacy(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	lines := func(events []runEvent) string {
		var b strings.Builder
		for _, ev := range events {
			b.Write(mustJSON(t, ev))
			b.WriteByte('\n')
		}
		return b.String()
	}
	old := testRunView("run_old", start)
	events := lifecycle(start, runCompleted, "the answer", "")
	old = ended(old, decoded(t, events))
	writeFile(t, dir, "run_old.json", string(mustJSON(t, old))+"\n")
	writeFile(t, dir, "run_old.events", lines(events))
	writeFile(t, dir, "run_old.messages", `{"step":0,"role":"user","content":"hi"}`+"\n"+`{"step":1,"role":"assistant","content":"the answer"}`+"\n")
	mid := testRunView("run_mid", start.Add(time.Minute))
	writeFile(t, dir, "run_mid.json", string(mustJSON(t, mid))+"\n")
	writeFile(t, dir, "run_mid.events", lines(lifecycle(mid.CreatedAt, runCompleted, "", "")[:3])+`{"seq":4,"type":"model.re`)
	writeFile(t, dir, "run_orphan.events", lines(events[:1]))

	s, err := openRunStore(dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for _, name := range []string{"run_old.json", "run_old.events", "run_old.messages", "run_mid.json", "run_mid.events", "run_orphan.events"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !os.IsNotExist(err) {
			t.Errorf("%s is still there after the conversion (stat: %v)", name, err)
		}
	}
	runs, err := s.load(time.Now())
	if err != nil || len(runs) != 2 {
		t.Fatalf("load = %d runs, %v; want 2", len(runs), err)
	}
	if got := runs[0].view; got.ID != "run_old" || got.Status != runCompleted || got.Output != "the answer" || got.Steps != 2 {
		t.Errorf("converted ended run = %+v, want it completed with its answer and 2 steps", got)
	}
	if got := runs[1].view; got.ID != "run_mid" || got.Status != runFailed || got.Error != interruptedError || got.Prompt != mid.Prompt {
		t.Errorf("converted interrupted run = %+v, want it failed as interrupted, with its prompt", got)
	}
	f, err := s.read("run_old")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range f.events {
		types = append(types, ev.Type)
	}
	if want := []string{"run.started", "model.response", "tool.call.completed", "model.response", "run.completed"}; !slices.Equal(types, want) {
		t.Errorf("events of the converted run = %v, want %v", types, want)
	}
	if msgs, cut := transcriptMessages(f.messages); len(msgs) != 2 || cut || string(msgs[1]) != `{"step":1,"role":"assistant","content":"the answer"}` {
		t.Errorf("transcript of the converted run = %q (cut %v), want its 2 messages", msgs, cut)
	}
	if evs, _ := s.readEvents("run_mid"); len(evs) != 4 || evs[3].Type != "run.failed" {
		t.Errorf("events of the interrupted run = %+v, want its 3 whole ones and run.failed", evs)
	}
	// A second start finds nothing left to convert and the same runs.
	if again, err := reopenRunStore(t, s).load(time.Now()); err != nil || len(again) != 2 || again[1].view.Status != runFailed {
		t.Errorf("second load = %+v, %v", again, err)
	}
}
