package main

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
)

// This file holds the daemon-wide budget of sampling requests that come
// while no call of a run is in flight (a global server sampling on its
// own): per server and per hour, in requests and tokens, configured by
// max_outside_sampling_requests and max_outside_sampling_tokens (read in
// config_budget.go), counted in /metrics.

// budget returns the budget the settings describe (defaults where unset),
// or an error naming each bad value's source.
func (s outsideSamplingSettings) budget() (*outsideSamplingBudget, error) {
	requests, tokens, err := s.limits()
	return newOutsideSamplingBudget(requests, tokens), err
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
// the tokens its requests under way hold, and since start (for /metrics).
type outsideUse struct {
	windowStart            time.Time
	requests, tokens       int
	held                   int
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

// take counts one request of server of about input tokens that asks for
// up to maxOutput output tokens, and holds its worst case. It returns the
// output tokens it may use, maxOutput cut to what the server's hour leaves
// after what was spent and what its requests under way hold, and the hold
// to settle or release; or an error naming the setting that refuses it.
// A nil budget bounds nothing.
func (b *outsideSamplingBudget) take(server string, input, maxOutput int) (int, *budgetHold, error) {
	if b == nil {
		return maxOutput, nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	u := b.useLocked(server)
	out := min(maxOutput, b.maxTokens-u.tokens-u.held-input)
	var err error
	switch {
	case b.maxRequests == 0 || b.maxTokens == 0:
		err = errors.New("sampling outside a call is off (max_outside_sampling_requests or max_outside_sampling_tokens is 0); raise them to allow it")
	case u.requests >= b.maxRequests:
		err = fmt.Errorf("server %q used its budget of sampling outside a call, max_outside_sampling_requests (%d per hour); raise it or wait", server, b.maxRequests)
	case u.tokens >= b.maxTokens:
		err = fmt.Errorf("server %q used its budget of sampling outside a call, max_outside_sampling_tokens (%d per hour); raise it or wait", server, b.maxTokens)
	case out < 1:
		err = fmt.Errorf("server %q: its budget of sampling outside a call, max_outside_sampling_tokens (%d per hour), has %d tokens spent and %d held by requests under way, no room for this one's %d input tokens and an answer; raise it or wait", server, b.maxTokens, u.tokens, u.held, input)
	}
	if err != nil {
		u.refused++
		return 0, nil, err
	}
	u.requests++
	u.served++
	hold := input + out
	u.held += hold
	return out, newBudgetHold(func(used *modelUsage) {
		b.mu.Lock()
		defer b.mu.Unlock()
		u := b.useLocked(server)
		u.held -= hold
		if used != nil {
			n := used.InputTokens + used.OutputTokens
			u.tokens += n
			u.spent += uint64(n)
		}
	}), nil
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
