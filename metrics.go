package main

import (
	"sort"
	"strings"
	"sync"
	"time"
)

// This file holds the counters /metrics reports: tool calls by outcome
// with a latency histogram, runs by status, configuration reloads,
// webhook attempts, budget stops, and the replays and event streams
// dropped. Every layer counts into them; it names none of them. The API
// writes them out (api_metrics.go).

// latencyBuckets are the tool-call histogram's upper bounds, in seconds.
var latencyBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics counts what /metrics reports. A nil *metrics counts nothing.
// Safe for concurrent use.
type metrics struct {
	mu sync.Mutex
	// guards everything below
	toolCalls   map[[2]string]uint64 // {server, outcome}
	histograms  map[string]*histogram
	runsEnded   map[string]uint64
	runsStarted uint64
	runsActive  int64
	// reloads counts configuration reloads by outcome ("applied",
	// "refused"); reloadServers the servers they changed, by change.
	reloads          map[string]uint64
	reloadServers    map[string]uint64
	lastReloadFailed bool
	// webhooks counts webhook attempts by outcome: "delivered",
	// "retried", "failed" (gave up).
	webhooks map[string]uint64
	// budgetStops counts runs stopped past a budget, by budget.
	budgetStops map[string]uint64
	// definitionChanges counts the changed tool definitions seen, by
	// {server, pin mode}.
	definitionChanges map[[2]string]uint64
	// replaysActive counts the event streams replaying an ended run
	// from disk, replaysRefused those refused at max_concurrent_replays,
	// streamsDropped the event streams whose client stopped reading.
	replaysActive  int64
	replaysRefused uint64
	streamsDropped uint64
	// outsideSampling counts sampling outside runs' calls; set once at
	// start (nil for none) and counted by itself.
	outsideSampling metricsWriter
	// tracer's exporter counts the spans exported and dropped; set once
	// at start (nil when tracing is off) and counted by itself.
	tracer metricsWriter
}

// A histogram is one server's tool-call latencies; guarded by metrics.mu.
type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

// newMetrics returns empty metrics.
func newMetrics() *metrics {
	return &metrics{toolCalls: map[[2]string]uint64{}, histograms: map[string]*histogram{}, runsEnded: map[string]uint64{},
		reloads: map[string]uint64{}, reloadServers: map[string]uint64{}, webhooks: map[string]uint64{},
		budgetStops: map[string]uint64{}, definitionChanges: map[[2]string]uint64{}}
}

// toolDefinitionChange counts a tool of server whose listed definition
// differs from its pinned one, under pin mode ("hold" or "warn").
func (m *metrics) toolDefinitionChange(server, mode string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.definitionChanges[[2]string{server, mode}]++
}

// budgetStop counts a run stopped past budget (max_tokens, max_cost_usd
// or max_duration).
func (m *metrics) budgetStop(budget string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.budgetStops[budget]++
}

// toolCall counts one tool call of server ("" for built-in tools) with
// outcome "ok" or "error" that took d.
func (m *metrics) toolCall(server, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	if server == "" {
		server = "builtin"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.toolCalls[[2]string{server, outcome}]++
	h := m.histograms[server]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.histograms[server] = h
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets, s)
	h.counts[i]++
	h.sum += s
	h.count++
}

// runStarted counts a run that was accepted.
func (m *metrics) runStarted() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runsStarted++
	m.runsActive++
}

// runEnded counts a run that reached the terminal status.
func (m *metrics) runEnded(status string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runsEnded[status]++
	m.runsActive--
}

// replay counts a replay from disk that starts (+1) or ends (-1).
func (m *metrics) replay(delta int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replaysActive += delta
}

// replayRefused counts a replay refused at max_concurrent_replays.
func (m *metrics) replayRefused() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replaysRefused++
}

// streamDropped counts an event stream dropped because its client
// stopped reading.
func (m *metrics) streamDropped() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.streamsDropped++
}

// A metricsWriter writes its own metrics in the exposition format.
type metricsWriter interface {
	writeMetrics(b *strings.Builder)
}

// reloaded counts one configuration reload: applied, with the number of
// global servers it changed by change ("added", "removed", "restarted",
// "rerooted"), or refused.
func (m *metrics) reloaded(applied bool, changed map[string]int) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastReloadFailed = !applied
	if !applied {
		m.reloads["refused"]++
		return
	}
	m.reloads["applied"]++
	for change, n := range changed {
		m.reloadServers[change] += uint64(n)
	}
}

// webhookDelivery counts one webhook attempt by outcome: "delivered",
// "retried" (failed, another follows) or "failed" (the last failed).
func (m *metrics) webhookDelivery(outcome string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.webhooks[outcome]++
}

// promLabelEscaper escapes a label value for the exposition format.
var promLabelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

// promLabel quotes a label value for the exposition format.
func promLabel(v string) string {
	return `"` + promLabelEscaper.Replace(v) + `"`
}
