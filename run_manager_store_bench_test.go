package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// BenchmarkRunsThroughAPIStore is BenchmarkRunsThroughAPI with the runs
// kept on disk: the run store's cost under concurrent runs. The store's
// directory is under the test's temporary one (TMPDIR): set it to a
// directory on the disk to measure.
func BenchmarkRunsThroughAPIStore(b *testing.B) {
	clients := defaultLimit("max_concurrent_runs")
	b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchRunsThroughAPI(b, clients, storeMode{on: true}) })
}

// BenchmarkRunsThroughAPIStoreFloor is BenchmarkRunsThroughAPI with the
// store off and, around each run, the least a store keeping the run
// store's two promises must do on the same disk (storeFloorCommits): the
// figures the store's runs/s can be set against, besides store off. Its
// batches are written at once (window=0), as the store's are, or wait a
// millisecond for more commits to join them; a run waits for its first
// commit before it starts (serial), or runs meanwhile (overlapped: only
// its 202 and its end wait for it).
func BenchmarkRunsThroughAPIStoreFloor(b *testing.B) {
	clients := defaultLimit("max_concurrent_runs")
	for _, mode := range []storeMode{
		{floor: true},
		{floor: true, window: time.Millisecond},
		{floor: true, overlapped: true},
	} {
		commits := "serial"
		if mode.overlapped {
			commits = "overlapped"
		}
		b.Run(fmt.Sprintf("clients=%d/commits=%s/window=%v", clients, commits, mode.window), func(b *testing.B) {
			benchRunsThroughAPI(b, clients, mode)
		})
	}
}

// A storeMode says how BenchmarkRunsThroughAPI keeps its runs: not at all
// (the zero value), in a run store (on) or in none, with the floor's
// commits around each run (floor, batched within window, the first one
// overlapped with the run or not).
type storeMode struct {
	on, floor  bool
	window     time.Duration
	overlapped bool
}

// storeFloorCommits is the floor of a durable run store: a run accepted
// must survive a crash and a run reported ended must be on disk, so a run
// waits for two commits at least, one before its 202 and one before its
// end is told. Here both go to one shared file, group-committed as the
// run store's log is (the oldest waiting commit writes everything
// queued and fsyncs once, for all), with the bytes the store writes for a
// run: no files of its own, no encoding, no recovery. The file has its
// space given ahead, as the log's segments have.
type storeFloorCommits struct {
	f          *os.File
	window     time.Duration // how long a batch waits for more, from its first commit
	overlapped bool          // the run goes on while its first commit is made

	mu      sync.Mutex
	off     int64 // where the next batch is written (by the batch's leader)
	queued  []byte
	waiting []chan error
	leading bool
	syncs   int
}

// The floor's bytes per run: the accepted record and the rest of what the
// store writes for a run of the benchmark (its written-B/run).
const (
	floorAcceptBytes = 400
	floorEndBytes    = 2046
)

func newStoreFloorCommits(b *testing.B, dir string, mode storeMode) *storeFloorCommits {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "floor"), os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	// Written into space given ahead, as the log's segments are.
	preallocate(f, segmentBytes)
	return &storeFloorCommits{f: f, window: mode.window, overlapped: mode.overlapped}
}

// run calls one with a commit before it or beside it (the 202's) and one
// after both (the end's); on a nil floor it only calls one.
func (c *storeFloorCommits) run(one func() (time.Duration, error)) (time.Duration, error) {
	if c == nil {
		return one()
	}
	accepted := make(chan error, 1)
	if c.overlapped {
		// Owned by run; ends with the commit, which run waits for.
		go func() { accepted <- c.commit(floorAcceptBytes) }()
	} else if err := c.commit(floorAcceptBytes); err != nil {
		return 0, err
	} else {
		accepted <- nil
	}
	d, err := one()
	if err := errors.Join(err, <-accepted); err != nil {
		return d, err
	}
	return d, c.commit(floorEndBytes)
}

// commit queues n bytes and returns once they are on disk.
func (c *storeFloorCommits) commit(n int) error {
	done := make(chan error, 1)
	c.mu.Lock()
	c.queued = append(c.queued, bytes.Repeat([]byte{'x'}, n-1)...)
	c.queued = append(c.queued, '\n')
	c.waiting = append(c.waiting, done)
	if c.leading {
		c.mu.Unlock()
		return <-done
	}
	c.leading = true
	for len(c.waiting) > 0 {
		if c.window > 0 {
			// The batch's window: more commits join it, at the price
			// of the wait (a bound on it, not synchronisation).
			c.mu.Unlock()
			time.Sleep(c.window)
			c.mu.Lock()
		}
		batch, waiting := c.queued, c.waiting
		c.queued, c.waiting = nil, nil
		c.mu.Unlock()
		_, err := c.f.WriteAt(batch, c.off)
		c.off += int64(len(batch))
		if err == nil {
			err = c.f.Sync()
		}
		for _, w := range waiting {
			w <- err
		}
		c.mu.Lock()
		c.syncs++
	}
	c.leading = false
	c.mu.Unlock()
	return <-done
}

// reportStoreCost reports the store's fsyncs, bytes written and the time
// runs waited for the disk, per run, and the bytes written over what the
// runs' lines in dir's log hold of their events and transcripts (as JSON
// lines).
func reportStoreCost(b *testing.B, dir string, syncs, written, wait int64) {
	var logs int64
	for line := range bytes.Lines(logOnDisk(b, dir)) {
		_, line, _ = bytes.Cut(line, []byte(" "))
		if inner, ok := unwrapLine(bytes.TrimSuffix(line, []byte("\n")), messageLinePrefix); ok {
			logs += int64(len(inner)) + 1
		} else if !bytes.HasPrefix(line, recordLinePrefix) && !bytes.HasPrefix(line, removedMarker) && !bytes.HasPrefix(line, movedPrefix) {
			logs += int64(len(line))
		}
	}
	b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/run")
	b.ReportMetric(float64(written)/float64(b.N), "written-B/run")
	b.ReportMetric(float64(wait)/1e6/float64(b.N), "disk-wait-ms/run")
	if logs > 0 {
		b.ReportMetric(float64(written)/float64(logs), "written/json")
	}
}
