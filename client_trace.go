package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds the trace of MCP traffic: at --log-level debug, one log
// line per JSON-RPC message a conn sends or receives (direction, kind,
// method, id, size; for an answer the time since its request and the
// outcome), and with --log-mcp-payloads the message itself, redacted,
// then cut. With debug off a conn has no trace, and a message costs a
// nil check.

// tracePayloadBytes is where a traced payload is cut.
const tracePayloadBytes = 2048

// traceMaxInFlight bounds the requests a trace remembers the start of; a
// request beyond it is traced without its answer's duration.
const traceMaxInFlight = 1024

// logPayloadsEnv is the environment variable of --log-mcp-payloads.
const logPayloadsEnv = "HARNESS_LOG_MCP_PAYLOADS"

// registerLogPayloadsFlag adds --log-mcp-payloads to fs, defaulting to
// HARNESS_LOG_MCP_PAYLOADS, and returns where the flag's value goes, and
// an error naming the variable when it is not a boolean.
func registerLogPayloadsFlag(fs *flag.FlagSet, getenv func(string) (string, bool)) (*bool, error) {
	var def bool
	var err error
	if v, ok := getenv(logPayloadsEnv); ok && strings.TrimSpace(v) != "" {
		if def, err = strconv.ParseBool(strings.TrimSpace(v)); err != nil {
			err = fmt.Errorf("%s: %q is not a boolean; set true or false, or unset it", logPayloadsEnv, v)
		}
	}
	on := fs.Bool("log-mcp-payloads", def, fmt.Sprintf("with --log-level debug, add each MCP message, redacted and cut at %d bytes, to its trace line (env %s)", tracePayloadBytes, logPayloadsEnv))
	return on, err
}

// An mcpTrace logs the messages of one conn. A nil *mcpTrace logs
// nothing. Safe for concurrent use.
type mcpTrace struct {
	logger   *slog.Logger
	payloads bool

	mu sync.Mutex
	// guards inFlight: the requests sent or received and not yet
	// answered, by direction and id.
	inFlight map[traceKey]traceStart
}

// A traceKey names one request: its direction and its id as JSON text.
type traceKey struct {
	sent bool
	id   string
}

// A traceStart is when a request went, and its method.
type traceStart struct {
	at     time.Time
	method string
}

// newMCPTrace returns the trace of a conn logging to logger, or nil when
// logger does not log at debug level. payloads adds each message to its
// line.
func newMCPTrace(logger *slog.Logger, payloads bool) *mcpTrace {
	if !logger.Enabled(context.Background(), slog.LevelDebug) {
		return nil
	}
	return &mcpTrace{logger: logger, payloads: payloads, inFlight: map[traceKey]traceStart{}}
}

// send sends msg over the conn's transport, traced.
func (c *conn) send(ctx context.Context, msg []byte) error {
	c.trace.message(true, msg)
	return c.t.send(ctx, msg)
}

// message logs one message; sent says whether harnessd sent it (else it
// came from the server).
func (t *mcpTrace) message(sent bool, raw []byte) {
	if t == nil {
		return
	}
	var shape struct {
		Method json.RawMessage `json:"method"`
		ID     json.RawMessage `json:"id"`
		Error  json.RawMessage `json:"error"`
	}
	json.Unmarshal(raw, &shape) // a malformed message is traced as "other"
	direction := "recv"
	if sent {
		direction = "send"
	}
	attrs := make([]slog.Attr, 0, 10)
	attrs = append(attrs, slog.String("direction", direction))
	id := traceID(shape.ID)
	hasID := id != "" && id != "null"
	switch {
	case shape.Method != nil:
		var method string
		json.Unmarshal(shape.Method, &method)
		if hasID {
			attrs = append(attrs, slog.String("kind", "request"), slog.String("method", method), slog.String("id", id))
			t.started(traceKey{sent, id}, method)
		} else {
			attrs = append(attrs, slog.String("kind", "notification"), slog.String("method", method))
			if method == "notifications/cancelled" {
				t.cancelled(sent, raw)
			}
		}
	case hasID:
		attrs = append(attrs, slog.String("kind", "response"))
		// An answer goes the other way from its request.
		if start, ok := t.answered(traceKey{!sent, id}); ok {
			attrs = append(attrs, slog.String("method", start.method), slog.String("id", id),
				slog.Float64("duration_ms", float64(time.Since(start.at).Microseconds())/1000))
		} else {
			attrs = append(attrs, slog.String("id", id))
		}
		attrs = append(attrs, outcomeAttrs(shape.Error)...)
	default:
		attrs = append(attrs, slog.String("kind", "other"))
	}
	attrs = append(attrs, slog.Int("bytes", len(raw)))
	if t.payloads {
		// The secrets the logger redacts, taken out before the cut so that
		// no prefix of one survives; read at each line, as they may grow.
		attrs = append(attrs, slog.String("payload", cutAll(loggerRedactors(t.logger), string(raw), tracePayloadBytes)))
	}
	t.logger.LogAttrs(context.Background(), slog.LevelDebug, "mcp message", attrs...)
}

// outcomeAttrs returns the outcome of an answer whose error member is
// errRaw: ok, or error with its code.
func outcomeAttrs(errRaw []byte) []slog.Attr {
	if len(errRaw) == 0 || string(errRaw) == "null" {
		return []slog.Attr{slog.String("outcome", "ok")}
	}
	var e struct {
		Code json.Number `json:"code"`
	}
	json.Unmarshal(errRaw, &e)
	code, err := strconv.Atoi(e.Code.String())
	if err != nil {
		return []slog.Attr{slog.String("outcome", "error")}
	}
	return []slog.Attr{slog.String("outcome", "error"), slog.Int("code", code)}
}

// started remembers when the request key went.
func (t *mcpTrace) started(key traceKey, method string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.inFlight) < traceMaxInFlight {
		t.inFlight[key] = traceStart{at: time.Now(), method: method}
	}
}

// answered forgets the request key and returns when it went.
func (t *mcpTrace) answered(key traceKey) (traceStart, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	start, ok := t.inFlight[key]
	delete(t.inFlight, key)
	return start, ok
}

// cancelled forgets the request a notifications/cancelled abandons: one
// the same side sent, which will get no answer.
func (t *mcpTrace) cancelled(sent bool, raw []byte) {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &n) == nil && len(n.Params.RequestID) > 0 {
		t.answered(traceKey{sent, traceID(n.Params.RequestID)})
	}
}

// traceID returns a JSON-RPC id as text: a string unquoted, a number as
// written.
func traceID(raw []byte) string {
	var s string
	if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}
