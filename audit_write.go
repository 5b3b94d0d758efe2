package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
)

// This file holds the audit trail's writing (audit.go holds what the
// trail is): a record is queued by whoever records it, which never waits
// on the disk, and the trail's writer chains, encodes and writes what is
// queued, a day's lines in one write, within auditWriteAfter, and fsyncs
// every auditSyncEvery.
//
// With the record encoded, chained and written by the tool call that made
// it, the audit trail cost a traced stdio tool call 17 µs of its 38 µs
// over an untraced, unaudited one, and up to 6 ms when the write met an
// fsync (BenchmarkRecordedToolCall, BenchmarkAuditCall on a loaded 2-core
// machine); queued, it costs the call under a microsecond
// (docs/performance.md, "Tracing and the audit trail").

// auditWriteAfter is how long a record may wait for its write: the first
// record queued arms the writer's timer, and what is queued meanwhile is
// written together. A crash of harnessd loses at most this much of the
// trail. Woken for each record instead, the writer cost a call the wake
// of a goroutine, a system call when the other core was idle.
const auditWriteAfter = 10 * time.Millisecond

// auditSyncEvery is how long a written record may wait for its fsync:
// lines are synced together, so a power loss loses at most this much of
// the trail.
const auditSyncEvery = 200 * time.Millisecond

// auditMaxQueued bounds the records waiting for the writer (a disk that
// refuses writes): past it, new records are dropped, logged, and left out
// of the chain, which stays whole. At a thousand tool calls a second it
// is half a minute of a disk's refusals.
const auditMaxQueued = 32 << 10

// An auditLog appends records to the trail. A nil *auditLog records
// nothing. Safe for concurrent use.
type auditLog struct {
	dir      string
	settings auditSettings
	logger   *slog.Logger
	now      func() time.Time

	// ioMu is held by the writer to write, and by a reader to have what
	// was recorded written before it reads (flush). It guards the chain
	// and the files below; taken before mu, never under it.
	ioMu sync.Mutex
	f    auditFile // today's file
	// dayStart and dayEnd bound f's day, so that a record does not
	// format its date to find its file.
	dayStart, dayEnd time.Time
	seq              int64
	prev             string
	// lines is where a flush encodes a day's records; unwritten the end
	// of them a write refused, written first by the next flush.
	lines     bytes.Buffer
	unwritten []byte
	unsynced  bool // a line was written since the last fsync

	mu sync.Mutex
	// guards everything below
	// queue holds the records waiting for the writer, at most maxQueued;
	// spare is the last flush's, kept for the next records.
	queue, spare []auditRecord
	maxQueued    int
	refused      map[string]int
	closed       bool
	err          error // the last failure, logged once

	// writeSoon is the writer's timer, armed by the first record queued.
	writeSoon *time.Timer
	stop      chan struct{}
	done      chan struct{}
}

// An auditFile is a day's file of the trail: an *os.File, or in tests
// one whose writes fail as a full disk's do.
type auditFile interface {
	io.Writer
	Sync() error
	Close() error
	Name() string
}

// record appends rec to the trail: timed and queued for the writer. It
// never waits on the disk; a record that cannot be queued is logged
// (once for a run of failures) and left out of the chain.
func (l *auditLog) record(rec auditRecord) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.queueLocked(rec)
	}
}

// queueLocked times rec and queues it. Called with mu held.
func (l *auditLog) queueLocked(rec auditRecord) {
	if len(l.queue) >= l.maxQueued {
		l.failLocked(fmt.Errorf("%d records wait to be written to %s, and new ones are dropped: check the disk and its permissions", len(l.queue), l.dir))
		return
	}
	rec.Time = l.now().UTC()
	l.queue = append(l.queue, rec)
	if len(l.queue) == 1 {
		l.writeSoon.Reset(auditWriteAfter)
	}
}

// failLocked logs a failure once per run of failures. Called with mu
// held.
func (l *auditLog) failLocked(err error) {
	if l.err == nil {
		l.logger.Error("audit: records cannot be written; they wait, and once too many wait new ones are dropped, until writes succeed", "err", err)
	}
	l.err = err
}

// refuse counts a refused request by reason ("unauthorized",
// "forbidden", "not_found"); the writer records the counts once a minute.
func (l *auditLog) refuse(reason string) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refused[reason]++
}

// queueRefusedLocked queues the refused counts, if any. Called with mu
// held.
func (l *auditLog) queueRefusedLocked() {
	if len(l.refused) == 0 {
		return
	}
	l.queueLocked(auditRecord{Type: auditRefused, Refused: l.refused})
	l.refused = map[string]int{}
}

// writeLoop is the log's writer: it writes what is queued when its timer
// fires, and every auditSyncEvery fsyncs and rewrites the head, and
// queues the refused counts once a minute, until close.
func (l *auditLog) writeLoop() {
	defer close(l.done)
	tick := time.NewTicker(auditSyncEvery)
	defer tick.Stop()
	lastRefused := l.now()
	for {
		select {
		case <-l.stop:
			l.mu.Lock()
			l.queueRefusedLocked()
			l.mu.Unlock()
			l.flush(true)
			l.ioMu.Lock()
			l.closeFile()
			l.ioMu.Unlock()
			return
		case <-l.writeSoon.C:
			l.flush(false)
		case <-tick.C:
			l.mu.Lock()
			if l.now().Sub(lastRefused) >= time.Minute {
				l.queueRefusedLocked()
				lastRefused = l.now()
			}
			l.mu.Unlock()
			l.flush(true)
		}
	}
}

// flush chains and writes the records queued, in order. With sync set it
// then fsyncs what was written since the last sync and rewrites the head
// to name the last line. Records a failure kept from being written stay
// queued, first, for the next flush.
func (l *auditLog) flush(sync bool) {
	if l == nil {
		return
	}
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	recs := l.queue
	l.queue, l.spare = l.spare[:0], nil
	l.mu.Unlock()

	done, err := l.writeRecords(recs)
	l.mu.Lock()
	if err != nil {
		l.queue = append(slices.Clip(recs[done:]), l.queue...)
		l.failLocked(err)
		l.mu.Unlock()
		return
	}
	if done > 0 {
		l.err = nil
	}
	clear(recs) // their strings and maps go
	l.spare = recs[:0]
	l.mu.Unlock()
	if sync {
		l.sync()
	}
}

// writeRecords writes what a write refused before, then chains recs and
// writes them, a day's lines in one write. It returns how many of recs
// were chained: those after stay for the next flush. Called with ioMu
// held.
func (l *auditLog) writeRecords(recs []auditRecord) (int, error) {
	if err := l.writeUnwritten(); err != nil {
		return 0, err
	}
	for i := 0; i < len(recs); {
		if err := l.openDay(recs[i].Time); err != nil {
			return i, err
		}
		l.lines.Reset()
		for ; i < len(recs) && recs[i].Time.Before(l.dayEnd); i++ {
			l.chain(&recs[i])
		}
		l.unwritten = l.lines.Bytes()
		if err := l.writeUnwritten(); err != nil {
			return i, err
		}
	}
	return len(recs), nil
}

// chain encodes rec as the next line of the chain into lines. Called with
// ioMu held.
func (l *auditLog) chain(rec *auditRecord) {
	rec.Seq, rec.Prev = l.seq+1, l.prev
	start := l.lines.Len()
	// Encoded into a buffer kept from flush to flush, newline included:
	// json.Marshal's line was copied again to add the newline (1140 bytes
	// and 10 allocations a record before, 708 and 8 after).
	if err := json.NewEncoder(&l.lines).Encode(rec); err != nil {
		l.lines.Truncate(start)
		l.logger.Error("audit: a record could not be encoded; it is left out", "type", rec.Type, "err", err)
		return
	}
	line := l.lines.Bytes()[start : l.lines.Len()-1]
	l.seq, l.prev = rec.Seq, lineHash(line)
}

// writeUnwritten writes what is left of the last lines encoded to f.
// Called with ioMu held.
func (l *auditLog) writeUnwritten() error {
	if len(l.unwritten) == 0 {
		return nil
	}
	n, err := l.f.Write(l.unwritten)
	l.unwritten = l.unwritten[n:]
	if n > 0 {
		l.unsynced = true
	}
	return err
}

// openDay makes f the file of t's day, syncing and closing the previous
// day's and applying retention. Called with ioMu held, nothing unwritten.
func (l *auditLog) openDay(t time.Time) error {
	if l.f != nil && !t.Before(l.dayStart) && t.Before(l.dayEnd) {
		return nil
	}
	l.sync()
	l.closeFile()
	day := t.Format(time.DateOnly)
	f, err := os.OpenFile(filepath.Join(l.dir, "audit-"+day+".jsonl"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("open the day's file: %w", err)
	}
	l.f = f
	l.dayStart = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	l.dayEnd = l.dayStart.AddDate(0, 0, 1)
	syncDir(l.dir)
	l.prune()
	return nil
}

// sync fsyncs f when a line was written since the last sync, then
// rewrites the head to name the last line. Called with ioMu held and not
// mu: a record is never held behind an fsync.
func (l *auditLog) sync() {
	if !l.unsynced || l.f == nil || len(l.unwritten) > 0 {
		return
	}
	if err := l.f.Sync(); err != nil {
		l.mu.Lock()
		l.failLocked(fmt.Errorf("sync %s: %w", l.f.Name(), err)) // tried again at the next tick
		l.mu.Unlock()
		return
	}
	l.unsynced = false
	data, _ := json.Marshal(auditHead{Seq: l.seq, SHA256: l.prev})
	tmp := filepath.Join(l.dir, "head.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err == nil {
		os.Rename(tmp, filepath.Join(l.dir, "head"))
	}
}

// closeFile closes f, if open. Called with ioMu held.
func (l *auditLog) closeFile() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
}

// close writes what is queued, syncs and stops the writer. Records a
// failing disk kept from being written are logged as lost.
func (l *auditLog) close() {
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	l.ioMu.Lock()
	defer l.ioMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.queue) > 0 || len(l.unwritten) > 0 {
		l.logger.Error("audit: records could not be written before the trail closed; they are lost", "queued", len(l.queue), "bytes_unwritten", len(l.unwritten), "err", l.err)
	}
}
