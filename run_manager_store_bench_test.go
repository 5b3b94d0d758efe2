package main

import (
	"fmt"
	"testing"
)

// BenchmarkRunsThroughAPIStore is BenchmarkRunsThroughAPI with the runs
// kept on disk: the run store's cost under concurrent runs. The store's
// directory is under the test's temporary one (TMPDIR): set it to a
// directory on the disk to measure.
func BenchmarkRunsThroughAPIStore(b *testing.B) {
	clients := defaultLimit("max_concurrent_runs")
	b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchRunsThroughAPI(b, clients, true) })
}
