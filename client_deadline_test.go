package main

import (
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// deadlineSet is the due of the watch tests: deadlines added to it run
// out when due is called at or after them.
type deadlineSet struct {
	mu    sync.Mutex
	left  []int64
	early []int64 // deadlines run out before their time
	ran   chan int64
	w     *deadlineWatch
	// looked, when set, runs once as due returns, after it has looked.
	looked func()
}

// newDeadlineSet returns a set for up to n deadlines and its watch,
// stopped when the test ends.
func newDeadlineSet(t *testing.T, n int) (*deadlineSet, *deadlineWatch) {
	s := &deadlineSet{ran: make(chan int64, n)}
	s.w = newDeadlineWatch(s.due)
	t.Cleanup(s.w.stop)
	return s, s.w
}

// waitRan returns the first n deadlines run out, in the order they ran
// out, failing the test if that takes over 10s.
func (s *deadlineSet) waitRan(t *testing.T, n int) []int64 {
	t.Helper()
	var got []int64
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case d := <-s.ran:
			got = append(got, d)
		case <-timeout:
			t.Fatalf("ran out %d of %d deadlines in 10s", len(got), n)
		}
	}
	return got
}

// runEarly returns the deadlines run out before their time.
func (s *deadlineSet) runEarly() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.early)
}

func (s *deadlineSet) add(w *deadlineWatch, d int64) {
	s.mu.Lock()
	s.left = append(s.left, d)
	s.mu.Unlock()
	w.watch(d)
}

func (s *deadlineSet) due(now int64) int64 {
	if f := s.looked; f != nil {
		s.looked = nil
		defer f()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := int64(0)
	kept := s.left[:0]
	for _, d := range s.left {
		if d <= now {
			if s.w.now() < d {
				s.early = append(s.early, d)
			}
			s.ran <- d
			continue
		}
		kept = append(kept, d)
		if next == 0 || d < next {
			next = d
		}
	}
	s.left = kept
	return next
}

// TestDeadlineWatch: deadlines told in any order run out in order, none
// before its time, and none is lost when they are told while the timer
// fires.
func TestDeadlineWatch(t *testing.T) {
	t.Parallel()
	t.Run("in order", func(t *testing.T) {
		t.Parallel()
		s, w := newDeadlineSet(t, 3)
		now := w.now()
		ds := []int64{now + int64(90*time.Millisecond), now + int64(30*time.Millisecond), now + int64(60*time.Millisecond)}
		for _, d := range ds {
			s.add(w, d)
		}
		got := s.waitRan(t, len(ds))
		if want := slices.Sorted(slices.Values(ds)); !slices.Equal(got, want) {
			t.Errorf("deadlines ran out in the order %v, want %v", got, want)
		}
		if early := s.runEarly(); len(early) > 0 {
			t.Errorf("deadlines run out early: %v", early)
		}
	})
	t.Run("told after due looked", func(t *testing.T) {
		t.Parallel()
		s, w := newDeadlineSet(t, 2)
		// The second deadline is told after the first has fired and after
		// due has looked at what is left, as a call that becomes pending
		// then would: the watch must fire for it too.
		s.looked = func() { s.add(w, w.now()+int64(5*time.Millisecond)) }
		s.add(w, w.now()+int64(time.Millisecond))
		s.waitRan(t, 2)
	})
	t.Run("told while firing", func(t *testing.T) {
		t.Parallel()
		const n = 2000
		s, w := newDeadlineSet(t, n)
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), 1))
				for range n / 8 {
					s.add(w, w.now()+r.Int64N(int64(20*time.Millisecond)))
					if r.IntN(4) == 0 {
						time.Sleep(time.Duration(r.Int64N(int64(time.Millisecond))))
					}
				}
			})
		}
		wg.Wait()
		s.waitRan(t, n)
		if early := s.runEarly(); len(early) > 0 {
			t.Errorf("%d deadlines run out early", len(early))
		}
	})
}
