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

// This file converts the runs an older harnessd kept as three files, each
// fsynced on its own: <id>.json (the record, replaced whole), <id>.events
// (the event log) and <id>.messages (the transcript). Each becomes one run
// file (run_store.go), written through a temporary file; once every one
// is written and the directory fsynced, the old files are removed. A crash
// midway leaves each run converted or not, and the next start goes on: a
// run whose file exists already only loses its old files.

// The files of a run kept by an older harnessd.
const (
	legacyRecordExt   = ".json"
	legacyEventsExt   = ".events"
	legacyMessagesExt = ".messages"
)

// convertLegacy converts every run kept in the three files of an older
// harnessd, and removes event logs and transcripts left without a record
// (of runs never accepted). A record that cannot be read is logged and
// left as it is.
func (s *runStore) convertLegacy() error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("read the runs directory: %w", err)
	}
	var done []string
	for _, e := range entries {
		name := e.Name()
		if id, ok := cutSuffixes(name, legacyEventsExt, legacyMessagesExt); ok {
			if _, err := os.Stat(filepath.Join(s.dir, id+legacyRecordExt)); errors.Is(err, fs.ErrNotExist) {
				os.Remove(filepath.Join(s.dir, name))
			}
			continue
		}
		id, ok := strings.CutSuffix(name, legacyRecordExt)
		if !ok || e.IsDir() {
			continue
		}
		if _, err := os.Stat(s.runPath(id)); err == nil {
			done = append(done, id)
			continue
		}
		b, err := s.legacyRunFile(id)
		if err == nil {
			err = writeTemp(s.runPath(id), b)
		}
		if err != nil {
			s.logger.Warn("a run kept by an older harnessd could not be converted; it is left as it is", "run", id, "err", err)
			continue
		}
		done = append(done, id)
	}
	if len(done) == 0 {
		return nil
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("convert the runs kept by an older harnessd: %w", err)
	}
	for _, id := range done {
		for _, ext := range []string{legacyEventsExt, legacyMessagesExt, legacyRecordExt} {
			os.Remove(filepath.Join(s.dir, id+ext))
		}
	}
	s.logger.Info("converted the runs kept by an older harnessd", "runs", len(done), "dir", s.dir)
	return nil
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

// legacyRunFile returns the run file of run id kept in three files: its
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
