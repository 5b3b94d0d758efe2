package main

import (
	"strings"
	"time"
	"unicode/utf8"
)

// This file holds a run's live-only events (model.delta,
// tool.call.progress): kept in a bounded log beside the history, never
// in it nor on disk, and merged with the history for each follower in
// the order they happened.
//
// A follower reads the history after its cursor, then the live events of
// the current segment (those emitted since the newest history event), then
// each new event as it comes, history or live, in emission order: no event
// twice, none left out while the follower keeps up. The run never waits on
// a follower: it appends under its lock and wakes them; each follower
// copies what it has not sent yet. The log holds at most maxLiveEvents
// events and maxLiveBytes of text; a follower that falls further behind
// than that skips the live events dropped meanwhile (it is told how many
// in an SSE comment) and goes on with the oldest one kept; the history
// events it has not sent are never dropped, and the step's model.response
// carries the whole text. A stream resumed with Last-Event-ID gets only
// the live events emitted after it connected: a replay holds no deltas.

// Bounds of a run's live-event log.
const (
	maxLiveEvents = 4096
	maxLiveBytes  = 1 << 20
)

// A liveEvent is one live-only event of a run.
type liveEvent struct {
	id    int64 // counts the run's live events from 1
	after int   // the Seq of the newest history event when it was emitted
	size  int   // its text's bytes, for maxLiveBytes
	ev    runEvent
}

// A liveLog is the recent live events of a run, oldest first; guarded by
// the run's mu.
type liveLog struct {
	items []liveEvent
	bytes int   // the sizes of items
	last  int64 // the id of the newest live event ever emitted
	// followers counts the streams attached (follow to unfollow): the
	// log outlives the run's end until they are gone.
	followers int
}

// A followFrame is one event to send to a follower: a history event, or a
// live one (live set).
type followFrame struct {
	ev   runEvent
	live bool
}

// A followCursor is where a follower is: the last history event and the
// last live event it was sent. The zero cursor starts at the beginning.
type followCursor struct {
	seq  int   // Seq of the last history event sent
	live int64 // id of the last live event sent (or skipped)
	// attached is set at the first read, which decides where live events
	// start: the current segment, or (resumed) from now on.
	attached bool
	resumed  bool // the stream resumes with Last-Event-ID
	// onDisk is set at the first read when the run's history is kept
	// on disk only: follow gives none of it, replay streams it.
	onDisk bool
}

// emitLive records a live-only event and wakes every follower. size is the
// text it carries, counted against maxLiveBytes. An ended run drops it.
func (r *run) emitLive(typ string, data any, size int) {
	ev := newLiveEvent(typ, time.Now().UTC(), data, encodeEventData(r.redactor(), data))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final != nil || isTerminal(r.status) {
		return
	}
	r.live.last++
	r.live.items = append(r.live.items, liveEvent{id: r.live.last, after: len(r.events), size: size, ev: ev})
	r.live.bytes += size
	if n := len(r.live.items); n > maxLiveEvents || r.live.bytes > maxLiveBytes {
		// Down to three quarters of the bounds at once, so that the copy
		// is rare.
		drop := 0
		for n-drop > 1 && (n-drop > maxLiveEvents*3/4 || r.live.bytes > maxLiveBytes*3/4) {
			r.live.bytes -= r.live.items[drop].size
			drop++
		}
		r.live.items = append(r.live.items[:0:0], r.live.items[drop:]...)
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// follow returns what a follower at cur has not been sent yet, history and
// live events merged in the order they happened, and advances cur past
// them. skipped counts live events dropped before the follower read them.
// changed is closed at the next event. It never blocks. The history of a
// run kept on disk is not read here: the first call sets cur.onDisk, and
// replay streams it. The first call attaches the follower; unfollow must
// detach it.
func (r *run) follow(cur *followCursor) (frames []followFrame, skipped int64, changed <-chan struct{}) {
	r.mu.Lock()
	// final: the history is read from disk (kept on disk, and no
	// follower held it in memory at the run's end).
	final := r.final != nil && r.events == nil
	newest := len(r.events)
	if !cur.attached {
		cur.attached, cur.onDisk = true, final
		r.live.followers++
		cur.live = r.live.last
		if !cur.resumed && !final {
			// The current segment: the live events after the newest
			// history event.
			for i := len(r.live.items) - 1; i >= 0 && r.live.items[i].after == newest; i-- {
				cur.live = r.live.items[i].id - 1
			}
		}
	}
	var history []runEvent
	if !final && max(cur.seq, 0) < newest {
		history = r.events[max(cur.seq, 0):newest] // never changed once appended
	}
	var live []liveEvent
	if n := len(r.live.items); n > 0 && cur.live < r.live.last {
		start := cur.live + 1 - r.live.items[0].id
		if start < 0 {
			skipped, start = -start, 0
		}
		live = r.live.items[start:] // trimming copies: these stay as they are
	}
	changed = r.changed
	r.mu.Unlock()
	frames = make([]followFrame, 0, len(history)+len(live))
	for len(history) > 0 || len(live) > 0 {
		if len(live) > 0 && (len(history) == 0 || live[0].after < history[0].Seq) {
			frames = append(frames, followFrame{ev: live[0].ev, live: true})
			cur.live = live[0].id
			live = live[1:]
			continue
		}
		frames = append(frames, followFrame{ev: history[0]})
		cur.seq = history[0].Seq
		history = history[1:]
	}
	return frames, skipped, changed
}

// unfollow detaches a follower that follow attached. Once the run has
// ended and its last follower is gone, the live log is let go.
func (r *run) unfollow(cur *followCursor) {
	if !cur.attached {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.live.followers--
	if r.live.followers == 0 && isTerminal(r.status) {
		r.live.items, r.live.bytes = nil, 0
		if r.final != nil {
			r.events = nil // on disk: read from there from now on
		}
	}
}

// keepOnDiskLocked marks the run kept on disk as final. Its history is
// read from there once the followers attached at its end are gone
// (unfollow lets it go then), not read back by each of them. Called under
// mu.
func (r *run) keepOnDiskLocked(final *runView) {
	r.final = final
	if r.live.followers == 0 {
		r.events = nil
	}
}

// dropLiveLocked lets the live log go at the run's end unless followers
// may still read it (unfollow does it then). Called under mu.
func (r *run) dropLiveLocked() {
	if r.live.followers == 0 {
		r.live.items, r.live.bytes = nil, 0
	}
}

// A deltaWriter turns the text of one step's model call into model.delta
// events. It holds back the end of the text while it could be the start
// of a secret, so that no secret is split across two events (each event is
// redacted whole). Used by the goroutine of the call.
type deltaWriter struct {
	r       *run
	step    int
	pending string
}

// write emits text, less what it must hold back.
func (d *deltaWriter) write(text string) {
	d.pending += text
	cut := len(d.pending) - secretPrefixLen(d.r.secrets.load(), d.pending)
	for cut > 0 && cut < len(d.pending) && !utf8.RuneStart(d.pending[cut]) {
		cut--
	}
	if cut > 0 {
		d.emit(d.pending[:cut])
		d.pending = d.pending[cut:]
	}
}

// flush emits what was held back: the call is over.
func (d *deltaWriter) flush() {
	if d.pending != "" {
		d.emit(d.pending)
		d.pending = ""
	}
}

// retry records that the step's call starts again: the text sent so far
// is void.
func (d *deltaWriter) retry(attempt int, err error) {
	d.pending = ""
	d.r.emit(evModelRetry, modelRetryEvent(d.step, attempt, err))
}

func (d *deltaWriter) emit(text string) {
	d.r.emitLive(evModelDelta, modelDeltaEvent(d.step, text), len(text))
}

// secretPrefixLen returns the length of the longest end of s that is the
// beginning of one of rd's secrets (and not a whole one): the part of a
// text that may continue into a secret. 0 for a nil rd.
func secretPrefixLen(rd *redactor, s string) int {
	if rd.size() == 0 {
		return 0
	}
	longest := 0
	for secret := range rd.set {
		for n := min(len(s), len(secret)-1); n > longest; n-- {
			if strings.HasSuffix(s, secret[:n]) {
				longest = n
				break
			}
		}
	}
	return longest
}

// replay sends the events of a run kept on disk after cur, read from its
// log a window at a time, and advances cur past each one sent: memory
// for what is in flight, not for the run. It may block as long as send
// does, and returns send's first error or the log's.
func (r *run) replay(cur *followCursor, send func(runEvent) error) error {
	var sendErr error
	err := r.disk.store.eachEvent(r.id, cur.seq, func(ev runEvent) error {
		if sendErr = send(ev); sendErr != nil {
			return sendErr
		}
		cur.seq = ev.Seq
		return nil
	})
	if err != nil && sendErr == nil {
		r.logger.Warn("reading the run's events failed", "err", err)
	}
	return err
}
