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
any. A server that only this machine keeps from starting (a ${VAR} that
is not set, a command not found on PATH, a cwd that does not exist) is a
warning: harnessd serve starts without it, marking it failed. Warnings
exit 0, or 1 with --strict.

With --store, checks the runs store ($HARNESS_HOME/runs) instead, without
writing to it (harnessd may be running): prints every damaged segment of
its log and every run the damage touched, and exits 1 if there is any.

`

// check implements "harnessd check".
func (a *app) check(_ context.Context, args []string) error {
	var f commonFlags
	var strict bool
	fs := newFlagSet("check", a.stderr, checkUsage)
	f.register(fs, a.getenv)
	store := fs.Bool("store", false, "check the runs store ($HARNESS_HOME/runs) for damage instead of the configuration")
	fs.Lookup("log-level").DefValue = "warn"
	f.logLevel = "warn"
	fs.BoolVar(&strict, "strict", false, "exit 1 when there are warnings (a server that would fail to start here)")
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
	var warnings []string
	if cfg != nil {
		warnings = serverWarnings(cfg.Servers, a.getenv)
	}
	for _, p := range profiles {
		warnings = append(warnings, serverWarnings(p.servers, a.getenv)...)
	}
	for _, w := range warnings {
		fmt.Fprintf(a.stderr, "warning: %s\n", w)
	}
	if err != nil {
		return usageError("check: configuration has problems:\n%v", err)
	}
	files := "no config files"
	if len(cfg.Files) > 0 {
		files = strings.Join(cfg.Files, ", ")
	}
	fmt.Fprintf(a.stdout, "configuration ok: %d %s (%s), %d %s", len(cfg.Servers), plural(len(cfg.Servers), "server"),
		files, len(profiles), plural(len(profiles), "profile"))
	if len(warnings) > 0 {
		fmt.Fprintf(a.stdout, "; %d %s (servers that will fail to start here)", len(warnings), plural(len(warnings), "warning"))
	}
	fmt.Fprintln(a.stdout)
	printSchedules(a.stdout, cfg.Schedules, time.Now())
	if strict && len(warnings) > 0 {
		return &exitError{code: 1, err: fmt.Errorf("check: %d %s and --strict", len(warnings), plural(len(warnings), "warning"))}
	}
	return nil
}

// A checkedProfile is one profile that check loaded.
type checkedProfile struct {
	name    string
	servers []serverConfig // nil when the profile has problems
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
// config and the profiles, sorted by name, or an error joining every problem, each
// naming its file or variable and field. opts.Home must be set. Both
// harnessd check and a reload (SIGHUP) use it.
func checkConfig(opts loadOptions) (*config, []checkedProfile, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, nil, err
	}
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
	profiles, err := checkProfiles(opts.Home, cfg, opts.Getenv)
	if err != nil {
		errs = append(errs, err)
	}
	return cfg, profiles, errors.Join(errs...)
}

// checkProfiles loads every profile in home/profiles and checks it against
// the global servers of cfg (nil when the config did not load). It returns
// the profiles, sorted by name, and an error joining every problem.
func checkProfiles(home string, cfg *config, getenv func(string) (string, bool)) ([]checkedProfile, error) {
	entries, err := os.ReadDir(filepath.Join(home, "profiles"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read profiles: %v; fix its permissions or remove it", err)
	}
	var profiles []checkedProfile
	var errs []error
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), ".toml")
		if !ok || e.IsDir() {
			continue
		}
		servers, _, err := loadProfile(home, name, getenv)
		profiles = append(profiles, checkedProfile{name: name, servers: servers})
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
	slices.SortFunc(profiles, func(a, b checkedProfile) int { return strings.Compare(a.name, b.name) })
	return profiles, errors.Join(errs...)
}
