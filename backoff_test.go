package main

import (
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		base, limit time.Duration
		n           int
		want        time.Duration
	}{
		{"first retry waits base", time.Second, time.Minute, 1, time.Second},
		{"doubles", time.Second, time.Minute, 4, 8 * time.Second},
		{"capped", time.Second, 30 * time.Second, 6, 30 * time.Second},
		{"capped far out", time.Second, 30 * time.Second, 1000, 30 * time.Second},
		{"limit below base", time.Second, time.Millisecond, 1, time.Millisecond},
		{"no base, no wait", 0, time.Second, 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := backoffDelay(tt.base, tt.limit, tt.n); got != tt.want {
				t.Errorf("backoffDelay(%v, %v, %d) = %v, want %v", tt.base, tt.limit, tt.n, got, tt.want)
			}
		})
	}
}
