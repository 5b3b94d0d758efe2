package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests the request deadlines of a session's conn over a
// transport whose server is the test (pipeTransport): progress extends a
// call's deadline, and the handshake waits for startup_timeout.

// TestClientProgressExtendsDeadline runs two calls with the same timeout
// against a scripted server: one kept alive by progress notifications,
// one without. The silent one times out; the other, which started first,
// is still waiting then, and gets its answer.
func TestClientProgressExtendsDeadline(t *testing.T) {
	t.Parallel()
	// The bubble's clock is fake: the second the silent call waits takes
	// no time.
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		pt := newPipeTransport()
		c := &mcpClient{conn: newConn(serverConfig{Name: "scripted", Timeout: timeout}, clientOptions{}, discardLogger(), pt)}
		t.Cleanup(func() { c.close() })

		type outcome struct {
			res *callResult
			err error
		}
		// start calls tool and returns its outcome and the request's id and
		// progress token as the server sees them.
		start := func(tool string) (<-chan outcome, string, string) {
			done := make(chan outcome, 1)
			go func() {
				res, err := c.callTool(t.Context(), tool, nil)
				done <- outcome{res, err}
			}()
			var req struct {
				ID     json.RawMessage `json:"id"`
				Params struct {
					Meta struct {
						ProgressToken json.RawMessage `json:"progressToken"`
					} `json:"_meta"`
				} `json:"params"`
			}
			if err := json.Unmarshal(<-pt.sent, &req); err != nil {
				t.Fatal(err)
			}
			return done, string(req.ID), string(req.Params.Meta.ProgressToken)
		}
		long, longID, token := start("long")
		if token == "" {
			t.Fatal("tools/call carries no progress token")
		}
		silent, _, _ := start("silent")

		pace := time.NewTicker(timeout / 20)
		defer pace.Stop()
		for step := 0; ; step++ {
			pt.msgs <- []byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d}}`, token, step))
			select {
			case o := <-long:
				t.Fatalf("callTool(long) with progress = %v, %v before the silent call timed out, want it still waiting", o.res, o.err)
			case o := <-silent:
				if !errors.Is(o.err, errTimeout) {
					t.Fatalf("callTool(silent) = %v, %v, want errTimeout", o.res, o.err)
				}
			case <-pace.C:
				continue
			}
			break
		}
		pt.msgs <- []byte(`{"jsonrpc":"2.0","id":` + longID + `,"result":{"content":[{"type":"text","text":"done"}]}}`)
		if o := <-long; o.err != nil || resultText(t, o.res) != "done" {
			t.Errorf("callTool(long) = %v, %v, want done", o.res, o.err)
		}
	})
}

// TestHandshakeBoundedByStartupTimeout checks that the handshake waits
// for startup_timeout, not for the per-request timeout: with a timeout of
// one nanosecond, a call times out at once while the handshake, answered
// later, succeeds.
func TestHandshakeBoundedByStartupTimeout(t *testing.T) {
	t.Parallel()
	pt := newPipeTransport()
	c := newConn(serverConfig{Name: "scripted", Timeout: time.Nanosecond, StartupTimeout: time.Minute}, clientOptions{}, discardLogger(), pt)
	t.Cleanup(func() { c.close() })

	answer := func() {
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		if err := json.Unmarshal(<-pt.sent, &req); err != nil {
			t.Error(err)
			return
		}
		pt.msgs <- []byte(`{"jsonrpc":"2.0","id":` + string(req.ID) + `,"result":{}}`)
	}
	go answer()
	if _, err := c.roundTrip(t.Context(), rpcRequest{method: "initialize", params: struct{}{}, handshake: true}); err != nil {
		t.Fatalf("handshake with a 1ns request timeout = %v, want its answer", err)
	}
	if _, err := c.roundTrip(t.Context(), rpcRequest{method: "tools/list", params: struct{}{}}); !errors.Is(err, errTimeout) {
		t.Fatalf("tools/list with a 1ns request timeout = %v, want errTimeout", err)
	}
}

// A pipeTransport is a transport whose server is the test: what the
// client sends arrives on sent, and the test delivers the server's
// messages on msgs (never after close). Safe for concurrent use.
type pipeTransport struct {
	sent      chan []byte
	msgs      chan []byte
	closeOnce sync.Once
}

func newPipeTransport() *pipeTransport {
	return &pipeTransport{sent: make(chan []byte, 16), msgs: make(chan []byte)}
}

func (p *pipeTransport) send(ctx context.Context, msg []byte) error {
	select {
	case p.sent <- msg:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (p *pipeTransport) listen(deliver func([]byte), ended func()) {
	relay(p.msgs, deliver, ended)
}
func (p *pipeTransport) endErr() error { return nil }
func (p *pipeTransport) close() error {
	p.closeOnce.Do(func() { close(p.msgs) })
	return nil
}

// TestEncodeRequest checks the request envelope written by hand against
// the encoder's.
func TestEncodeRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		id     int64
		method string
		params json.RawMessage
	}{
		{"params", 7, "tools/call", json.RawMessage(`{"_meta":{"progressToken":7},"name":"echo","arguments":{"message":"<hi>"}}`)},
		{"no params", 1, "ping", nil},
		{"null params", 2, "tools/list", json.RawMessage(`null`)},
		{"negative id", -3, "x", json.RawMessage(`{}`)},
		{"method to escape", 4, "a\"b\\c\u00e9\n", json.RawMessage(`{}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := encodeRequest(tc.id, tc.method, tc.params)
			if err != nil {
				t.Fatal(err)
			}
			var params any // no params are left out, as roundTrip's nil params were
			if tc.params != nil {
				params = tc.params
			}
			want, err := marshalJSON(outgoingRequest{JSONRPC: "2.0", ID: &tc.id, Method: tc.method, Params: params})
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("encodeRequest(%d, %q, %s) = %s, want %s", tc.id, tc.method, tc.params, got, want)
			}
		})
	}
}
