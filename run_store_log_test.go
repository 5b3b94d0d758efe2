package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds the tests of the run store's log: its shared syncs,
// its compaction, and what removal and deletion leave on disk.

// TestRunsLogSyncsWhatQueues holds the first sync's leader while seven more
// runs ask to be accepted: their records are made durable together, by
// one more sync led by one of them, each told its outcome.
func TestRunsLogSyncsWhatQueues(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	release := make(chan struct{})
	var mu sync.Mutex
	leaders := 0
	s.log.onSync = func() {
		mu.Lock()
		leaders++
		first := leaders == 1
		mu.Unlock()
		if first {
			<-release
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	create := func() {
		l, err := s.create(testRunView(newID("run_"), time.Now()), nil)
		if err == nil {
			l.close()
		}
		errs <- err
	}
	wg.Go(create)
	waitUntil(t, "the first sync leads", func() bool { mu.Lock(); defer mu.Unlock(); return leaders == 1 })
	for range 7 {
		wg.Go(create)
	}
	waitUntil(t, "seven syncs wait behind it", func() bool {
		s.log.smu.Lock()
		defer s.log.smu.Unlock()
		return s.log.waiting == 7
	})
	syncs := s.log.costs.syncs.Load()
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("create: %v", err)
		}
	}
	if got := s.log.costs.syncs.Load() - syncs; got != 2 {
		t.Errorf("%d fsyncs for the 8 records, want 2: the one held and one for all that waited", got)
	}
	if leaders != 2 {
		t.Errorf("%d syncs led, want 2", leaders)
	}
	if ids := reopenRunStore(t, s).log.ids(); len(ids) != 8 {
		t.Errorf("the log holds %d runs after a restart, want the 8 accepted", len(ids))
	}
}

// TestRunsLogGathersOpenRuns opens two runs and makes the window long:
// the first run's end waits for the other run's before its fsync, and
// one fsync makes both durable. A run alone waits for nothing.
func TestRunsLogGathersOpenRuns(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	a, err := s.create(testRunView("run_a", time.Now()), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.create(testRunView("run_b", time.Now()), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.log.window = time.Hour
	line := append(mustJSON(t, lifecycle(time.Now(), runCompleted, "", "")[0]), '\n')
	syncs := s.log.costs.syncs.Load()
	var wg sync.WaitGroup
	write := func(l *runLog) {
		wg.Go(func() {
			if err := l.write(line, true); err != nil {
				t.Error(err)
			}
		})
	}
	write(a)
	waitUntil(t, "the first end's sync waits for the other run", func() bool {
		s.log.smu.Lock()
		defer s.log.smu.Unlock()
		return s.log.gathering != nil
	})
	write(b)
	wg.Wait()
	if got := s.log.costs.syncs.Load() - syncs; got != 1 {
		t.Errorf("%d fsyncs for the two runs' ends, want 1", got)
	}
	b.close()
	b.close() // closing again does not count twice
	if got := s.log.open.Load(); got != 1 {
		t.Fatalf("%d runs open, want 1", got)
	}
	if err := a.write(line, true); err != nil { // alone: no wait
		t.Fatal(err)
	}
	a.close()
}

// storeEndedRuns writes n ended runs, run_<name><i>, each with a line
// that names it (secret-<id>), and returns their ids, oldest first.
func storeEndedRuns(t *testing.T, s *runStore, name string, n int) []string {
	t.Helper()
	var ids []string
	start := time.Now().Add(-time.Hour)
	for i := range n {
		v := testRunView(fmt.Sprintf("run_%s%03d", name, i), start.Add(time.Duration(i)*time.Second))
		v.Prompt = "secret-" + v.ID + " " + strings.Repeat("x", 300)
		l, err := s.create(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		events := lifecycle(v.CreatedAt, runCompleted, "out", "")
		endRun(t, s, l, ended(v, decoded(t, events)), events...)
		ids = append(ids, v.ID)
	}
	return ids
}

// checkRuns checks that s holds exactly ids, each readable and ended.
func checkRuns(t *testing.T, s *runStore, ids []string) {
	t.Helper()
	got := s.log.ids()
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(ids)); !slices.Equal(got, want) {
		t.Fatalf("the log holds %v, want %v", got, want)
	}
	for _, id := range ids {
		rec, err := s.readRecord(id)
		evs, _ := s.readEvents(id)
		if err != nil || rec.ID != id || rec.Status != runCompleted || len(evs) != 5 {
			t.Errorf("run %s = %+v with %d events, %v; want it whole", id, rec, len(evs), err)
		}
	}
}

// TestRunsLogCompaction lowers the segment size so that runs span several
// segments, removes most of them (retention) and checks that the log's
// segments with little live left are emptied and removed, and that the
// runs kept read the same, before and after a restart.
func TestRunsLogCompaction(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	s.log.segBytes = 4 << 10
	ids := storeEndedRuns(t, s, "a", 40)
	before := len(s.log.segs)
	if before < 4 {
		t.Fatalf("%d segments for 40 runs, want several", before)
	}
	var kept, removed []string
	for i, id := range ids {
		if i%5 == 0 {
			kept = append(kept, id)
		} else {
			removed = append(removed, id)
		}
	}
	s.removeAll(removed)
	checkRuns(t, s, kept)
	if after := len(s.log.segs); after >= before {
		t.Errorf("%d segments after removing 32 of 40 runs, want fewer than %d", after, before)
	}
	for _, seg := range s.log.segs[:len(s.log.segs)-1] {
		if seg.live*2 < seg.size {
			t.Errorf("segment %d is kept with %d live bytes of %d", seg.num, seg.live, seg.size)
		}
	}
	s = reopenRunStore(t, s)
	checkRuns(t, s, kept)
	if runs, err := s.load(time.Now()); err != nil || len(runs) != len(kept) {
		t.Fatalf("load = %d runs, %v; want %d", len(runs), err, len(kept))
	}
}

// TestRunsLogRemovedLineOutlivesSegment removes a run whose segment stays
// (the rest of it is live), then empties the segment its removed line went
// to: the line is written again, and the run does not come back at the
// next start.
func TestRunsLogRemovedLineOutlivesSegment(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	s.log.segBytes = 4 << 10
	ids := storeEndedRuns(t, s, "a", 8)
	gone := ids[1]
	// The removed line begins a segment of its own, so that the runs'
	// own lines (whose size varies with the record) do not keep it live.
	s.log.mu.Lock()
	if err := s.log.rotate(); err != nil {
		s.log.mu.Unlock()
		t.Fatal(err)
	}
	s.log.mu.Unlock()
	s.removeAll([]string{gone})
	marker := s.log.current().num
	if s.log.segs[0].num == marker {
		t.Fatalf("the removed line went to the run's own segment %d; want a later one", marker)
	}
	fill := storeEndedRuns(t, s, "fill", 6)
	s.removeAll(fill)
	if slices.ContainsFunc(s.log.segs, func(seg *segment) bool { return seg.num == marker }) {
		t.Fatalf("segment %d, which holds the removed line, is kept; want it emptied", marker)
	}
	if !bytes.Contains(logOnDisk(t, s.dir), []byte("secret-"+gone)) {
		t.Fatalf("the lines of %s are gone from disk; want them left in their segment", gone)
	}
	s = reopenRunStore(t, s)
	checkRuns(t, s, slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id == gone }))
}

// TestRunsLogPurge deletes runs the way a deleted conversation does: nothing
// of them is left in any segment, moved copies included, while the other
// runs are whole before and after a restart.
func TestRunsLogPurge(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	s.log.segBytes = 4 << 10
	ids := storeEndedRuns(t, s, "a", 24)
	// A compaction first, so that some runs have copies left behind.
	s.removeAll(ids[1:12])
	purged := []string{ids[0], ids[13], ids[23]}
	if err := s.purge(purged); err != nil {
		t.Fatal(err)
	}
	kept := slices.DeleteFunc(slices.Clone(ids[12:]), func(id string) bool { return slices.Contains(purged, id) })
	for _, id := range purged {
		if bytes.Contains(logOnDisk(t, s.dir), []byte("secret-"+id)) || len(runLinesOnDisk(t, s.dir, id)) > 0 {
			t.Errorf("run %s is still on disk after its purge", id)
		}
	}
	checkRuns(t, s, kept)
	s = reopenRunStore(t, s)
	checkRuns(t, s, kept)
}

// TestRunsLogCrashDuringCompaction takes the runs directory as it is
// when compaction syncs what it moved, before it removes the emptied
// segments, and cuts the last segment at every line's start, middle and
// end since the removal began (a crash at that instant: nothing after the
// cut was written). Every run kept must be whole at the next start, once;
// a removed run may come back only whole (its removed line was cut off),
// to be removed again.
func TestRunsLogCrashDuringCompaction(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	s.log.segBytes = 4 << 10
	ids := storeEndedRuns(t, s, "a", 30)
	var kept, removed []string
	for i, id := range ids {
		if i%4 == 0 {
			kept = append(kept, id)
		} else {
			removed = append(removed, id)
		}
	}
	// Room for every move in the last segment: the cuts below are in it.
	s.log.segBytes = 1 << 20
	last := s.log.current()
	from := last.size
	var snapshot map[string][]byte
	s.log.onSync = func() {
		if snapshot == nil {
			snapshot = readRunsDir(t, s.dir)
		}
	}
	s.removeAll(removed)
	if snapshot == nil || len(s.log.segs) != 1 {
		t.Fatalf("compaction left %d segments (synced: %v), want the last alone", len(s.log.segs), snapshot != nil)
	}
	full := snapshot[filepath.Base(last.path)]
	for i, cut := range lineCuts(full, int(from), len(full)) {
		dir := filepath.Join(t.TempDir(), "runs")
		os.MkdirAll(dir, 0o700)
		for name, b := range snapshot {
			if name == filepath.Base(last.path) {
				// Followed by the space given ahead, or by nothing,
				// in turn.
				b = b[:cut]
				if i%2 == 0 {
					b = append(slices.Clip(b), make([]byte, 4096)...)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s2, err := openRunStoreOnceFree(dir, s.logger)
		if err != nil {
			t.Fatal(err)
		}
		got := s2.log.ids()
		for _, id := range kept {
			if !slices.Contains(got, id) {
				t.Fatalf("cut %d: kept run %s is gone", cut, id)
			}
		}
		for _, id := range got {
			rec, err := s2.readRecord(id)
			evs, _ := s2.readEvents(id)
			if !slices.Contains(ids, id) || err != nil || rec.Status != runCompleted || len(evs) != 5 {
				t.Fatalf("cut %d: run %s = %+v with %d events, %v; want one of the runs, whole", cut, id, rec, len(evs), err)
			}
		}
		s2.close()
	}
	s = reopenRunStore(t, s)
	checkRuns(t, s, kept)
}

// readRunsDir returns the files of dir by name, the lock left out, each
// without the zeros of its space given ahead.
func readRunsDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		if e.Name() == "lock" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b[:writtenLen(b)]
	}
	return out
}

func TestWithID(t *testing.T) {
	t.Parallel()
	tests := []struct{ lines, want string }{
		{"", ""},
		{"{}\n", "run_a {}\n"},
		{"{\"a\":1}\n{\"b\":2}\n", "run_a {\"a\":1}\nrun_a {\"b\":2}\n"},
		{"{}\n{}", "run_a {}\nrun_a {}\n"}, // the last line is given its newline
	}
	for _, tt := range tests {
		if got := string(withID(nil, "run_a", []byte(tt.lines))); got != tt.want {
			t.Errorf("withID(%q) = %q, want %q", tt.lines, got, tt.want)
		}
	}
}

func TestMovedSize(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rest string
		n    int
		ok   bool
	}{
		{string(movedLine(0)), 0, true},
		{string(movedLine(1234)), 1234, true},
		{`{"moved":}`, 0, false},
		{`{"moved":12x}`, 0, false},
		{`{"moved":12`, 0, false},
		{`5}`, 0, false},
		{`{"removed":true}`, 0, false},
		{`{"moved":1234567890123}`, 0, false},
	}
	for _, tt := range tests {
		if n, ok := movedSize([]byte(tt.rest)); n != tt.n || ok != tt.ok {
			t.Errorf("movedSize(%s) = %d, %v; want %d, %v", tt.rest, n, ok, tt.n, tt.ok)
		}
	}
}

// FuzzRunsLogScan opens a runs directory whose log is one segment of
// arbitrary bytes and loads it: nothing panics, every run loaded reads
// back ended, and a second start finds the same runs without writing a
// byte (what the first start wrote, ending interrupted runs, is whole).
func FuzzRunsLogScan(f *testing.F) {
	s, err := openRunStoreOnceFree(filepath.Join(f.TempDir(), "runs"), discardLogger())
	if err != nil {
		f.Fatal(err)
	}
	start := time.Now()
	v := testRunView("run_done", start)
	l, _ := s.create(v, nil)
	events := lifecycle(start, runCompleted, "out", "")
	var lines []byte
	for _, ev := range events {
		lines = append(append(lines, mustJSON(f, ev)...), '\n')
	}
	l.write(lines[:len(lines)/2], false)
	l.write(append(lines[len(lines)/2:], recordLine(replayEvents(v, decoded(f, events)), nil)...), true)
	open, _ := s.create(testRunView("run_open", start), nil)
	open.write(lines[:len(lines)/3], false)
	s.log.put("run_moved", lines[:len(lines)/2])
	s.removeAll([]string{"run_gone"})
	seed := logOnDisk(f, s.dir)
	s.close()
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	// The space given ahead after a cut, and a crash that wrote a later
	// piece of a write but not the piece before it.
	f.Add(append(slices.Clip(seed[:len(seed)/2]), make([]byte, 300)...))
	f.Add(slices.Concat(seed[:len(seed)/3], make([]byte, len(seed)/3), seed[2*len(seed)/3:], make([]byte, 300)))
	f.Add([]byte("run_x {\"moved\":10}\nrun_x {}\n"))
	f.Add([]byte("run_x {\"record\":{\"id\":\"run_x\",\"status\":\"running\"}}\nrun_x {\"removed\":true}\nrun_x {\"seq\":1}\n"))
	f.Fuzz(func(t *testing.T, segment []byte) {
		dir := filepath.Join(t.TempDir(), "runs")
		os.MkdirAll(dir, 0o700)
		if err := os.WriteFile(filepath.Join(dir, logFilePrefix+"00000001"), segment, 0o600); err != nil {
			t.Fatal(err)
		}
		s, err := openRunStoreOnceFree(dir, discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		runs, err := s.load(time.Now())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range runs {
			if !isTerminal(r.view.Status) || !validRunID([]byte(r.view.ID)) {
				t.Fatalf("loaded run %q with status %q", r.view.ID, r.view.Status)
			}
			if rec, err := s.readRecord(r.view.ID); err != nil || !isTerminal(rec.Status) {
				t.Fatalf("run %s reads back %+v, %v", r.view.ID, rec, err)
			}
			s.readEvents(r.view.ID)
		}
		s.close()
		s, err = openRunStoreOnceFree(dir, discardLogger())
		if err != nil {
			t.Fatal(err)
		}
		defer s.close()
		again, err := s.load(time.Now())
		if written := s.log.costs.written.Load(); err != nil || len(again) != len(runs) || written != 0 {
			t.Fatalf("second start: %d runs (first: %d), %v, %d bytes written", len(again), len(runs), err, written)
		}
	})
}

// TestRunsLogReadsDuringCompaction holds a read of a run between taking
// its segment and reading it, and meanwhile removes every other run of
// that segment, so that compaction moves the run and removes the segment:
// the read still reads the segment it took, whole.
func TestRunsLogReadsDuringCompaction(t *testing.T) {
	t.Parallel()
	s := newTestRunStore(t)
	s.log.segBytes = 4 << 10
	storeEndedRuns(t, s, "a", 12)
	first := s.log.segs[0]
	var inFirst []string
	for id, r := range s.log.runs {
		if r.extents[0].seg == first {
			inFirst = append(inFirst, id)
		}
	}
	slices.Sort(inFirst)
	if len(inFirst) < 2 {
		t.Fatalf("%d runs in the first segment, want several", len(inFirst))
	}
	kept := inFirst[0]
	entered, proceed := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.log.onRead = func() {
		once.Do(func() {
			close(entered)
			<-proceed
		})
	}
	read := make(chan error)
	go func() {
		evs, err := s.readEvents(kept)
		if err == nil && len(evs) != 5 {
			err = fmt.Errorf("%d events, want 5", len(evs))
		}
		read <- err
	}()
	<-entered
	s.removeAll(inFirst[1:])
	if slices.Contains(s.log.segs, first) || !first.dropped {
		t.Fatalf("the first segment is kept after its other runs were removed; want it compacted away")
	}
	close(proceed)
	if err := <-read; err != nil {
		t.Fatalf("read of %s that took its segment before the compaction: %v", kept, err)
	}
	if evs, err := s.readEvents(kept); err != nil || len(evs) != 5 {
		t.Fatalf("read of %s after the compaction = %d events, %v", kept, len(evs), err)
	}
}

// TestRunsLogEachLine reads runs whose lines cross the read window, are
// longer than it, are interleaved with another run's and were moved by
// compaction: eachLine gives each line once, in order, and lastLine the
// last, however the lines lie.
func TestRunsLogEachLine(t *testing.T) {
	t.Parallel()
	line := func(n int, c byte) string { return `{"x":"` + strings.Repeat(string(c), n) + `"}` }
	tests := []struct {
		name   string
		writes []string // each one append of a line of run_a, after one of run_b
		move   bool     // rewrite run_a as one moved copy at the end
	}{
		{name: "small lines", writes: []string{line(10, 'a'), line(20, 'b'), line(30, 'c')}},
		{name: "many across windows", writes: slices.Repeat([]string{line(1000, 'd'), line(3000, 'e')}, 40)},
		{name: "one line over the window", writes: []string{line(10, 'f'), line(3*readWindow, 'g'), line(10, 'h')}},
		{name: "lines around the window's size", writes: []string{line(readWindow-9, 'i'), line(readWindow-8, 'j'), line(readWindow+1, 'k')}},
		{name: "moved", writes: slices.Repeat([]string{line(5000, 'l'), line(2*readWindow, 'm')}, 3), move: true},
		{name: "last line over the first read", writes: []string{line(10, 'n'), line(20<<10, 'o')}, move: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := openRunsLog(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(g.closeFiles)
			for i, w := range tt.writes {
				if _, err := g.appendLines("run_b", []byte(fmt.Sprintf(`{"b":%d}`, i))); err != nil {
					t.Fatal(err)
				}
				if _, err := g.appendLines("run_a", []byte(w)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.move {
				if err := g.put("run_a", []byte(strings.Join(tt.writes, "\n")+"\n")); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			if err := g.eachLine("run_a", func(line []byte) error {
				got = append(got, string(line))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.writes) {
				t.Errorf("eachLine gave %d lines, want the %d written, in order", len(got), len(tt.writes))
			}
			last, err := g.lastLine("run_a")
			if want := tt.writes[len(tt.writes)-1]; err != nil || string(last) != want {
				t.Errorf("lastLine = %d bytes (%v), want the %d of the last line", len(last), err, len(want))
			}
			stop := fmt.Errorf("stop")
			calls := 0
			if err := g.eachLine("run_a", func([]byte) error { calls++; return stop }); err != stop || calls != 1 {
				t.Errorf("eachLine with fn failing = %v after %d calls, want fn's error after 1", err, calls)
			}
		})
	}
}
