package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the export of ended spans: OTLP over HTTP with the
// JSON encoding (POST of an ExportTraceServiceRequest), from a bounded
// queue by one goroutine that sends a batch when one is queued or every
// exportInterval. Ending a span never waits: when the queue is full (a
// slow or dead collector) the span is dropped and counted.

// Defaults of the exporter, those of the OpenTelemetry SDKs' batch span
// processor.
const (
	spanQueueSize         = 2048
	spanBatchSize         = 512
	exportInterval        = 5 * time.Second
	defaultExportTimeout  = 10 * time.Second
	telemetryScopeName    = "harnessd"
	otlpJSONContentType   = "application/json"
	otlpExportBodyLimit   = 64 << 10
	defaultServiceName    = "harnessd"
	telemetryTracesSuffix = "/v1/traces"
)

// An otlpExporter posts ended spans to an OTLP/HTTP endpoint. enqueue is
// safe for concurrent use and never blocks; shutdown ends it.
type otlpExporter struct {
	endpoint string
	header   http.Header
	client   *http.Client
	timeout  time.Duration
	logger   *slog.Logger
	// head and tail are an encoded request around its spans
	// (otlpEnvelope); lastBody is the size of the last request encoded.
	// lastBody is the loop's.
	head, tail []byte
	lastBody   int
	// batchSize is opts.batchSize or spanBatchSize; interval is
	// exportInterval.
	batchSize int
	interval  time.Duration

	// mu guards queued and stopped. A span ended is appended to queued
	// under mu, without waking the loop: the loop is woken (full) only
	// once a batch is queued, or by its ticker. A channel send per span
	// woke it for every span, a thread's wake-up each. With that, tracing
	// cost a tool call 45% more CPU over stdio (240 µs against 165 off)
	// and 25% over HTTP (385 against 307, p=0.000); with this, encode and
	// the trace context's _meta (client_telemetry.go), no difference
	// benchstat finds (212 against 218, 359 against 365):
	// BenchmarkRecordedToolCall, 8 interleaved rounds, a loaded 2-core
	// machine.
	mu      sync.Mutex
	queued  []*traceSpan // at most spanQueueSize
	stopped bool
	// full holds a value once queued holds a batch.
	full chan struct{}
	// ctx bounds every export; shutdown cancels it at its deadline.
	ctx    context.Context
	cancel context.CancelFunc
	// stop is closed by shutdown: the loop exports what is queued and
	// closes done.
	stop, done chan struct{}
	stopOnce   sync.Once

	// dropped counts spans lost (queue full, failed or rejected exports,
	// left at shutdown), exported those the collector took, exportErrors
	// the export requests that failed.
	dropped, exported, exportErrors atomic.Uint64
	// failing is set while exports fail, so that a dead collector is
	// logged once, and its return once. Owned by the loop.
	failing bool
}

// newOTLPExporter returns an exporter to opts' endpoint and starts its
// goroutine.
func newOTLPExporter(opts telemetryOptions, logger *slog.Logger) *otlpExporter {
	header := http.Header{}
	for k, v := range opts.Headers {
		header.Set(k, v)
	}
	header.Set("Content-Type", otlpJSONContentType)
	header.Set("User-Agent", "harnessd/"+buildVersion)
	ctx, cancel := context.WithCancel(context.Background())
	e := &otlpExporter{
		endpoint: opts.Endpoint, header: header, client: &http.Client{},
		timeout: opts.Timeout, logger: orDiscard(logger).With("endpoint", opts.Endpoint),
		batchSize: cmp.Or(opts.batchSize, spanBatchSize), interval: exportInterval,
		queued: make([]*traceSpan, 0, spanQueueSize), full: make(chan struct{}, 1),
		ctx: ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	e.head, e.tail = otlpEnvelope(otlpAttrs(nil, []attribute{
		stringAttr("service.name", opts.ServiceName),
		stringAttr("service.version", buildVersion),
		stringAttr("telemetry.sdk.name", "harnessd"),
		stringAttr("telemetry.sdk.language", "go"),
	}))
	if e.timeout <= 0 {
		e.timeout = defaultExportTimeout
	}
	// Owned by the exporter; exits once shutdown closed stop and what was
	// queued is exported or dropped.
	go e.loop()
	return e
}

// enqueue queues s for export, or drops it (counted) when the queue is
// full or the exporter has stopped. It never blocks.
func (e *otlpExporter) enqueue(s *traceSpan) {
	e.mu.Lock()
	if e.stopped || len(e.queued) >= spanQueueSize {
		e.mu.Unlock()
		e.dropped.Add(1)
		return
	}
	e.queued = append(e.queued, s)
	n := len(e.queued)
	e.mu.Unlock()
	if n >= e.batchSize {
		select {
		case e.full <- struct{}{}:
		default: // the loop is told already
		}
	}
}

// take moves the oldest queued spans, a batch at most, into batch and
// returns it: empty when fewer than least are queued.
func (e *otlpExporter) take(batch []*traceSpan, least int) []*traceSpan {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.queued) < max(least, 1) {
		return batch[:0]
	}
	n := min(len(e.queued), e.batchSize)
	batch = append(batch[:0], e.queued[:n]...)
	rest := copy(e.queued, e.queued[n:])
	clear(e.queued[rest:])
	e.queued = e.queued[:rest]
	return batch
}

// loop exports the queued spans, a batch at a time, once a whole batch
// is queued and, whatever is queued, when the interval passes and at
// stop; then it ends.
func (e *otlpExporter) loop() {
	defer close(e.done)
	ticker := time.NewTicker(e.interval)
	defer ticker.Stop()
	batch := make([]*traceSpan, 0, e.batchSize)
	// flush exports batches while at least least spans are queued.
	flush := func(least int) {
		for {
			if batch = e.take(batch, least); len(batch) == 0 {
				return
			}
			e.export(batch)
			clear(batch)
		}
	}
	for {
		select {
		case <-e.full:
			flush(e.batchSize)
		case <-ticker.C:
			flush(1)
		case <-e.stop:
			flush(1)
			return
		}
	}
}

// shutdown stops the exporter: the spans queued are exported within ctx,
// after which the export under way is abandoned and what is left counted
// as dropped. It returns ctx's error when the deadline cut it short.
// Idempotent; blocks until the loop has ended.
func (e *otlpExporter) shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() {
		e.mu.Lock()
		e.stopped = true
		e.mu.Unlock()
		close(e.stop)
	})
	select {
	case <-e.done:
		e.cancel()
		return nil
	case <-ctx.Done():
		e.cancel()
		<-e.done
		return fmt.Errorf("telemetry: export spans at shutdown: %w", ctx.Err())
	}
}

// telemetryCounts are the exporter's counters, for /metrics.
type telemetryCounts struct {
	dropped, exported, exportErrors uint64
}

// counts returns the exporter's counters; zeros for a nil tracer.
func (t *tracer) counts() telemetryCounts {
	if t == nil {
		return telemetryCounts{}
	}
	e := t.exporter
	return telemetryCounts{dropped: e.dropped.Load(), exported: e.exported.Load(), exportErrors: e.exportErrors.Load()}
}

// export posts batch, bounded by the export timeout, and counts the
// outcome: the collector's partial success rejects count as dropped, as
// does the whole batch when the export fails.
func (e *otlpExporter) export(batch []*traceSpan) {
	body, err := e.encode(batch)
	if err == nil {
		var rejected int64
		rejected, err = e.post(body)
		if err == nil {
			e.exported.Add(uint64(int64(len(batch)) - rejected))
			e.dropped.Add(uint64(rejected))
			if e.failing {
				e.failing = false
				e.logger.Info("telemetry: exporting spans again")
			}
			return
		}
	}
	e.exportErrors.Add(1)
	e.dropped.Add(uint64(len(batch)))
	if !e.failing {
		e.failing = true
		e.logger.Warn("telemetry: export spans failed; spans are dropped until the collector answers (see harnessd_telemetry_spans_dropped_total)",
			"spans", len(batch), "err", err)
	}
}

// post sends one encoded request and returns how many spans the
// collector rejected, or why the export failed. The error names the
// endpoint's status, never the headers.
func (e *otlpExporter) post(body []byte) (rejected int64, err error) {
	ctx, cancel := context.WithTimeout(e.ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = e.header.Clone()
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded && e.ctx.Err() == nil {
			return 0, fmt.Errorf("no answer within %s", e.timeout)
		}
		return 0, err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, otlpExportBodyLimit))
	if resp.StatusCode/100 != 2 {
		return 0, fmt.Errorf("collector answered %s: %.200s", resp.Status, bytes.TrimSpace(answer))
	}
	var partial struct {
		PartialSuccess struct {
			RejectedSpans json.Number `json:"rejectedSpans"`
		} `json:"partialSuccess"`
	}
	if json.Unmarshal(answer, &partial) == nil && partial.PartialSuccess.RejectedSpans != "" {
		n, _ := strconv.ParseInt(partial.PartialSuccess.RejectedSpans.String(), 10, 64)
		return max(n, 0), nil
	}
	return 0, nil
}

// The ExportTraceServiceRequest in the proto3 JSON mapping OTLP/HTTP
// takes: ids as hex, 64-bit integers as strings, enums as numbers.
type (
	otlpRequest struct {
		ResourceSpans []otlpResourceSpans `json:"resourceSpans"`
	}
	otlpResourceSpans struct {
		Resource   otlpResource     `json:"resource"`
		ScopeSpans []otlpScopeSpans `json:"scopeSpans"`
	}
	otlpResource struct {
		Attributes []otlpKeyValue `json:"attributes"`
	}
	otlpScopeSpans struct {
		Scope otlpScope  `json:"scope"`
		Spans []otlpSpan `json:"spans"`
	}
	otlpScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	otlpSpan struct {
		TraceID           string         `json:"traceId"`
		SpanID            string         `json:"spanId"`
		TraceState        string         `json:"traceState,omitempty"`
		ParentSpanID      string         `json:"parentSpanId,omitempty"`
		Flags             uint32         `json:"flags"`
		Name              string         `json:"name"`
		Kind              spanKind       `json:"kind"`
		StartTimeUnixNano int64          `json:"startTimeUnixNano,string"`
		EndTimeUnixNano   int64          `json:"endTimeUnixNano,string"`
		Attributes        []otlpKeyValue `json:"attributes,omitempty"`
		Status            otlpStatus     `json:"status"`
	}
	otlpStatus struct {
		Message string `json:"message,omitempty"`
		Code    int    `json:"code,omitempty"`
	}
	otlpKeyValue struct {
		Key   string       `json:"key"`
		Value otlpAnyValue `json:"value"`
	}
	otlpAnyValue struct {
		StringValue *string         `json:"stringValue,omitempty"`
		IntValue    string          `json:"intValue,omitempty"`
		ArrayValue  *otlpArrayValue `json:"arrayValue,omitempty"`
	}
	otlpArrayValue struct {
		Values []otlpAnyValue `json:"values"`
	}
)

// spanFlagsContextHasIsRemote and spanFlagsContextIsRemote are OTLP's
// SpanFlags bits saying whether a span's parent is in another process.
const (
	spanFlagsContextHasIsRemote = 0x100
	spanFlagsContextIsRemote    = 0x200
)

// encode returns the ExportTraceServiceRequest of batch, encoded by
// encoding/json: the envelope (resource and scope) as encoded once by
// newOTLPExporter around the spans, each encoded in turn into a buffer
// the size of the last request. json.Marshal of the whole request grew
// its buffer from empty at each export (its pool is emptied by the
// collections between exports) and copied it: 2.6 KiB of the 10.7 KiB a
// traced stdio tool call allocated (BenchmarkRecordedToolCall).
func (e *otlpExporter) encode(batch []*traceSpan) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, max(e.lastBody, len(e.head)+len(e.tail))))
	buf.Write(e.head)
	enc := json.NewEncoder(buf)
	var attrs []otlpKeyValue
	for i, s := range batch {
		if i > 0 {
			buf.WriteByte(',')
		}
		var o otlpSpan
		o, attrs = otlpSpanOf(s, attrs[:0])
		if err := enc.Encode(&o); err != nil {
			return nil, err
		}
	}
	buf.Write(e.tail)
	e.lastBody = buf.Len()
	return buf.Bytes(), nil
}

// otlpEnvelope returns an ExportTraceServiceRequest of the resource
// attributes with no span, encoded, split where its spans go.
func otlpEnvelope(resource []otlpKeyValue) (head, tail []byte) {
	b, _ := json.Marshal(otlpRequest{ResourceSpans: []otlpResourceSpans{{
		Resource:   otlpResource{Attributes: resource},
		ScopeSpans: []otlpScopeSpans{{Scope: otlpScope{Name: telemetryScopeName, Version: buildVersion}, Spans: []otlpSpan{}}},
	}}})
	// The spans are the last member: what follows them closes the
	// objects, so the last "spans":[ is theirs.
	const spans = `"spans":[`
	at := bytes.LastIndex(b, []byte(spans)) + len(spans)
	return b[:at], b[at:]
}

// otlpSpanOf returns s, ended, as OTLP's Span, its attributes appended
// to attrs (returned for reuse once the span is encoded).
func otlpSpanOf(s *traceSpan, attrs []otlpKeyValue) (otlpSpan, []otlpKeyValue) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The three ids in hex are one string, cut: one allocation, not three;
	// with the times encoded by encoding/json from integers (",string")
	// rather than formatted first, a traced tool call allocates 7 times
	// less (BenchmarkRecordedToolCall, stdio, 87 allocations to 80).
	var ids [len(otelTraceID{}) + 2*len(otelSpanID{})]byte
	copy(ids[copy(ids[:], s.sc.TraceID[:]):], s.sc.SpanID[:])
	copy(ids[len(ids)-len(s.parent):], s.parent[:])
	hexIDs := hex.EncodeToString(ids[:])
	o := otlpSpan{
		TraceID: hexIDs[:32], SpanID: hexIDs[32:48],
		TraceState: s.sc.State, Flags: uint32(s.sc.Flags) | spanFlagsContextHasIsRemote,
		Name: s.name, Kind: s.kind,
		StartTimeUnixNano: s.start.UnixNano(), EndTimeUnixNano: s.endTime.UnixNano(),
		Status: otlpStatus{Code: s.status, Message: s.statusMessage},
	}
	if s.parent != (otelSpanID{}) {
		o.ParentSpanID = hexIDs[48:]
		if s.remoteParent {
			o.Flags |= spanFlagsContextIsRemote
		}
	}
	attrs = otlpAttrs(attrs, s.attrs)
	o.Attributes = attrs
	return o, attrs
}

// otlpAttrs appends attrs as OTLP's KeyValues to kvs; their strings
// point into attrs, which must not change after.
func otlpAttrs(kvs []otlpKeyValue, attrs []attribute) []otlpKeyValue {
	for i := range attrs {
		kvs = append(kvs, otlpKeyValue{Key: attrs[i].key, Value: otlpValue(&attrs[i].value)})
	}
	return kvs
}

// otlpValue returns v as OTLP's AnyValue, pointing into v.
func otlpValue(v *attrValue) otlpAnyValue {
	switch v.kind {
	case attrInt:
		return otlpAnyValue{IntValue: strconv.FormatInt(v.integer, 10)}
	case attrStrings:
		values := make([]otlpAnyValue, len(v.strs))
		for i := range v.strs {
			values[i] = otlpAnyValue{StringValue: &v.strs[i]}
		}
		return otlpAnyValue{ArrayValue: &otlpArrayValue{Values: values}}
	}
	return otlpAnyValue{StringValue: &v.str}
}
