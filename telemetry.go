package main

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds OpenTelemetry tracing: spans and the tracer that starts
// them, carried in a context.Context; the W3C traceparent and tracestate
// headers; and the samplers of OTEL_TRACES_SAMPLER. telemetry_otlp.go
// exports the ended spans. With tracing off the tracer is nil, and every
// span is a nil *traceSpan whose methods do nothing.

// A otelTraceID and a otelSpanID are the W3C trace context's identifiers.
type (
	otelTraceID [16]byte
	otelSpanID  [8]byte
)

// A spanContext is what identifies a span across processes: the
// traceparent header's fields and the tracestate header.
type spanContext struct {
	TraceID otelTraceID
	SpanID  otelSpanID
	// Flags are the trace flags; bit 0 is "sampled".
	Flags byte
	// State is the tracestate header, as received; "" for none.
	State string
}

// valid reports whether sc names a span: neither id is all zeros.
func (sc spanContext) valid() bool {
	return sc.TraceID != otelTraceID{} && sc.SpanID != otelSpanID{}
}

// sampled reports whether the trace's spans are recorded.
func (sc spanContext) sampled() bool { return sc.Flags&1 == 1 }

// traceparentLen is the length of a version 00 traceparent.
const traceparentLen = 55

// traceparent returns sc as a version 00 traceparent header value.
func (sc spanContext) traceparent() string {
	var b [traceparentLen]byte
	return string(sc.appendTraceparent(b[:0]))
}

// appendTraceparent appends sc as a version 00 traceparent to b.
func (sc spanContext) appendTraceparent(b []byte) []byte {
	b = append(b, "00-"...)
	b = hex.AppendEncode(b, sc.TraceID[:])
	b = append(b, '-')
	b = hex.AppendEncode(b, sc.SpanID[:])
	b = append(b, '-')
	return hex.AppendEncode(b, []byte{sc.Flags})
}

// maxTraceStateBytes is the longest tracestate kept: the W3C
// specification lets a vendor drop a longer one.
const maxTraceStateBytes = 512

// parseTraceparent parses a traceparent header value (W3C Trace Context
// level 1): version 00 exactly, or a later version with more fields
// after a dash, never version ff; lowercase hex; ids not all zeros. It
// returns an error saying what is wrong.
func parseTraceparent(s string) (spanContext, error) {
	var sc spanContext
	if len(s) < 55 {
		return sc, fmt.Errorf("traceparent %q: %d characters, want 55 (00-<32 hex>-<16 hex>-<2 hex>)", s, len(s))
	}
	version, ok := lowerHex(s[0:2])
	if !ok || s[2] != '-' || s[35] != '-' || s[52] != '-' {
		return sc, fmt.Errorf("traceparent %q: not version-traceid-spanid-flags in lowercase hex", s)
	}
	switch {
	case version[0] == 0xff:
		return sc, fmt.Errorf("traceparent %q: version ff is invalid", s)
	case version[0] == 0 && len(s) != 55:
		return sc, fmt.Errorf("traceparent %q: version 00 has exactly 55 characters", s)
	case len(s) > 55 && s[55] != '-':
		return sc, fmt.Errorf("traceparent %q: a later version's extra fields follow a dash", s)
	}
	tid, ok1 := lowerHex(s[3:35])
	sid, ok2 := lowerHex(s[36:52])
	flags, ok3 := lowerHex(s[53:55])
	if !ok1 || !ok2 || !ok3 {
		return sc, fmt.Errorf("traceparent %q: not version-traceid-spanid-flags in lowercase hex", s)
	}
	copy(sc.TraceID[:], tid)
	copy(sc.SpanID[:], sid)
	sc.Flags = flags[0]
	if version[0] == 0 {
		sc.Flags &= 1 // the other bits are not defined at version 00
	}
	if sc.TraceID == (otelTraceID{}) || sc.SpanID == (otelSpanID{}) {
		return spanContext{}, fmt.Errorf("traceparent %q: an all-zero trace or span id is invalid", s)
	}
	return sc, nil
}

// lowerHex decodes s when it is lowercase hex.
func lowerHex(s string) ([]byte, bool) {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return nil, false
		}
	}
	b, err := hex.DecodeString(s)
	return b, err == nil
}

// cleanTraceState returns the tracestate header values joined as one, or
// "" when they are too long or hold characters no list member may: a
// tracestate that cannot be passed on whole is dropped, as the W3C
// specification allows.
func cleanTraceState(values []string) string {
	s := strings.TrimSpace(strings.Join(values, ","))
	if len(s) > maxTraceStateBytes {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return ""
		}
	}
	return s
}

// Header names of the W3C trace context.
const (
	headerTraceparent = "Traceparent"
	headerTracestate  = "Tracestate"
)

// spanContextFromHeader returns the span context of h's traceparent and
// tracestate, and false when h has no valid traceparent.
func spanContextFromHeader(h http.Header) (spanContext, bool) {
	v := h.Values(headerTraceparent)
	if len(v) != 1 {
		return spanContext{}, false
	}
	sc, err := parseTraceparent(strings.TrimSpace(v[0]))
	if err != nil {
		return spanContext{}, false
	}
	sc.State = cleanTraceState(h.Values(headerTracestate))
	return sc, true
}

// injectTraceHeaders sets h's traceparent and tracestate to ctx's span,
// when ctx has one.
func injectTraceHeaders(ctx context.Context, h http.Header) {
	sc, ok := currentSpanContext(ctx)
	if !ok {
		return
	}
	h[headerTraceparent] = []string{sc.traceparent()}
	if sc.State != "" {
		h[headerTracestate] = []string{sc.State}
	}
}

// Sampler names of OTEL_TRACES_SAMPLER.
const (
	samplerAlwaysOn        = "always_on"
	samplerAlwaysOff       = "always_off"
	samplerRatio           = "traceidratio"
	samplerParentAlwaysOn  = "parentbased_always_on"
	samplerParentAlwaysOff = "parentbased_always_off"
	samplerParentRatio     = "parentbased_traceidratio"
)

// A traceSampler decides which traces are recorded, as the specification's
// samplers of the same names. The zero traceSampler records nothing;
// parseSampler returns the others.
type traceSampler struct {
	// ratio decides for a trace harnessd starts: record a trace whose id
	// is below ratio (1 for always, 0 for never).
	ratio float64
	// parentBased: a span with a parent follows the parent's decision.
	parentBased bool
}

// parseSampler returns the sampler named name ("" for the default,
// parentbased_always_on) with the argument arg (the ratio of the
// traceidratio samplers, default 1; ignored by the others). The errors
// name source and say what to set.
func parseSampler(source, name, arg string) (traceSampler, error) {
	name = strings.ToLower(strings.TrimSpace(name))
	s := traceSampler{ratio: 1}
	switch name {
	case "", samplerParentAlwaysOn:
		s.parentBased = true
	case samplerAlwaysOn:
	case samplerAlwaysOff:
		s.ratio = 0
	case samplerParentAlwaysOff:
		s.ratio, s.parentBased = 0, true
	case samplerRatio, samplerParentRatio:
		s.parentBased = name == samplerParentRatio
		if arg = strings.TrimSpace(arg); arg != "" {
			r, err := strconv.ParseFloat(arg, 64)
			if err != nil || r < 0 || r > 1 {
				return s, fmt.Errorf("%s: sampler %s: argument %q is not a ratio; give a number from 0 to 1", source, name, arg)
			}
			s.ratio = r
		}
	default:
		return s, fmt.Errorf("%s: sampler %q is not supported; use %s, %s, %s, %s, %s or %s", source, name,
			samplerAlwaysOn, samplerAlwaysOff, samplerRatio, samplerParentAlwaysOn, samplerParentAlwaysOff, samplerParentRatio)
	}
	return s, nil
}

// sample reports whether a span of trace id with the parent (valid when
// there is one) is recorded.
func (s traceSampler) sample(parent spanContext, id otelTraceID) bool {
	if s.parentBased && parent.valid() {
		return parent.sampled()
	}
	switch s.ratio {
	case 1:
		return true
	case 0:
		return false
	}
	// The specification's TraceIdRatioBased: the trace id's last 8 bytes,
	// as the Go SDK reads them, against the ratio's share of 2^63.
	return binary.BigEndian.Uint64(id[8:])>>1 < uint64(s.ratio*(1<<63))
}

// A spanKind is OTLP's Span.SpanKind.
type spanKind int

// The span kinds harnessd starts.
const (
	spanInternal spanKind = 1
	spanServer   spanKind = 2
	spanClient   spanKind = 3
)

// An attribute is one key and value of a span or a resource.
type attribute struct {
	key   string
	value attrValue
}

// An attrValue is a string, an integer or a list of strings: kind says
// which field holds it.
type attrValue struct {
	kind    attrKind
	str     string
	integer int64
	strs    []string
}

// An attrKind says what an attrValue holds.
type attrKind uint8

// The kinds of attribute values.
const (
	attrString attrKind = iota
	attrInt
	attrStrings
)

// stringAttr, intAttr and stringsAttr return an attribute of key with
// value v.
func stringAttr(key, v string) attribute { return attribute{key, attrValue{kind: attrString, str: v}} }
func intAttr(key string, v int64) attribute {
	return attribute{key, attrValue{kind: attrInt, integer: v}}
}
func stringsAttr(key string, v []string) attribute {
	return attribute{key, attrValue{kind: attrStrings, strs: v}}
}

// A telemetryOptions configures tracing; the config family builds it
// from [telemetry] and the OTEL_ variables (config_telemetry.go).
type telemetryOptions struct {
	// Endpoint is the URL spans are posted to; "" turns tracing off.
	Endpoint string
	// Headers are sent with every export; their values are secrets.
	Headers map[string]string
	// ServiceName is the resource's service.name.
	ServiceName string
	Sampler     traceSampler
	// IncludeContent puts prompts, arguments, results and answers,
	// redacted and cut, into spans.
	IncludeContent bool
	// Timeout bounds each export.
	Timeout time.Duration
	// batchSize is the spans an export sends at most; 0 means
	// spanBatchSize (tests make it smaller).
	batchSize int
}

// maxSpanContentBytes is where a text put into a span (include_content)
// is cut.
const maxSpanContentBytes = 4096

// A tracer starts spans and hands the ended ones to its exporter. A nil
// *tracer starts none. Safe for concurrent use.
type tracer struct {
	sampler        traceSampler
	includeContent bool
	exporter       *otlpExporter
}

// newTracer returns the tracer of opts, exporting in the background, or
// nil when opts has no endpoint. The caller calls shutdown.
func newTracer(opts telemetryOptions, logger *slog.Logger) *tracer {
	if opts.Endpoint == "" {
		return nil
	}
	return &tracer{sampler: opts.Sampler, includeContent: opts.IncludeContent, exporter: newOTLPExporter(opts, logger)}
}

// content reports whether spans carry text (include_content); false for
// a nil tracer.
func (t *tracer) content() bool { return t != nil && t.includeContent }

// shutdown exports the spans still queued, within ctx, and stops the
// exporter; spans ended after are dropped. Nil-safe and idempotent.
func (t *tracer) shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.exporter.shutdown(ctx)
}

// A traceSpan is one timed operation of a trace. A nil *traceSpan records nothing,
// and neither does one its trace's sampler left out (recording false),
// which still passes its trace on. Safe for concurrent use; end it once.
type traceSpan struct {
	tracer *tracer
	sc     spanContext
	parent otelSpanID // zero for a root span
	// remoteParent: parent is a span of another process.
	remoteParent bool
	name         string
	kind         spanKind
	start        time.Time
	// recording is false for a span left out by the sampler.
	recording bool

	mu sync.Mutex
	// guards attrs, status, statusMessage, endTime and ended
	attrs         []attribute
	status        int // OTLP Status.StatusCode: 0 unset, 1 ok, 2 error
	statusMessage string
	endTime       time.Time
	ended         bool
}

// Context keys of the current span and of a parent from another process.
type (
	spanKey         struct{}
	remoteParentKey struct{}
)

// withRemoteParent returns ctx whose spans started next are children of
// sc, a span of another process (an incoming traceparent).
func withRemoteParent(ctx context.Context, sc spanContext) context.Context {
	return context.WithValue(ctx, remoteParentKey{}, sc)
}

// withSpan returns ctx whose spans started next are children of s; ctx
// itself when s is nil.
func withSpan(ctx context.Context, s *traceSpan) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, spanKey{}, s)
}

// contextSpan returns ctx's current span, or nil.
func contextSpan(ctx context.Context) *traceSpan {
	s, _ := ctx.Value(spanKey{}).(*traceSpan)
	return s
}

// currentSpanContext returns the span context of ctx's span, else of its
// remote parent; false when it has neither.
func currentSpanContext(ctx context.Context) (spanContext, bool) {
	if s := contextSpan(ctx); s != nil {
		return s.sc, true
	}
	sc, ok := ctx.Value(remoteParentKey{}).(spanContext)
	return sc, ok
}

// startSpan starts a span of name and kind as a child of ctx's span (or
// its remote parent), with the tracer of ctx's span, else with t. It
// returns ctx unchanged and a nil span when neither has a tracer: a
// caller that knows no tracer (t nil) traces only inside a traced
// operation.
func startSpan(ctx context.Context, t *tracer, name string, kind spanKind, attrs ...attribute) (context.Context, *traceSpan) {
	if s := contextSpan(ctx); s != nil {
		t = s.tracer
	}
	return t.start(ctx, name, kind, attrs...)
}

// start starts a span of name and kind, the child of ctx's span or remote
// parent, else the root of a new trace, and returns ctx carrying it. A
// nil tracer returns ctx and a nil span. The caller ends the span.
func (t *tracer) start(ctx context.Context, name string, kind spanKind, attrs ...attribute) (context.Context, *traceSpan) {
	if t == nil {
		return ctx, nil
	}
	parent, _ := currentSpanContext(ctx)
	s := &traceSpan{tracer: t, name: name, kind: kind, start: time.Now()}
	if parent.valid() {
		s.sc.TraceID, s.sc.State, s.parent = parent.TraceID, parent.State, parent.SpanID
		s.remoteParent = contextSpan(ctx) == nil
	} else {
		binary.LittleEndian.PutUint64(s.sc.TraceID[:8], rand.Uint64())
		binary.LittleEndian.PutUint64(s.sc.TraceID[8:], rand.Uint64())
	}
	// Random and never zero: math/rand/v2's global generator (ChaCha8,
	// seeded by the runtime) without crypto/rand's system call per id.
	binary.LittleEndian.PutUint64(s.sc.SpanID[:], rand.Uint64()|1)
	if t.sampler.sample(parent, s.sc.TraceID) {
		s.sc.Flags = 1
		s.recording = true
		s.attrs = append(make([]attribute, 0, len(attrs)+4), attrs...)
	}
	return context.WithValue(ctx, spanKey{}, s), s
}

// set adds attrs to s.
func (s *traceSpan) set(attrs ...attribute) {
	if s == nil || !s.recording {
		return
	}
	s.mu.Lock()
	s.attrs = append(s.attrs, attrs...)
	s.mu.Unlock()
}

// setContent adds key with text when the tracer includes content; the
// caller has redacted text and cut it at maxSpanContentBytes.
func (s *traceSpan) setContent(key, text string) {
	if s == nil || !s.tracer.content() {
		return
	}
	s.set(stringAttr(key, text))
}

// fail marks s failed with errType (its error.type) and a message; a
// nil err or "" message leaves the status message empty.
func (s *traceSpan) fail(errType, message string) {
	if s == nil || !s.recording {
		return
	}
	s.mu.Lock()
	s.attrs = append(s.attrs, stringAttr("error.type", errType))
	s.status, s.statusMessage = 2, message
	s.mu.Unlock()
}

// failErr is fail with err's text and errType, or "_OTHER" when errType
// is "" (the convention's fallback); nothing when err is nil.
func (s *traceSpan) failErr(errType string, err error) {
	if err == nil {
		return
	}
	if errType == "" {
		errType = errorType(err)
	}
	s.fail(errType, err.Error())
}

// errorType is the error.type of err: "timeout" when a deadline ran out,
// "cancelled" when a context was cancelled, else "_OTHER".
func errorType(err error) string {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "cancelled"
	}
	return "_OTHER"
}

// end ends s and queues it for export; later calls do nothing. It never
// blocks: a full queue drops the span (counted).
func (s *traceSpan) end() {
	if s == nil || !s.recording {
		return
	}
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended, s.endTime = true, time.Now()
	s.mu.Unlock()
	s.tracer.exporter.enqueue(s)
}
