package main

import (
	"log/slog"
	"sync"
	"time"
)

// This file holds the logging rules every layer shares: the logger left
// out, and the throttle of a line that repeats.

// orDiscard returns logger, or one that discards when it is nil. It is
// the one rule for a logger left out: code below the constructors that
// call it never sees a nil logger.
func orDiscard(logger *slog.Logger) *slog.Logger {
	if logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return logger
}

// A logThrottle lets a repeated log line through at most once per
// interval and counts the ones it held back; the next line let through
// reports that count. The zero value allows one line per second. Safe for
// concurrent use.
type logThrottle struct {
	interval time.Duration

	mu sync.Mutex
	// guards next and held
	next time.Time
	held int
}

// allow reports whether a line may be logged now and, if so, how many
// were held back since the last one.
func (t *logThrottle) allow() (ok bool, held int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	if now.Before(t.next) {
		t.held++
		return false, 0
	}
	interval := t.interval
	if interval == 0 {
		interval = time.Second
	}
	t.next = now.Add(interval)
	held, t.held = t.held, 0
	return true, held
}
