package main

import (
	"testing"
	"time"
)

// TestRetentionMayExpire checks the cheap test pruning makes before
// grouping: it says false only when expired returns nothing, grouped or
// not, and true when a bound is passed.
func TestRetentionMayExpire(t *testing.T) {
	t.Parallel()
	now := time.Now()
	recent, old := now.Add(-time.Minute), now.Add(-48*time.Hour)
	k := retention{MaxRuns: 3, MaxAge: 24 * time.Hour, MaxBytes: 100}
	tests := []struct {
		name string
		runs []keptRun
		want bool
	}{
		{"within every bound", []keptRun{{id: "a", ended: true, endedAt: recent, bytes: 30}, {id: "b", ended: true, endedAt: recent, bytes: 30}}, false},
		{"running runs do not count", []keptRun{{id: "a"}, {id: "b"}, {id: "c"}, {id: "d", ended: true, endedAt: recent}}, false},
		{"too many", []keptRun{{id: "a", ended: true, endedAt: recent}, {id: "b", ended: true, endedAt: recent}, {id: "c", ended: true, endedAt: recent}, {id: "d", ended: true, endedAt: recent}}, true},
		{"a group counts its runs", []keptRun{{id: "conv", ended: true, endedAt: recent, runs: 4}}, true},
		{"too big", []keptRun{{id: "a", ended: true, endedAt: recent, bytes: 101}}, true},
		{"too old", []keptRun{{id: "a", ended: true, endedAt: old}}, true},
		{"old but not ended", []keptRun{{id: "a", endedAt: old}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := k.mayExpire(tt.runs, now)
			if got != tt.want {
				t.Errorf("mayExpire = %v, want %v", got, tt.want)
			}
			if expired := k.expired(tt.runs, now); !got && len(expired) > 0 {
				t.Errorf("mayExpire = false but expired = %v", expired)
			}
		})
	}
}
