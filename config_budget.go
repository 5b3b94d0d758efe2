package main

import (
	"cmp"
	"errors"
	"flag"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// This file holds the settings of what runs may spend and keep: run
// budgets and [model.prices], the retention of finished runs, and the
// budget of sampling outside runs' calls, from TOML, the environment and
// flags. What enforces them is in run_budget.go, run_store_retention.go
// and input_budget.go.

// Budget names, as run requests, errors, events and metrics name them.
const (
	budgetTokens   = "max_tokens"
	budgetCostUSD  = "max_cost_usd"
	budgetDuration = "max_duration"
)

// budgetNames are the budgets in the order /metrics lists them.
var budgetNames = []string{budgetTokens, budgetCostUSD, budgetDuration}

// perMillion converts a price per million tokens to one per token.
const perMillion = 1e6

// A modelPrice is what one model costs, in USD per million tokens.
// CachedInput prices the input tokens read from a prompt cache; when the
// table does not set it, they cost Input.
type modelPrice struct {
	Input, Output, CachedInput float64
}

// A tomlPrice is one [model.prices."provider/model"] table; nil fields
// were not set.
type tomlPrice struct {
	Input       *float64 `toml:"input"`
	Output      *float64 `toml:"output"`
	CachedInput *float64 `toml:"cached_input"`
}

// parsePrices validates the [model.prices] tables of file: each keyed by
// a "provider/model" name, with input and output set and every price a
// finite number of at least 0. It returns the valid prices by model name
// and an error for each problem.
func parsePrices(file string, tables map[string]tomlPrice) (map[string]modelPrice, []error) {
	prices := make(map[string]modelPrice, len(tables))
	var errs []error
	for name, t := range tables {
		label := fmt.Sprintf("%s: [model.prices.%q]", file, name)
		spec, err := parseModelName(name)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", label, err))
			continue
		}
		var p modelPrice
		ok := true
		for _, f := range []struct {
			key      string
			value    *float64
			into     *float64
			required bool
		}{{"input", t.Input, &p.Input, true}, {"output", t.Output, &p.Output, true}, {"cached_input", t.CachedInput, &p.CachedInput, false}} {
			switch {
			case f.value == nil && f.required:
				errs = append(errs, fmt.Errorf("%s: %s: missing; set the model's price in USD per million tokens, like %s = 2.5", label, f.key, f.key))
				ok = false
			case f.value == nil:
			case math.IsNaN(*f.value) || math.IsInf(*f.value, 0) || *f.value < 0:
				errs = append(errs, fmt.Errorf("%s: %s: %v is not a price; give USD per million tokens, 0 or more", label, f.key, *f.value))
				ok = false
			default:
				*f.into = *f.value
			}
		}
		if t.CachedInput == nil {
			p.CachedInput = p.Input
		}
		if ok {
			prices[spec.name()] = p
		}
	}
	return prices, errs
}

// A budgetLimits is what a run may spend; a zero field does not bound.
type budgetLimits struct {
	Tokens   int64
	CostUSD  float64
	Duration time.Duration
}

// budgetSettings are the default budgets of every source, each as its
// text and the source it came from ("config.toml: max_run_tokens", an
// environment variable, a flag); a later source overrides an earlier one.
type budgetSettings struct{ tokens, cost, duration settingValue }

// budgetSettingKeys are the TOML keys of the defaults, with each one's
// place in a budgetSettings and what the flag's help says of it.
var budgetSettingKeys = []struct {
	key   string
	field func(*budgetSettings) *settingValue
	usage string
}{
	{"max_run_tokens", func(s *budgetSettings) *settingValue { return &s.tokens }, "model tokens (input and output, sampling included) a run may use, unless its request sets max_tokens; 0 for no bound"},
	{"max_run_cost_usd", func(s *budgetSettings) *settingValue { return &s.cost }, "USD a run's model calls may cost, unless its request sets max_cost_usd (needs [model.prices]); 0 for no bound"},
	{"max_run_duration", func(s *budgetSettings) *settingValue { return &s.duration }, "how long a run may run, like 10m, unless its request sets max_duration; 0 for no bound"},
}

// A tomlBudgets is the default budgets at the top level of config.toml;
// nil fields were not set.
type tomlBudgets struct {
	MaxRunTokens   *int64   `toml:"max_run_tokens"`
	MaxRunCostUSD  *float64 `toml:"max_run_cost_usd"`
	MaxRunDuration *string  `toml:"max_run_duration"`
}

// settings returns the defaults file sets, as text, for limits to check.
func (t tomlBudgets) settings(file string) budgetSettings {
	var s budgetSettings
	set := func(into *settingValue, key, value string) {
		*into = settingValue{value: value, source: file + ": " + key}
	}
	if t.MaxRunTokens != nil {
		set(&s.tokens, "max_run_tokens", strconv.FormatInt(*t.MaxRunTokens, 10))
	}
	if t.MaxRunCostUSD != nil {
		set(&s.cost, "max_run_cost_usd", strconv.FormatFloat(*t.MaxRunCostUSD, 'g', -1, 64))
	}
	if t.MaxRunDuration != nil {
		set(&s.duration, "max_run_duration", cmp.Or(*t.MaxRunDuration, `""`))
	}
	return s
}

// merge sets in s every default o sets.
func (s *budgetSettings) merge(o budgetSettings) {
	for _, k := range budgetSettingKeys {
		k.field(s).override(*k.field(&o))
	}
}

// budgetsFromEnv returns the defaults of the HARNESS_MAX_RUN_...
// variables that are set and not empty.
func budgetsFromEnv(getenv func(string) (string, bool)) budgetSettings {
	var s budgetSettings
	for _, k := range budgetSettingKeys {
		*k.field(&s) = envSetting(getenv, "HARNESS_"+strings.ToUpper(k.key))
	}
	return s
}

// registerBudgetFlags adds a flag per default budget to fs, writing into s.
func registerBudgetFlags(fs *flag.FlagSet, s *budgetSettings) {
	for _, k := range budgetSettingKeys {
		name := strings.ReplaceAll(k.key, "_", "-")
		field := k.field(s)
		field.source = "--" + name
		fs.StringVar(&field.value, name, "", fmt.Sprintf("default cap on %s (env HARNESS_%s, %s)", k.usage, strings.ToUpper(k.key), k.key))
	}
}

// limits returns the defaults as budgets, or an error naming each bad
// value's source and what to write instead.
func (s budgetSettings) limits() (budgetLimits, error) {
	var l budgetLimits
	var errs []error
	if v := s.tokens; v.value != "" {
		n, err := strconv.ParseInt(v.value, 10, 64)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a number of tokens; give a whole number, or 0 for no bound", v.source, v.value))
		}
		l.Tokens = max(n, 0)
	}
	if v := s.cost; v.value != "" {
		f, err := strconv.ParseFloat(v.value, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not an amount of USD; give one like 0.50, or 0 for no bound", v.source, v.value))
			f = 0
		}
		l.CostUSD = f
	}
	if v := s.duration; v.value != "" {
		d, err := time.ParseDuration(v.value)
		if v.value == "0" {
			d, err = 0, nil
		}
		if err != nil || d < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a duration; give one like 10m, or 0 for no bound", v.source, v.value))
			d = 0
		}
		l.Duration = d
	}
	return l, errors.Join(errs...)
}

// applyEnvBudgets lets the HARNESS_ variables of the default budgets
// override the files' and checks the result.
func (cfg *config) applyEnvBudgets(getenv func(string) (string, bool)) error {
	cfg.Budgets.merge(budgetsFromEnv(getenv))
	_, err := cfg.Budgets.limits()
	return err
}

// formatUSD writes an amount of USD with no more digits than it needs.
func formatUSD(v float64) string { return strconv.FormatFloat(roundUSD(v), 'f', -1, 64) }

// roundUSD rounds v to a billionth of a dollar, so that sums of many small
// costs print short.
func roundUSD(v float64) float64 { return math.Round(v*1e9) / 1e9 }

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

// Defaults of the budget outside calls: small, as nobody asked for these.
const (
	defaultOutsideSamplingRequests = 10     // per server and hour
	defaultOutsideSamplingTokens   = 20_000 // per server and hour
	outsideSamplingWindow          = time.Hour
)

// outsideSamplingSettings are the budget's settings of every source: TOML
// max_outside_sampling_requests and max_outside_sampling_tokens, the
// HARNESS_ variables of their upper-case names, and the flags of their
// names with dashes; a later source overrides an earlier one. 0 refuses.
type outsideSamplingSettings struct{ requests, tokens settingValue }

// merge sets in s every value o sets.
func (s *outsideSamplingSettings) merge(o outsideSamplingSettings) {
	s.requests.override(o.requests)
	s.tokens.override(o.tokens)
}

// outsideSamplingFromEnv returns the settings of the environment.
func outsideSamplingFromEnv(getenv func(string) (string, bool)) outsideSamplingSettings {
	return outsideSamplingSettings{
		requests: envSetting(getenv, "HARNESS_MAX_OUTSIDE_SAMPLING_REQUESTS"),
		tokens:   envSetting(getenv, "HARNESS_MAX_OUTSIDE_SAMPLING_TOKENS"),
	}
}

// applyEnvOutsideSampling lets the HARNESS_ variables of the budget of
// sampling outside runs' calls override the files' settings, and checks
// the result.
func (cfg *config) applyEnvOutsideSampling(getenv func(string) (string, bool)) error {
	cfg.OutsideSampling.merge(outsideSamplingFromEnv(getenv))
	_, _, err := cfg.OutsideSampling.limits()
	return err
}

// limits returns the requests and tokens a server's sampling outside
// runs' calls may take per hour, or an error naming a bad setting.
func (s outsideSamplingSettings) limits() (requests, tokens int, err error) {
	requests, tokens = defaultOutsideSamplingRequests, defaultOutsideSamplingTokens
	var errs []error
	for _, p := range []struct {
		set settingValue
		dst *int
	}{{s.requests, &requests}, {s.tokens, &tokens}} {
		if p.set.value == "" {
			continue
		}
		n, err := strconv.Atoi(p.set.value)
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a number of at least 0; give a whole number per server and hour, 0 to refuse", p.set.source, p.set.value))
			continue
		}
		*p.dst = n
	}
	return requests, tokens, errors.Join(errs...)
}
