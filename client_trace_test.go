package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

// This file holds the tests of the MCP trace: one debug line per message,
// with durations and outcomes, payloads only when asked for, redacted then
// cut; nothing at all above debug level.

// A syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	// guards buf
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A traceLine is one "mcp message" log line.
type traceLine struct {
	Server     string   `json:"server"`
	Direction  string   `json:"direction"`
	Kind       string   `json:"kind"`
	Method     string   `json:"method"`
	ID         string   `json:"id"`
	DurationMS *float64 `json:"duration_ms"`
	Outcome    string   `json:"outcome"`
	Code       int      `json:"code"`
	Bytes      int      `json:"bytes"`
	Payload    *string  `json:"payload"`
}

// traceLines returns the "mcp message" lines of a JSON log.
func traceLines(t *testing.T, log string) []traceLine {
	t.Helper()
	var out []traceLine
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var head struct {
			Msg string `json:"msg"`
		}
		if err := json.Unmarshal(sc.Bytes(), &head); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		if head.Msg != "mcp message" {
			continue
		}
		var l traceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("trace line %q: %v", sc.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// traceSession connects to the fake server with transcriptSecret in its
// env, through a JSON logger at level that also redacts globalSecret,
// calls echo with message and an unknown method, closes, and returns the
// log.
func traceSession(t *testing.T, level slog.Level, payloads bool, globalSecret, message string) string {
	t.Helper()
	var log syncBuffer
	logger := redactLoggerLive(slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: level})), newLiveRedactor(newRedactor(globalSecret)))
	c, err := connect(t.Context(), secretFakeServer(t), clientOptions{Logger: logger, LogPayloads: payloads})
	if err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"message": message})
	if _, err := c.callTool(t.Context(), "echo", args); err != nil {
		t.Fatal(err)
	}
	if err := c.request(t.Context(), rpcRequest{method: "no/such"}, nil); err == nil {
		t.Error("no/such succeeded, want -32601")
	}
	c.close()
	return log.String()
}

func TestMCPTrace(t *testing.T) {
	t.Parallel()
	const globalSecret = "global-secret-0123456789"
	message := "use " + transcriptSecret + " and " + globalSecret + " " + strings.Repeat("x", 3000)
	for _, tt := range []struct {
		name     string
		payloads bool
	}{
		{"without payloads", false},
		{"with payloads", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			log := traceSession(t, slog.LevelDebug, tt.payloads, globalSecret, message)
			if strings.Contains(log, transcriptSecret) || strings.Contains(log, globalSecret) {
				t.Errorf("the log shows a secret:\n%s", log)
			}
			lines := traceLines(t, log)
			seen := map[string]traceLine{}
			for _, l := range lines {
				seen[l.Direction+" "+l.Kind+" "+l.Method] = l
				if l.Server != "fake" || l.Bytes <= 0 {
					t.Errorf("trace line %+v: want server fake and a size", l)
				}
				if (l.Payload != nil) != tt.payloads {
					t.Errorf("trace line %+v: payload present = %v, want %v", l, l.Payload != nil, tt.payloads)
				}
				if l.Payload != nil && len(*l.Payload) > tracePayloadBytes+len("…") {
					t.Errorf("payload of %d bytes, want it cut at %d", len(*l.Payload), tracePayloadBytes)
				}
			}
			call, answer := seen["send request tools/call"], seen["recv response tools/call"]
			if call.ID == "" || answer.ID != call.ID || answer.DurationMS == nil || *answer.DurationMS < 0 || answer.Outcome != "ok" {
				t.Errorf("tools/call = %+v, answer = %+v: want the answer with the call's id, a duration and outcome ok", call, answer)
			}
			if call.Bytes < len(message) {
				t.Errorf("tools/call size = %d, want at least the message's %d", call.Bytes, len(message))
			}
			if bad := seen["recv response no/such"]; bad.Outcome != "error" || bad.Code != codeMethodNotFound || bad.DurationMS == nil {
				t.Errorf("answer to no/such = %+v, want outcome error, code %d and a duration", bad, codeMethodNotFound)
			}
			for _, want := range []string{"send request initialize", "recv response initialize", "send notification notifications/initialized"} {
				if _, ok := seen[want]; !ok {
					t.Errorf("no trace line %q among %v", want, lines)
				}
			}
			if tt.payloads {
				if p := *call.Payload; !strings.Contains(p, `"use [redacted] and [redacted] xxx`) || !strings.HasSuffix(p, "…") {
					t.Errorf("tools/call payload = %.200q…, want the message redacted, then cut", p)
				}
			}
		})
	}
	t.Run("info level", func(t *testing.T) {
		if lines := traceLines(t, traceSession(t, slog.LevelInfo, true, globalSecret, "hi")); len(lines) != 0 {
			t.Errorf("trace lines at info level: %+v, want none", lines)
		}
	})
}

func TestLogPayloadsFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		want    bool
		wantErr string
	}{
		{name: "off by default", want: false},
		{name: "env", env: map[string]string{logPayloadsEnv: "true"}, want: true},
		{name: "flag over env", env: map[string]string{logPayloadsEnv: "1"}, args: []string{"--log-mcp-payloads=false"}, want: false},
		{name: "flag", args: []string{"--log-mcp-payloads"}, want: true},
		{name: "bad env", env: map[string]string{logPayloadsEnv: "yes please"}, wantErr: `HARNESS_LOG_MCP_PAYLOADS: "yes please" is not a boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			on, err := registerLogPayloadsFlag(fs, fakeEnv(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("registerLogPayloadsFlag(%v) error = %v, want %q", tt.env, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if *on != tt.want {
				t.Errorf("--log-mcp-payloads with env %v and args %v = %v, want %v", tt.env, tt.args, *on, tt.want)
			}
		})
	}
}
