package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds the Prometheus metrics: tool calls by outcome with a
// latency histogram, runs by status, servers up, configuration reloads,
// the replays and event streams dropped, and the spans exported and
// dropped, written as text.

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
	// replaysActive counts the event streams replaying an ended run
	// from disk, replaysRefused those refused at max_concurrent_replays,
	// streamsDropped the event streams whose client stopped reading.
	replaysActive  int64
	replaysRefused uint64
	streamsDropped uint64
	// outsideSampling counts sampling outside runs' calls; set once at
	// start (nil for none) and counted by itself.
	outsideSampling *outsideSamplingBudget
	// tracer's exporter counts the spans exported and dropped; set once
	// at start (nil when tracing is off) and counted by itself.
	tracer *tracer
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
		budgetStops: map[string]uint64{}}
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

// reloaded counts one configuration reload: applied with the changes d,
// or refused.
func (m *metrics) reloaded(applied bool, d serverDiff) {
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
	m.reloadServers["added"] += uint64(len(d.Added))
	m.reloadServers["removed"] += uint64(len(d.Removed))
	m.reloadServers["restarted"] += uint64(len(d.Restarted))
	m.reloadServers["rerooted"] += uint64(len(d.Rerooted))
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

// write renders the Prometheus text exposition format, with the global
// servers' statuses and the run store's health.
func (m *metrics) write(w io.Writer, servers []serverStatus, store storeHealth) {
	var b strings.Builder
	writeServerMetrics(&b, servers)
	writeStoreMetrics(&b, store)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.writeToolCallsLocked(&b)
	m.writeRunsLocked(&b)
	m.writeReloadsLocked(&b)
	m.writeStreamsLocked(&b)
	b.WriteString("# HELP harnessd_webhook_deliveries_total Webhook attempts, by outcome: delivered, retried (another attempt follows), failed (the last).\n# TYPE harnessd_webhook_deliveries_total counter\n")
	for _, outcome := range []string{webhookDelivered, "retried", webhookFailed} {
		fmt.Fprintf(&b, "harnessd_webhook_deliveries_total{outcome=%q} %d\n", outcome, m.webhooks[outcome])
	}
	m.outsideSampling.writeMetrics(&b)
	writeTelemetryMetrics(&b, m.tracer.counts())
	io.WriteString(w, b.String())
}

// promFlag is a boolean as a gauge's value.
func promFlag(ok bool) int {
	if ok {
		return 1
	}
	return 0
}

// writeStoreMetrics renders the run store's health.
func writeStoreMetrics(b *strings.Builder, h storeHealth) {
	b.WriteString("# HELP harnessd_store_errors_total Failed writes, space allocations and segment creations of the runs store.\n# TYPE harnessd_store_errors_total counter\n")
	fmt.Fprintf(b, "harnessd_store_errors_total %d\n", h.errors)
	b.WriteString("# HELP harnessd_store_writable Whether the runs store can write (0 while new runs are refused).\n# TYPE harnessd_store_writable gauge\n")
	fmt.Fprintf(b, "harnessd_store_writable %d\n", promFlag(h.err == nil))
	b.WriteString("# HELP harnessd_store_damaged_runs Runs start-up found damaged in the runs store.\n# TYPE harnessd_store_damaged_runs gauge\n")
	fmt.Fprintf(b, "harnessd_store_damaged_runs %d\n", h.damaged)
	b.WriteString("# HELP harnessd_store_fsyncs_total Fsyncs of the runs log's segments and directory.\n# TYPE harnessd_store_fsyncs_total counter\n")
	fmt.Fprintf(b, "harnessd_store_fsyncs_total %d\n", h.syncs)
	b.WriteString("# HELP harnessd_store_written_bytes_total Bytes written to the runs log.\n# TYPE harnessd_store_written_bytes_total counter\n")
	fmt.Fprintf(b, "harnessd_store_written_bytes_total %d\n", h.written)
	b.WriteString("# HELP harnessd_store_wait_seconds_total Time runs waited for the disk: the commit of their first record and the write of their end.\n# TYPE harnessd_store_wait_seconds_total counter\n")
	fmt.Fprintf(b, "harnessd_store_wait_seconds_total %g\n", float64(h.wait)/1e9)
}

// writeServerMetrics renders the gauges and counters of the global servers.
func writeServerMetrics(b *strings.Builder, servers []serverStatus) {
	perServer := func(name, kind, help string, value func(serverStatus) int) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, kind)
		for _, s := range servers {
			fmt.Fprintf(b, "%s{server=%s} %d\n", name, promLabel(s.Name), value(s))
		}
	}
	perServer("harnessd_mcp_server_up", "gauge", "Whether a global MCP server is connected (1) or not (0).",
		func(s serverStatus) int { return promFlag(s.Status == statusReady) })
	perServer("harnessd_mcp_server_needs_auth", "gauge", "Whether a global MCP server waits for an OAuth login (1) or not (0).",
		func(s serverStatus) int { return promFlag(s.Status == statusNeedsAuth) })
	perServer("harnessd_mcp_server_tools", "gauge", "Tools a global MCP server offers.",
		func(s serverStatus) int { return len(s.Tools) })
	perServer("harnessd_mcp_server_restarts_total", "counter", "Reconnections of a global MCP server.",
		func(s serverStatus) int { return s.Restarts })
}

// writeToolCallsLocked renders the tool calls by server and outcome and
// their latency histograms. m.mu is held.
func (m *metrics) writeToolCallsLocked(b *strings.Builder) {
	b.WriteString("# HELP harnessd_tool_calls_total Tool calls by server and outcome.\n# TYPE harnessd_tool_calls_total counter\n")
	keys := make([][2]string, 0, len(m.toolCalls))
	for k := range m.toolCalls {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || (keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1])
	})
	for _, k := range keys {
		fmt.Fprintf(b, "harnessd_tool_calls_total{server=%s,outcome=%s} %d\n", promLabel(k[0]), promLabel(k[1]), m.toolCalls[k])
	}
	b.WriteString("# HELP harnessd_tool_call_duration_seconds Tool call latency by server.\n# TYPE harnessd_tool_call_duration_seconds histogram\n")
	names := make([]string, 0, len(m.histograms))
	for n := range m.histograms {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := m.histograms[n]
		var cum uint64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(b, "harnessd_tool_call_duration_seconds_bucket{server=%s,le=%q} %d\n", promLabel(n), strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		cum += h.counts[len(latencyBuckets)]
		fmt.Fprintf(b, "harnessd_tool_call_duration_seconds_bucket{server=%s,le=\"+Inf\"} %d\n", promLabel(n), cum)
		fmt.Fprintf(b, "harnessd_tool_call_duration_seconds_sum{server=%s} %s\n", promLabel(n), strconv.FormatFloat(h.sum, 'g', -1, 64))
		fmt.Fprintf(b, "harnessd_tool_call_duration_seconds_count{server=%s} %d\n", promLabel(n), h.count)
	}
}

// writeRunsLocked renders the runs started, ended, active and stopped
// past a budget. m.mu is held.
func (m *metrics) writeRunsLocked(b *strings.Builder) {
	b.WriteString("# HELP harnessd_runs_started_total Runs started.\n# TYPE harnessd_runs_started_total counter\n")
	fmt.Fprintf(b, "harnessd_runs_started_total %d\n", m.runsStarted)
	b.WriteString("# HELP harnessd_runs_total Runs ended, by status.\n# TYPE harnessd_runs_total counter\n")
	for _, st := range []string{runCompleted, runFailed, runCancelled} {
		fmt.Fprintf(b, "harnessd_runs_total{status=%q} %d\n", st, m.runsEnded[st])
	}
	b.WriteString("# HELP harnessd_runs_active Runs queued or running.\n# TYPE harnessd_runs_active gauge\n")
	fmt.Fprintf(b, "harnessd_runs_active %d\n", max(m.runsActive, 0))
	b.WriteString("# HELP harnessd_run_budget_stops_total Runs stopped past a budget, by budget.\n# TYPE harnessd_run_budget_stops_total counter\n")
	for _, budget := range budgetNames {
		fmt.Fprintf(b, "harnessd_run_budget_stops_total{budget=%q} %d\n", budget, m.budgetStops[budget])
	}
}

// writeReloadsLocked renders the configuration reloads. m.mu is held.
func (m *metrics) writeReloadsLocked(b *strings.Builder) {
	b.WriteString("# HELP harnessd_config_reloads_total Configuration reloads (SIGHUP), by outcome.\n# TYPE harnessd_config_reloads_total counter\n")
	for _, outcome := range []string{"applied", "refused"} {
		fmt.Fprintf(b, "harnessd_config_reloads_total{outcome=%q} %d\n", outcome, m.reloads[outcome])
	}
	b.WriteString("# HELP harnessd_config_last_reload_successful Whether the last reload was applied (1) or refused (0); 1 before any.\n# TYPE harnessd_config_last_reload_successful gauge\n")
	fmt.Fprintf(b, "harnessd_config_last_reload_successful %d\n", promFlag(!m.lastReloadFailed))
	b.WriteString("# HELP harnessd_config_reload_servers_total Global MCP servers reloads added, removed, restarted or gave new roots.\n# TYPE harnessd_config_reload_servers_total counter\n")
	for _, change := range []string{"added", "removed", "restarted", "rerooted"} {
		fmt.Fprintf(b, "harnessd_config_reload_servers_total{change=%q} %d\n", change, m.reloadServers[change])
	}
}

// writeStreamsLocked renders the replays of ended runs and the event
// streams dropped. m.mu is held.
func (m *metrics) writeStreamsLocked(b *strings.Builder) {
	b.WriteString("# HELP harnessd_replays_active Event streams replaying an ended run's history from disk.\n# TYPE harnessd_replays_active gauge\n")
	fmt.Fprintf(b, "harnessd_replays_active %d\n", max(m.replaysActive, 0))
	b.WriteString("# HELP harnessd_replays_refused_total Replays refused at max_concurrent_replays (429).\n# TYPE harnessd_replays_refused_total counter\n")
	fmt.Fprintf(b, "harnessd_replays_refused_total %d\n", m.replaysRefused)
	b.WriteString("# HELP harnessd_event_streams_dropped_total Event streams dropped because their client took nothing for max_stream_write_seconds.\n# TYPE harnessd_event_streams_dropped_total counter\n")
	fmt.Fprintf(b, "harnessd_event_streams_dropped_total %d\n", m.streamsDropped)
}

// writeTelemetryMetrics renders the counters of the span exporter (all
// zero while tracing is off).
func writeTelemetryMetrics(b *strings.Builder, c telemetryCounts) {
	b.WriteString("# HELP harnessd_telemetry_spans_exported_total Spans the OTLP collector accepted.\n# TYPE harnessd_telemetry_spans_exported_total counter\n")
	fmt.Fprintf(b, "harnessd_telemetry_spans_exported_total %d\n", c.exported)
	b.WriteString("# HELP harnessd_telemetry_spans_dropped_total Spans lost: the export queue was full (a slow or dead collector), an export failed or was refused, or shutdown cut it short.\n# TYPE harnessd_telemetry_spans_dropped_total counter\n")
	fmt.Fprintf(b, "harnessd_telemetry_spans_dropped_total %d\n", c.dropped)
	b.WriteString("# HELP harnessd_telemetry_export_errors_total OTLP export requests that failed (no answer in time, or not a 2xx).\n# TYPE harnessd_telemetry_export_errors_total counter\n")
	fmt.Fprintf(b, "harnessd_telemetry_export_errors_total %d\n", c.exportErrors)
}

// promLabelEscaper escapes a label value for the exposition format.
var promLabelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)

// promLabel quotes a label value for the exposition format.
func promLabel(v string) string {
	return `"` + promLabelEscaper.Replace(v) + `"`
}
