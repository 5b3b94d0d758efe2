package main

import (
	"bytes"
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

// reportStoreCost reports the store's fsyncs, bytes written and the time
// runs waited for the disk, per run, and the bytes written over what the
// runs' files in dir hold of their events and transcripts (as JSON
// lines).
func reportStoreCost(b *testing.B, dir string, syncs, written, wait int64) {
	var logs int64
	paths, _ := filepath.Glob(filepath.Join(dir, "*"+runFileExt))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		for line := range bytes.Lines(data) {
			if inner, ok := unwrapLine(bytes.TrimSuffix(line, []byte("\n")), messageLinePrefix); ok {
				logs += int64(len(inner)) + 1
			} else if !bytes.HasPrefix(line, recordLinePrefix) {
				logs += int64(len(line))
			}
		}
	}
	b.ReportMetric(float64(syncs)/float64(b.N), "fsyncs/run")
	b.ReportMetric(float64(written)/float64(b.N), "written-B/run")
	b.ReportMetric(float64(wait)/1e6/float64(b.N), "disk-wait-ms/run")
	if logs > 0 {
		b.ReportMetric(float64(written)/float64(logs), "written/json")
	}
}
