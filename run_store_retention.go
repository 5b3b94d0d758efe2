package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"time"
)

// This file holds retention: which finished runs the store keeps, by
// count, age and bytes, the settings that bound them, and the removal of
// runs from disk.

// Retention defaults: what a small appliance keeps.
const (
	defaultMaxKeptRuns     = 1000
	defaultMaxKeptRunAge   = 30 * 24 * time.Hour
	defaultMaxKeptRunBytes = 1 << 30
)

// A retention bounds the finished runs kept, in memory and on disk. The
// oldest finished runs go first; active runs are never dropped. Zero
// fields mean no bound of that kind. Expired runs are dropped at start-up
// and after runs end (pruneSoon).
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

// keptRunsSettings are the retention settings of every source: TOML
// max_kept_runs, max_kept_run_age and max_kept_run_bytes, the
// HARNESS_ variables of their upper-case names, and the flags of their
// names with dashes. A later source overrides an earlier one.
type keptRunsSettings struct{ runs, age, bytes settingValue }

// merge sets in s every value o sets.
func (s *keptRunsSettings) merge(o keptRunsSettings) {
	s.runs.override(o.runs)
	s.age.override(o.age)
	s.bytes.override(o.bytes)
}

// keptRunsFromEnv returns the retention settings of the environment.
func keptRunsFromEnv(getenv func(string) (string, bool)) keptRunsSettings {
	return keptRunsSettings{
		runs:  envSetting(getenv, "HARNESS_MAX_KEPT_RUNS"),
		age:   envSetting(getenv, "HARNESS_MAX_KEPT_RUN_AGE"),
		bytes: envSetting(getenv, "HARNESS_MAX_KEPT_RUN_BYTES"),
	}
}

// retention returns defaultRetention with the settings applied, or an
// error naming each bad value's source and what to write instead.
func (s keptRunsSettings) retention() (retention, error) {
	k := defaultRetention()
	var errs []error
	count := func(set settingValue, what string) int64 {
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
