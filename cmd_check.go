package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// This file holds "harnessd check": every configuration source validated
// without starting anything, for image builds and CI.

const checkUsage = `Usage: harnessd check [flags]

Validates every configuration source as harnessd serve would read it: the
home and workspace config.toml, HARNESS_MCP_SERVERS, HARNESS_MODEL,
HARNESS_API_KEYS and the other settings, [[schedules]] (printing each one's
next three fire times), and every profile in $HARNESS_HOME/profiles.
Starts no server. Prints every problem at once and exits 2 if there is
any, 0 otherwise.

With --store, checks the runs store ($HARNESS_HOME/runs) instead, without
writing to it (harnessd may be running): prints every damaged segment of
its log and every run the damage touched, and exits 1 if there is any.

`

// check implements "harnessd check".
func (a *app) check(_ context.Context, args []string) error {
	var f commonFlags
	fs := newFlagSet("check", a.stderr, checkUsage)
	f.register(fs, a.getenv)
	store := fs.Bool("store", false, "check the runs store ($HARNESS_HOME/runs) for damage instead of the configuration")
	fs.Lookup("log-level").DefValue = "warn"
	f.logLevel = "warn"
	logger, workspace, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("check: unexpected argument %q", fs.Arg(0))
	}
	home, err := defaultHome(a.getenv)
	if err != nil {
		return usageError("%v", err)
	}
	if *store {
		return a.checkStore(filepath.Join(home, "runs"))
	}
	cfg, profiles, err := checkConfig(loadOptions{Home: home, Workspace: workspace, Getenv: a.getenv, Logger: logger})
	if err != nil {
		return usageError("check: configuration has problems:\n%v", err)
	}
	files := "no config files"
	if len(cfg.Files) > 0 {
		files = strings.Join(cfg.Files, ", ")
	}
	fmt.Fprintf(a.stdout, "configuration ok: %d %s (%s), %d %s\n", len(cfg.Servers), plural(len(cfg.Servers), "server"),
		files, len(profiles), plural(len(profiles), "profile"))
	printSchedules(a.stdout, cfg.Schedules, time.Now())
	return nil
}

// checkStore reports the damage in the runs store in dir as start-up
// would (WARN lines), without starting harnessd or writing anything: each
// damaged segment and run on a line. It returns an error (exit status 1)
// when there is any.
func (a *app) checkStore(dir string) error {
	rep, err := checkRunsStore(dir)
	if err != nil {
		return err
	}
	for _, d := range rep.damage {
		fmt.Fprintf(a.stdout, "segment %s: damaged at offset %d (%d bytes): %s\n", d.segment, d.offset, d.bytes, d.reason)
	}
	for _, d := range rep.damaged {
		fmt.Fprintln(a.stdout, d)
	}
	if len(rep.damage) == 0 && len(rep.damaged) == 0 {
		fmt.Fprintf(a.stdout, "runs store ok: %s, %d %s, %d %s\n", dir, rep.segments, plural(rep.segments, "segment"), rep.runs, plural(rep.runs, "run"))
		return nil
	}
	return fmt.Errorf("runs store %s: %d damaged %s, %d damaged %s; the runs' lines that remain are kept, marked damaged, when harnessd starts",
		dir, len(rep.damage), plural(len(rep.damage), "segment"), len(rep.damaged), plural(len(rep.damaged), "run"))
}

// checkConfig loads the configuration as harnessd serve reads it and
// checks it whole: the config files and environment, the retention
// settings and every profile against the global servers. It returns the
// config and the profiles' names, or an error joining every problem, each
// naming its file or variable and field. opts.Home must be set. Both
// harnessd check and a reload (SIGHUP) use it.
func checkConfig(opts loadOptions) (*config, []string, error) {
	var errs []error
	cfg, err := loadConfig(opts)
	if err != nil {
		errs = append(errs, err)
	}
	if cfg != nil {
		if _, err := cfg.KeptRuns.retention(); err != nil {
			errs = append(errs, err)
		}
		errs = append(errs, checkScheduleModels(cfg))
	}
	getenv := opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	profiles, err := checkProfiles(opts.Home, cfg, getenv)
	if err != nil {
		errs = append(errs, err)
	}
	return cfg, profiles, errors.Join(errs...)
}

// checkProfiles loads every profile in home/profiles and checks it against
// the global servers of cfg (nil when the config did not load). It returns
// the names of the profiles and an error joining every problem.
func checkProfiles(home string, cfg *config, getenv func(string) (string, bool)) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(home, "profiles"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read profiles: %v; fix its permissions or remove it", err)
	}
	var names []string
	var errs []error
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".toml")
		if !ok || e.IsDir() {
			continue
		}
		names = append(names, name)
		servers, _, err := loadProfile(home, name, getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if cfg != nil {
			if err := checkProfileServers(cfg.Servers, servers); err != nil {
				errs = append(errs, err)
			}
		}
	}
	slices.Sort(names)
	return names, errors.Join(errs...)
}
