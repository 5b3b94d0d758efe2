package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// turnTestWaiter is a call of the turn tests: its answer arrives on ch,
// with where it was read.
type turnTestWaiter struct{ ch chan turnTestAnswer }

type turnTestAnswer struct {
	msg    []byte
	reader string // "call" or "reader goroutine"
}

func (w *turnTestWaiter) answered() bool { return len(w.ch) > 0 }

// turnTest drives a stdio transport as a client's calls do: a waiting
// call takes the turn when it can and reads for itself.
type turnTest struct {
	tr      *stdioTransport
	mu      sync.Mutex
	waiting map[string]*turnTestWaiter // by id; guarded by mu
}

// startTurnTest starts a fake server in mode normal. idleDelay is the
// transport's.
func startTurnTest(t *testing.T, idleDelay time.Duration) *turnTest {
	t.Helper()
	cfg := fakeServerConfig(t, "normal")
	tr, err := startStdio(cfg, stdioEnv(cfg, os.LookupEnv), nil, testStopGrace, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.close() })
	tr.idleDelay = idleDelay
	tt := &turnTest{tr: tr, waiting: map[string]*turnTestWaiter{}}
	tr.listen(tt.deliver, func() {})
	return tt
}

// deliver hands an answer to its waiter, saying which goroutine read it.
func (tt *turnTest) deliver(msg []byte) {
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	json.Unmarshal(msg, &m)
	buf := make([]byte, 16<<10)
	stack := string(buf[:runtime.Stack(buf, false)])
	reader := "unknown"
	switch {
	case strings.Contains(stack, ".readFor("):
		reader = "call"
	case strings.Contains(stack, ".readStdout("):
		reader = "reader goroutine"
	}
	tt.mu.Lock()
	w := tt.waiting[string(m.ID)]
	delete(tt.waiting, string(m.ID))
	tt.mu.Unlock()
	if w != nil {
		w.ch <- turnTestAnswer{msg: msg, reader: reader}
	}
}

// send sends tools/call of tool with message under id and returns its
// waiter.
func (tt *turnTest) send(t *testing.T, id int, tool, message string) *turnTestWaiter {
	t.Helper()
	w := &turnTestWaiter{ch: make(chan turnTestAnswer, 1)}
	tt.mu.Lock()
	tt.waiting[fmt.Sprint(id)] = w
	tt.mu.Unlock()
	req := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{"message":%q}}}`, id, tool, message)
	if err := tt.tr.send(t.Context(), []byte(req)); err != nil {
		t.Fatalf("send %s: %v", req, err)
	}
	return w
}

// call calls tool and waits for its answer as conn.await does.
func (tt *turnTest) call(ctx context.Context, t *testing.T, id int, tool, message string) (turnTestAnswer, error) {
	w := tt.send(t, id, tool, message)
	turn := tt.tr.wantTurn()
	for {
		select {
		case a := <-w.ch:
			return a, nil
		case <-turn:
			tt.tr.readFor(ctx, w)
			turn = nil
		case <-ctx.Done():
			return turnTestAnswer{}, ctx.Err()
		}
	}
}

// TestStdioCallsReadTheirOwnAnswers keeps the reader goroutine from
// reading: every answer must then be read by a waiting call, its own or
// another's, and a call whose context ends while it reads must give the
// turn back.
func TestStdioCallsReadTheirOwnAnswers(t *testing.T) {
	t.Parallel()
	tt := startTurnTest(t, time.Hour)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	id := 0
	check := func(a turnTestAnswer, err error, message string) {
		t.Helper()
		if err != nil {
			t.Fatalf("call %q: %v", message, err)
		}
		if !strings.Contains(string(a.msg), message) || a.reader != "call" {
			t.Fatalf("call %q = %s, read by %s; want its echo, read by a call", message, a.msg, a.reader)
		}
	}
	for range 50 {
		id++
		message := fmt.Sprintf("one by one %d", id)
		a, err := tt.call(ctx, t, id, "echo", message)
		check(a, err, message)
	}

	// A call whose context ends while it holds the turn gives it back.
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	id++
	if _, err := tt.call(short, t, id, "hang", ""); err != context.DeadlineExceeded {
		t.Fatalf("call of hang = %v, want %v", err, context.DeadlineExceeded)
	}
	cancelShort()
	id++
	a, err := tt.call(ctx, t, id, "echo", "after the hang")
	check(a, err, "after the hang")

	// Calls at once: whoever holds the turn reads for the others too.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for g := range 8 {
		base := 1000 * (g + 1)
		wg.Go(func() {
			for i := range 50 {
				message := fmt.Sprintf("together %d", base+i)
				a, err := tt.call(ctx, t, base+i, "echo", message)
				mu.Lock()
				check(a, err, message)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// TestStdioReaderGoroutineReadsBetweenCalls: what the server sends while
// no call waits is read by the reader goroutine, and calls after it still
// get their answers.
func TestStdioReaderGoroutineReadsBetweenCalls(t *testing.T) {
	t.Parallel()
	tt := startTurnTest(t, idleReadDelay)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := tt.send(t, 1, "echo", "unasked")
	select {
	case a := <-w.ch:
		if a.reader != "reader goroutine" {
			t.Errorf("answer with no call waiting read by %s, want the reader goroutine", a.reader)
		}
	case <-ctx.Done():
		t.Fatal("answer with no call waiting: not read")
	}
	for i := 2; i < 10; i++ {
		message := fmt.Sprintf("call %d", i)
		a, err := tt.call(ctx, t, i, "echo", message)
		if err != nil || !strings.Contains(string(a.msg), message) {
			t.Fatalf("call %q = %s, %v", message, a.msg, err)
		}
	}
}
