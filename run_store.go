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
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// This file holds the runs on disk, under $HARNESS_HOME/runs/. Every
// run's lines go to the store's log (run_store_log.go), which all runs
// share: one JSON value a line, its events as they were streamed, its
// transcript's messages ({"message": ...}, see run_transcript.go) and its
// records ({"record": ...}); the last record line is the run's. The
// record a run is accepted with is made durable (with whatever else was
// written to the log by then, group-committed) before POST /v1/runs
// answers; so is its end, the terminal event and the record, before
// anyone sees the run end. So a 202 means the run survives a crash, and a
// run reported ended is on disk. (The record is appended once more after
// the run's servers have closed, with their final statuses, without a
// sync of its own: a power cut soon after leaves the record of the end,
// whose only difference is those statuses.)
//
// At start-up every run in the log is read back: one whose last line is
// the record of an ended run is that run. Any other is of a run a crash
// interrupted: it takes its record from its lines (a run with none is
// removed), its outcome from its terminal event when that reached the
// disk, or else gets run.failed with interruptedError; then its record is
// appended, durably. A line that does not decode, which only outside
// damage makes, is skipped. Runs an older harnessd kept in files of their
// own are moved into the log first (run_store_legacy.go).

// File names under the runs directory.
const runTempExt = ".tmp"

// interruptedError is the error of a run that was active when harnessd
// stopped without ending it (a crash, kill -9, a power cut).
const interruptedError = "interrupted: harnessd stopped"

// A runStore keeps runs in one directory (0700; files 0600), which it
// holds locked so that no other harnessd takes it for its own (and ends
// its active runs as interrupted). It is safe for concurrent use.
type runStore struct {
	dir     string
	logger  *slog.Logger
	lock    *os.File // holds the directory's lock until close
	log     *runsLog
	closing sync.Once
	// damaged counts the runs found damaged at start-up
	// (run_store_damage.go).
	damaged atomic.Int64
}

// openRunStore creates (0700) or opens dir, locks it, removes the
// temporary files an interrupted write left, opens the log and moves
// into it the runs an older harnessd kept. It fails when another process
// (or another store of this one) holds dir.
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
	if s.log, err = openRunsLog(dir); err != nil {
		lock.Close()
		return nil, fmt.Errorf("runs directory %s: %w; check the free space and permissions of the directory", dir, err)
	}
	return s, nil
}

// close closes the log and releases the directory's lock; closing again
// does nothing. The store must not be used after.
func (s *runStore) close() {
	s.closing.Do(func() {
		s.log.closeFiles()
		s.lock.Close()
	})
}

func (s *runStore) webhookPath(id string) string { return filepath.Join(s.dir, id+runWebhookExt) }

// The lines of a run that are not events start with these.
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
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
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

// A runLog is one run's writer to the log. It is not safe for
// concurrent use: its run's writer (run_writer.go) writes it, then the
// goroutine ending the run.
type runLog struct {
	store *runStore
	id    string
	// pending holds the lines a failed write left (the disk was full,
	// say): they are written before the next, so that the run's lines
	// on disk have no gap once the store can write again.
	pending []byte
	err     error // set when the log takes nothing more; later writes are dropped
	closed  bool
}

// maxPendingBytes bounds the lines a run keeps while the store cannot
// write them; past it the run's log takes nothing more.
const maxPendingBytes = 16 << 20

// create commits the first record of a new run to the log: it is durable
// before create returns (so an accepted run survives a crash, as
// interrupted at worst). Its error is a *storeUnavailableError when the
// log could not be written.
func (s *runStore) create(v runView, rd *redactor) (*runLog, error) {
	defer s.log.costs.waited(time.Now())
	l := &runLog{store: s, id: v.ID}
	s.log.open.Add(1)
	if err := l.write(recordLine(v, rd), true); err != nil {
		l.close()
		return nil, &storeUnavailableError{dir: s.dir, cause: fmt.Errorf("run %s: write its record: %w", v.ID, err), free: freeSpaceText(s.dir)}
	}
	return l, nil
}

// write appends lines (whole lines) after those a failed write left, in
// one write(2), so that a crash tears at most the last, and makes them
// durable when sync is set. A failed write keeps its lines for the next
// (up to maxPendingBytes); when the log cannot be repaired, or after a
// failed fsync, the run's log takes nothing more: its lines on disk stop
// where they were whole. It returns the write's error.
func (l *runLog) write(lines []byte, sync bool) error {
	if l.err != nil {
		return l.err
	}
	if len(l.pending) > 0 {
		lines = append(l.pending, lines...)
	}
	seq, err := l.store.log.appendLines(l.id, lines)
	if err == nil {
		l.pending = nil
		if sync {
			if err = l.store.log.sync(seq); err != nil {
				l.err = fmt.Errorf("append run %s to the runs log in %s: %w", l.id, l.store.dir, err)
			}
		}
		return l.err
	}
	err = fmt.Errorf("append run %s to the runs log in %s: %w", l.id, l.store.dir, err)
	if l.store.log.isBroken() || len(lines) > maxPendingBytes {
		l.err, l.pending = err, nil
		return err
	}
	if len(l.pending) == 0 {
		l.pending = bytes.Clone(lines)
	} else {
		l.pending = lines
	}
	return err
}

// close ends the log; it takes nothing more. Closing again does nothing.
func (l *runLog) close() {
	if !l.closed {
		l.closed = true
		l.store.log.open.Add(-1)
	}
	if l.err == nil {
		l.err = fmt.Errorf("append run %s to the runs log: closed", l.id)
	}
	l.pending = nil
}

// end writes the last lines of l's run (its terminal event and record),
// durably, with what earlier writes left. When they cannot be written the
// log takes nothing more: the run is not on disk as ended, and must not
// be reported so. It returns the write's error.
func (s *runStore) end(l *runLog, lines []byte) error {
	defer s.log.costs.waited(time.Now())
	err := l.write(lines, true)
	if err != nil && l.err == nil {
		l.err, l.pending = err, nil
	}
	return err
}

// A runFile is what the log holds of a run, as read back.
type runFile struct {
	events   []runEvent
	messages [][]byte // each transcript line's JSON
	record   []byte   // the last record's JSON; nil when there is none
	bad      int      // lines that do not decode
}

// parseRunFile decodes the complete lines of a run. Each event's
// data is kept as the raw JSON it was written as.
func parseRunFile(b []byte) runFile {
	var f runFile
	for line := range bytes.Lines(b[:bytes.LastIndexByte(b, '\n')+1]) {
		line = bytes.TrimSuffix(line, []byte("\n"))
		if inner, ok := unwrapLine(line, recordLinePrefix); ok {
			if json.Valid(inner) {
				f.record = inner
			}
		} else if inner, ok := unwrapLine(line, messageLinePrefix); ok {
			f.messages = append(f.messages, inner)
		} else if ev, ok := parseEventLine(line); ok {
			f.events = append(f.events, ev)
		} else {
			f.bad++
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

// read returns what the log holds of run id. The error wraps
// fs.ErrNotExist when the run is not on disk.
func (s *runStore) read(id string) (runFile, error) {
	b, err := s.log.read(id)
	if err != nil {
		return runFile{}, err
	}
	return parseRunFile(b), nil
}

// eachEvent calls fn with each event of run id after the one numbered
// after, in order, read from the log a window at a time (eachLine): its
// memory does not grow with the run. It stops at fn's first error and
// returns it; the error wraps fs.ErrNotExist when the run is not on disk.
func (s *runStore) eachEvent(id string, after int, fn func(runEvent) error) error {
	return s.log.eachLine(id, func(line []byte) error {
		if bytes.HasPrefix(line, recordLinePrefix) || bytes.HasPrefix(line, messageLinePrefix) {
			return nil
		}
		if ev, ok := parseEventLine(line); ok && ev.Seq > after {
			return fn(ev)
		}
		return nil
	})
}

// readMessages returns the transcript lines of run id (each one's JSON),
// in order, reading nothing else of the run into memory. The error wraps
// fs.ErrNotExist when the run is not on disk.
func (s *runStore) readMessages(id string) ([][]byte, error) {
	var out [][]byte
	err := s.log.eachLine(id, func(line []byte) error {
		if inner, ok := unwrapLine(line, messageLinePrefix); ok {
			out = append(out, bytes.Clone(inner))
		}
		return nil
	})
	return out, err
}

// readRecord returns the record of ended run id: its last line. The
// error wraps fs.ErrNotExist when the run is not on disk.
func (s *runStore) readRecord(id string) (runView, error) {
	var v runView
	line, err := s.log.lastLine(id)
	if err != nil {
		return v, err
	}
	inner, ok := unwrapLine(line, recordLinePrefix)
	if !ok {
		return v, fmt.Errorf("run %s: its last line in the runs log in %s is not the run's record", id, s.dir)
	}
	if err := json.Unmarshal(inner, &v); err != nil {
		return v, fmt.Errorf("run %s: record in the runs log in %s: %w", id, s.dir, err)
	}
	return v, nil
}

// A storedRun is one run found on disk at start-up: its record (ended,
// whatever state the crash left it in) and the bytes its lines take.
type storedRun struct {
	view  runView
	bytes int64
}

// load reads every run in the log, oldest first, ending each run a crash
// left active (see the top of this file), and removing webhook
// deliveries without a run. Runs whose record cannot be read are logged
// and left alone.
func (s *runStore) load(now time.Time) ([]storedRun, error) {
	var runs []storedRun
	logDamage(s.logger, s.dir, s.log.damage)
	damaged, marked := 0, 0
	for _, id := range s.log.ids() {
		v, err := s.loadRun(id, now)
		if errors.Is(err, errRecordMissing) {
			damaged++
			logDamagedRun(s.logger, damagedRun{id, *s.checkRun(id, false)})
			continue
		}
		if err != nil {
			s.logger.Warn("skipping a run whose lines in the runs log cannot be read", "run", id, "err", err)
			continue
		}
		if v == nil {
			continue
		}
		if v.Damaged != nil {
			marked++
		} else if d := s.checkRun(id, true); d != nil {
			v.Damaged = d
			logDamagedRun(s.logger, damagedRun{id, *d})
			// Marked in its record, for later start-ups and readers.
			if _, err := s.log.appendLines(id, recordLine(*v, nil)); err != nil {
				s.logger.Warn("marking a damaged run in its record failed", "run", id, "err", err)
			}
		}
		if v.Damaged != nil {
			damaged++
		}
		runs = append(runs, storedRun{view: *v, bytes: s.log.size(id)})
	}
	if marked > 0 {
		s.logger.Warn("runs found damaged in the runs log at an earlier start-up are kept marked damaged", "runs", marked, "dir", s.dir)
	}
	s.damaged.Store(int64(damaged))
	// What ending the interrupted runs wrote (a sync without anything new
	// to make durable does nothing).
	if err := s.log.syncAll(); err != nil {
		return nil, fmt.Errorf("end the runs a crash interrupted in %s: %w", s.dir, err)
	}
	s.removeOrphanDeliveries()
	slices.SortFunc(runs, func(a, b storedRun) int { return compareAge(a.view.CreatedAt, a.view.ID, b.view.CreatedAt, b.view.ID) })
	if err := s.log.compact(nil); err != nil {
		s.logger.Warn("compacting the runs log failed; it is tried again when runs are next removed", "err", err)
	}
	return runs, nil
}

// removeOrphanDeliveries removes the webhook deliveries without a run: a
// crash came between the delivery and the run's first record.
func (s *runStore) removeOrphanDeliveries() {
	paths, _ := filepath.Glob(filepath.Join(s.dir, "*"+runWebhookExt))
	for _, p := range paths {
		if id := strings.TrimSuffix(filepath.Base(p), runWebhookExt); !s.log.holds(id) {
			os.Remove(p)
		}
	}
}

// loadRun returns the record of run id, ending the run if a crash left
// it active (durably once load syncs the log); nil for a run without a
// record, which it removes.
func (s *runStore) loadRun(id string, now time.Time) (*runView, error) {
	if line, err := s.log.lastLine(id); err == nil {
		if inner, ok := unwrapLine(line, recordLinePrefix); ok {
			var v runView
			if json.Unmarshal(inner, &v) == nil && isTerminal(v.Status) {
				if v.ID != id {
					return nil, fmt.Errorf("its record is of run %q", v.ID)
				}
				return &v, nil
			}
		}
	}
	return s.recover(id, now)
}

// recover ends run id, found active: it takes the record from its lines,
// completes it from the events (steps, tool calls, and the outcome when
// the terminal event made it to disk) or appends run.failed with
// interruptedError (after a result for each tool call left open in the
// transcript), then appends the record (made durable by load, with every
// other). It returns the ended record, also on a write error; nil,
// removing the run, when there is no record (the run was never
// accepted).
func (s *runStore) recover(id string, now time.Time) (*runView, error) {
	f, err := s.read(id)
	if err != nil {
		return nil, err
	}
	if f.record == nil {
		if len(s.log.damage) > 0 {
			// Lost to the damage: its lines are kept for whoever looks.
			return nil, errRecordMissing
		}
		return nil, s.log.removeRuns([]string{id}, false)
	}
	var v runView
	if err := json.Unmarshal(f.record, &v); err != nil || v.ID != id {
		return nil, fmt.Errorf("the record of run %s does not decode or names another run (%v)", id, err)
	}
	if isTerminal(v.Status) {
		// Ended: only a later record (the servers' last statuses) was torn.
		return &v, nil
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
	_, err = s.log.appendLines(id, lines)
	return &v, err
}

// errRecordMissing is recover's error for a run whose lines have no
// record while the log is damaged: its record was lost.
var errRecordMissing = errors.New("the run's record is missing")

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
