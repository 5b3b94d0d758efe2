package main

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
)

// This file holds how the API writes the Prometheus metrics: the counters
// of metrics.go, the global servers' statuses, the run store's health and
// the spans exported and dropped, as text.

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
	if m.outsideSampling != nil {
		m.outsideSampling.writeMetrics(&b)
	}
	if m.tracer != nil {
		m.tracer.writeMetrics(&b)
	}
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
	for _, k := range sortedPairs(m.toolCalls) {
		fmt.Fprintf(b, "harnessd_tool_calls_total{server=%s,outcome=%s} %d\n", promLabel(k[0]), promLabel(k[1]), m.toolCalls[k])
	}
	b.WriteString("# HELP harnessd_tool_definition_changes_total Listed tool definitions that differ from the pinned ones, by server and pin mode.\n# TYPE harnessd_tool_definition_changes_total counter\n")
	for _, k := range sortedPairs(m.definitionChanges) {
		fmt.Fprintf(b, "harnessd_tool_definition_changes_total{server=%s,mode=%s} %d\n", promLabel(k[0]), promLabel(k[1]), m.definitionChanges[k])
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

// sortedPairs returns the keys of counts, sorted.
func sortedPairs(counts map[[2]string]uint64) [][2]string {
	keys := make([][2]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || (keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1])
	})
	return keys
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

// writeMetrics renders the counters of the span exporter (all zero while
// tracing is off).
func (t *tracer) writeMetrics(b *strings.Builder) {
	c := t.counts()
	b.WriteString("# HELP harnessd_telemetry_spans_exported_total Spans the OTLP collector accepted.\n# TYPE harnessd_telemetry_spans_exported_total counter\n")
	fmt.Fprintf(b, "harnessd_telemetry_spans_exported_total %d\n", c.exported)
	b.WriteString("# HELP harnessd_telemetry_spans_dropped_total Spans lost: the export queue was full (a slow or dead collector), an export failed or was refused, or shutdown cut it short.\n# TYPE harnessd_telemetry_spans_dropped_total counter\n")
	fmt.Fprintf(b, "harnessd_telemetry_spans_dropped_total %d\n", c.dropped)
	b.WriteString("# HELP harnessd_telemetry_export_errors_total OTLP export requests that failed (no answer in time, or not a 2xx).\n# TYPE harnessd_telemetry_export_errors_total counter\n")
	fmt.Fprintf(b, "harnessd_telemetry_export_errors_total %d\n", c.exportErrors)
}
