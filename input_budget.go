package main

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds the daemon-wide budget of sampling requests that come
// while no call of a run is in flight (a global server sampling on its
// own): per server and per hour, in requests and tokens, configured by
// max_outside_sampling_requests and max_outside_sampling_tokens, counted
// in /metrics.

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
	_, err := cfg.OutsideSampling.budget()
	return err
}

// budget returns the budget the settings describe (defaults where unset),
// or an error naming each bad value's source.
func (s outsideSamplingSettings) budget() (*outsideSamplingBudget, error) {
	b := newOutsideSamplingBudget(defaultOutsideSamplingRequests, defaultOutsideSamplingTokens)
	var errs []error
	for _, p := range []struct {
		set settingValue
		dst *int
	}{{s.requests, &b.maxRequests}, {s.tokens, &b.maxTokens}} {
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
	return b, errors.Join(errs...)
}

// outsideInputOf returns the daemon's policy for requests outside any
// run's call (outsideRunInput) with the budget of cfg's settings, or an
// error naming a bad setting.
func outsideInputOf(cfg *config, getenv func(string) (string, bool), logger *slog.Logger) (*inputPolicy, error) {
	budget, err := cfg.OutsideSampling.budget()
	if err != nil {
		return nil, err
	}
	p := outsideRunInput(cfg.Model, getenv, logger)
	p.Outside = budget
	return p, nil
}

// An outsideSamplingBudget bounds, per server and per hour, the sampling
// requests served while no run's call is in flight, and counts them.
// Safe for concurrent use; a nil budget bounds nothing.
type outsideSamplingBudget struct {
	maxRequests, maxTokens int
	now                    func() time.Time

	mu sync.Mutex
	// guards servers
	servers map[string]*outsideUse
}

// An outsideUse is one server's use of the budget: in its current hour,
// and since start (for /metrics).
type outsideUse struct {
	windowStart            time.Time
	requests, tokens       int
	served, refused, spent uint64
}

// newOutsideSamplingBudget returns a budget of maxRequests and maxTokens
// per server and hour.
func newOutsideSamplingBudget(maxRequests, maxTokens int) *outsideSamplingBudget {
	return &outsideSamplingBudget{maxRequests: maxRequests, maxTokens: maxTokens, now: time.Now, servers: map[string]*outsideUse{}}
}

// useLocked returns server's use, its hour renewed when over. Called
// under mu.
func (b *outsideSamplingBudget) useLocked(server string) *outsideUse {
	u := b.servers[server]
	if u == nil {
		u = &outsideUse{}
		b.servers[server] = u
	}
	if now := b.now(); now.Sub(u.windowStart) >= outsideSamplingWindow {
		u.windowStart, u.requests, u.tokens = now, 0, 0
	}
	return u
}

// take counts one request of server and returns the tokens it may spend,
// or an error naming the setting that refuses it.
func (b *outsideSamplingBudget) take(server string) (int, error) {
	if b == nil {
		return defaultSamplingTokens, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.useLocked(server)
	var err error
	switch {
	case b.maxRequests == 0 || b.maxTokens == 0:
		err = errors.New("sampling outside a call is off (max_outside_sampling_requests or max_outside_sampling_tokens is 0); raise them to allow it")
	case u.requests >= b.maxRequests:
		err = fmt.Errorf("server %q used its budget of sampling outside a call, max_outside_sampling_requests (%d per hour); raise it or wait", server, b.maxRequests)
	case u.tokens >= b.maxTokens:
		err = fmt.Errorf("server %q used its budget of sampling outside a call, max_outside_sampling_tokens (%d per hour); raise it or wait", server, b.maxTokens)
	}
	if err != nil {
		u.refused++
		return 0, err
	}
	u.requests++
	u.served++
	return b.maxTokens - u.tokens, nil
}

// spend counts the tokens of one served request of server.
func (b *outsideSamplingBudget) spend(server string, usage modelUsage) {
	if b == nil {
		return
	}
	n := usage.InputTokens + usage.OutputTokens
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.useLocked(server)
	u.tokens += n
	u.spent += uint64(n)
}

// writeMetrics writes the budget's counters in the exposition format.
func (b *outsideSamplingBudget) writeMetrics(w *strings.Builder) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.servers))
	for n := range b.servers {
		names = append(names, n)
	}
	sort.Strings(names)
	w.WriteString("# HELP harnessd_outside_sampling_requests_total Sampling requests outside a run's call, by server and outcome.\n# TYPE harnessd_outside_sampling_requests_total counter\n")
	for _, n := range names {
		fmt.Fprintf(w, "harnessd_outside_sampling_requests_total{server=%s,outcome=\"served\"} %d\n", promLabel(n), b.servers[n].served)
		fmt.Fprintf(w, "harnessd_outside_sampling_requests_total{server=%s,outcome=\"refused\"} %d\n", promLabel(n), b.servers[n].refused)
	}
	w.WriteString("# HELP harnessd_outside_sampling_tokens_total Model tokens spent on sampling outside a run's call, by server.\n# TYPE harnessd_outside_sampling_tokens_total counter\n")
	for _, n := range names {
		fmt.Fprintf(w, "harnessd_outside_sampling_tokens_total{server=%s} %d\n", promLabel(n), b.servers[n].spent)
	}
}
