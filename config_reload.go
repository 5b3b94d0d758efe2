package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file holds the reload of the configuration on SIGHUP: what a new
// configuration changes in the global servers (diffServers), how the
// registry swaps its set of servers without touching the unchanged ones or
// the runs, and the daemon's reload that checks a configuration and applies it
// with the other settings that may change while harnessd runs.
//
// What a run sees when a reload removes or restarts a global server it
// uses: a call already in flight finishes on the old connection (bounded
// by the server's timeout); a later call of a restarted server goes to its
// replacement, and a later call of a removed one fails with
// errRemovedByReload. A run keeps the set of global names it started with:
// servers a reload adds reach only runs started after it.

// Why a reload retired a server; calls that reach it get these.
var (
	errRemovedByReload   = errors.New("it was removed from the configuration by a reload (SIGHUP); runs started since do not have it")
	errRestartedByReload = errors.New("its configuration changed and a reload (SIGHUP) restarted it")
)

// A serverDiff is what a new configuration changes in the global servers,
// by name: Added, Restarted, Rerooted and Unchanged in the new
// configuration's order, Removed in the old one's. A server whose
// configuration differs only in its roots keeps running and is told of
// its new roots (Rerooted); one that differs in anything else (command,
// env, headers, timeouts, tool filters, enabled, the file it comes from)
// is restarted.
type serverDiff struct {
	Added, Removed, Restarted, Rerooted, Unchanged []string
}

// diffServers compares the global servers of two configurations.
func diffServers(old, next []serverConfig) serverDiff {
	var d serverDiff
	before := make(map[string]serverConfig, len(old))
	for _, s := range old {
		before[s.Name] = s
	}
	seen := make(map[string]bool, len(next))
	for _, s := range next {
		seen[s.Name] = true
		prev, ok := before[s.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, s.Name)
		case reflect.DeepEqual(prev, s):
			d.Unchanged = append(d.Unchanged, s.Name)
		case onlyRootsDiffer(prev, s):
			d.Rerooted = append(d.Rerooted, s.Name)
		default:
			d.Restarted = append(d.Restarted, s.Name)
		}
	}
	for _, s := range old {
		if !seen[s.Name] {
			d.Removed = append(d.Removed, s.Name)
		}
	}
	return d
}

// onlyRootsDiffer reports whether two configurations of one server differ
// in their roots alone (nil differs from []: both answer no roots, and the
// server is told again, which changes nothing for it).
func onlyRootsDiffer(a, b serverConfig) bool {
	if (a.Roots == nil) == (b.Roots == nil) && slices.Equal(a.Roots, b.Roots) {
		return false
	}
	a.Roots = b.Roots
	return reflect.DeepEqual(a, b)
}

// changes reports whether the diff changes anything.
func (d serverDiff) changes() bool {
	return len(d.Added)+len(d.Removed)+len(d.Restarted)+len(d.Rerooted) > 0
}

// reload makes next the global servers: added ones start, removed ones
// are retired, changed ones are retired and their replacement starts at
// once (so a stdio server holding a resource exclusively may fail its
// first attempt and retry), unchanged ones are kept as they are. It
// returns once the new set is in place, without waiting for servers to
// connect or stop: started is closed once every server it started has
// made its first attempt. It fails only when the registry is closed. next
// must be valid (loadConfig's checks).
func (r *registry) reload(next []serverConfig) (d serverDiff, started <-chan struct{}, err error) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.Lock()
	closed, old := r.closed, r.set
	r.mu.Unlock()
	if closed {
		return serverDiff{}, nil, errors.New("reload: harnessd is shutting down")
	}
	d = diffServers(old.configs(), next)
	firstDone := make(chan struct{})
	if !d.changes() {
		close(firstDone)
		return d, firstDone, nil
	}
	list := make([]*managedServer, 0, len(next))
	var start []*managedServer
	for _, cfg := range next {
		if slices.Contains(d.Unchanged, cfg.Name) || slices.Contains(d.Rerooted, cfg.Name) {
			list = append(list, old.byName[cfg.Name])
			continue
		}
		s := newManagedServer(cfg, false, r.logger)
		list = append(list, s)
		if cfg.Enabled {
			start = append(start, s)
		}
	}
	r.mu.Lock()
	r.set = newGlobalSet(list)
	r.mu.Unlock()
	var first sync.WaitGroup
	for _, s := range start {
		first.Add(1)
		r.startLocked(s, first.Done)
	}
	// Owned by reload; exits once every started server made its first
	// attempt (bounded by their startup timeouts, or the registry's close).
	go func() {
		first.Wait()
		close(firstDone)
	}()
	for _, name := range d.Removed {
		r.retireLocked(old.byName[name], errRemovedByReload)
	}
	for _, name := range d.Restarted {
		r.retireLocked(old.byName[name], errRestartedByReload)
	}
	for _, cfg := range next {
		if slices.Contains(d.Rerooted, cfg.Name) {
			r.rerootLocked(old.byName[cfg.Name], cfg.Roots)
		}
	}
	return d, firstDone, nil
}

// rerootLocked gives the global server s new roots in place, in the
// background: its session, if it has one, is told with
// notifications/roots/list_changed. Calls already in flight keep going.
func (r *registry) rerootLocked(s *managedServer, dirs []string) {
	r.wg.Add(1)
	// Owned by the registry; exits once the notification is sent, bounded
	// by the server's request timeout and the registry's close.
	go func() {
		defer r.wg.Done()
		ctx, cancel := context.WithTimeout(r.ctx, s.cfg.requestTimeout())
		defer cancel()
		if err := s.setRoots(ctx, dirs); err != nil {
			s.logger.Warn("could not announce the new roots", "err", err)
			return
		}
		s.logger.Info("roots changed by reload", "roots", dirs)
	}()
}

// retireLocked takes the global server s out of service: it refuses new
// calls with why at once, and is stopped in the background once its calls
// in flight have ended, their timeout has passed, or the registry closes.
// The caller holds reloadMu and has already taken s out of the set.
func (r *registry) retireLocked(s *managedServer, why error) {
	r.mu.Lock()
	sup, supervised := r.supervisors[s]
	delete(r.supervisors, s)
	r.mu.Unlock()
	drained := s.retire(why)
	r.wg.Add(1)
	// Owned by the registry; exits once s is stopped, which is bounded by
	// the server's request timeout and stop ladder.
	go func() {
		defer r.wg.Done()
		if supervised {
			sup.cancel()
			<-sup.done // supervise returns promptly once cancelled
		}
		bound := time.NewTimer(s.cfg.requestTimeout())
		defer bound.Stop()
		select {
		case <-drained:
		case <-r.ctx.Done():
		case <-bound.C:
			s.logger.Warn("calls still in flight when the retired server stops; they fail", "timeout", s.cfg.requestTimeout())
		}
		s.stop()
		s.logger.Info("server stopped by reload", "reason", why.Error())
	}()
}

// serveFlags are the flags of harnessd serve that override configuration
// settings; a reload overlays them again, so a flag keeps winning.
type serveFlags struct {
	limits          runLimits
	keepRuns        keptRunsSettings
	outsideSampling outsideSamplingSettings
	maxConns        int
	budgets         budgetSettings
}

// A textSetting is one of the settings kept as written until checked
// (settingValue): the retention of finished runs and the budget of
// sampling outside runs' calls. serve takes each as a flag, a reload does
// not apply them. Its env variable is HARNESS_ plus the key in upper case,
// its flag the key with dashes.
type textSetting struct {
	key, usage string
	def        any
	field      func(*keptRunsSettings, *outsideSamplingSettings) *settingValue
}

// textSettings lists them, in the order --help lists their flags.
var textSettings = []textSetting{
	{"max_kept_runs", "finished runs kept, newest first; 0 for no bound", defaultMaxKeptRuns,
		func(k *keptRunsSettings, _ *outsideSamplingSettings) *settingValue { return &k.runs }},
	{"max_kept_run_age", "finished runs older than this are dropped; 0 for no bound", defaultMaxKeptRunAge,
		func(k *keptRunsSettings, _ *outsideSamplingSettings) *settingValue { return &k.age }},
	{"max_kept_run_bytes", "bytes the kept runs take on disk; 0 for no bound", defaultMaxKeptRunBytes,
		func(k *keptRunsSettings, _ *outsideSamplingSettings) *settingValue { return &k.bytes }},
	{"max_outside_sampling_requests", "sampling requests a server may make per hour outside any run's call; 0 refuses them", defaultOutsideSamplingRequests,
		func(_ *keptRunsSettings, o *outsideSamplingSettings) *settingValue { return &o.requests }},
	{"max_outside_sampling_tokens", "model tokens the sampling of a server may spend per hour outside any run's call; 0 refuses it", defaultOutsideSamplingTokens,
		func(_ *keptRunsSettings, o *outsideSamplingSettings) *settingValue { return &o.tokens }},
}

// registerTextFlags adds a flag per textSetting to fs, writing into f.
func registerTextFlags(fs *flag.FlagSet, f *serveFlags) {
	for _, s := range textSettings {
		name := strings.ReplaceAll(s.key, "_", "-")
		set := s.field(&f.keepRuns, &f.outsideSampling)
		set.source = "--" + name
		fs.StringVar(&set.value, name, "", fmt.Sprintf("%s (env HARNESS_%s, %s; default %v)", s.usage, strings.ToUpper(s.key), s.key, s.def))
	}
}

// overlay applies the flags to cfg as serve does at start.
func (f serveFlags) overlay(cfg *config) {
	cfg.KeptRuns.merge(f.keepRuns)
	cfg.OutsideSampling.merge(f.outsideSampling)
	cfg.Limits.overlay(f.limits)
	cfg.Budgets.merge(f.budgets)
	if f.maxConns > 0 {
		cfg.MaxConnections = f.maxConns
	}
}

// reload reads and checks every configuration source as harnessd check
// does and, if all is well, applies what can change while harnessd runs:
// the global servers (see registry.reload), the API keys, [connect_mcp]
// allow_hosts, the default model, max_steps, budgets and model prices of
// runs started from then on, [webhooks] and [[schedules]] (see
// scheduler.replace). A configuration with any problem is refused whole and the
// running one stays; the error names each problem's file or variable and
// field. It logs one line either way, and warns of changed settings that
// need a restart.
func (d *daemon) reload() error {
	begun := time.Now()
	cfg, _, err := checkConfig(d.load)
	if err == nil {
		err = d.opts.checkAuth(cfg.AuthKeys)
	}
	if err == nil && d.runs != nil {
		err = d.runs.checkScheduleConversations(cfg.Schedules)
	}
	if err != nil {
		d.metrics.reloaded(false, serverDiff{})
		d.logger.Error("configuration reload refused; the running configuration stays", "err", err)
		return err
	}
	d.opts.flags.overlay(cfg)
	// Secrets first: the new servers' lines and answers are hidden from
	// their first byte.
	// d.secrets is the runs' live redactor too.
	d.secrets.add(cfg.secretValues()...)
	diff, started, err := d.reg.reload(cfg.Servers)
	if err != nil {
		d.metrics.reloaded(false, serverDiff{})
		d.logger.Error("configuration reload refused; the running configuration stays", "err", err)
		return err
	}
	d.api.setAuthKeys(cfg.AuthKeys)
	d.runs.setDefaults(cfg.Model.spec(), cfg.Model.MaxSteps, cfg.ConnectAllowHosts)
	if budgets, err := cfg.Budgets.limits(); err == nil { // the flags were checked at start
		d.runs.setBudgets(budgets, cfg.Model.Prices)
	}
	d.runs.setWebhooks(cfg.Webhooks)
	if d.schedules != nil {
		d.schedules.reload(cfg.Schedules)
	}
	d.metrics.reloaded(true, diff)
	attrs := append(diff.summary(), "auth_keys", len(cfg.AuthKeys), "model", cfg.Model.spec().name(),
		"config_files", cfg.Files, "took", time.Since(begun))
	d.logger.Info("configuration reloaded", attrs...)
	if pending := restartSettings(d.started, cfg); len(pending) > 0 {
		d.logger.Warn("settings changed that apply only after a restart; the running values stay", "settings", pending)
	}
	if len(diff.Added)+len(diff.Restarted) > 0 {
		// Owned by reload; exits once every started server made its first
		// attempt (bounded by their startup timeouts and the registry's
		// close).
		go func() {
			<-started
			d.logger.Info("servers started by the reload made their first attempt", "took", time.Since(begun))
		}()
	}
	return nil
}

// summary returns the diff as log attributes: counts and names.
func (d serverDiff) summary() []any {
	return []any{
		"added", len(d.Added), "removed", len(d.Removed), "restarted", len(d.Restarted), "rerooted", len(d.Rerooted), "unchanged", len(d.Unchanged),
		"added_names", d.Added, "removed_names", d.Removed, "restarted_names", d.Restarted, "rerooted_names", d.Rerooted, "unchanged_names", d.Unchanged,
	}
}

// restartSettings returns the names of the settings that differ between
// the configuration harnessd started with and next and that a reload does
// not apply: the run limits, the retention of finished runs, the budget of
// sampling outside runs' calls, max_connections, allowed_hosts and
// [telemetry] (with the OTEL_ variables, read again).
func restartSettings(started, next *config) []string {
	var names []string
	for _, s := range limitSettings {
		if s.value(&started.Limits) != s.value(&next.Limits) {
			names = append(names, s.key)
		}
	}
	for _, s := range textSettings {
		if s.field(&started.KeptRuns, &started.OutsideSampling).value != s.field(&next.KeptRuns, &next.OutsideSampling).value {
			names = append(names, s.key)
		}
	}
	if started.MaxConnections != next.MaxConnections {
		names = append(names, "max_connections")
	}
	if !slices.Equal(started.AllowedHosts, next.AllowedHosts) {
		names = append(names, "allowed_hosts")
	}
	if !started.Telemetry.equal(next.Telemetry) {
		names = append(names, "telemetry")
	}
	return names
}
