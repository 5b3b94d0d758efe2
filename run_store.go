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
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file holds the runs on disk, under $HARNESS_HOME/runs/: each run's
// record (<id>.json, replaced whole: write a temporary file, fsync,
// rename, fsync the directory), its event log (<id>.events, one JSON
// event a line, append-only, fsynced at the terminal event) and its
// transcript (<id>.messages, one message a line, append-only, fsynced
// with the terminal event; see run_transcript.go); loading them
// at start-up, where the runs a crash interrupted are ended; and retention
// by count, age and bytes.
//
// A crash at any instant leaves every earlier run readable: a record is
// either the old or the new file, and a torn last line of an event log is
// ignored (and cut off before anything is appended to it again).

// File names under the runs directory.
const (
	runRecordExt = ".json"
	runEventsExt = ".events"
	// runMessagesExt is a run's transcript.
	runMessagesExt = ".messages"
	runTempExt     = ".tmp"
)

// interruptedError is the error of a run that was active when harnessd
// stopped without ending it (a crash, kill -9, a power cut).
const interruptedError = "interrupted: harnessd stopped"

// A runStore keeps runs as files in one directory (0700; files 0600),
// which it holds locked so that no other harnessd takes it for its own
// (and ends its active runs as interrupted). It is safe for concurrent
// use: every run has its own files, and a directory fsync is safe to race.
type runStore struct {
	dir    string
	logger *slog.Logger
	lock   *os.File // holds the directory's lock until close
}

// openRunStore creates (0700) or opens dir, locks it, and removes the
// temporary files an interrupted record write left. It fails when
// another process (or another store of this one) holds dir.
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
	return &runStore{dir: dir, logger: logger, lock: lock}, nil
}

// close releases the directory's lock. The store must not be used after.
func (s *runStore) close() {
	s.lock.Close()
}

func (s *runStore) recordPath(id string) string   { return filepath.Join(s.dir, id+runRecordExt) }
func (s *runStore) eventsPath(id string) string   { return filepath.Join(s.dir, id+runEventsExt) }
func (s *runStore) messagesPath(id string) string { return filepath.Join(s.dir, id+runMessagesExt) }
func (s *runStore) webhookPath(id string) string  { return filepath.Join(s.dir, id+runWebhookExt) }

// writeRecord replaces the record of v.ID, with rd's secrets cut out:
// write a temporary file, fsync it, rename it over the record and fsync
// the directory, so that after a crash the record is whole, old or new.
// It returns the record's size.
func (s *runStore) writeRecord(v runView, rd *redactor) (int64, error) {
	return s.writeRecordData(v.ID, encodeRecord(v, rd))
}

// encodeRecord returns the record of v as written, with rd's secrets cut
// out.
func encodeRecord(v runView, rd *redactor) []byte {
	return append(rd.marshal(v, false), '\n')
}

// writeRecordData replaces the record of run id with b, an encodeRecord,
// as writeRecord does.
func (s *runStore) writeRecordData(id string, b []byte) (int64, error) {
	if err := writeFileAtomic(s.recordPath(id), b); err != nil {
		return 0, fmt.Errorf("run %s: write record: %w", id, err)
	}
	return int64(len(b)), nil
}

// writeFileAtomic replaces path with data (mode 0600) durably: a crash
// leaves either the old file or the new one, never a mix.
func writeFileAtomic(path string, data []byte) error {
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
		return err
	}
	return syncDir(filepath.Dir(path))
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

// readRecord returns the record of run id. The error wraps fs.ErrNotExist
// when the run is not on disk.
func (s *runStore) readRecord(id string) (runView, error) {
	var v runView
	b, err := os.ReadFile(s.recordPath(id))
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("run %s: record %s: %w", id, s.recordPath(id), err)
	}
	return v, nil
}

// A runLog is one run's open event log. It is not safe for concurrent use:
// its run calls it in event order, under the run's lock.
type runLog struct {
	f    *os.File
	path string
	size int64
	err  error // the first write error; later appends are dropped
}

// create writes the first record of a new run and creates its empty event
// log, both durable before it returns (so an accepted run survives a
// crash, as interrupted at worst).
func (s *runStore) create(v runView, rd *redactor) (*runLog, error) {
	f, err := os.OpenFile(s.eventsPath(v.ID), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run %s: create event log: %w; check the free space and permissions of %s", v.ID, err, s.dir)
	}
	if _, err := s.writeRecord(v, rd); err != nil {
		f.Close()
		os.Remove(s.eventsPath(v.ID))
		return nil, fmt.Errorf("%w; check the free space and permissions of %s", err, s.dir)
	}
	return &runLog{f: f, path: s.eventsPath(v.ID)}, nil
}

// openMessages creates the empty transcript of run id, written like an
// event log. The run's record must exist: load removes a transcript
// without one.
func (s *runStore) openMessages(id string) (*runLog, error) {
	path := s.messagesPath(id)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run %s: create transcript: %w; check the free space and permissions of %s", id, err, s.dir)
	}
	return &runLog{f: f, path: path}, nil
}

// append writes one event (encoded JSON, without newline) as a line, and
// fsyncs the log when sync is set (the terminal event). After a failed
// write the log takes nothing more: a partial line must stay the last.
// It returns the first error the log met.
func (l *runLog) append(event []byte, sync bool) error {
	if l.err != nil {
		return l.err
	}
	line := make([]byte, 0, len(event)+1)
	line = append(append(line, event...), '\n')
	// One write per line: a crash tears at most the line being written.
	n, err := l.f.Write(line)
	l.size += int64(countWrite(n))
	if err == nil && sync {
		err = syncFile(l.f)
	}
	if err != nil {
		l.err = fmt.Errorf("append to %s: %w", l.path, err)
	}
	return l.err
}

// sync makes what the log holds durable, unless nothing was written. It
// returns the first error the log met.
func (l *runLog) sync() error {
	if l.err != nil || l.size == 0 {
		return l.err
	}
	if err := syncFile(l.f); err != nil {
		l.err = fmt.Errorf("sync %s: %w", l.path, err)
	}
	return l.err
}

// close closes the log file; the log takes nothing more.
func (l *runLog) close() {
	if l.err == nil {
		l.err = fmt.Errorf("append to %s: log closed", l.path)
	}
	l.f.Close()
}

// readEvents returns the events of run id in order. A torn last line (no
// newline: a crash mid-write) is ignored, and so is a line that does not
// decode, which only outside damage makes. Each event's data is kept as
// the raw JSON it was written as.
func (s *runStore) readEvents(id string) ([]runEvent, error) {
	b, err := os.ReadFile(s.eventsPath(id))
	if err != nil {
		return nil, err
	}
	events, _ := parseEventLog(b)
	return events, nil
}

// A storedEvent is a runEvent as read back: its data stays raw JSON.
type storedEvent struct {
	Seq  int             `json:"seq"`
	Type string          `json:"type"`
	Time time.Time       `json:"time"`
	Data json.RawMessage `json:"data,omitempty"`
}

// parseEventLog decodes the complete lines of an event log and returns
// the events and the length of the log up to its last newline (what a
// torn last line is cut back to).
func parseEventLog(b []byte) ([]runEvent, int) {
	whole := bytes.LastIndexByte(b, '\n') + 1
	var events []runEvent
	for line := range bytes.Lines(b[:whole]) {
		var ev storedEvent
		if json.Unmarshal(line, &ev) != nil || ev.Type == "" {
			continue
		}
		out := runEvent{Seq: ev.Seq, Type: ev.Type, Time: ev.Time}
		if len(ev.Data) > 0 {
			out.Data = ev.Data
		}
		out.frame, out.encoded = storedEventFrame(ev.Seq, ev.Type, bytes.TrimSuffix(line, []byte("\n")))
		events = append(events, out)
	}
	return events, whole
}

// A storedRun is one run found on disk at start-up: its record (ended,
// whatever state the crash left it in) and the bytes its files take.
type storedRun struct {
	view  runView
	bytes int64
}

// load reads every run on disk, oldest first, removing event logs and
// transcripts without a record and ending each run a crash left active:
// one whose log holds its terminal event takes its outcome from it (the
// crash came between the event and the record); any other
// gets a run.failed event with interruptedError. Runs whose record cannot
// be read are logged and left alone.
func (s *runStore) load(now time.Time) ([]storedRun, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("read runs directory %s: %w", s.dir, err)
	}
	var runs []storedRun
	for _, e := range entries {
		// An event log or transcript without a record is of a run never
		// accepted: the crash came between the files of create.
		if id, ok := cutSuffixes(e.Name(), runEventsExt, runMessagesExt, runWebhookExt); ok {
			if _, err := os.Stat(s.recordPath(id)); errors.Is(err, fs.ErrNotExist) {
				os.Remove(filepath.Join(s.dir, e.Name()))
			}
			continue
		}
		id, ok := strings.CutSuffix(e.Name(), runRecordExt)
		if !ok || e.IsDir() {
			continue
		}
		v, err := s.readRecord(id)
		if err != nil {
			s.logger.Warn("skipping unreadable run record", "run", id, "err", err)
			continue
		}
		if v.ID != id {
			s.logger.Warn("skipping run record named for another run", "file", e.Name(), "run", v.ID)
			continue
		}
		if !isTerminal(v.Status) {
			if v, err = s.recover(v, now); err != nil {
				s.logger.Error("ending an interrupted run failed", "run", id, "err", err)
			}
		}
		runs = append(runs, storedRun{view: v, bytes: s.size(id)})
	}
	slices.SortStableFunc(runs, func(a, b storedRun) int { return a.view.CreatedAt.Compare(b.view.CreatedAt) })
	return runs, nil
}

// cutSuffixes returns name without the first of suffixes it ends with.
func cutSuffixes(name string, suffixes ...string) (string, bool) {
	for _, suffix := range suffixes {
		if id, ok := strings.CutSuffix(name, suffix); ok {
			return id, true
		}
	}
	return "", false
}

// files returns the paths of run id's files, the record last.
func (s *runStore) files(id string) []string {
	return []string{s.eventsPath(id), s.messagesPath(id), s.recordPath(id)}
}

// size returns the bytes run id's files take.
func (s *runStore) size(id string) int64 {
	var n int64
	for _, p := range s.files(id) {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// recover ends a run found active: it completes its record from its
// events (steps, tool calls, and the outcome when the terminal event made
// it to disk) or appends run.failed with interruptedError, then writes the
// record. It returns the ended record, also on error.
func (s *runStore) recover(v runView, now time.Time) (runView, error) {
	b, err := os.ReadFile(s.eventsPath(v.ID))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return s.markInterrupted(v, now), err
	}
	events, whole := parseEventLog(b)
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
	if !isTerminal(v.Status) {
		v = s.markInterrupted(v, now)
		ev := runEvent{Seq: len(events) + 1, Type: terminalEventType(runFailed), Time: *v.EndedAt,
			Data: map[string]any{"status": runFailed, "error": interruptedError}}
		if err := s.appendAfterCrash(v.ID, whole, ev); err != nil {
			return v, err
		}
		if err := s.closeTranscript(v.ID, now); err != nil {
			s.logger.Error("closing the tool calls of an interrupted run failed", "run", v.ID, "err", err)
		}
	}
	_, err = s.writeRecord(v, nil)
	return v, err
}

// markInterrupted returns v failed with interruptedError at now.
func (s *runStore) markInterrupted(v runView, now time.Time) runView {
	t := now.UTC()
	v.Status, v.Error, v.EndedAt = runFailed, interruptedError, &t
	return v
}

// appendAfterCrash cuts a torn last line off run id's event log (whole is
// the length up to its last newline) and appends ev, durably.
func (s *runStore) appendAfterCrash(id string, whole int, ev runEvent) error {
	f, err := os.OpenFile(s.eventsPath(id), os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(int64(whole)); err != nil {
		return err
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	n, err := f.WriteAt(append(b, '\n'), int64(whole))
	if countWrite(n); err != nil {
		return err
	}
	return syncFile(f)
}

// remove deletes run id's files and its webhook delivery, the record last,
// or the record of conversation id (a missing file is no error).
func (s *runStore) remove(id string) error {
	var errs []error
	for _, p := range slices.Concat([]string{s.webhookPath(id)}, s.files(id), []string{s.conversationPath(id)}) {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Retention defaults: what a small appliance keeps.
const (
	defaultMaxKeptRuns     = 1000
	defaultMaxKeptRunAge   = 30 * 24 * time.Hour
	defaultMaxKeptRunBytes = 1 << 30
)

// A retention bounds the finished runs kept, in memory and on disk. The
// oldest finished runs go first; active runs are never dropped. Zero
// fields mean no bound of that kind. Expired runs are dropped at start-up
// and whenever a run ends.
type retention struct {
	MaxRuns  int
	MaxAge   time.Duration
	MaxBytes int64
}

// defaultRetention returns the retention used when nothing is configured.
func defaultRetention() retention {
	return retention{MaxRuns: defaultMaxKeptRuns, MaxAge: defaultMaxKeptRunAge, MaxBytes: defaultMaxKeptRunBytes}
}

// A keptRun is what retention needs to know of one run.
type keptRun struct {
	id      string
	ended   bool
	endedAt time.Time // when ended
	bytes   int64
	runs    int // the runs it stands for (a conversation's); 0 counts as 1
}

// expired returns the ids of the runs to drop from runs (oldest first, as
// kept) so that the finished ones left fit every bound of k at now.
func (k retention) expired(runs []keptRun, now time.Time) []string {
	var count int
	var total int64
	for _, r := range runs {
		if r.ended {
			count += max(r.runs, 1)
			total += r.bytes
		}
	}
	var out []string
	for _, r := range runs {
		if !r.ended {
			continue
		}
		tooMany := k.MaxRuns > 0 && count > k.MaxRuns
		tooBig := k.MaxBytes > 0 && total > k.MaxBytes
		tooOld := k.MaxAge > 0 && now.Sub(r.endedAt) > k.MaxAge
		if !tooMany && !tooBig && !tooOld {
			continue
		}
		out = append(out, r.id)
		count -= max(r.runs, 1)
		total -= r.bytes
	}
	return out
}

// removeAll deletes the files of the runs ids, logging what it cannot.
func (s *runStore) removeAll(ids []string) {
	for _, id := range ids {
		if err := s.remove(id); err != nil {
			s.logger.Warn("removing an expired run failed", "run", id, "err", err)
		}
	}
}

// A keptRunsSetting is one value as configured, as text (a count, a Go
// duration, a byte count, an amount; "0" for no bound), with where it
// came from; an empty value is not set. Retention's settings use it, and
// so do the default budgets and the outside sampling limits.
type keptRunsSetting struct{ value, source string }

// keptRunsSettings are the retention settings of every source: TOML
// max_kept_runs, max_kept_run_age and max_kept_run_bytes, the
// HARNESS_ variables of their upper-case names, and the flags of their
// names with dashes. A later source overrides an earlier one.
type keptRunsSettings struct{ runs, age, bytes keptRunsSetting }

// merge sets in s every value o sets.
func (s *keptRunsSettings) merge(o keptRunsSettings) {
	for _, p := range []struct{ dst, src *keptRunsSetting }{{&s.runs, &o.runs}, {&s.age, &o.age}, {&s.bytes, &o.bytes}} {
		if p.src.value != "" {
			*p.dst = *p.src
		}
	}
}

// keptRunsFromEnv returns the retention settings of the environment.
func keptRunsFromEnv(getenv func(string) (string, bool)) keptRunsSettings {
	get := func(name string) keptRunsSetting {
		v, _ := getenv(name)
		return keptRunsSetting{value: strings.TrimSpace(v), source: name}
	}
	return keptRunsSettings{runs: get("HARNESS_MAX_KEPT_RUNS"), age: get("HARNESS_MAX_KEPT_RUN_AGE"), bytes: get("HARNESS_MAX_KEPT_RUN_BYTES")}
}

// retention returns defaultRetention with the settings applied, or an
// error naming each bad value's source and what to write instead.
func (s keptRunsSettings) retention() (retention, error) {
	k := defaultRetention()
	var errs []error
	count := func(set keptRunsSetting, what string) int64 {
		n, err := strconv.ParseInt(set.value, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a %s; give a whole number, or 0 for no bound", set.source, set.value, what))
		}
		return n
	}
	if s.runs.value != "" {
		k.MaxRuns = int(count(s.runs, "number of runs"))
	}
	if s.bytes.value != "" {
		k.MaxBytes = count(s.bytes, "number of bytes")
	}
	if s.age.value != "" {
		d, err := time.ParseDuration(s.age.value)
		if s.age.value == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration; give one like 720h (30 days), or 0 for no bound", s.age.source, s.age.value))
		}
		k.MaxAge = d
	}
	return k, errors.Join(errs...)
}
