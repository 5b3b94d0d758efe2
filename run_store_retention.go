package main

import (
	"errors"
	"io/fs"
	"os"
	"time"
)

// This file holds retention at work: which finished runs the store keeps,
// by count, age and bytes (the settings are in config_budget.go), and the
// removal of runs from disk.

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

// remove deletes run id from the log, with its webhook delivery, or the
// record of conversation id (a missing file is no error).
func (s *runStore) remove(id string) error {
	return s.removeFiles([]string{id}, false)
}

// removeAll deletes the runs ids, logging what it cannot; the log is
// compacted when that leaves it with little live.
func (s *runStore) removeAll(ids []string) {
	if err := s.removeFiles(ids, false); err != nil {
		s.logger.Warn("removing expired runs failed", "runs", len(ids), "err", err)
	}
}

// purge removes the runs ids as removeAll does and compacts at once every
// segment of the log that holds any of their lines: nothing of them is
// left on disk (a deleted conversation).
func (s *runStore) purge(ids []string) error {
	return s.removeFiles(ids, true)
}

// removeFiles removes the runs ids from the log (see removeRuns for
// purge), with their webhook deliveries, and the records of the
// conversations among ids.
func (s *runStore) removeFiles(ids []string, purge bool) error {
	errs := []error{s.log.removeRuns(ids, purge)}
	for _, id := range ids {
		for _, p := range []string{s.webhookPath(id), s.conversationPath(id)} {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
