package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds the tool-call soak: many echo calls from concurrent
// callers to the official Go SDK's server, over stdio and Streamable HTTP
// at both revisions, failing on any answer harnessd lost or crossed, with
// the last messages each side saw. Over stdio the server writes what it
// read and wrote to a trace with times (echoserver -trace), which places a
// loss: a call whose request the server read and did not answer in time is
// the server's (the Go SDK server sometimes stalls, every call in flight
// held until its stdin brings another message: about once in 100,000
// calls under load), counted and logged; an answer the server wrote in
// time that the call never got is harnessd's, and fails the test.

// soakCallsEnv sets how many calls TestToolCallSoak makes per transport and
// revision (default soakCallsDefault); .ci/run sets 100000.
const soakCallsEnv = "HARNESS_SOAK_CALLS"

const (
	// soakCallsDefault is the suite's: under -race, enough calls in flight
	// for the detector to see every path (it reports two accesses that no
	// synchronisation orders whenever both happen, not only when they
	// collide; 25 calls per caller take each path many times). The
	// volume that finds a rare loss is .ci/run's, 100,000 calls per
	// transport and revision without -race: 1000 here only spent the
	// suite's time.
	soakCallsDefault = 200
	// soakTimeout bounds one call: far above any honest answer on a loaded
	// machine, far below the hour a lost answer would otherwise cost.
	soakTimeout = 10 * time.Second
	// soakServerLosses is how many calls the server may hold past their
	// timeout before the soak stops counting and fails: one stall of the
	// Go SDK server holds every call in flight, up to 8.
	soakServerLosses = 40
	// soakTraceLines is how many of the client's last trace lines a failure
	// shows.
	soakTraceLines = 64
)

func TestToolCallSoak(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("makes thousands of calls to a real server")
	}
	calls := soakCallsDefault
	if v := os.Getenv(soakCallsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 8 {
			t.Fatalf("%s=%q: want a whole number of at least 8", soakCallsEnv, v)
		}
		calls = n
	}
	tests := []struct {
		name      string
		transport string
		mode      string // the echoserver's HTTP mode
		pin       string // protocol_version
		want      string // the revision negotiated
		callers   int
	}{
		{"stdio/2026-07-28", transportStdio, "", "", "2026-07-28", 8},
		{"stdio/2025-11-25", transportStdio, "", "2025-11-25", "2025-11-25", 8},
		{"http/2026-07-28", transportHTTP, "http-stateless", "", "2026-07-28", 8},
		{"http/2025-11-25", transportHTTP, "http", "", "2025-11-25", 8},
		// One call at a time, as BenchmarkStdioToolCall2025's seq, where an
		// answer was once lost.
		{"stdio/2025-11-25/seq", transportStdio, "", "2025-11-25", "2025-11-25", 1},
		{"stdio/2026-07-28/seq", transportStdio, "", "", "2026-07-28", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serverConfig{Name: "soak", Transport: tt.transport, Timeout: soakTimeout, StartupTimeout: defaultStartupTimeout,
				Enabled: true, MaxMessageBytes: defaultMaxMessageBytes, Source: "test", ProtocolVersion: tt.pin}
			serverTrace := ""
			if tt.transport == transportStdio {
				serverTrace = filepath.Join(t.TempDir(), "server.trace")
				cfg.Command, cfg.Args = buildEchoServer(t), []string{"stdio", "-trace", serverTrace}
			} else {
				cfg.URL = startEchoServerHTTP(t, tt.mode)
			}
			ring := newLogRing(soakTraceLines)
			c, err := connect(t.Context(), cfg, clientOptions{Logger: slog.New(ring)})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			t.Cleanup(func() { c.close() })
			if got := c.protocolVersion(); got != tt.want {
				t.Fatalf("protocol version %q, want %q", got, tt.want)
			}
			serverLost := func(msg string, sent time.Time) bool {
				return serverTrace != "" && unansweredByServer(serverTrace, msg, sent)
			}
			lost, err := soakCalls(t.Context(), c, calls, tt.callers, serverLost)
			if err != nil {
				t.Errorf("%v\nthe client's last %d trace lines:\n%s\nthe server's last messages:\n%s",
					err, soakTraceLines, ring.String(), tailFile(serverTrace, 8<<10))
			}
			if len(lost) > 0 {
				t.Logf("%d of %d calls were read by the server and not answered within their timeout (the server's loss, shown by its trace): %s",
					len(lost), calls, strings.Join(lost, ", "))
			}
		})
	}
}

// soakCalls makes calls echo calls from callers goroutines, each call with
// a message of its own. It returns the messages of the calls that timed
// out because the server never answered (serverLost says so), and the first
// failure: any other error, an answer that is not the call's own message,
// or more than soakServerLosses server losses.
func soakCalls(ctx context.Context, c *mcpClient, calls, callers int, serverLost func(msg string, sent time.Time) bool) ([]string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		losses []string
	)
	for caller := range callers {
		wg.Add(1)
		// Owned by soakCalls; ends after its share of calls or at the
		// first failure of any caller.
		go func() {
			defer wg.Done()
			for i := caller; i < calls && ctx.Err() == nil; i += callers {
				msg := fmt.Sprintf("soak-%d", i)
				start := time.Now()
				res, err := c.callTool(ctx, "echo", []byte(`{"message":"`+msg+`"}`))
				if errors.Is(err, errTimeout) && serverLost(msg, start) {
					mu.Lock()
					losses = append(losses, msg)
					n := len(losses)
					mu.Unlock()
					if n > soakServerLosses {
						cancel(fmt.Errorf("the server left %d calls unanswered, more than %d", n, soakServerLosses))
						return
					}
					continue
				}
				if err != nil {
					cancel(fmt.Errorf("call %d (%s) failed after %s: %w", i, msg, time.Since(start).Round(time.Millisecond), err))
					return
				}
				if got := resultToText(res); got != msg {
					cancel(fmt.Errorf("call %d: echo(%q) = %q: an answer crossed to the wrong call", i, msg, got))
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && ctx.Err() != nil {
		return losses, err
	}
	return losses, nil
}

// unansweredByServer reports whether the server's trace (each line stamped
// with the time of day, echoserver -trace) shows the request whose message
// is msg, sent at sent, held by the server: read more than half a call's
// timeout after it was sent (the server stopped reading its stdin: with
// at most eight requests in flight, far less than a pipe holds, the
// client's write of it does not wait on the server), or read and its
// result not written within half a call's timeout. An answer the server
// wrote in time that the call never got, or a request it never read, is
// the client's loss.
func unansweredByServer(trace, msg string, sent time.Time) bool {
	f, err := os.Open(trace)
	if err != nil {
		return false
	}
	defer f.Close()
	quoted := `"message":"` + msg + `"`
	result := `"text":"` + msg + `"`
	var read, wrote time.Time
	scanner := bufio.NewScanner(f)
	scanner.Buffer(make([]byte, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		stamp, rest, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		at, err := time.Parse("15:04:05.000000", stamp)
		if err != nil {
			continue
		}
		switch {
		case strings.HasPrefix(rest, "read: ") && strings.Contains(rest, quoted):
			read = at
		case strings.HasPrefix(rest, "write: ") && strings.Contains(rest, result):
			wrote = at
		}
	}
	if read.IsZero() {
		return false
	}
	// The trace has the time of day alone: sent on the same clock.
	sentAt := time.Date(0, 1, 1, sent.Hour(), sent.Minute(), sent.Second(), sent.Nanosecond(), time.UTC)
	late := read.Sub(sentAt)
	if late < -12*time.Hour {
		late += 24 * time.Hour // read after midnight
	}
	return late > soakTimeout/2 || wrote.IsZero() || wrote.Sub(read) > soakTimeout/2
}

// A logRing is a slog.Handler at debug level keeping the last lines it was
// given, for a failure to show. Safe for concurrent use.
type logRing struct {
	attrs string
	state *logRingState
}

type logRingState struct {
	mu sync.Mutex
	// guards lines and next
	lines []string
	next  int
}

func newLogRing(n int) *logRing {
	return &logRing{state: &logRingState{lines: make([]string, n)}}
}

func (r *logRing) Enabled(context.Context, slog.Level) bool { return true }

func (r *logRing) Handle(_ context.Context, rec slog.Record) error {
	var b strings.Builder
	b.WriteString(rec.Time.Format("15:04:05.000000 "))
	b.WriteString(rec.Message)
	b.WriteString(r.attrs)
	rec.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
		return true
	})
	s := r.state
	s.mu.Lock()
	s.lines[s.next%len(s.lines)] = b.String()
	s.next++
	s.mu.Unlock()
	return nil
}

func (r *logRing) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(r.attrs)
	for _, a := range attrs {
		fmt.Fprintf(&b, " %s=%v", a.Key, a.Value)
	}
	return &logRing{attrs: b.String(), state: r.state}
}

func (r *logRing) WithGroup(string) slog.Handler { return r }

// String returns the kept lines, oldest first.
func (r *logRing) String() string {
	s := r.state
	s.mu.Lock()
	defer s.mu.Unlock()
	var b strings.Builder
	for i := max(0, s.next-len(s.lines)); i < s.next; i++ {
		b.WriteString(s.lines[i%len(s.lines)])
		b.WriteByte('\n')
	}
	return b.String()
}

// tailFile returns the last n bytes of the file at path, or a word on why
// there are none.
func tailFile(path string, n int64) string {
	if path == "" {
		return "(none: the server's side of an HTTP call is its answer)"
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if int64(len(data)) > n {
		data = data[int64(len(data))-n:]
	}
	return string(data)
}

func TestUnansweredByServer(t *testing.T) {
	t.Parallel()
	read := func(at string) string {
		return at + ` read: {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"message":"soak-5"}}}`
	}
	sent := time.Date(2026, 12, 1, 10, 0, 0, 0, time.Local)
	write := func(at string) string {
		return at + ` write: {"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"soak-5"}]}}`
	}
	tests := []struct {
		name  string
		lines []string
		want  bool
	}{
		{"answered at once: the client lost it", []string{read("10:00:00.000000"), write("10:00:00.000300")}, false},
		{"answered after the timeout: the server held it", []string{read("10:00:00.000000"), write("10:00:10.000300")}, true},
		{"never answered", []string{read("10:00:00.000000")}, true},
		{"never read: the client lost the request", []string{write("10:00:00.000300")}, false},
		{"read after the timeout, answered at once: the server held it", []string{read("10:00:10.003000"), write("10:00:10.003300")}, true},
		{"read a little late, answered at once: the client lost it", []string{read("10:00:00.200000"), write("10:00:00.200300")}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trace := filepath.Join(t.TempDir(), "trace")
			if err := os.WriteFile(trace, []byte(strings.Join(tt.lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := unansweredByServer(trace, "soak-5", sent); got != tt.want {
				t.Errorf("unansweredByServer() = %v, want %v", got, tt.want)
			}
		})
	}
}
