package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests the spans, the trace context, the samplers and the
// OTLP exporter against a collector that answers, one that hangs and one
// that refuses.

func TestTraceparent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		ok       bool
		sampled  bool
		out      string // the value formatted back; in when ""
	}{
		{"sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, true, ""},
		{"not sampled", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true, false, ""},
		{"undefined flags at 00 dropped", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09", true, true,
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"later version with more fields", "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future-holds", true, true,
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"later version, exact length", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true, true,
			"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"version ff", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false, ""},
		{"00 too long", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra", false, false, ""},
		{"later version, no dash", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x", false, false, ""},
		{"uppercase", "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false, false, ""},
		{"zero trace id", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false, false, ""},
		{"zero span id", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false, false, ""},
		{"short", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1", false, false, ""},
		{"bad separator", "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", false, false, ""},
		{"not hex", "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01", false, false, ""},
		{"empty", "", false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, err := parseTraceparent(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("parseTraceparent(%q) error = %v, want ok %v", tt.in, err, tt.ok)
			}
			if !tt.ok {
				if !strings.Contains(err.Error(), "traceparent") {
					t.Errorf("error %q does not name the header", err)
				}
				return
			}
			if sc.sampled() != tt.sampled {
				t.Errorf("parseTraceparent(%q).sampled() = %v, want %v", tt.in, sc.sampled(), tt.sampled)
			}
			want := tt.out
			if want == "" {
				want = tt.in
			}
			if got := sc.traceparent(); got != want {
				t.Errorf("parseTraceparent(%q).traceparent() = %q, want %q", tt.in, got, want)
			}
		})
	}
}

func TestSpanContextFromHeader(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name   string
		header http.Header
		ok     bool
		state  string
	}{
		{"with tracestate lines joined", http.Header{"Traceparent": {tp}, "Tracestate": {"a=1", "b=2"}}, true, "a=1,b=2"},
		{"two traceparents", http.Header{"Traceparent": {tp, tp}}, false, ""},
		{"tracestate too long dropped", http.Header{"Traceparent": {tp}, "Tracestate": {"a=" + strings.Repeat("x", 600)}}, true, ""},
		{"none", http.Header{}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc, ok := spanContextFromHeader(tt.header)
			if ok != tt.ok || sc.State != tt.state {
				t.Errorf("spanContextFromHeader(%v) = %q, %v, want %q, %v", tt.header, sc.State, ok, tt.state, tt.ok)
			}
		})
	}
}

func TestSampler(t *testing.T) {
	t.Parallel()
	sampledParent := spanContext{TraceID: otelTraceID{1}, SpanID: otelSpanID{1}, Flags: 1}
	unsampledParent := spanContext{TraceID: otelTraceID{1}, SpanID: otelSpanID{1}}
	low := otelTraceID{15: 0x10}                                               // below every ratio above 0
	high := otelTraceID{8: 0xff, 9: 0xff, 10: 0xff, 11: 0xff, 12: 0xff, 15: 1} // above every ratio below 1
	tests := []struct {
		name, sampler, arg string
		parent             spanContext
		id                 otelTraceID
		want               bool
	}{
		{"default follows a sampled parent", "", "", sampledParent, high, true},
		{"default follows an unsampled parent", "", "", unsampledParent, low, false},
		{"default samples roots", "", "", spanContext{}, high, true},
		{"always_on ignores the parent", "always_on", "", unsampledParent, high, true},
		{"always_off ignores the parent", "always_off", "", sampledParent, low, false},
		{"traceidratio low id", "traceidratio", "0.5", spanContext{}, low, true},
		{"traceidratio high id", "traceidratio", "0.5", spanContext{}, high, false},
		{"traceidratio ignores the parent", "traceidratio", "0.5", sampledParent, high, false},
		{"traceidratio 0", "traceidratio", "0", spanContext{}, low, false},
		{"traceidratio default 1", "traceidratio", "", spanContext{}, high, true},
		{"parentbased_traceidratio root", "parentbased_traceidratio", "0.5", spanContext{}, high, false},
		{"parentbased_traceidratio parent", "parentbased_traceidratio", "0.5", sampledParent, high, true},
		{"parentbased_always_off root", "parentbased_always_off", "", spanContext{}, low, false},
		{"parentbased_always_off parent", "parentbased_always_off", "", sampledParent, low, true},
		{"case and spaces", " ALWAYS_OFF ", "", spanContext{}, low, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := parseSampler("test", tt.sampler, tt.arg)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.sample(tt.parent, tt.id); got != tt.want {
				t.Errorf("sampler %q(%q).sample = %v, want %v", tt.sampler, tt.arg, got, tt.want)
			}
		})
	}
	for _, bad := range []struct{ name, arg, want string }{
		{"jaeger_remote", "", `sampler "jaeger_remote" is not supported`},
		{"traceidratio", "half", `argument "half" is not a ratio`},
		{"traceidratio", "1.5", `argument "1.5" is not a ratio`},
	} {
		if _, err := parseSampler("OTEL_TRACES_SAMPLER", bad.name, bad.arg); err == nil || !strings.Contains(err.Error(), bad.want) || !strings.HasPrefix(err.Error(), "OTEL_TRACES_SAMPLER: ") {
			t.Errorf("parseSampler(%q, %q) = %v, want an error naming the variable with %q", bad.name, bad.arg, err, bad.want)
		}
	}
}

// A fakeCollector is an OTLP/HTTP collector: it decodes each export into
// the exporter's own types (the interop module proves the encoding with
// the collector's receiver). hang, when set, holds every export until
// the test ends; status, when set, answers it.
type fakeCollector struct {
	*httptest.Server
	hang   bool
	status int
	// posted receives a value per export received, before it is answered.
	posted chan struct{}

	mu sync.Mutex
	// guards spans and headers
	spans   []otlpSpan
	headers []http.Header
}

// newFakeCollector starts a collector, closed at cleanup.
func newFakeCollector(t testing.TB, hang bool, status int) *fakeCollector {
	c := &fakeCollector{hang: hang, status: status, posted: make(chan struct{}, 1024)}
	release := make(chan struct{})
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req otlpRequest
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.headers = append(c.headers, r.Header.Clone())
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		c.posted <- struct{}{}
		if c.hang {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		if c.status != 0 {
			w.WriteHeader(c.status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	t.Cleanup(func() {
		close(release)
		c.Close()
	})
	return c
}

// received returns the spans received so far.
func (c *fakeCollector) received() []otlpSpan {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// newTestTracer returns a tracer exporting to the collector at url,
// always sampling, with batches of batch spans; shut down at cleanup.
func newTestTracer(t testing.TB, url string, batch int, timeout time.Duration) *tracer {
	sampler, _ := parseSampler("test", samplerAlwaysOn, "")
	tr := newTracer(telemetryOptions{Endpoint: url + "/v1/traces", ServiceName: "harnessd-test", Sampler: sampler,
		Timeout: timeout, Headers: map[string]string{"Authorization": "Bearer collector-secret"}, batchSize: batch}, nil)
	t.Cleanup(func() {
		// A hanging collector is not waited for: it holds no span a test
		// checks after it ended.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		tr.shutdown(ctx)
	})
	return tr
}

func TestExporterQueueFullDrops(t *testing.T) {
	t.Parallel()
	c := newFakeCollector(t, true, 0)
	tr := newTestTracer(t, c.URL, 1, time.Minute)
	end := func(n int) {
		for range n {
			_, sp := tr.start(t.Context(), "op", spanInternal)
			sp.end()
		}
	}
	// The first span goes out alone and hangs: the exporter holds it, and
	// the queue is empty again.
	end(1)
	<-c.posted
	start := time.Now()
	end(spanQueueSize + 10)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("ending %d spans took %s with a hanging collector", spanQueueSize+10, took)
	}
	if got := tr.counts(); got.dropped != 10 || got.exported != 0 {
		t.Errorf("counts = %+v, want 10 dropped, 0 exported", got)
	}
	var b strings.Builder
	m := newMetrics()
	m.tracer = tr
	m.write(&b, nil, storeHealth{})
	if !strings.Contains(b.String(), "harnessd_telemetry_spans_dropped_total 10\n") {
		t.Errorf("/metrics does not count 10 dropped spans:\n%s", b.String())
	}
}

func TestExporterShutdownFlushes(t *testing.T) {
	t.Parallel()
	c := newFakeCollector(t, false, 0)
	tr := newTestTracer(t, c.URL, spanBatchSize, time.Minute)
	const n = spanBatchSize + 5 // one full batch, and the rest at shutdown
	for range n {
		_, sp := tr.start(t.Context(), "op", spanInternal)
		sp.end()
	}
	if err := tr.shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := len(c.received()); got != n {
		t.Errorf("collector received %d spans, want %d", got, n)
	}
	if got := tr.counts(); got.exported != n || got.dropped != 0 {
		t.Errorf("counts = %+v, want %d exported", got, n)
	}
	if got := c.headers[0].Get("Authorization"); got != "Bearer collector-secret" {
		t.Errorf("export's Authorization = %q, want the configured header", got)
	}
	_, sp := tr.start(t.Context(), "late", spanInternal)
	sp.end()
	if got := tr.counts(); got.dropped != 1 {
		t.Errorf("a span ended after shutdown: dropped = %d, want 1", got.dropped)
	}
}

func TestExporterShutdownDeadline(t *testing.T) {
	t.Parallel()
	c := newFakeCollector(t, true, 0)
	tr := newTestTracer(t, c.URL, 2, time.Minute)
	for range 3 {
		_, sp := tr.start(t.Context(), "op", spanInternal)
		sp.end()
	}
	<-c.posted
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	if err := tr.shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("shutdown = %v, want the deadline's error", err)
	}
	if got := tr.counts(); got.dropped != 3 || got.exportErrors == 0 {
		t.Errorf("counts = %+v, want 3 dropped and an export error", got)
	}
}

func TestExporterRefused(t *testing.T) {
	t.Parallel()
	c := newFakeCollector(t, false, http.StatusServiceUnavailable)
	tr := newTestTracer(t, c.URL, 1, time.Minute)
	_, sp := tr.start(t.Context(), "op", spanInternal)
	sp.end()
	if err := tr.shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := tr.counts(); got.dropped != 1 || got.exportErrors != 1 || got.exported != 0 {
		t.Errorf("counts = %+v, want 1 dropped, 1 export error", got)
	}
}
