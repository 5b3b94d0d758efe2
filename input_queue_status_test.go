package main

import (
	"sync"
	"testing"
	"time"
)

// TestWaitingInputFollowsTheQueue opens 2,000 questions at once on an
// interactive run, all timing out at once, while views are taken: a view
// never shows waiting_input without an open question (or running with
// one), and once all are gone the run is running again, never left
// waiting_input with nothing open.
func TestWaitingInputFollowsTheQueue(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Hang: true})
	m := newTestRuns(t, f)
	r, err := m.start(runRequest{Prompt: "wait", Interactive: true}, false)
	if err != nil {
		t.Fatal(err)
	}
	waitForModelRequests(t, f, 1)
	var asks sync.WaitGroup
	for range 2000 {
		asks.Add(1)
		go func() {
			defer asks.Done()
			r.input.Queue.ask(t.Context(), &inputRequest{Server: "s", Mode: "form", Message: "?"}, time.Millisecond, nil)
		}()
	}
	done := make(chan struct{})
	go func() { asks.Wait(); close(done) }()
	check := func() {
		v := r.view()
		switch {
		case v.Status == runWaitingInput && len(v.InputRequests) == 0:
			t.Fatalf("view: waiting_input with no open question")
		case v.Status == runRunning && len(v.InputRequests) > 0:
			t.Fatalf("view: running with %d open questions", len(v.InputRequests))
		}
	}
	for waiting := true; waiting; {
		select {
		case <-done:
			waiting = false
		default:
			check()
		}
	}
	check()
	if v := r.view(); v.Status != runRunning {
		t.Errorf("after every question timed out: status %s with %d open, want running", v.Status, len(v.InputRequests))
	}
	r.cancel()
	waitRun(t, r)
}
