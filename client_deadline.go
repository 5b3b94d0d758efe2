package main

import (
	"math"
	"sync"
	"time"
)

// This file holds the deadlines of a conn's calls. One timer serves them
// all, armed for the earliest deadline it has been told of: telling it a
// later one touches no timer, so calls one after another with the same
// timeout arm none. A timer per call cost more than its own upkeep: adding
// a runtime timer while no thread waits in the network poller wakes a
// thread to watch it, once per call.

// monoAfter returns the time d after now on a watch's clock, saturated
// rather than overflowing for a timeout of centuries.
func monoAfter(now int64, d time.Duration) int64 {
	if int64(d) > math.MaxInt64-now {
		return math.MaxInt64
	}
	return now + int64(d)
}

// A deadlineWatch runs out deadlines with one timer. Its clock is now's:
// nanoseconds on the monotonic clock since the watch was made, where 0
// means no deadline. due runs out what is due at now and returns the
// earliest deadline left, 0 for none. It is safe for concurrent use.
type deadlineWatch struct {
	due   func(now int64) int64
	epoch time.Time

	mu sync.Mutex
	// guards timer and armed
	timer *time.Timer
	armed int64 // when the timer fires; 0 when it is not armed
}

// newDeadlineWatch returns a watch that calls due when a deadline it was
// told of passes.
func newDeadlineWatch(due func(now int64) int64) *deadlineWatch {
	w := &deadlineWatch{due: due, epoch: time.Now()}
	w.timer = time.AfterFunc(time.Duration(math.MaxInt64), w.fire)
	w.timer.Stop()
	return w
}

// now returns the watch's time: at least 1, so never "no deadline".
func (w *deadlineWatch) now() int64 { return int64(time.Since(w.epoch)) + 1 }

// watch makes sure due runs no later than deadline; 0 is no deadline.
func (w *deadlineWatch) watch(deadline int64) {
	if deadline == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.armed != 0 && w.armed <= deadline {
		return
	}
	w.armed = deadline
	w.timer.Reset(time.Duration(deadline - w.now()))
}

// fire runs out what is due and watches the earliest deadline left. The
// timer counts as unarmed from before due looks, so a deadline told while
// it looks arms the timer itself.
func (w *deadlineWatch) fire() {
	w.mu.Lock()
	w.armed = 0
	w.mu.Unlock()
	w.watch(w.due(w.now()))
}

// stop disarms the timer.
func (w *deadlineWatch) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
	w.armed = 0
}

// runOutDeadlines is the conn's deadline watch's due: every pending call
// whose deadline has passed at now runs out (expire), and the earliest
// deadline left is returned.
func (c *conn) runOutDeadlines(now int64) int64 {
	var due []*pendingCall
	next := int64(0)
	c.mu.Lock()
	for _, pc := range c.pending {
		switch d := pc.deadline.Load(); {
		case d == 0:
		case d <= now:
			due = append(due, pc)
		case next == 0 || d < next:
			next = d
		}
	}
	c.mu.Unlock()
	for _, pc := range due {
		if d := pc.expire(now); d != 0 && (next == 0 || d < next) {
			next = d
		}
	}
	return next
}

// expire runs when the call's deadline has passed at now: it cancels the
// call with errTimeout, unless the server waits on an answer for input,
// and so does the call: its deadline is then a timeout from now. It
// returns the call's deadline after, 0 for none.
func (pc *pendingCall) expire(now int64) int64 {
	d := pc.deadline.Load()
	if d == 0 || d > now {
		return d // pushed out by progress meanwhile, or run out already
	}
	if pc.held.Load() > 0 {
		next := monoAfter(now, pc.timeout)
		if pc.deadline.CompareAndSwap(d, next) {
			return next
		}
		return pc.deadline.Load()
	}
	if pc.deadline.CompareAndSwap(d, 0) {
		pc.cancel(errTimeout)
		return 0
	}
	return pc.deadline.Load()
}
