package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// This file holds the runs on disk, under $HARNESS_HOME/runs/. Each run
// has one file, <id>.run, append-only, one JSON value a line: its events
// as they were streamed, its transcript's messages ({"message": ...}, see
// run_transcript.go) and, once it has ended, its record
// ({"record": ...}); the last record line is the run's. The record a run
// is accepted with goes to the journal (run_store_journal.go), which every
// run shares and which is made durable once per batch of runs, with the
// names of the run files created since. A run's own file is fsynced once:
// when it ends, with its terminal event and its record, before anyone
// sees it end. So a 202 means the run survives a crash, and a run
// reported ended is on disk. (The record is appended once more after the
// run's servers have closed, with their final statuses, without an fsync
// of its own: a power cut soon after leaves the record of the end, whose
// only difference is those statuses.)
//
// At start-up every run file is read back: one that ends with the record
// of an ended run is that run. Any other is of a run a crash interrupted:
// it takes its record from its file or else from the journal (a file with
// neither is of a run never accepted, and is removed), its outcome from
// its terminal event when that reached the disk, or else gets run.failed
// with interruptedError; then its record is appended, durably. A torn
// last line is ignored, and cut off before anything is appended to the
// file again; a line that does not decode, which only outside damage
// makes, is skipped. Runs an older harnessd kept as three files are
// converted first (run_store_legacy.go).

// File names under the runs directory.
const (
	runFileExt = ".run"
	runTempExt = ".tmp"
)

// interruptedError is the error of a run that was active when harnessd
// stopped without ending it (a crash, kill -9, a power cut).
const interruptedError = "interrupted: harnessd stopped"

// A runStore keeps runs as files in one directory (0700; files 0600),
// which it holds locked so that no other harnessd takes it for its own
// (and ends its active runs as interrupted). It is safe for concurrent
// use: every run has its own file, and the journal its own goroutine.
type runStore struct {
	dir     string
	logger  *slog.Logger
	lock    *os.File // holds the directory's lock until close
	journal *runJournal
	pool    *runIDPool // ids of new runs, their files ready (run_store_pool.go)
	closing sync.Once
}

// openRunStore creates (0700) or opens dir, locks it, removes the
// temporary files an interrupted write left, converts the runs an older
// harnessd kept and opens the journal. It fails when another process (or
// another store of this one) holds dir.
func openRunStore(dir string, logger *slog.Logger) (*runStore, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runs directory %s: %w; check that $HARNESS_HOME is writable", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("runs directory %s: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("runs directory %s: %w", dir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("runs directory %s is in use by another harnessd (%v); give each instance its own HARNESS_HOME", dir, err)
	}
	temps, _ := filepath.Glob(filepath.Join(dir, "*"+runTempExt))
	for _, p := range temps {
		os.Remove(p)
	}
	s := &runStore{dir: dir, logger: orDiscard(logger), lock: lock}
	if err := s.convertLegacy(); err != nil {
		lock.Close()
		return nil, fmt.Errorf("runs directory %s: %w", dir, err)
	}
	if s.journal, err = openJournal(dir, s.logger); err != nil {
		lock.Close()
		return nil, fmt.Errorf("runs directory %s: %w; check the free space and permissions of the directory", dir, err)
	}
	s.startIDPool()
	return s, nil
}

// close stops the pool and the journal and releases the directory's
// lock; closing again does nothing. The store must not be used after.
func (s *runStore) close() {
	s.closing.Do(func() {
		s.pool.close()
		s.journal.close()
		s.lock.Close()
	})
}

// newRunID returns the id for a new run, with its file ready when the
// pool has one. An id not used for a run must be released.
func (s *runStore) newRunID() string { return s.pool.take() }

// releaseRunID lets go of id, which a refused run did not use.
func (s *runStore) releaseRunID(id string) { s.pool.release(id) }

func (s *runStore) runPath(id string) string     { return filepath.Join(s.dir, id+runFileExt) }
func (s *runStore) webhookPath(id string) string { return filepath.Join(s.dir, id+runWebhookExt) }

// The lines of a run file that are not events start with these.
var (
	recordLinePrefix  = []byte(`{"record":`)
	messageLinePrefix = []byte(`{"message":`)
)

// wrapLine appends to b the line of the kind prefix holding v (one JSON
// value).
func wrapLine(b, prefix, v []byte) []byte {
	return append(append(append(b, prefix...), v...), '}', '\n')
}

// unwrapLine returns the value of a line of the kind prefix (without its
// newline).
func unwrapLine(line, prefix []byte) ([]byte, bool) {
	inner, ok := bytes.CutPrefix(line, prefix)
	if !ok {
		return nil, false
	}
	return bytes.CutSuffix(inner, []byte("}"))
}

// recordLine returns the record line of v, with rd's secrets cut out.
func recordLine(v runView, rd *redactor) []byte {
	b := rd.marshal(v, false)
	return wrapLine(make([]byte, 0, len(recordLinePrefix)+len(b)+2), recordLinePrefix, b)
}

// writeFileAtomic replaces path with data (mode 0600) durably: a crash
// leaves either the old file or the new one, never a mix.
func writeFileAtomic(path string, data []byte) error {
	if err := writeTemp(path, data); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// writeTemp replaces path with data (mode 0600) through a temporary file,
// fsynced before it is renamed; the caller makes the name durable.
func writeTemp(path string, data []byte) error {
	tmp := path + runTempExt
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	n, err := f.Write(data)
	countWrite(n)
	if err == nil {
		err = syncFile(f)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// syncDir fsyncs a directory, so that the names created, renamed or
// removed in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = syncFile(d)
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// A runLog is one run's open file. It is not safe for concurrent use: its
// run's writer (run_writer.go) writes it, then the goroutine ending the
// run.
type runLog struct {
	f    *os.File
	path string
	size int64
	err  error // the first write error; later writes are dropped
}

// create opens the file of a new run (the pool's, for an id from
// newRunID, or else a new one) and commits its first record to the
// journal: both are durable before it returns (so an accepted run
// survives a crash, as interrupted at worst). A file of another run is
// never reused.
func (s *runStore) create(v runView, rd *redactor) (*runLog, error) {
	path := s.runPath(v.ID)
	pooled := s.pool.use(v.ID)
	flags := os.O_WRONLY | os.O_APPEND
	if !pooled {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run %s: create its file: %w; check the free space and permissions of %s", v.ID, err, s.dir)
	}
	start := time.Now()
	err = s.journal.commit(v.ID, recordLine(v, rd), !pooled)
	countWait(start)
	if err != nil {
		f.Close()
		os.Remove(path)
		return nil, fmt.Errorf("run %s: write its record: %w; check the free space and permissions of %s", v.ID, err, s.dir)
	}
	return &runLog{f: f, path: path}, nil
}

// write appends lines (whole lines) in one write(2), so that a crash
// tears at most the last, and fsyncs the file when sync is set. After a
// failed write the log takes nothing more: a partial line must stay the
// last. It returns the first error the log met.
func (l *runLog) write(lines []byte, sync bool) error {
	if l.err != nil {
		return l.err
	}
	n, err := l.f.Write(lines)
	l.size += int64(countWrite(n))
	if err == nil && sync {
		err = syncFile(l.f)
	}
	if err != nil {
		l.err = fmt.Errorf("append to %s: %w", l.path, err)
	}
	return l.err
}

// close closes the file; the log takes nothing more.
func (l *runLog) close() {
	if l.err == nil {
		l.err = fmt.Errorf("append to %s: file closed", l.path)
	}
	l.f.Close()
}

// end writes the last lines of run id (its terminal event and record),
// durably, and lets the journal forget the run. It returns the first
// error the log met.
func (s *runStore) end(id string, l *runLog, lines []byte) error {
	defer countWait(time.Now())
	if err := l.write(lines, true); err != nil {
		return err
	}
	s.journal.forget(id)
	return nil
}

// A runFile is what a run's file holds, as read back.
type runFile struct {
	events   []runEvent
	messages [][]byte // each transcript line's JSON
	record   []byte   // the last record's JSON; nil when there is none
	whole    int      // the length up to the last newline: a torn last line is cut back to it
}

// parseRunFile decodes the complete lines of a run file. Each event's
// data is kept as the raw JSON it was written as.
func parseRunFile(b []byte) runFile {
	var f runFile
	f.whole = bytes.LastIndexByte(b, '\n') + 1
	for line := range bytes.Lines(b[:f.whole]) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if inner, ok := unwrapLine(line, recordLinePrefix); ok {
			if json.Valid(inner) {
				f.record = inner
			}
		} else if inner, ok := unwrapLine(line, messageLinePrefix); ok {
			f.messages = append(f.messages, inner)
		} else if ev, ok := parseEventLine(line); ok {
			f.events = append(f.events, ev)
		}
	}
	return f
}

// A storedEvent is a runEvent as read back: its data stays raw JSON.
type storedEvent struct {
	Seq  int             `json:"seq"`
	Type string          `json:"type"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data,omitempty"`
}

// parseEventLine decodes one event line (without its newline).
func parseEventLine(line []byte) (runEvent, bool) {
	var ev storedEvent
	if json.Unmarshal(line, &ev) != nil || ev.Type == "" {
		return runEvent{}, false
	}
	out := runEvent{Seq: ev.Seq, Type: ev.Type, Time: ev.Time}
	if len(ev.Data) > 0 {
		out.Data = ev.Data
	}
	out.frame, out.encoded = storedEventFrame(ev.Seq, ev.Type, line)
	return out, true
}

// read returns what run id's file holds. The error wraps fs.ErrNotExist
// when the run is not on disk.
func (s *runStore) read(id string) (runFile, error) {
	b, err := os.ReadFile(s.runPath(id))
	if err != nil {
		return runFile{}, err
	}
	return parseRunFile(b), nil
}

// readEvents returns the events of run id in order.
func (s *runStore) readEvents(id string) ([]runEvent, error) {
	f, err := s.read(id)
	return f.events, err
}

// readRecord returns the record of ended run id: the last line of its
// file, read from the end. The error wraps fs.ErrNotExist when the run is
// not on disk.
func (s *runStore) readRecord(id string) (runView, error) {
	var v runView
	line, err := lastLine(s.runPath(id))
	if err != nil {
		return v, err
	}
	inner, ok := unwrapLine(line, recordLinePrefix)
	if !ok {
		return v, fmt.Errorf("run %s: %s does not end with the run's record", id, s.runPath(id))
	}
	if err := json.Unmarshal(inner, &v); err != nil {
		return v, fmt.Errorf("run %s: record in %s: %w", id, s.runPath(id), err)
	}
	return v, nil
}

// lastLine returns the last line of the file at path without its
// newline, reading back from the end; nil when the file does not end with
// a newline (it is empty, or its last line is torn).
func lastLine(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	for chunk := int64(4 << 10); ; chunk *= 4 {
		n := min(chunk, size)
		b := make([]byte, n)
		if _, err := f.ReadAt(b, size-n); err != nil {
			return nil, err
		}
		if n == 0 || b[n-1] != '\n' {
			return nil, nil
		}
		if i := bytes.LastIndexByte(b[:n-1], '\n'); i >= 0 || n == size {
			return b[i+1 : n-1], nil
		}
	}
}

// A storedRun is one run found on disk at start-up: its record (ended,
// whatever state the crash left it in) and the bytes its file takes.
type storedRun struct {
	view  runView
	bytes int64
}

// load reads every run on disk, oldest first, ending each run a crash
// left active (see the top of this file), and removing webhook
// deliveries without a run. Runs whose record cannot be read are logged
// and left alone. Then the journal keeps only the runs of this process
// not yet ended.
func (s *runStore) load(now time.Time) ([]storedRun, error) {
	journaled, err := s.journal.records()
	if err != nil {
		return nil, fmt.Errorf("read the journal of %s: %w", s.dir, err)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("read runs directory %s: %w", s.dir, err)
	}
	var runs []storedRun
	for _, e := range entries {
		// A delivery without a run is of a run never accepted: the crash
		// came between the delivery and the run's file.
		if id, ok := strings.CutSuffix(e.Name(), runWebhookExt); ok {
			if _, err := os.Stat(s.runPath(id)); errors.Is(err, fs.ErrNotExist) {
				os.Remove(filepath.Join(s.dir, e.Name()))
			}
			continue
		}
		id, ok := strings.CutSuffix(e.Name(), runFileExt)
		if !ok || e.IsDir() || s.pool.holds(id) {
			continue
		}
		v, err := s.loadRun(id, journaled[id], now)
		if err != nil {
			s.logger.Warn("skipping a run whose file cannot be read", "run", id, "err", err)
			continue
		}
		if v != nil {
			runs = append(runs, storedRun{view: *v, bytes: s.size(id)})
		}
	}
	slices.SortStableFunc(runs, func(a, b storedRun) int { return a.view.CreatedAt.Compare(b.view.CreatedAt) })
	if err := s.journal.compact(); err != nil {
		s.logger.Warn("rewriting the runs journal failed; it is rewritten when it next grows", "err", err)
	}
	return runs, nil
}

// loadRun returns the record of run id, ending the run if a crash left
// it active (journaled is its record in the journal, nil for none); nil
// for a run never accepted, whose file it removes.
func (s *runStore) loadRun(id string, journaled []byte, now time.Time) (*runView, error) {
	if line, err := lastLine(s.runPath(id)); err == nil {
		if inner, ok := unwrapLine(line, recordLinePrefix); ok {
			var v runView
			if json.Unmarshal(inner, &v) == nil && isTerminal(v.Status) {
				if v.ID != id {
					return nil, fmt.Errorf("the record in %s is of run %q", s.runPath(id), v.ID)
				}
				return &v, nil
			}
		}
	}
	return s.recover(id, journaled, now)
}

// size returns the bytes run id's file takes.
func (s *runStore) size(id string) int64 {
	if fi, err := os.Stat(s.runPath(id)); err == nil {
		return fi.Size()
	}
	return 0
}

// recover ends run id, found active: it takes the record from the file
// or else journaled, completes it from the events (steps, tool calls, and
// the outcome when the terminal event made it to disk) or appends
// run.failed with interruptedError (after a result for each tool call
// left open in the transcript), then appends the record, durably. It
// returns the ended record, also on a write error; nil, removing the
// file, when there is no record (the run was never accepted).
func (s *runStore) recover(id string, journaled []byte, now time.Time) (*runView, error) {
	path := s.runPath(id)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := parseRunFile(b)
	base := f.record
	if base == nil {
		base = journaled
	}
	if base == nil {
		return nil, os.Remove(path)
	}
	var v runView
	if err := json.Unmarshal(base, &v); err != nil || v.ID != id {
		return nil, fmt.Errorf("the record of run %s does not decode or names another run (%v)", id, err)
	}
	if isTerminal(v.Status) {
		// Ended: only a later record (the servers' last statuses) was torn.
		return &v, truncateTo(path, f.whole, len(b))
	}
	v = replayEvents(v, f.events)
	var lines []byte
	if !isTerminal(v.Status) {
		v = markInterrupted(v, now)
		lines = closeToolCalls(lines, f.messages, now)
		ev := runEvent{Seq: len(f.events) + 1, Type: terminalEventType(runFailed), Time: *v.EndedAt,
			Data: map[string]any{"status": runFailed, "error": interruptedError}}
		enc, err := json.Marshal(ev)
		if err != nil {
			return &v, err
		}
		lines = append(append(lines, enc...), '\n')
	}
	lines = append(lines, recordLine(v, nil)...)
	return &v, s.appendAfterCrash(path, f.whole, lines)
}

// replayEvents returns v completed from its run's events: when it
// started, its steps and tool calls, and its outcome when the terminal
// event is among them.
func replayEvents(v runView, events []runEvent) runView {
	for _, ev := range events {
		var data struct {
			Step   int    `json:"step"`
			Status string `json:"status"`
			Output string `json:"output"`
			Error  string `json:"error"`
		}
		if raw, ok := ev.Data.(json.RawMessage); ok {
			json.Unmarshal(raw, &data)
		}
		switch ev.Type {
		case evRunStarted:
			t := ev.Time
			v.StartedAt = &t
		case evModelResponse:
			v.Steps = max(v.Steps, data.Step)
		case evToolCallCompleted:
			v.ToolCalls++
		}
		if isTerminal(data.Status) && ev.Type == terminalEventType(data.Status) {
			t := ev.Time
			v.Status, v.Output, v.Error, v.EndedAt = data.Status, data.Output, data.Error, &t
		}
	}
	return v
}

// markInterrupted returns v failed with interruptedError at now.
func markInterrupted(v runView, now time.Time) runView {
	t := now.UTC()
	v.Status, v.Error, v.EndedAt = runFailed, interruptedError, &t
	return v
}

// appendAfterCrash cuts a torn last line off the file at path (whole is
// its length up to the last newline) and appends lines, durably.
func (s *runStore) appendAfterCrash(path string, whole int, lines []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(whole)); err != nil {
		return err
	}
	n, err := f.WriteAt(lines, int64(whole))
	if countWrite(n); err != nil {
		return err
	}
	return syncFile(f)
}

// truncateTo cuts the file at path, size bytes long, back to whole.
func truncateTo(path string, whole, size int) error {
	if whole == size {
		return nil
	}
	return os.Truncate(path, int64(whole))
}
