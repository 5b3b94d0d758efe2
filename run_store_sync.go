package main

import (
	"os"
	"sync/atomic"
	"time"
)

// This file holds what the runs log costs the disk, counted where it is
// spent: its fsyncs, the bytes it writes and the time runs wait for it
// (the commit of their first record, the write of their end). /metrics
// shows them, so an operator can read the bytes written per run (flash
// wear) and the disk's share of a run's latency; the benchmarks report
// them per run.

// A storeCosts counts what a runs log cost. It is safe for concurrent
// use.
type storeCosts struct {
	syncs   atomic.Int64 // fsyncs of the log's segments and directory
	written atomic.Int64 // bytes written to the log's segments
	wait    atomic.Int64 // nanoseconds runs waited for the disk
}

// waited counts the time since start as a run's wait for the disk.
func (c *storeCosts) waited(start time.Time) {
	c.wait.Add(int64(time.Since(start)))
}

// syncFile fsyncs f, a segment, counted.
func (c *storeCosts) syncFile(f *os.File) error {
	c.syncs.Add(1)
	return f.Sync()
}

// syncDir fsyncs the directory dir, counted.
func (c *storeCosts) syncDir(dir string) error {
	c.syncs.Add(1)
	return syncDir(dir)
}

// wrote counts n bytes written and returns n.
func (c *storeCosts) wrote(n int) int {
	c.written.Add(int64(n))
	return n
}

// zeroRange writes n zero bytes to f at off, counted.
func (c *storeCosts) zeroRange(f *os.File, off, n int64) error {
	for n > 0 {
		k, err := f.WriteAt(zeros[:min(n, int64(len(zeros)))], off)
		c.wrote(k)
		if err != nil {
			return err
		}
		off, n = off+int64(k), n-int64(k)
	}
	return nil
}

// zeros is what zeroRange writes, a piece at a time.
var zeros = make([]byte, 64<<10)
