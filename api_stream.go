package main

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
)

// This file holds what bounds the cost of the event streams (GET
// /v1/runs/{id}/events): the replays of ended runs, read from disk, of
// which at most max_concurrent_replays stream at once (more are answered
// 429 with Retry-After), and the write deadline that drops a client who
// stops reading (max_stream_write_seconds).

// replayRetryAfter is the Retry-After of a replay refused at
// max_concurrent_replays: a replay lasts as long as its client takes to
// read the run's history, seconds for most.
const replayRetryAfter = 2 * time.Second

// A replayGate bounds the replays streaming at once. Safe for concurrent
// use.
type replayGate chan struct{}

// enter takes a slot and reports true, or reports false at once when
// every slot is taken.
func (g replayGate) enter() bool {
	select {
	case g <- struct{}{}:
		return true
	default:
		return false
	}
}

// leave frees the slot enter took.
func (g replayGate) leave() { <-g }

// refuseReplay answers a replay that found no slot: 429 with Retry-After.
func refuseReplay(w http.ResponseWriter, id string, limit int) {
	w.Header().Set("Retry-After", strconv.Itoa(int(replayRetryAfter.Seconds())))
	writeError(w, http.StatusTooManyRequests, "too_many_replays",
		fmt.Sprintf("run %q: %d replays of ended runs are streaming, the max_concurrent_replays limit; retry after %s, or raise the limit", id, limit, replayRetryAfter))
}

// A streamWriter writes an event stream, each write and each flush under
// a deadline of timeout from when it starts: a client that takes nothing
// for that long fails the write, and the stream ends. It keeps its first
// error; every write after it fails with it. Used by the stream's handler
// alone.
type streamWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	err     error
}

// newStreamWriter returns the stream writer of w.
func newStreamWriter(w http.ResponseWriter, timeout time.Duration) *streamWriter {
	return &streamWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// extend moves the write deadline to timeout from now. A writer that has
// none (a test's recorder) is bounded by nothing but the server.
func (s *streamWriter) extend() {
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
}

// Write writes p under a fresh deadline.
func (s *streamWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	s.extend()
	n, err := s.w.Write(p)
	s.err = err
	return n, err
}

// Flush sends what is buffered under a fresh deadline.
func (s *streamWriter) Flush() error {
	if s.err == nil {
		s.extend()
		s.err = s.rc.Flush()
	}
	return s.err
}

// stalled reports whether the stream failed because its client took
// nothing for the deadline.
func (s *streamWriter) stalled() bool {
	return errors.Is(s.err, os.ErrDeadlineExceeded)
}
