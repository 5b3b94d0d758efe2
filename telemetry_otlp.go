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
// queue by one goroutine that sends a batch when it is full or every
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
	resource []otlpKeyValue
	// batchSize is opts.batchSize or spanBatchSize; interval is
	// exportInterval.
	batchSize int
	interval  time.Duration

	queue chan *traceSpan
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
		resource: []otlpKeyValue{
			otlpAttr(stringAttr("service.name", opts.ServiceName)),
			otlpAttr(stringAttr("service.version", buildVersion)),
			otlpAttr(stringAttr("telemetry.sdk.name", "harnessd")),
			otlpAttr(stringAttr("telemetry.sdk.language", "go")),
		},
		batchSize: cmp.Or(opts.batchSize, spanBatchSize), interval: exportInterval,
		queue: make(chan *traceSpan, spanQueueSize),
		ctx:   ctx, cancel: cancel,
		stop: make(chan struct{}), done: make(chan struct{}),
	}
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
	select {
	case <-e.stop:
		e.dropped.Add(1)
		return
	default:
	}
	select {
	case e.queue <- s:
	default:
		e.dropped.Add(1)
	}
}

// loop collects spans into batches and exports each when full or when
// the interval passes, until stop; then it exports what is queued.
func (e *otlpExporter) loop() {
	defer close(e.done)
	ticker := time.NewTicker(e.interval)
	defer ticker.Stop()
	batch := make([]*traceSpan, 0, e.batchSize)
	flush := func() {
		if len(batch) > 0 {
			e.export(batch)
			clear(batch)
			batch = batch[:0]
		}
	}
	for {
		select {
		case s := <-e.queue:
			if batch = append(batch, s); len(batch) >= e.batchSize {
				flush()
			}
		case <-ticker.C:
			flush()
		case <-e.stop:
			for {
				select {
				case s := <-e.queue:
					if batch = append(batch, s); len(batch) >= e.batchSize {
						flush()
					}
				default:
					flush()
					return
				}
			}
		}
	}
}

// shutdown stops the exporter: the spans queued are exported within ctx,
// after which the export under way is abandoned and what is left counted
// as dropped. It returns ctx's error when the deadline cut it short.
// Idempotent; blocks until the loop has ended.
func (e *otlpExporter) shutdown(ctx context.Context) error {
	e.stopOnce.Do(func() { close(e.stop) })
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
	body, err := json.Marshal(e.request(batch))
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
		StartTimeUnixNano string         `json:"startTimeUnixNano"`
		EndTimeUnixNano   string         `json:"endTimeUnixNano"`
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

// request returns the ExportTraceServiceRequest of batch. The spans are
// ended, so their fields no longer change.
func (e *otlpExporter) request(batch []*traceSpan) otlpRequest {
	spans := make([]otlpSpan, 0, len(batch))
	for _, s := range batch {
		s.mu.Lock()
		o := otlpSpan{
			TraceID: hex.EncodeToString(s.sc.TraceID[:]), SpanID: hex.EncodeToString(s.sc.SpanID[:]),
			TraceState: s.sc.State, Flags: uint32(s.sc.Flags) | spanFlagsContextHasIsRemote,
			Name: s.name, Kind: s.kind,
			StartTimeUnixNano: strconv.FormatInt(s.start.UnixNano(), 10),
			EndTimeUnixNano:   strconv.FormatInt(s.endTime.UnixNano(), 10),
			Status:            otlpStatus{Code: s.status, Message: s.statusMessage},
		}
		if s.parent != (otelSpanID{}) {
			o.ParentSpanID = hex.EncodeToString(s.parent[:])
			if s.remoteParent {
				o.Flags |= spanFlagsContextIsRemote
			}
		}
		o.Attributes = make([]otlpKeyValue, len(s.attrs))
		for i, a := range s.attrs {
			o.Attributes[i] = otlpAttr(a)
		}
		s.mu.Unlock()
		spans = append(spans, o)
	}
	return otlpRequest{ResourceSpans: []otlpResourceSpans{{
		Resource:   otlpResource{Attributes: e.resource},
		ScopeSpans: []otlpScopeSpans{{Scope: otlpScope{Name: telemetryScopeName, Version: buildVersion}, Spans: spans}},
	}}}
}

// otlpAttr returns a as OTLP's KeyValue.
func otlpAttr(a attribute) otlpKeyValue {
	return otlpKeyValue{Key: a.key, Value: otlpValue(a.value)}
}

// otlpValue returns v as OTLP's AnyValue.
func otlpValue(v attrValue) otlpAnyValue {
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
	s := v.str
	return otlpAnyValue{StringValue: &s}
}
