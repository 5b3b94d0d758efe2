package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// This file holds the benchmark of what recording a tool call costs: the
// same echo call as BenchmarkStdioToolCall and BenchmarkHTTPToolCall, one
// at a time, made by run.callRecorded as a run makes each (its
// execute_tool span, the MCP request's span and the trace context in
// _meta and the headers, the metrics, the audit record), with tracing and
// the audit trail off and on.

// recordModes are what BenchmarkRecordedToolCall compares, each a
// sub-benchmark mode=NAME, so that `benchstat -col /mode` puts them side
// by side.
var recordModes = []struct {
	name string
	// collector returns the tracer, nil for tracing off.
	collector func(b *testing.B) *tracer
	audit     bool
}{
	{"off", noTracer, false},
	{"trace", fastTracer, false},
	{"audit", noTracer, true},
	{"trace+audit", fastTracer, true},
	// A collector that never answers: the first export hangs and every
	// span past the queue is dropped.
	{"hanging+audit", func(b *testing.B) *tracer {
		return newTestTracer(b, newFakeCollector(b, true, 0).URL, spanBatchSize, time.Hour)
	}, true},
}

// noTracer is tracing off.
func noTracer(*testing.B) *tracer { return nil }

// fastTracer exports to a collector that answers at once.
func fastTracer(b *testing.B) *tracer {
	return newTestTracer(b, discardingCollector(b), spanBatchSize, time.Minute)
}

// BenchmarkRecordedToolCall measures tool calls per second over stdio and
// Streamable HTTP with tracing and the audit trail off and on (see
// recordModes). Besides the wall time it reports the process's CPU time
// per call and the spans dropped. Run it in rounds of -count=1, so that
// the load of a shared machine hits every mode alike.
func BenchmarkRecordedToolCall(b *testing.B) {
	sessions := []struct {
		name string
		cfg  func(b *testing.B) serverConfig
	}{
		{"stdio", func(b *testing.B) serverConfig { return benchStdioConfig(b, "bench") }},
		{"http", func(b *testing.B) serverConfig { return benchHTTPConfig(b, "http") }},
	}
	for _, s := range sessions {
		b.Run(s.name, func(b *testing.B) {
			cfg := s.cfg(b)
			reg := newRegistry([]serverConfig{cfg}, registryOptions{Logger: benchLogger, Client: clientOptions{}})
			b.Cleanup(reg.close)
			if err := reg.waitReady(b.Context()); err != nil {
				b.Fatal(err)
			}
			m := newRunManager(runManagerOptions{Registry: reg, Logger: benchLogger, Home: b.TempDir(), Metrics: newMetrics()})
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				m.shutdown(ctx)
			})
			tc := toolCall{ID: "call_1", Name: mcpToolName(cfg.Name, "echo"), Arguments: benchEchoArgs}
			for _, mode := range recordModes {
				b.Run("mode="+mode.name, func(b *testing.B) {
					r, ctx := recordingRun(b, m, mode.collector(b), mode.audit)
					b.ReportAllocs()
					cpu := processCPU()
					for b.Loop() {
						recordedEcho(b, r, ctx, tc)
					}
					b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
					b.ReportMetric(float64(r.env.tracer.counts().dropped), "dropped")
				})
			}
			// Calls with everything off and with tracing and audit on, in
			// turn on the same session: the load of the machine hits both
			// alike. The ratio is of the median calls, off over on (the
			// calls per second on against off); the exports' work, on
			// another goroutine, falls on either.
			b.Run("mode=paired", func(b *testing.B) {
				off, offCtx := recordingRun(b, m, nil, false)
				on, onCtx := recordingRun(b, m, fastTracer(b), true)
				var offTook, onTook []time.Duration
				timed := func(r *run, ctx context.Context, took *[]time.Duration) {
					start := time.Now()
					recordedEcho(b, r, ctx, tc)
					*took = append(*took, time.Since(start))
				}
				for i := 0; b.Loop(); i++ {
					if i%2 == 0 {
						timed(off, offCtx, &offTook)
						timed(on, onCtx, &onTook)
					} else {
						timed(on, onCtx, &onTook)
						timed(off, offCtx, &offTook)
					}
				}
				slices.Sort(offTook)
				slices.Sort(onTook)
				offMedian, onMedian := offTook[len(offTook)/2], onTook[len(onTook)/2]
				b.ReportMetric(float64(offMedian.Nanoseconds()), "off-ns/call")
				b.ReportMetric(float64(onMedian.Nanoseconds()), "on-ns/call")
				b.ReportMetric(float64(offMedian)/float64(onMedian), "on/off")
			})
		})
	}
}

// recordingRun returns a run of m's that traces with tr (nil: off) and
// audits when audit is set, and the context of its span.
func recordingRun(b *testing.B, m *runManager, tr *tracer, audit bool) (*run, context.Context) {
	env := *m.env
	env.tracer = tr
	if audit {
		al, err := openAuditLog(filepath.Join(b.TempDir(), "audit"), defaultAudit(), benchLogger)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(al.close)
		env.audit = al
	}
	r := newRun(&env, runRequest{Owner: "bench"})
	r.status = runRunning
	ctx := r.startRunSpan(b.Context())
	b.Cleanup(func() { r.endRunSpan(runCompleted, "", "") })
	return r, ctx
}

// recordedEcho calls tc (echo hello) as r's calls are made, and fails b
// unless the answer is hello.
func recordedEcho(b *testing.B, r *run, ctx context.Context, tc toolCall) {
	res, _ := r.callRecorded(ctx, 1, tc)
	if res.isError || res.text != "hello" {
		b.Fatalf("callRecorded(echo hello) = %q (isError %v), want %q", res.text, res.isError, "hello")
	}
}

// discardingCollector starts a collector that reads each export and
// accepts it without decoding it (the benchmark's process pays for the
// export, not for a collector), closed at cleanup, and returns its URL.
func discardingCollector(b *testing.B) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, "{}")
	}))
	b.Cleanup(srv.Close)
	return srv.URL
}

// BenchmarkAuditCall measures the audit record of one tool call alone, as
// run.auditCall makes it after each call: what the call waits for (the
// record queued) in ns/op and its slowest, and the process's CPU per
// record, the writer's chaining, encoding and writing included (the fsync
// is the writer's, every auditSyncEvery).
func BenchmarkAuditCall(b *testing.B) {
	al, err := openAuditLog(filepath.Join(b.TempDir(), "audit"), defaultAudit(), benchLogger)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(al.close)
	r := &run{id: "run_bench", env: &runEnv{audit: al}, req: runRequest{Owner: "bench"}}
	tc := toolCall{ID: "call_1", Name: "mcp_bench_echo", Arguments: benchEchoArgs}
	res := toolResult{text: "hello", server: "bench"}
	var took []time.Duration
	b.ReportAllocs()
	cpu := processCPU()
	for b.Loop() {
		start := time.Now()
		r.auditCall(tc, res, start, time.Millisecond)
		took = append(took, time.Since(start))
	}
	al.flush(false) // the records' writing is counted
	b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)*999/1000].Nanoseconds()), "p99.9-ns")
	b.ReportMetric(float64(took[len(took)-1].Nanoseconds()), "max-ns")
}
