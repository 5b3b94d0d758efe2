package main

import (
	"sync"
	"time"
)

// This file holds the rate limit of a tool call's progress events: an MCP
// server may send progress notifications as fast as it likes; followers
// get tool.call.progress at most progressInterval apart per call, always
// with the newest one, and the last one before the call ends.

// progressInterval is the shortest time between two tool.call.progress
// events of one call (four a second).
const progressInterval = 250 * time.Millisecond

// A progressLimiter turns one tool call's progress notifications into
// tool.call.progress events, at most one per progressInterval: a
// notification within the interval of the last event waits for its end,
// replaced by any newer one meanwhile, so the newest always goes out;
// stop sends the one still waiting. Safe for concurrent use.
type progressLimiter struct {
	r        *run
	callID   string
	interval time.Duration

	mu sync.Mutex
	// guards everything below
	last    time.Time       // when the last event went out
	pending *progressParams // the newest notification not sent yet
	timer   *time.Timer     // sends pending at the end of the interval; nil when none is armed
	stopped bool
}

// newProgressLimiter returns the limiter of the call callID.
func (r *run) newProgressLimiter(callID string) *progressLimiter {
	return &progressLimiter{r: r, callID: callID, interval: progressInterval}
}

// note takes one progress notification; it never blocks on followers.
func (l *progressLimiter) note(p progressParams) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	wait := l.interval - time.Since(l.last)
	if wait <= 0 && l.pending == nil {
		l.sendLocked(p)
		return
	}
	l.pending = &p
	if l.timer == nil {
		// Owned by the limiter: it runs once, at the end of the interval.
		l.timer = time.AfterFunc(max(wait, 0), l.flush)
	}
}

// flush sends the waiting notification at the end of the interval.
func (l *progressLimiter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.timer = nil
	if l.stopped || l.pending == nil {
		return
	}
	l.sendLocked(*l.pending)
}

// stop sends the notification still waiting, if any, and ignores later
// ones: the call is over. Called before tool.call.completed, so the last
// progress comes before it.
func (l *progressLimiter) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	if l.pending != nil {
		l.sendLocked(*l.pending)
	}
}

// sendLocked emits p as tool.call.progress. Called under mu.
func (l *progressLimiter) sendLocked(p progressParams) {
	l.pending = nil
	l.last = time.Now()
	data := toolCallProgressEvent(l.callID, p)
	if msg, ok := data["message"].(string); ok {
		data["message"] = l.r.secrets.load().cut(msg, l.r.env.limits.MaxToolEventBytes)
	}
	l.r.emitLive(evToolCallProgress, data, len(p.Message))
}
