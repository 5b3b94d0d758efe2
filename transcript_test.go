package main

import (
	"fmt"
	"strings"
	"testing"
)

// This file holds the tests of what a run shows of its tool calls: the
// arguments and results in its events, cut and redacted.

// transcriptSecret is the env value of the fake server the tests here
// configure: every run may quote it, and nothing may show it.
const transcriptSecret = "tr-secret-0123456789"

// secretFakeServer returns the fake server with transcriptSecret in its
// env.
func secretFakeServer(t *testing.T) serverConfig {
	t.Helper()
	s := fakeServerConfig(t, "normal")
	s.Env["API_TOKEN"] = transcriptSecret
	return s
}

// eventsOf returns the data of r's events of type typ, in order.
func eventsOf(r *run, typ string) []map[string]any {
	events, _, _ := r.eventsAfter(0)
	var out []map[string]any
	for _, ev := range events {
		if ev.Type == typ {
			d, _ := ev.Data.(map[string]any)
			out = append(out, d)
		}
	}
	return out
}

func TestToolEventsCarryArgumentsAndResult(t *testing.T) {
	long := strings.Repeat("L", 3000)
	tests := []struct {
		name, message string
		// want is what the event's arguments and result contain; wantCut
		// says whether they were cut (and carry their full size).
		wantArgs, wantResult string
		wantCut              bool
	}{
		{name: "short", message: "hello", wantArgs: `{"message":"hello"}`, wantResult: "hello"},
		{name: "secret", message: "token " + transcriptSecret, wantArgs: `{"message":"token [redacted]"}`, wantResult: "token [redacted]"},
		{name: "long", message: long, wantArgs: `{"message":"` + long[:1024-len(`{"message":"`)] + "…", wantResult: long[:1024] + "…", wantCut: true},
	}
	var calls []toolCall
	for i, tt := range tests {
		args := fmt.Sprintf(`{"message":%q}`, tt.message)
		calls = append(calls, toolCall{ID: fmt.Sprintf("call_%d", i), Name: "mcp_fake_echo", Arguments: []byte(args)})
	}
	f := newFakeModel(t, "openai", fakeTurn{ToolCalls: calls}, fakeTurn{Text: "done"})
	reg := newPeerRegistry(t, "", secretFakeServer(t))
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.Limits.MaxToolEventBytes = 1024
	m := newRunsWith(t, opts)
	r := startRun(t, m, runRequest{Prompt: "echo them"})
	if v := waitRun(t, r); v.Status != runCompleted {
		t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
	}
	started, completed := eventsOf(r, "tool.call.started"), eventsOf(r, "tool.call.completed")
	byCall := func(events []map[string]any, id string) map[string]any {
		for _, d := range events {
			if d["call_id"] == id {
				return d
			}
		}
		t.Fatalf("no event of call %s in %v", id, events)
		return nil
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("call_%d", i)
			s, c := byCall(started, id), byCall(completed, id)
			if s["arguments"] != tt.wantArgs {
				t.Errorf("tool.call.started arguments = %.80q, want %.80q", s["arguments"], tt.wantArgs)
			}
			if c["result"] != tt.wantResult || c["is_error"] != false {
				t.Errorf("tool.call.completed result, is_error = %.80q, %v, want %.80q, false", c["result"], c["is_error"], tt.wantResult)
			}
			_, argsSized := s["arguments_bytes"]
			_, resultSized := c["result_bytes"]
			if argsSized != tt.wantCut || resultSized != tt.wantCut {
				t.Errorf("arguments_bytes, result_bytes present = %v, %v, want %v", argsSized, resultSized, tt.wantCut)
			}
			if tt.wantCut && (s["arguments_bytes"] != len(`{"message":""}`)+len(long) || c["result_bytes"] != len(long)) {
				t.Errorf("arguments_bytes, result_bytes = %v, %v, want the full sizes", s["arguments_bytes"], c["result_bytes"])
			}
		})
	}
}
