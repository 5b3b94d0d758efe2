package main

import (
	"crypto/sha256"
	"sync"
)

// This file holds the writer of a run's lines in the store's log: one
// goroutine per run kept on disk writes its events and transcript lines
// in the order they were handed over, so that the run's mu is never held
// across a write(2) or an fsync, and followers and status reads never
// wait on the disk. The end (what is still queued, then the terminal
// event and the record, in one write, made durable) is written by the
// goroutine ending the run, which waits for it anyway: handing it to the
// writer would add two wake-ups to the wait.

// A diskItem is one thing for the writer: an event or a transcript line.
type diskItem struct {
	event *runEvent // nil for a transcript line
	line  []byte
}

// appendTo appends the item's line to b and returns it.
func (it diskItem) appendTo(b []byte) []byte {
	if it.event == nil {
		return wrapLine(b, messageLinePrefix, it.line)
	}
	return append(append(b, it.event.encoded...), '\n')
}

// A diskQueue hands a run's disk items to its writer goroutine, in order.
// Safe for concurrent use; enqueue never blocks on the disk.
type diskQueue struct {
	wake chan struct{} // 1-buffered: items are waiting, or the queue stopped

	// writing is held by whoever writes the run's lines and takes
	// items to write: the writer, then the end. Taken before mu.
	writing sync.Mutex

	mu sync.Mutex
	// guards items and stopped
	items   []diskItem
	stopped bool // set at the end: later items are dropped, and the writer exits
}

// startWriter starts d's writer goroutine for r. Owned by the run: it
// exits once the queue is stopped (the end, or discard).
func (d *runDisk) startWriter(r *run) {
	d.queue = &diskQueue{wake: make(chan struct{}, 1)}
	go d.writeLoop(r)
}

// enqueue hands it to the writer. It reports false, dropping it, once the
// queue is stopped (nothing is written after the terminal event). Called
// in the order the items must be written (under the run's mu).
func (q *diskQueue) enqueue(it diskItem) bool {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, it)
	q.mu.Unlock()
	q.poke()
	return true
}

// poke wakes the writer.
func (q *diskQueue) poke() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// stop makes the queue take nothing more and tells the writer to exit
// once it is empty; it reports false when it was stopped already.
func (q *diskQueue) stop() bool {
	q.mu.Lock()
	was := q.stopped
	q.stopped = true
	q.mu.Unlock()
	q.poke()
	return !was
}

// take returns the items queued so far, taken off the queue, and whether
// the queue is stopped; for the writer (forWriter) a stopped queue keeps
// its items, which the end writes before the terminal event. Called with
// writing held.
func (q *diskQueue) take(forWriter bool) ([]diskItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if forWriter && q.stopped {
		return nil, true
	}
	items := q.items
	q.items = nil
	return items, q.stopped
}

// writeLoop writes the queued items until the queue is stopped: what was
// queued at once goes in one write(2). Items left when it stops are the
// end's to write.
func (d *runDisk) writeLoop(r *run) {
	var buf []byte
	for range d.queue.wake {
		d.queue.writing.Lock()
		items, stopped := d.queue.take(true)
		if stopped {
			d.queue.writing.Unlock()
			return
		}
		if len(items) > 0 {
			buf = buf[:0]
			for _, it := range items {
				buf = it.appendTo(buf)
			}
			d.write(r, buf, false)
		}
		d.queue.writing.Unlock()
	}
}

// writeEnd writes what is still queued, then the end: the terminal event
// ev and the record v of the ended run, in one write, fsynced. Called
// once, by the goroutine ending the run, outside the run's mu, after
// stopLocked. An error says the end is not on disk.
func (d *runDisk) writeEnd(r *run, ev runEvent, v runView) error {
	record := recordLine(v, d.redact.load())
	d.recordSum = sha256.Sum256(record)
	d.queue.writing.Lock()
	defer d.queue.writing.Unlock()
	items, _ := d.queue.take(false)
	var buf []byte
	for _, it := range append(items, diskItem{event: &ev}) {
		buf = it.appendTo(buf)
	}
	return d.write(r, append(buf, record...), true)
}

// write writes lines to the store's log, and at the end (the terminal
// event) makes it durable. A failed write is logged when it is the first
// of the lines the run keeps for its next write; the run goes on.
func (d *runDisk) write(r *run, lines []byte, end bool) error {
	failing := d.log.err != nil || len(d.log.pending) > 0
	var err error
	if end {
		err = d.store.end(d.log, lines)
	} else {
		err = d.log.write(lines, false)
	}
	if err != nil && !failing {
		r.logger.Error("writing the run to disk failed; its lines are kept in memory and written with its next ones once the store can write", "err", err)
	}
	return err
}
