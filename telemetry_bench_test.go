package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// This file holds the benchmark of tracing's cost on tool calls: the same
// echo call as BenchmarkStdioToolCall and BenchmarkHTTPToolCall, one at a
// time, with tracing off, exporting to a collector that answers at once,
// and exporting to one that never answers (every span past the queue is
// dropped). Each call is traced as a run's is: an execute_tool span, the
// MCP request's span, and the trace context in _meta (and the headers
// over HTTP).

func BenchmarkTracedToolCall(b *testing.B) {
	sessions := []struct {
		name string
		cfg  func(b *testing.B) serverConfig
	}{
		{"stdio", func(b *testing.B) serverConfig { return benchStdioConfig(b, "bench") }},
		{"http", func(b *testing.B) serverConfig { return benchHTTPConfig(b, "http") }},
	}
	collectors := []struct {
		name      string
		collector func(b *testing.B) *tracer
	}{
		{"off", func(*testing.B) *tracer { return nil }},
		{"fast", func(b *testing.B) *tracer {
			return newTestTracer(b, discardingCollector(b), spanBatchSize, time.Minute)
		}},
		{"hanging", func(b *testing.B) *tracer {
			return newTestTracer(b, newFakeCollector(b, true, 0).URL, spanBatchSize, time.Hour)
		}},
	}
	for _, s := range sessions {
		b.Run(s.name, func(b *testing.B) {
			c := benchConnect(b, s.cfg(b))
			for _, col := range collectors {
				b.Run(col.name, func(b *testing.B) {
					tr := col.collector(b)
					b.ReportAllocs()
					ctx, run := tr.start(b.Context(), "invoke_agent harnessd", spanInternal)
					defer run.end()
					cpu := processCPU()
					for b.Loop() {
						callCtx, sp := startSpan(ctx, nil, "execute_tool mcp_bench_echo", spanInternal,
							stringAttr("gen_ai.operation.name", "execute_tool"), stringAttr("gen_ai.tool.name", "mcp_bench_echo"))
						err := benchEcho(callCtx, c)
						sp.end()
						if err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
					counts := tr.counts()
					b.ReportMetric(float64(counts.dropped), "dropped")
				})
			}
		})
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
