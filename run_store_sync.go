package main

import (
	"os"
	"sync/atomic"
)

// This file holds the one place the run store makes a file durable, so
// that what it costs is counted: the fsyncs and the bytes the store wrote
// since the process started, which the benchmarks report per run.

// Counters of the run store's work, process-wide.
var (
	storeSyncs atomic.Int64 // fsyncs of the store's files and directory
	storeBytes atomic.Int64 // bytes the store wrote to its files
)

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
