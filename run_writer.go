package main

import "sync"

// This file holds the writer of a run's files: one goroutine per run kept
// on disk writes its events and transcript lines in the order they were
// handed over, so that the run's mu is never held across a write(2) or an
// fsync, and followers and status reads never wait on the disk.

// A diskItem is one thing for the writer: an event or a transcript line;
// a sync item also makes both logs durable, and a last item stops the
// writer once everything before it is written.
type diskItem struct {
	event   *runEvent // nil for a transcript line
	line    []byte
	sync    bool
	last    bool
	discard bool          // stop without writing (the run was refused)
	done    chan struct{} // closed once the item is handled; nil for none
}

// A diskQueue hands a run's disk items to its writer goroutine, in order.
// Safe for concurrent use; enqueue never blocks on the disk.
type diskQueue struct {
	wake chan struct{} // 1-buffered: items are waiting

	mu sync.Mutex
	// guards items and stopped
	items   []diskItem
	stopped bool // set once a last item was queued: later ones are dropped
}

// startWriter starts d's writer goroutine for r. Owned by the run: it
// exits after the last item (the terminal event, or discard).
func (d *runDisk) startWriter(r *run) {
	d.queue = &diskQueue{wake: make(chan struct{}, 1)}
	go d.writeLoop(r)
}

// enqueue hands it to the writer. It reports false, dropping it, once the
// writer has been told to stop (nothing is written after the terminal
// event). Called in the order the items must be written (under the
// run's mu for events and lines).
func (q *diskQueue) enqueue(it diskItem) bool {
	q.mu.Lock()
	if q.stopped {
		q.mu.Unlock()
		return false
	}
	q.stopped = it.last
	q.items = append(q.items, it)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns the items queued so far, waiting for one.
func (q *diskQueue) take() []diskItem {
	for {
		q.mu.Lock()
		items := q.items
		q.items = nil
		q.mu.Unlock()
		if len(items) > 0 {
			return items
		}
		<-q.wake
	}
}

// writeLoop writes the queued items until the last one.
func (d *runDisk) writeLoop(r *run) {
	for {
		for _, it := range d.queue.take() {
			if !it.discard {
				d.write(r, it)
			}
			if it.done != nil {
				close(it.done)
			}
			if it.last {
				return
			}
		}
	}
}

// write writes one item: a transcript line, or an event (after making the
// transcript durable first when it syncs). A failed write is logged once
// per log; the run goes on in memory.
func (d *runDisk) write(r *run, it diskItem) {
	if it.event == nil {
		first := d.messages.err == nil
		if err := d.messages.append(it.line, false); err != nil && first {
			r.logger.Error("writing the run's transcript to disk failed; it is incomplete", "err", err)
		}
		return
	}
	if it.sync {
		first := d.messages.err == nil
		if err := d.messages.sync(); err != nil && first {
			r.logger.Error("writing the run's transcript to disk failed; it is incomplete", "err", err)
		}
	}
	first := d.log.err == nil
	if err := d.log.append(it.event.encoded, it.sync); err != nil && first {
		r.logger.Error("writing the run's events to disk failed; they are kept in memory only", "err", err)
	}
}
