package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// This file tests input-required rounds (mcpserve_rounds.go): at
// 2026-07-28 a client that takes elicitation, and not the tasks
// extension, is asked about a run's approval by a run call that ends with
// resultType input_required; its retry with the answer and the
// requestState holds the same run to its end.

func TestMCPServeInputRequiredRounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, answer, text string
	}{
		{"approved", `{"action":"accept","content":{"decision":"approve"}}`, "echoed hello"},
		{"denied", `{"action":"decline"}`, "denied"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := newMCPTest(t, findThenEcho()...)
			c := newTaskClient(t, at, mcpAliceToken, sessionlessProtocolVersion)
			c.caps = map[string]any{"elicitation": map[string]any{}}
			args := json.RawMessage(`{"prompt":"echo hello","approval":"always"}`)
			first := c.call(t, "tools/call", map[string]any{"name": "run", "arguments": args})
			var round inputRequiredAnswer
			if first.Error != nil || json.Unmarshal(first.Result, &round) != nil || round.ResultType != resultTypeInputRequired ||
				len(round.InputRequests) != 1 || round.RequestState.RunID == "" {
				t.Fatalf("run = %s %v, want an input_required round with one request and the run in requestState", first.Result, first.Error)
			}
			responses := map[string]json.RawMessage{}
			for key, req := range round.InputRequests {
				if msg, _ := req.Params["message"].(string); req.Method != "elicitation/create" || !strings.Contains(msg, "mcp_fake_echo") {
					t.Errorf("inputRequests[%s] = %+v, want an elicitation/create naming the tool", key, req)
				}
				responses[key] = json.RawMessage(tt.answer)
			}
			state, _ := json.Marshal(round.RequestState)
			second := c.call(t, "tools/call", map[string]any{"name": "run", "arguments": args,
				"inputResponses": responses, "requestState": json.RawMessage(state)})
			var res mcpToolResult
			if second.Error != nil || json.Unmarshal(second.Result, &res) != nil || len(res.Content) == 0 || !strings.Contains(res.Content[0].Text, tt.text) {
				t.Fatalf("the retry = %s %v, want the run's outcome with %q", second.Result, second.Error, tt.text)
			}
			if n := len(listedIDs(t, at, "/v1/runs", "runs", "Bearer "+mcpAliceToken)); n != 1 {
				t.Errorf("the key has %d runs, want 1: the retry takes up the run, it starts none", n)
			}
			// Another key cannot take up the run through a requestState.
			bob := newTaskClient(t, at, mcpBobToken, sessionlessProtocolVersion)
			bob.caps = c.caps
			stolen := bob.call(t, "tools/call", map[string]any{"name": "run", "arguments": args, "requestState": json.RawMessage(state)})
			if !strings.Contains(string(stolen.Result), "not found") {
				t.Errorf("another key's retry = %s, want the run not found", stolen.Result)
			}
		})
	}
}
