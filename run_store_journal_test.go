package main

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds the tests of the run store's journal and its pool of
// run files: batches, rewrites, and the ids a refused run leaves.

// TestJournalBatchesWhatQueues holds the first commit's leader while
// seven more runs ask to be accepted: they are committed together, in
// one batch led by the oldest of them, each told its outcome.
func TestJournalBatchesWhatQueues(t *testing.T) {
	s := newTestRunStore(t)
	release := make(chan struct{})
	var mu sync.Mutex
	var sizes []int
	s.journal.onBatch = func(n int) {
		mu.Lock()
		sizes = append(sizes, n)
		first := len(sizes) == 1
		mu.Unlock()
		if first {
			<-release
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	create := func(i int) {
		l, err := s.create(testRunView(s.newRunID(), time.Now()), nil)
		if err == nil {
			l.close()
		}
		errs <- err
	}
	wg.Go(func() { create(0) })
	waitUntil(t, "the first commit leads", func() bool { mu.Lock(); defer mu.Unlock(); return len(sizes) == 1 })
	for i := 1; i < 8; i++ {
		wg.Go(func() { create(i) })
	}
	waitUntil(t, "seven commits queue behind it", func() bool {
		s.journal.mu.Lock()
		defer s.journal.mu.Unlock()
		return len(s.journal.queue) == 8
	})
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("create: %v", err)
		}
	}
	if !slices.Equal(sizes, []int{1, 7}) {
		t.Errorf("batches = %v, want [1 7]: what queued during a commit goes in the next one", sizes)
	}
	recs, err := s.journal.records()
	if err != nil || len(recs) != 8 {
		t.Errorf("journal = %d records, %v; want the 8 runs'", len(recs), err)
	}
}

// TestJournalRewrite lowers the journal's bound so that every commit
// rewrites it: it then holds the records of the runs not yet ended, and a
// crash (a store closed with runs open) still ends them at the next start.
func TestJournalRewrite(t *testing.T) {
	s := newTestRunStore(t)
	s.journal.compactBytes = 1
	start := time.Now()
	var open []string
	for i := range 4 {
		v := testRunView(s.newRunID(), start.Add(time.Duration(i)*time.Second))
		l, err := s.create(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			events := lifecycle(v.CreatedAt, runCompleted, "out", "")
			endRun(t, s, l, ended(v, decoded(t, events)), events...)
			continue
		}
		l.close()
		open = append(open, v.ID)
	}
	// One more commit, after the last end, rewrites the journal.
	if err := s.journal.compact(); err != nil {
		t.Fatal(err)
	}
	recs, err := s.journal.records()
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range recs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	slices.Sort(open)
	if !slices.Equal(ids, open) {
		t.Errorf("journal after the rewrite holds %v, want the runs not ended %v", ids, open)
	}
	runs, err := reopenRunStore(t, s).load(time.Now())
	if err != nil || len(runs) != 4 {
		t.Fatalf("load = %d runs, %v; want 4", len(runs), err)
	}
	for _, r := range runs {
		want := runCompleted
		if slices.Contains(open, r.view.ID) {
			want = runFailed
		}
		if r.view.Status != want {
			t.Errorf("run %s after the restart = %s, want %s", r.view.ID, r.view.Status, want)
		}
	}
}

// TestRunIDPool checks the pool's ids: their files are ready, empty, and
// not runs; a released id's file is removed; a fresh id (the pool empty)
// gets a file of its own; and a restart removes the files left unused.
func TestRunIDPool(t *testing.T) {
	s := newTestRunStore(t)
	if _, err := os.Stat(s.runPath(s.newRunID())); !os.IsNotExist(err) {
		t.Errorf("the first id, taken before the pool was filled, has a file (stat: %v); want a fresh id", err)
	}
	waitUntil(t, "the pool fills", func() bool { s.pool.mu.Lock(); defer s.pool.mu.Unlock(); return len(s.pool.free) == runIDPoolSize })
	id := s.newRunID()
	if fi, err := os.Stat(s.runPath(id)); err != nil || fi.Size() != 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file of a pooled id = %v, %v; want it there, empty, 0600", fi, err)
	}
	if !s.pool.holds(id) {
		t.Errorf("pool does not hold %s, taken and not used", id)
	}
	s.releaseRunID(id)
	if _, err := os.Stat(s.runPath(id)); !os.IsNotExist(err) {
		t.Errorf("the file of a released id is still there (stat: %v)", err)
	}
	if runs, err := s.load(time.Now()); err != nil || len(runs) != 0 {
		t.Errorf("load with the pool full = %d runs, %v; want none: its files are not runs", len(runs), err)
	}
	fresh := "run_fresh"
	l, err := s.create(testRunView(fresh, time.Now()), nil)
	if err != nil {
		t.Fatalf("create with an id not from the pool: %v", err)
	}
	l.close()
	if _, err := s.create(testRunView(fresh, time.Now()), nil); err == nil || !strings.Contains(err.Error(), "create its file") {
		t.Errorf("create of an id whose file exists = %v, want it refused", err)
	}
	s2 := reopenRunStore(t, s)
	runs, err := s2.load(time.Now())
	if err != nil || len(runs) != 1 || runs[0].view.ID != fresh {
		t.Fatalf("load after a restart = %+v, %v; want run_fresh alone, interrupted", runs, err)
	}
	entries, _ := os.ReadDir(s.dir)
	files := 0
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), runFileExt); ok && name != fresh && !s2.pool.holds(name) {
			files++
		}
	}
	if files != 0 {
		t.Errorf("%d run files left that are neither runs nor the new pool's", files)
	}
}
