package main

import (
	"slices"
	"time"
)

// This file holds the daemon's reload of its configuration on SIGHUP:
// every source checked as harnessd check does, then applied to the
// registry (registry_reload.go), the API keys, the runs' defaults,
// budgets and webhooks, and the schedules.

// reload reads and checks every configuration source as harnessd check
// does and, if all is well, applies what can change while harnessd runs
// (see apply). A configuration with any problem is refused whole and the
// running one stays; the error names each problem's file or variable and
// field. It logs one line either way, and warns of changed settings that
// need a restart. SIGHUP and POST /v1/config/reload call it; reloads and
// edits (editConfig) are serialised.
func (d *daemon) reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	begun := time.Now()
	cfg, err := d.checkLoad(d.load)
	if err != nil {
		d.metrics.reloaded(false, nil)
		d.logger.Error("configuration reload refused; the running configuration stays", "err", err)
		return err
	}
	return d.apply(cfg, begun)
}

// editConfig changes file (one of the config files) to what plan returns
// and applies the configuration that results, as reload does, without a
// restart. plan reads the file and returns its new contents, or an error
// returned as is. The whole configuration is checked with the new
// contents in file's place before anything is written: a configuration
// with any problem is refused with a *configRefusal, and neither the file
// nor the daemon changes. An error writing the file leaves both as they
// were too. Safe for concurrent use: edits and reloads are serialised, so
// no edit is lost to another.
func (d *daemon) editConfig(file string, plan func() ([]byte, error)) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	begun := time.Now()
	data, err := plan()
	if err != nil {
		return err
	}
	load := d.load
	load.Files = map[string][]byte{file: data}
	cfg, err := d.checkLoad(load)
	if err != nil {
		d.logger.Info("configuration edit refused; the file and the running configuration stay", "file", file, "err", err)
		return &configRefusal{err: err}
	}
	if err := writeConfigFile(file, data); err != nil {
		return err
	}
	return d.apply(cfg, begun)
}

// configFiles returns the config.toml files harnessd reads, lowest
// precedence first (whether they exist or not).
func (d *daemon) configFiles() []string {
	return configPaths(d.load.Home, d.load.Workspace)
}

// checkLoad reads and checks the configuration of load as harnessd check
// does, with the checks of the running daemon (its address and keys, the
// schedules' conversations).
func (d *daemon) checkLoad(load loadOptions) (*config, error) {
	cfg, _, err := checkConfig(load)
	if err == nil {
		err = d.opts.checkAuth(cfg.AuthKeys)
	}
	if err == nil && d.runs != nil {
		err = d.runs.checkScheduleConversations(cfg.Schedules)
	}
	return cfg, err
}

// apply makes cfg, checked, the running configuration: the global
// servers (see registry.reload), the API keys, [connect_mcp] allow_hosts,
// the default model, max_steps, budgets and model prices of runs started
// from then on, [webhooks] and [[schedules]] (see scheduler.replace). The
// caller holds reloadMu.
func (d *daemon) apply(cfg *config, begun time.Time) error {
	d.opts.flags.overlay(cfg)
	// Secrets first: the new servers' lines and answers are hidden from
	// their first byte.
	// d.secrets is the runs' live redactor too.
	d.secrets.add(cfg.secretValues()...)
	diff, started, err := d.reg.reload(cfg.Servers)
	if err != nil {
		d.metrics.reloaded(false, nil)
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
	d.metrics.reloaded(true, diff.counts())
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
