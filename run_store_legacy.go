package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// This file moves into the log (run_store_log.go) the runs an older
// harnessd kept in files of their own: one file each, <id>.run (the same
// lines the log holds), with the records of the runs not yet ended in
// the journal; or, older still, three files each, fsynced on their own:
// <id>.json (the record, replaced whole), <id>.events (the event log) and
// <id>.messages (the transcript). Each run's lines go to the log after a
// moved line, so that a run moved twice (a crash came before its files
// were removed) is kept once; once every run is in the log, durably, the
// old files are removed. A run file without a record anywhere is of a run
// never accepted, and is removed.

// The files of runs kept by older harnessd.
const (
	legacyRunExt      = ".run"
	legacyJournalName = "journal"
	legacyRecordExt   = ".json"
	legacyEventsExt   = ".events"
	legacyMessagesExt = ".messages"
)

// convertLegacy moves into the log every run kept in files of its own,
// and removes event logs and transcripts left without a record (of runs
// never accepted). A run that cannot be read is logged and left as it
// is.
func (s *runStore) convertLegacy() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("read the runs directory: %w", err)
	}
	journal, err := readLegacyJournal(filepath.Join(s.dir, legacyJournalName))
	if err != nil {
		return err
	}
	var done []string // the files to remove
	failed := false
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() {
			continue
		}
		if id, ok := cutSuffixes(name, legacyEventsExt, legacyMessagesExt); ok {
			if _, err := os.Stat(filepath.Join(s.dir, id+legacyRecordExt)); errors.Is(err, fs.ErrNotExist) {
				os.Remove(filepath.Join(s.dir, name))
			}
			continue
		}
		id, oneFile := strings.CutSuffix(name, legacyRunExt)
		threeFiles := false
		if !oneFile {
			id, threeFiles = strings.CutSuffix(name, legacyRecordExt)
		}
		if !oneFile && !threeFiles || !validRunID([]byte(id)) {
			continue // not a run's file
		}
		var lines []byte
		files := []string{name}
		if oneFile {
			lines, err = readLegacyRun(filepath.Join(s.dir, name), journal[id])
		} else {
			lines, err = s.legacyRunFile(id)
			files = append(files, id+legacyEventsExt, id+legacyMessagesExt)
		}
		if err == nil && lines != nil {
			err = s.log.put(id, lines)
		}
		if err != nil {
			s.logger.Warn("a run kept by an older harnessd could not be moved into the runs log; it is left as it is", "file", name, "err", err)
			failed = true
			continue
		}
		done = append(done, files...)
	}
	if len(done) == 0 && journal == nil {
		return nil
	}
	if err := s.log.syncAll(); err != nil {
		return fmt.Errorf("move the runs kept by an older harnessd into the runs log: %w", err)
	}
	if !failed {
		// The journal may hold the record of a run left behind.
		done = append(done, legacyJournalName)
	}
	for _, name := range done {
		os.Remove(filepath.Join(s.dir, name))
	}
	s.logger.Info("moved the runs kept by an older harnessd into the runs log", "files", len(done), "dir", s.dir)
	return syncDir(s.dir)
}

// readLegacyJournal returns the records the journal of an older harnessd
// holds, the last of each run's, by run id; nil when there is no journal.
// A line that does not decode (torn by a crash) is skipped.
func readLegacyJournal(path string) (map[string][]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the journal of an older harnessd: %w", err)
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

// readLegacyRun returns the whole lines of the run file at path, with
// journaled (the run's record in the journal, nil for none) before them
// when they hold no record; nil for a run with no record anywhere.
func readLegacyRun(path string, journaled []byte) ([]byte, error) {
	b, err := readWholeLines(path)
	if err != nil || parseRunFile(b).record != nil {
		return b, err
	}
	if journaled == nil {
		return nil, nil
	}
	return append(wrapLine(nil, recordLinePrefix, journaled), b...), nil
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

// legacyRunFile returns the lines of run id kept in three files: its
// events and its messages (their whole lines), with the record after
// them when the run had ended, before them when it had not (the record of
// a run a crash interrupted, which load then ends).
func (s *runStore) legacyRunFile(id string) ([]byte, error) {
	record, err := os.ReadFile(filepath.Join(s.dir, id+legacyRecordExt))
	if err != nil {
		return nil, err
	}
	record = bytes.TrimSpace(record)
	var v struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(record, &v); err != nil || v.ID != id {
		return nil, fmt.Errorf("its record does not decode or names another run (%v)", err)
	}
	events, err := readWholeLines(filepath.Join(s.dir, id+legacyEventsExt))
	if err != nil {
		return nil, err
	}
	messages, err := readWholeLines(filepath.Join(s.dir, id+legacyMessagesExt))
	if err != nil {
		return nil, err
	}
	var out []byte
	if !isTerminal(v.Status) {
		out = wrapLine(out, recordLinePrefix, record)
	}
	out = append(out, events...)
	for line := range bytes.Lines(messages) {
		out = wrapLine(out, messageLinePrefix, bytes.TrimSuffix(line, []byte("\n")))
	}
	if isTerminal(v.Status) {
		out = wrapLine(out, recordLinePrefix, record)
	}
	return out, nil
}

// readWholeLines returns the file at path up to its last newline; nothing
// when it does not exist.
func readWholeLines(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return b[:bytes.LastIndexByte(b, '\n')+1], err
}
