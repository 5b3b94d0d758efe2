package main

import (
	"fmt"
	"os"
	"path/filepath"
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

// reportStoreCost reports the store's fsyncs and bytes written per run,
// and the bytes written over what the runs' event logs and transcripts
// in dir hold (their events and messages as JSON).
func reportStoreCost(b *testing.B, dir string, syncs, written int64) {
	var logs int64
	for _, pattern := range []string{"*" + runEventsExt, "*" + runMessagesExt} {
		paths, _ := filepath.Glob(filepath.Join(dir, pattern))
		for _, p := range paths {
			if fi, err := os.Stat(p); err == nil {
				logs += fi.Size()
			}
		}
	}
	b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/run")
	b.ReportMetric(float64(written)/float64(b.N), "written-B/run")
	if logs > 0 {
		b.ReportMetric(float64(written)/float64(logs), "written/json")
	}
}
