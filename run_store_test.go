package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file holds the tests of the runs on disk: torn writes, crashes at
// every byte of an event log, recovery of interrupted runs, retention.

// newTestRunStore opens a store in a fresh directory.
func newTestRunStore(t *testing.T) *runStore {
	t.Helper()
	s, err := openRunStore(filepath.Join(t.TempDir(), "runs"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openRunStore: %v", err)
	}
	t.Cleanup(s.close)
	return s
}

// testRunView returns the record of a new run id created at created.
func testRunView(id string, created time.Time) runView {
	return runView{ID: id, Status: runRunning, Prompt: "prompt of " + id, Model: "openai/fake-model",
		Servers: []serverStatus{}, ActivatedTools: []string{}, CreatedAt: created.UTC()}
}

// appendEvents appends events to l as finish and emit do, the terminal
// one fsynced.
func appendEvents(t *testing.T, l *runLog, events ...runEvent) {
	t.Helper()
	for _, ev := range events {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		status, _ := strings.CutPrefix(ev.Type, "run.")
		if err := l.append(b, isTerminal(status)); err != nil {
			t.Fatalf("append %s: %v", ev.Type, err)
		}
	}
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

func TestRunStoreFilesArePrivate(t *testing.T) {
	s := newTestRunStore(t)
	l, err := s.create(testRunView("run_a", time.Now()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer l.close()
	for path, want := range map[string]os.FileMode{s.dir: 0o700, s.recordPath("run_a"): 0o600, s.eventsPath("run_a"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("mode of %s = %v, want %v", path, got, want)
		}
	}
	if _, err := s.create(testRunView("run_a", time.Now()), nil); err == nil {
		t.Errorf("create(run_a) twice = nil error, want one: a run's log is never reused")
	}
}

func TestRunStoreTornLastLine(t *testing.T) {
	s := newTestRunStore(t)
	start := time.Now()
	l, err := s.create(testRunView("run_torn", start), nil)
	if err != nil {
		t.Fatal(err)
	}
	events := lifecycle(start, runCompleted, "done", "")
	appendEvents(t, l, events[:3]...)
	l.close()
	// A crash in the middle of the fourth line.
	f, err := os.OpenFile(s.eventsPath("run_torn"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":4,"type":"model.resp`)
	f.Close()

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
	b, _ := os.ReadFile(s.eventsPath("run_torn"))
	if _, whole := parseEventLog(b); whole != len(b) {
		t.Errorf("the log has %d bytes after its last newline, want none", len(b)-whole)
	}
}

// TestRunStoreCrashAtEveryByte cuts a run's event log at every length its
// terminal line passes through, and at each other line's ends and middle
// (a crash at that instant: nothing after the cut was written) with the record as the run wrote it at creation, and checks
// what start-up makes of it: a finished run before it is intact, the run
// itself is readable and ended, completed only when its terminal event
// made it to disk whole. The final record is written only after the
// terminal event was fsynced, so it never meets a shorter log.
func TestRunStoreCrashAtEveryByte(t *testing.T) {
	base := newTestRunStore(t)
	start := time.Now().Add(-time.Minute)
	earlier := testRunView("run_earlier", start)
	l, err := base.create(earlier, nil)
	if err != nil {
		t.Fatal(err)
	}
	appendEvents(t, l, lifecycle(start, runCompleted, "earlier answer", "")...)
	l.close()
	earlier.Status, earlier.Output, earlier.Steps = runCompleted, "earlier answer", 2
	if _, err := base.writeRecord(earlier, nil); err != nil {
		t.Fatal(err)
	}

	crashed := testRunView("run_crashed", start.Add(time.Second))
	l, err = base.create(crashed, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := lifecycle(start.Add(time.Second), runCompleted, "the answer", "")
	appendEvents(t, l, events...)
	l.close()
	full, err := os.ReadFile(base.eventsPath("run_crashed"))
	if err != nil {
		t.Fatal(err)
	}
	lastLine := len(full) - len(mustJSON(t, events[len(events)-1])) - 1

	// Every byte of the terminal line, and each other line's ends and middle.
	var cuts []int
	for i := lastLine; i <= len(full); i++ {
		cuts = append(cuts, i)
	}
	lineStart := 0
	for i, c := range full[:lastLine] {
		if c == '\n' {
			cuts = append(cuts, lineStart, (lineStart+i)/2, i, i+1)
			lineStart = i + 1
		}
	}
	for _, cut := range cuts {
		s := newTestRunStore(t)
		for _, name := range []string{"run_earlier" + runRecordExt, "run_earlier" + runEventsExt, "run_crashed" + runRecordExt} {
			copyFile(t, filepath.Join(base.dir, name), filepath.Join(s.dir, name))
		}
		if err := os.WriteFile(s.eventsPath("run_crashed"), full[:cut], 0o600); err != nil {
			t.Fatal(err)
		}
		runs, err := s.load(time.Now())
		if err != nil || len(runs) != 2 {
			t.Fatalf("cut %d: load = %d runs, %v; want 2", cut, len(runs), err)
		}
		if got := runs[0].view; got.ID != "run_earlier" || got.Status != runCompleted || got.Output != "earlier answer" {
			t.Fatalf("cut %d: earlier run = %+v, want it completed with its answer", cut, got)
		}
		got := runs[1].view
		wantStatus, wantOutput, wantError := runFailed, "", interruptedError
		if cut == len(full) {
			wantStatus, wantOutput, wantError = runCompleted, "the answer", ""
		}
		if got.Status != wantStatus || got.Output != wantOutput || got.Error != wantError || got.EndedAt == nil {
			t.Fatalf("cut %d of %d (last line from %d): run = status %q output %q error %q ended %v, want %q %q %q, ended",
				cut, len(full), lastLine, got.Status, got.Output, got.Error, got.EndedAt, wantStatus, wantOutput, wantError)
		}
		evs, err := s.readEvents("run_crashed")
		if err != nil || len(evs) == 0 || evs[len(evs)-1].Type != terminalEventType(wantStatus) {
			t.Fatalf("cut %d: events = %+v, %v; want them to end with %s", cut, evs, err, terminalEventType(wantStatus))
		}
		// What start-up wrote is itself whole: a second start-up agrees.
		again, err := s.load(time.Now())
		if err != nil || again[1].view.Status != wantStatus {
			t.Fatalf("cut %d: second load = %+v, %v", cut, again, err)
		}
		if evs2, _ := s.readEvents("run_crashed"); len(evs2) != len(evs) {
			t.Fatalf("cut %d: second load changed the log: %d events, then %d", cut, len(evs), len(evs2))
		}
	}
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

// copyFile copies src to dst (0600).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestRunStoreRecordWriteIsAtomic(t *testing.T) {
	s := newTestRunStore(t)
	v := testRunView("run_rec", time.Now())
	l, err := s.create(v, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.close()
	// A crash while the final record was being written leaves its
	// temporary file, half done; the record in place is the old one.
	os.WriteFile(s.recordPath("run_rec")+runTempExt, []byte(`{"id":"run_rec","status":"compl`), 0o600)
	if _, err := openRunStore(s.dir, s.logger); err == nil || !strings.Contains(err.Error(), "in use by another harnessd") {
		t.Fatalf("openRunStore of a directory in use = %v, want it refused", err)
	}
	s.close()
	s2, err := openRunStore(s.dir, s.logger)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.close()
	if _, err := os.Stat(s.recordPath("run_rec") + runTempExt); !os.IsNotExist(err) {
		t.Errorf("the temporary record is still there after openRunStore (stat: %v)", err)
	}
	runs, err := s2.load(time.Now())
	if err != nil || len(runs) != 1 || runs[0].view.Prompt != v.Prompt || runs[0].view.Error != interruptedError {
		t.Fatalf("load = %+v, %v; want the run, interrupted, with its prompt", runs, err)
	}
}

func TestRunStoreRecoveryMarking(t *testing.T) {
	tests := []struct {
		name       string
		events     int // how many of lifecycle's events reached the log
		status     string
		wantStatus string
		wantError  string
		wantSteps  int
		wantCalls  int
	}{
		{name: "nothing logged", events: 0, wantStatus: runFailed, wantError: interruptedError},
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
			appendEvents(t, l, lifecycle(start, cmpOr(tt.status, runCompleted), "", "step 2: boom")[:tt.events]...)
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
				t.Errorf("record on disk = %+v, %v; want it rewritten as recovered", onDisk, err)
			}
		})
	}
}

func TestRetentionExpired(t *testing.T) {
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
	s := newTestRunStore(t)
	start := time.Now().Add(-time.Hour)
	for i := 3; i >= 1; i-- {
		id := fmt.Sprintf("run_%d", i)
		v := testRunView(id, start.Add(time.Duration(i)*time.Minute))
		l, err := s.create(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		appendEvents(t, l, lifecycle(v.CreatedAt, runCompleted, "out", "")...)
		l.close()
		v.Status = runCompleted
		s.writeRecord(v, nil)
	}
	os.WriteFile(s.eventsPath("run_orphan"), []byte(`{"seq":1,"type":"run.started"}`+"\n"), 0o600)
	os.WriteFile(s.messagesPath("run_orphan"), []byte(`{"step":0,"role":"user","content":"x"}`+"\n"), 0o600)
	runs, err := s.load(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{s.eventsPath("run_orphan"), s.messagesPath("run_orphan")} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s, of a run without a record, is still there after load (stat: %v)", p, err)
		}
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.view.ID)
		if want := s.size(r.view.ID); r.bytes != want || want == 0 {
			t.Errorf("run %s: bytes = %d, want %d (both files)", r.view.ID, r.bytes, want)
		}
	}
	if want := []string{"run_1", "run_2", "run_3"}; !slices.Equal(ids, want) {
		t.Errorf("load order = %v, want oldest first %v", ids, want)
	}
	s.removeAll([]string{"run_1", "run_9"})
	if runs, _ := s.load(time.Now()); len(runs) != 2 {
		t.Errorf("after remove: %d runs, want 2", len(runs))
	}
	if left, _ := filepath.Glob(filepath.Join(s.dir, "run_1*")); len(left) != 0 {
		t.Errorf("files left of a removed run: %v", left)
	}
}

func TestKeptRunsSettings(t *testing.T) {
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
			flags: keptRunsSettings{bytes: keptRunsSetting{value: "0", source: "--max-kept-run-bytes"}},
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

// BenchmarkRunStoreLifecycle measures what the disk adds to one run: the
// first record, ten events, the fsynced terminal event and the final
// record (five fsyncs in all).
func BenchmarkRunStoreLifecycle(b *testing.B) {
	s, err := openRunStore(filepath.Join(b.TempDir(), "runs"), slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	syncs, written := storeSyncs.Load(), storeBytes.Load()
	start := time.Now()
	ev := mustJSON(b, runEvent{Seq: 1, Type: "model.response", Time: start, Data: map[string]any{"step": 1, "content": strings.Repeat("x", 200)}})
	end := mustJSON(b, runEvent{Seq: 11, Type: "run.completed", Time: start, Data: map[string]any{"status": runCompleted, "output": "done"}})
	for i := 0; b.Loop(); i++ {
		v := testRunView(fmt.Sprintf("run_%d", i), start)
		l, err := s.create(v, nil)
		if err != nil {
			b.Fatal(err)
		}
		for range 10 {
			l.append(ev, false)
		}
		l.append(end, true)
		l.close()
		v.Status = runCompleted
		if _, err := s.writeRecord(v, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(storeSyncs.Load()-syncs)/float64(b.N), "fsyncs/op")
	b.ReportMetric(float64(storeBytes.Load()-written)/float64(b.N), "written-B/op")
}
