package main

import (
	"flag"
	"fmt"
	"strings"
)

// This file holds the flags of harnessd serve that override settings of
// the configuration, and how they are laid over it at start and at each
// reload.

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
