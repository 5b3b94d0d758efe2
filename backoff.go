package main

import (
	"context"
	"time"
)

// This file holds the one backoff rule that server restarts, HTTP stream
// reconnections and model retries share, and the wait between attempts.

// backoffDelay returns the delay before retry n (counted from 1): base
// doubled n-1 times, at most limit. A base of zero or less gives zero.
func backoffDelay(base, limit time.Duration, n int) time.Duration {
	if base <= 0 {
		return 0
	}
	d := base
	for i := 1; i < n && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// sleepContext waits for d; it returns false if ctx ended first.
func sleepContext(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
