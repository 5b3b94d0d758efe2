package main

import (
	"os"
	"sync/atomic"
	"time"
)

// This file holds the one place the run store makes a file durable, so
// that what it costs is counted: the fsyncs and the bytes the store wrote
// since the process started, and the time runs waited for the disk (the
// commit of their first record, the write of their end), which the
// benchmarks report per run.

// Counters of the run store's work, process-wide.
var (
	storeSyncs atomic.Int64 // fsyncs of the store's files and directory
	storeBytes atomic.Int64 // bytes the store wrote to its files
	storeWait  atomic.Int64 // nanoseconds runs waited for their record's commit and their end
)

// countWait counts the time since start as a run's wait for the disk.
func countWait(start time.Time) {
	storeWait.Add(int64(time.Since(start)))
}

// syncFile fsyncs f (a file or a directory of the store), counted.
func syncFile(f *os.File) error {
	storeSyncs.Add(1)
	return f.Sync()
}

// countWrite counts n bytes written by the store and returns n.
func countWrite(n int) int {
	storeBytes.Add(int64(n))
	return n
}
