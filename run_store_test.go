package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// This file holds the tests of the runs on disk: torn writes, crashes at
// every byte of an event log, recovery of interrupted runs, retention.

// readEvents returns the events of run id in order, read back with
// eachEvent.
func (s *runStore) readEvents(id string) ([]runEvent, error) {
	var out []runEvent
	err := s.eachEvent(id, 0, func(ev runEvent) error {
		out = append(out, ev)
		return nil
	})
	return out, err
}

// openRunStoreOnceFree opens the store in dir as openRunStore does, trying
// again while dir's lock looks held, for up to waitLimit. A store this
// test closed can look held for a moment: a child that a parallel test
// forks meanwhile shares every descriptor of this process until it execs,
// the closed lock's among them. A lock never released still fails.
func openRunStoreOnceFree(dir string, logger *slog.Logger) (*runStore, error) {
	var s *runStore
	var err error
	eventually(waitLimit, func() bool {
		s, err = openRunStore(dir, logger)
		return err == nil || !strings.Contains(err.Error(), "in use by another harnessd")
	})
	return s, err
}

// newTestRunStore opens a store in a fresh directory.
func newTestRunStore(t *testing.T) *runStore {
	t.Helper()
	s, err := openRunStoreOnceFree(filepath.Join(t.TempDir(), "runs"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openRunStore: %v", err)
	}
	t.Cleanup(s.close)
	return s
}

// reopenRunStore closes s, as a stop does, and opens its directory again.
func reopenRunStore(t *testing.T, s *runStore) *runStore {
	t.Helper()
	s.close()
	s2, err := openRunStoreOnceFree(s.dir, s.logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s2.close)
	return s2
}

// testRunView returns the record of a new run id created at created.
func testRunView(id string, created time.Time) runView {
	return runView{ID: id, Status: runRunning, Prompt: "prompt of " + id, Model: "openai/fake-model",
		Servers: []serverStatus{}, ActivatedTools: []string{}, CreatedAt: created.UTC()}
}

// writeEvents writes events to l, each in a write of its own, as the
// run's writer does when they come one at a time.
func writeEvents(t *testing.T, l *runLog, events ...runEvent) {
	t.Helper()
	for _, ev := range events {
		if err := l.write(append(mustJSON(t, ev), '\n'), false); err != nil {
			t.Fatalf("write %s: %v", ev.Type, err)
		}
	}
}

// endRun writes the events of run v (the last one terminal) as the run's
// writer does: the terminal event and the record v ended with in one
// fsynced write. It closes l.
func endRun(t *testing.T, s *runStore, l *runLog, v runView, events ...runEvent) {
	t.Helper()
	writeEvents(t, l, events[:len(events)-1]...)
	last := events[len(events)-1]
	if err := s.end(l, append(append(mustJSON(t, last), '\n'), recordLine(v, nil)...)); err != nil {
		t.Fatalf("end %s: %v", v.ID, err)
	}
	l.close()
}

// ended returns v ended as the last event of lifecycle says.
func ended(v runView, events []runEvent) runView {
	return replayEvents(v, events)
}

// lifecycle returns the events of a run that made step steps, called one
// tool and ended with status.
func lifecycle(start time.Time, status, output, errMsg string) []runEvent {
	at := func(i int) time.Time { return start.Add(time.Duration(i) * time.Millisecond).UTC() }
	end := map[string]any{"status": status}
	if output != "" {
		end["output"] = output
	}
	if errMsg != "" {
		end["error"] = errMsg
	}
	return []runEvent{
		{Seq: 1, Type: "run.started", Time: at(1), Data: map[string]any{"model": "openai/fake-model"}},
		{Seq: 2, Type: "model.response", Time: at(2), Data: map[string]any{"step": 1, "tool_calls": []string{"t"}}},
		{Seq: 3, Type: "tool.call.completed", Time: at(3), Data: map[string]any{"step": 1, "name": "t"}},
		{Seq: 4, Type: "model.response", Time: at(4), Data: map[string]any{"step": 2}},
		{Seq: 5, Type: terminalEventType(status), Time: at(5), Data: end},
	}
}

// decoded returns events as read back from a file: their data raw JSON.
func decoded(t testing.TB, events []runEvent) []runEvent {
	t.Helper()
	var b []byte
	for _, ev := range events {
		b = append(append(b, mustJSON(t, ev)...), '\n')
	}
	return parseRunFile(b).events
}

// logOnDisk returns the segments of the runs log in dir, oldest first,
// concatenated, each without the zeros of its space given ahead.
func logOnDisk(t testing.TB, dir string) []byte {
	t.Helper()
	nums, err := segmentNumbers(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	for _, num := range nums {
		b, err := os.ReadFile(filepath.Join(dir, fmt.Sprintf("%s%08d", logFilePrefix, num)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b[:writtenLen(b)]...)
	}
	return out
}

// runLinesOnDisk returns the lines of run id in the runs log in dir,
// without its id, the log's own lines left out.
func runLinesOnDisk(t testing.TB, dir, id string) []byte {
	t.Helper()
	var out []byte
	for line := range bytes.Lines(logOnDisk(t, dir)) {
		rest, ok := bytes.CutPrefix(line, []byte(id+" "))
		if ok && !bytes.HasPrefix(rest, removedMarker) && !bytes.HasPrefix(rest, movedPrefix) {
			out = append(out, rest...)
		}
	}
	return out
}

func TestRunStoreFilesArePrivate(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	l, err := s.create(testRunView("run_a", time.Now()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for path, want := range map[string]os.FileMode{s.dir: 0o700, s.log.current().path: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %v, want %v", path, got, want)
		}
	}
}

func TestRunStoreTornLastLine(t *testing.T) {
	t.Parallel()
	for _, preallocated := range []bool{true, false} {
		t.Run(fmt.Sprintf("preallocated=%v", preallocated), func(t *testing.T) { testRunStoreTornLastLine(t, preallocated) })
	}
}

func testRunStoreTornLastLine(t *testing.T, preallocated bool) {
	s := newTestRunStore(t)
	start := time.Now()
	l, err := s.create(testRunView("run_torn", start), nil)
	if err != nil {
		t.Fatal(err)
	}
	events := lifecycle(start, runCompleted, "done", "")
	writeEvents(t, l, events[:3]...)
	l.close()
	seg, size := s.log.current().path, s.log.current().size
	s.close()
	// A crash in the middle of the fourth line, written into the space
	// given ahead; or, for a segment given none, appended.
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !preallocated {
		f.Truncate(size)
	}
	f.WriteAt([]byte(`run_torn {"seq":4,"type":"model.resp`), size)
	f.Close()

	s = reopenRunStore(t, s)
	got, err := s.readEvents("run_torn")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[2].Seq != 3 {
		t.Fatalf("readEvents after a torn line = %d events (%+v), want the 3 whole ones", len(got), got)
	}
	runs, err := s.load(time.Now())
	if err != nil || len(runs) != 1 {
		t.Fatalf("load = %d runs, %v; want 1", len(runs), err)
	}
	s = reopenRunStore(t, s)
	got, _ = s.readEvents("run_torn")
	var types []string
	for i, ev := range got {
		types = append(types, ev.Type)
		if ev.Seq != i+1 {
			t.Errorf("event %d has seq %d, want %d", i, ev.Seq, i+1)
		}
	}
	want := []string{"run.started", "model.response", "tool.call.completed", "run.failed"}
	if !slices.Equal(types, want) {
		t.Errorf("events after recovery = %v, want %v (the torn line cut off, the end appended)", types, want)
	}
	if rec, err := s.readRecord("run_torn"); err != nil || rec.Status != runFailed || rec.Error != interruptedError {
		t.Errorf("record after recovery = %+v, %v; want the run failed as interrupted, last of its lines", rec, err)
	}
}

// TestRunStoreCrashAtEveryByte cuts the runs log at every length the
// write of a run's end passes through in its terminal event (the end's
// write holds the event and then the record), at the record's ends and
// middle, and at each other line of the run's ends and middle (a crash at
// that instant: nothing after the cut was written), and checks what
// start-up makes of it: a finished run before it is intact, the run
// itself is readable and ended, completed when its terminal event made it
// to disk whole; when the cut is in its first record, the crash came
// before the run was accepted, and it is not there.
func TestRunStoreCrashAtEveryByte(t *testing.T) {
	t.Parallel()
	base := newTestRunStore(t)
	start := time.Now().Add(-time.Minute)
	earlier := testRunView("run_earlier", start)
	l, err := base.create(earlier, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := lifecycle(start, runCompleted, "earlier answer", "")
	endRun(t, base, l, ended(earlier, decoded(t, events)), events...)

	crashed := testRunView("run_crashed", start.Add(time.Second))
	if l, err = base.create(crashed, nil); err != nil {
		t.Fatal(err)
	}
	events = lifecycle(start.Add(time.Second), runCompleted, "the answer", "")
	endRun(t, base, l, ended(crashed, decoded(t, events)), events...)
	base.close()
	full := logOnDisk(t, base.dir)
	first := bytes.Index(full, []byte("run_crashed "))
	accepted := first + bytes.IndexByte(full[first:], '\n') + 1
	terminal := append([]byte("run_crashed "), mustJSON(t, events[len(events)-1])...)
	endWrite := bytes.LastIndex(full, terminal)
	endEvent := endWrite + len(terminal) + 1

	var cuts []int
	for i := endWrite; i <= endEvent; i++ {
		cuts = append(cuts, i)
	}
	cuts = append(cuts, endEvent+1, (endEvent+len(full))/2, len(full)-1, len(full))
	cuts = append(cuts, lineCuts(full, first, endWrite)...)
	for i, cut := range cuts {
		// What follows the cut was never written: the space given ahead
		// (zeros), or nothing where a segment grows as it is written.
		// Each cut is made in both forms, in turn.
		content := full[:cut]
		if i%2 == 0 {
			content = append(slices.Clip(content), make([]byte, 4096)...)
		}
		dir := filepath.Join(t.TempDir(), "runs")
		os.MkdirAll(dir, 0o700)
		if err := os.WriteFile(filepath.Join(dir, logFilePrefix+"00000001"), content, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openRunStoreOnceFree(dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		runs, err := s.load(time.Now())
		want := 2
		if cut < accepted {
			want = 1
		}
		if err != nil || len(runs) != want {
			t.Fatalf("cut %d: load = %d runs, %v; want %d", cut, len(runs), err, want)
		}
		if got := runs[0].view; got.ID != "run_earlier" || got.Status != runCompleted || got.Output != "earlier answer" {
			t.Fatalf("cut %d: earlier run = %+v, want it completed with its answer", cut, got)
		}
		if want == 1 {
			s.close()
			continue
		}
		got := runs[1].view
		wantStatus, wantOutput, wantError := runFailed, "", interruptedError
		if cut >= endEvent {
			wantStatus, wantOutput, wantError = runCompleted, "the answer", ""
		}
		if got.Status != wantStatus || got.Output != wantOutput || got.Error != wantError || got.EndedAt == nil || got.Prompt != crashed.Prompt {
			t.Fatalf("cut %d of %d (end from %d): run = status %q output %q error %q ended %v prompt %q, want %q %q %q, ended, its prompt",
				cut, len(full), endWrite, got.Status, got.Output, got.Error, got.EndedAt, got.Prompt, wantStatus, wantOutput, wantError)
		}
		evs, err := s.readEvents("run_crashed")
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Type != terminalEventType(wantStatus) {
			t.Fatalf("cut %d: events = %+v, %v; want them to end with %s", cut, evs, err, terminalEventType(wantStatus))
		}
		s.close()
		// What start-up wrote is itself whole: a second start-up agrees
		// without writing anything.
		s, err = openRunStoreOnceFree(dir, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.load(time.Now())
		if err != nil || len(again) != 2 || again[1].view.Status != wantStatus {
			t.Fatalf("cut %d: second load = %+v, %v", cut, again, err)
		}
		if evs2, _ := s.readEvents("run_crashed"); len(evs2) != len(evs) || s.log.costs.written.Load() != 0 {
			t.Fatalf("cut %d: second load changed the log: %d events, then %d", cut, len(evs), len(evs2))
		}
		s.close()
	}
}

// lineCuts returns, for each line of b that starts in [from, to), the
// lengths b cut there has at its start, its middle, before its newline
// and after it.
func lineCuts(b []byte, from, to int) []int {
	var cuts []int
	start := from
	for i := from; i < to; i++ {
		if b[i] == '\n' {
			cuts = append(cuts, start, (start+i)/2, i, i+1)
			start = i + 1
		}
	}
	return cuts
}

// mustJSON encodes v.
func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestRunStoreAcceptedRunSurvives stops a store with a run accepted and
// nothing more: its first record is durable, and the next start ends it
// as interrupted with its prompt. A run removed is not loaded, and a
// temporary file an interrupted write left is removed.
func TestRunStoreAcceptedRunSurvives(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	v := testRunView("run_rec", time.Now())
	l, err := s.create(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.close()
	gone := testRunView("run_gone", time.Now())
	if l, err = s.create(gone, nil); err != nil {
		t.Fatal(err)
	}
	l.close()
	if err := s.remove("run_gone"); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(s.dir, "conv_x"+conversationExt+runTempExt)
	os.WriteFile(tmp, []byte(`{"id":"conv_x","owner":`), 0o600)
	if _, err := openRunStore(s.dir, s.logger); err == nil || !strings.Contains(err.Error(), "in use by another harnessd") {
		t.Fatalf("openRunStore of a directory in use = %v, want it refused", err)
	}
	s2 := reopenRunStore(t, s)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the temporary file is still there after openRunStore (stat: %v)", err)
	}
	runs, err := s2.load(time.Now())
	if err != nil || len(runs) != 1 || runs[0].view.Prompt != v.Prompt || runs[0].view.Error != interruptedError {
		t.Fatalf("load = %+v, %v; want the accepted run alone, interrupted, with its prompt", runs, err)
	}
	s3 := reopenRunStore(t, s2)
	if runs, err := s3.load(time.Now()); err != nil || len(runs) != 1 || runs[0].view.Error != interruptedError {
		t.Fatalf("load after a second start = %+v, %v; want the run as the first start ended it", runs, err)
	}
}

func TestRunStoreRecoveryMarking(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		events     int // how many of lifecycle's events reached the file
		status     string
		wantStatus string
		wantError  string
		wantSteps  int
		wantCalls  int
	}{
		{name: "nothing written", events: 0, wantStatus: runFailed, wantError: interruptedError},
		{name: "mid step", events: 3, wantStatus: runFailed, wantError: interruptedError, wantSteps: 1, wantCalls: 1},
		{name: "terminal event, no record", events: 5, status: runFailed, wantStatus: runFailed, wantError: "step 2: boom", wantSteps: 2, wantCalls: 1},
		{name: "cancelled, no record", events: 5, status: runCancelled, wantStatus: runCancelled, wantError: "step 2: boom", wantSteps: 2, wantCalls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newTestRunStore(t)
			start := time.Now().Add(-time.Hour)
			l, err := s.create(testRunView("run_x", start), nil)
			if err != nil {
				t.Fatal(err)
			}
			writeEvents(t, l, lifecycle(start, cmpOr(tt.status, runCompleted), "", "step 2: boom")[:tt.events]...)
			l.close()
			now := time.Now()
			runs, err := s.load(now)
			if err != nil || len(runs) != 1 {
				t.Fatalf("load = %d runs, %v", len(runs), err)
			}
			got := runs[0].view
			if got.Status != tt.wantStatus || got.Error != tt.wantError || got.Steps != tt.wantSteps || got.ToolCalls != tt.wantCalls {
				t.Errorf("recovered = status %q error %q steps %d tool_calls %d, want %q %q %d %d",
					got.Status, got.Error, got.Steps, got.ToolCalls, tt.wantStatus, tt.wantError, tt.wantSteps, tt.wantCalls)
			}
			if tt.events > 0 && (got.StartedAt == nil || !got.StartedAt.Equal(start.Add(time.Millisecond).UTC())) {
				t.Errorf("started_at = %v, want the run.started event's time", got.StartedAt)
			}
			evs, _ := s.readEvents("run_x")
			last := evs[len(evs)-1]
			wantEvents := tt.events
			if tt.wantError == interruptedError {
				wantEvents++ // run.failed appended
			}
			if len(evs) != wantEvents || last.Seq != len(evs) || last.Type != terminalEventType(tt.wantStatus) {
				t.Errorf("events = %+v, want %d ending with %s", evs, wantEvents, terminalEventType(tt.wantStatus))
			}
			if tt.wantError == interruptedError && !got.EndedAt.Equal(now.UTC()) {
				t.Errorf("ended_at = %v, want the start-up time %v", got.EndedAt, now.UTC())
			}
			onDisk, err := s.readRecord("run_x")
			if err != nil || onDisk.Status != tt.wantStatus || onDisk.Error != tt.wantError {
				t.Errorf("record on disk = %+v, %v; want it appended as recovered", onDisk, err)
			}
		})
	}
}

func TestRetentionExpired(t *testing.T) {
	t.Parallel()
	now := time.Now()
	run := func(id string, ended bool, age time.Duration, bytes int64) keptRun {
		return keptRun{id: id, ended: ended, endedAt: now.Add(-age), bytes: bytes}
	}
	runs := []keptRun{
		run("a", true, 10*time.Hour, 100),
		run("b", false, 0, 100), // active: never dropped
		run("c", true, 5*time.Hour, 100),
		run("d", true, time.Hour, 100),
		run("e", true, time.Minute, 100),
	}
	tests := []struct {
		name string
		k    retention
		want []string
	}{
		{name: "no bounds", k: retention{}, want: nil},
		{name: "count", k: retention{MaxRuns: 2}, want: []string{"a", "c"}},
		{name: "count above", k: retention{MaxRuns: 10}, want: nil},
		{name: "age", k: retention{MaxAge: 2 * time.Hour}, want: []string{"a", "c"}},
		{name: "bytes", k: retention{MaxBytes: 250}, want: []string{"a", "c"}},
		{name: "bytes exact", k: retention{MaxBytes: 400}, want: nil},
		{name: "each bound", k: retention{MaxRuns: 3, MaxAge: 6 * time.Hour, MaxBytes: 150}, want: []string{"a", "c", "d"}},
		{name: "zero count keeps none", k: retention{MaxRuns: 0, MaxBytes: 1}, want: []string{"a", "c", "d", "e"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.k.expired(runs, now); !slices.Equal(got, tt.want) {
				t.Errorf("%+v.expired = %v, want %v", tt.k, got, tt.want)
			}
		})
	}
}

func TestRunStoreLoadOrderAndRemove(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	start := time.Now().Add(-time.Hour)
	for i := 3; i >= 1; i-- {
		id := fmt.Sprintf("run_%d", i)
		v := testRunView(id, start.Add(time.Duration(i)*time.Minute))
		l, err := s.create(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		events := lifecycle(v.CreatedAt, runCompleted, "out", "")
		endRun(t, s, l, ended(v, decoded(t, events)), events...)
	}
	os.WriteFile(s.webhookPath("run_orphan"), []byte(`{"url":"http://127.0.0.1:1/"}`+"\n"), 0o600)
	runs, err := s.load(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(s.webhookPath("run_orphan")); !os.IsNotExist(err) {
		t.Errorf("the delivery of a run not on disk is still there after load (stat: %v)", err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.view.ID)
		if want := s.log.size(r.view.ID); r.bytes != want || want == 0 {
			t.Errorf("run %s: bytes = %d, want %d (its lines)", r.view.ID, r.bytes, want)
		}
	}
	if want := []string{"run_1", "run_2", "run_3"}; !slices.Equal(ids, want) {
		t.Errorf("load order = %v, want oldest first %v", ids, want)
	}
	s.removeAll([]string{"run_1", "run_9"})
	if runs, _ := s.load(time.Now()); len(runs) != 2 {
		t.Errorf("after remove: %d runs, want 2", len(runs))
	}
	s = reopenRunStore(t, s)
	if runs, _ := s.load(time.Now()); len(runs) != 2 || s.log.holds("run_1") {
		t.Errorf("after remove and a restart: %d runs (run_1 there: %v), want 2 without it", len(runs), s.log.holds("run_1"))
	}
}

func TestKeptRunsSettings(t *testing.T) {
	t.Parallel()
	def := defaultRetention()
	tests := []struct {
		name    string
		toml    string
		env     map[string]string
		flags   keptRunsSettings
		want    retention
		wantErr string
	}{
		{name: "defaults", want: def},
		{name: "toml", toml: "max_kept_runs = 10\nmax_kept_run_age = \"1h\"\nmax_kept_run_bytes = 4096\n",
			want: retention{MaxRuns: 10, MaxAge: time.Hour, MaxBytes: 4096}},
		{name: "env over toml", toml: "max_kept_runs = 10\n", env: map[string]string{"HARNESS_MAX_KEPT_RUNS": "20", "HARNESS_MAX_KEPT_RUN_AGE": "0"},
			want: retention{MaxRuns: 20, MaxAge: 0, MaxBytes: def.MaxBytes}},
		{name: "flag over env", env: map[string]string{"HARNESS_MAX_KEPT_RUN_BYTES": "100"},
			flags: keptRunsSettings{bytes: settingValue{value: "0", source: "--max-kept-run-bytes"}},
			want:  retention{MaxRuns: def.MaxRuns, MaxAge: def.MaxAge, MaxBytes: 0}},
		{name: "bad values", toml: "max_kept_runs = -1\nmax_kept_run_age = \"a month\"\n", env: map[string]string{"HARNESS_MAX_KEPT_RUN_BYTES": "1GB"},
			wantErr: `F: max_kept_runs: "-1" is not a number of runs; give a whole number, or 0 for no bound
HARNESS_MAX_KEPT_RUN_BYTES: "1GB" is not a number of bytes; give a whole number, or 0 for no bound
F: max_kept_run_age: "a month" is not a duration; give one like 720h (30 days), or 0 for no bound`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			writeFile(t, home, "config.toml", tt.toml)
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(tt.env)})
			if got := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "F"); got != tt.wantErr {
				t.Fatalf("loadConfig(%q) error =\n%s\nwant\n%s", tt.toml, got, tt.wantErr)
			}
			if err != nil {
				return
			}
			cfg.KeptRuns.merge(tt.flags)
			got, err := cfg.KeptRuns.retention()
			if err != nil || got != tt.want {
				t.Errorf("retention() = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// BenchmarkRunStoreLifecycle measures what the disk adds to one run: its
// first record committed, ten events, and its end (the terminal event and
// the record, fsynced), with 1 run at a time and with 8 concurrent ones,
// which share the log's syncs.
func BenchmarkRunStoreLifecycle(b *testing.B) {
	for _, concurrent := range []int{1, 8} {
		b.Run(fmt.Sprintf("runs=%d", concurrent), func(b *testing.B) { benchRunStoreLifecycle(b, concurrent) })
	}
}

func benchRunStoreLifecycle(b *testing.B, concurrent int) {
	s, err := openRunStoreOnceFree(filepath.Join(b.TempDir(), "runs"), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	start := time.Now()
	ev := append(mustJSON(b, runEvent{Seq: 1, Type: "model.response", Time: start, Data: map[string]any{"step": 1, "content": strings.Repeat("x", 200)}}), '\n')
	end := append(mustJSON(b, runEvent{Seq: 11, Type: "run.completed", Time: start, Data: map[string]any{"status": runCompleted, "output": "done"}}), '\n')
	var left atomic.Int64
	left.Store(int64(b.N))
	b.ResetTimer()
	var wg sync.WaitGroup
	for range concurrent {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				id := newID("run_")
				v := testRunView(id, start)
				l, err := s.create(v, nil)
				if err != nil {
					b.Error(err)
					return
				}
				for range 10 {
					l.write(ev, false)
				}
				v.Status = runCompleted
				if err := s.end(l, append(slices.Clip(end), recordLine(v, nil)...)); err != nil {
					b.Error(err)
				}
				l.close()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(s.log.costs.syncs.Load())/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(s.log.costs.written.Load())/float64(b.N), "written-B/op")
}
