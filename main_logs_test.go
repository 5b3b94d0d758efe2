package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
)

// This file holds the log recorder the tests use to wait for and check
// what harnessd logs.

// A loggedRecord is one log record with its attributes as strings (those
// of the logger's With included).
type loggedRecord struct {
	Level   slog.Level
	Message string
	Attrs   map[string]string
}

// A logRecorder keeps every record logged through its loggers and lets a
// test wait, without polling, until the records (or anything that changes
// before a record is logged) satisfy a condition. Safe for concurrent use.
type logRecorder struct {
	mu sync.Mutex
	// guards records
	records []loggedRecord
	changed chan struct{} // 1-buffered: a record arrived since the last wait
}

func newLogRecorder() *logRecorder {
	return &logRecorder{changed: make(chan struct{}, 1)}
}

// logger returns a logger, enabled at every level, that records into l.
func (l *logRecorder) logger() *slog.Logger { return slog.New(&recordingHandler{rec: l}) }

// snapshot returns a copy of the records so far.
func (l *logRecorder) snapshot() []loggedRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// waitFor waits until cond holds, testing it at once and after each new
// record; it fails the test after waitLimit.
func (l *logRecorder) waitFor(t *testing.T, what string, cond func([]loggedRecord) bool) {
	t.Helper()
	timer := time.NewTimer(waitLimit)
	defer timer.Stop()
	for !cond(l.snapshot()) {
		select {
		case <-l.changed:
		case <-timer.C:
			t.Fatalf("waiting for %s: not within %v", what, waitLimit)
		}
	}
}

// A recordingHandler is the slog.Handler of a logRecorder.
type recordingHandler struct {
	rec   *logRecorder
	attrs []slog.Attr
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	rec := loggedRecord{Level: r.Level, Message: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.rec.mu.Lock()
	h.rec.records = append(h.rec.records, rec)
	h.rec.mu.Unlock()
	select {
	case h.rec.changed <- struct{}{}:
	default:
	}
	return nil
}

func (h *recordingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingHandler{rec: h.rec, attrs: append(slices.Clone(h.attrs), attrs...)}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }
