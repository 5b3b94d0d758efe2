package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// This file holds the run store's journal, $HARNESS_HOME/runs/journal:
// the one file every accepted run's first record goes to before
// POST /v1/runs answers, one record line each. Records are committed in
// batches (group commit): the oldest waiting request leads, writing what
// is queued at that moment in one write(2) and making it durable with one
// fsync, while requests that arrive meanwhile queue for the next batch,
// which the oldest of them leads. Nothing waits for a batch to fill: a
// lone run pays one commit, made by its own goroutine, and a run waits at
// most for the commit under way and its own. A batch takes at most
// journalBatchMax records. When a run's file was created for it, rather
// than taken from the pool of files made ahead (run_store_pool.go), the
// batch fsyncs the runs directory too.
//
// The journal needs a record only until its run's file holds the run's
// end, durably; then the run's file says everything. When the journal
// passes its size bound, the leader rewrites it with the records of the
// runs not yet ended (a temporary file, fsynced and renamed over it).

const (
	journalName = "journal"
	// journalCompactBytes is the size past which the journal is rewritten.
	journalCompactBytes = 1 << 20
	journalBatchMax     = 256
)

// errStoreClosed is the error of a commit after the store was closed.
var errStoreClosed = errors.New("the runs store is closed")

// A commitReq is one record to commit, a request to rewrite the journal
// (compact), or the journal's close.
type commitReq struct {
	id      string
	line    []byte
	newName bool // the run's file was created for it: its name is not yet durable
	compact bool
	close   bool
	// ready is closed when the request is done (done set, with err) or
	// leads the next batch.
	ready chan struct{}
	done  bool
	err   error
}

// A runJournal is the runs directory's journal. Safe for concurrent use.
type runJournal struct {
	dir, path string
	logger    *slog.Logger
	// compactBytes is journalCompactBytes (tests lower it).
	compactBytes int64
	// onBatch, when set, is called by each batch's leader with the
	// batch's size before it writes (tests pace the batches with it).
	onBatch func(n int)
	// f, size, err and buf belong to the leader of the batch under way.
	f    *os.File
	size int64
	err  error // set when a failed write could not be undone: nothing more is committed
	buf  []byte

	mu sync.Mutex
	// guards queue, closed and open
	queue  []*commitReq // waiting, oldest first; the first leads
	closed bool
	open   map[string][]byte // record lines of the runs not yet ended, by run id
}

// openJournal opens (or creates, durably) the journal of dir.
func openJournal(dir string, logger *slog.Logger) (*runJournal, error) {
	j := &runJournal{dir: dir, path: filepath.Join(dir, journalName), logger: logger, compactBytes: journalCompactBytes, open: map[string][]byte{}}
	_, err := os.Stat(j.path)
	created := errors.Is(err, os.ErrNotExist)
	if j.f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err != nil {
		return nil, fmt.Errorf("open the journal: %w", err)
	}
	fi, err := j.f.Stat()
	if err == nil && created {
		err = syncDir(dir)
	}
	if err != nil {
		j.f.Close()
		return nil, fmt.Errorf("open the journal: %w", err)
	}
	j.size = fi.Size()
	return j, nil
}

// close closes the journal once every request queued before it is
// committed; later commits fail with errStoreClosed. Called once.
func (j *runJournal) close() {
	j.send(&commitReq{close: true})
}

// commit makes line, the record run id is accepted with, durable with
// the next batch (and the name of the run's file, when newName is set),
// and returns once it is (or the batch failed).
func (j *runJournal) commit(id string, line []byte, newName bool) error {
	return j.send(&commitReq{id: id, line: line, newName: newName})
}

// compact rewrites the journal with the records of the runs not yet
// ended, whatever its size.
func (j *runJournal) compact() error {
	return j.send(&commitReq{compact: true})
}

// send queues req and returns its outcome: once a leader has committed
// it, or once req, at the head of the queue, has led a batch itself.
func (j *runJournal) send(req *commitReq) error {
	req.ready = make(chan struct{})
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return errStoreClosed
	}
	j.closed = req.close
	j.queue = append(j.queue, req)
	lead := len(j.queue) == 1
	j.mu.Unlock()
	if !lead {
		<-req.ready
		if req.done {
			return req.err
		}
	}
	j.mu.Lock()
	n := min(len(j.queue), journalBatchMax)
	batch := slices.Clone(j.queue[:n])
	j.mu.Unlock()
	err := j.commitBatch(batch)
	j.mu.Lock()
	j.queue = slices.Delete(j.queue, 0, n)
	for _, b := range batch[1:] {
		b.done, b.err = true, err
		close(b.ready)
	}
	if len(j.queue) > 0 {
		close(j.queue[0].ready)
	}
	j.mu.Unlock()
	return err
}

// forget drops the record of run id, whose end is durable in its file,
// from what a rewrite of the journal keeps.
func (j *runJournal) forget(id string) {
	j.mu.Lock()
	delete(j.open, id)
	j.mu.Unlock()
}

// commitBatch writes the records of batch and makes them durable (with
// the directory when a run's file is new), then rewrites the journal when
// it is past its bound or a request asks for it; a close request closes
// the file, last. A failed rewrite the bound asked for is logged: the
// records are committed all the same. Called by the batch's leader.
func (j *runJournal) commitBatch(batch []*commitReq) error {
	if last := batch[len(batch)-1]; last.close {
		defer func() { j.f.Close() }()
	}
	if j.onBatch != nil {
		j.onBatch(len(batch))
	}
	if j.err != nil {
		return j.err
	}
	compact, newNames := false, false
	buf := j.buf[:0]
	j.mu.Lock()
	for _, req := range batch {
		buf = append(buf, req.line...)
		if req.line != nil {
			j.open[req.id] = req.line
		}
		compact = compact || req.compact
		newNames = newNames || req.newName
	}
	j.mu.Unlock()
	j.buf = buf
	if err := j.append(buf, newNames); err != nil {
		j.mu.Lock()
		for _, req := range batch {
			delete(j.open, req.id)
		}
		j.mu.Unlock()
		return err
	}
	if compact || j.size > j.compactBytes {
		if err := j.rewrite(); err != nil {
			if compact {
				return err
			}
			j.logger.Warn("rewriting the runs journal failed; it is tried again at the next commit", "err", err)
		}
	}
	return nil
}

// append writes buf at the journal's end and makes it durable, with the
// directory when dir is set. A write that fails is undone, so that no
// torn line is left before the next; when it cannot be, the journal takes
// nothing more.
func (j *runJournal) append(buf []byte, dir bool) error {
	if len(buf) > 0 {
		n, err := j.f.Write(buf)
		countWrite(n)
		if err == nil {
			err = syncFile(j.f)
		}
		if err != nil {
			if terr := j.f.Truncate(j.size); terr != nil {
				j.err = fmt.Errorf("the runs journal %s could not be repaired after a failed write (%v); restart harnessd", j.path, terr)
			}
			return fmt.Errorf("write the runs journal: %w", err)
		}
		j.size += int64(n)
	}
	if !dir {
		return nil
	}
	if err := syncDir(j.dir); err != nil {
		return fmt.Errorf("sync the runs directory: %w", err)
	}
	return nil
}

// rewrite replaces the journal with the records of the runs not yet
// ended, durably, and appends to the new one from then on.
func (j *runJournal) rewrite() error {
	j.mu.Lock()
	var b []byte
	for _, line := range j.open {
		b = append(b, line...)
	}
	j.mu.Unlock()
	if err := writeFileAtomic(j.path, b); err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		j.err = fmt.Errorf("reopen the runs journal %s: %w; restart harnessd", j.path, err)
		return j.err
	}
	j.f.Close()
	j.f, j.size = f, int64(len(b))
	return nil
}

// records returns the records the journal holds, the last of each run's,
// by run id. A line that does not decode (torn by a crash) is skipped.
func (j *runJournal) records() (map[string][]byte, error) {
	b, err := os.ReadFile(j.path)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for line := range bytes.Lines(b) {
		inner, ok := unwrapLine(bytes.TrimSuffix(line, []byte("\n")), recordLinePrefix)
		var rec struct {
			ID string `json:"id"`
		}
		if ok && json.Unmarshal(inner, &rec) == nil && rec.ID != "" {
			out[rec.ID] = inner
		}
	}
	return out, nil
}
