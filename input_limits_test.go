package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// questions returns n elicitation questions keyed q0001...
func questions(n int) map[string]any {
	out := make(map[string]any, n)
	for i := range n {
		out[fmt.Sprintf("q%05d", i)] = elicitQuestion("?")
	}
	return out
}

// TestInputRequiredBounds has servers ask too many questions in
// input-required results: the call fails saying which bound it passed,
// and no question of the refused round is asked.
func TestInputRequiredBounds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		perRound  int
		wantAsked int
		want      string
	}{
		{"a flood in one round", 2000, 0, "over the limit of 16 per round"},
		{"rounds of 16 past the call's bound", 16, 64, "over the limit of 64 per call"},
		{"within bounds until the rounds run out", 4, 32, "after 8 answered rounds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var asked atomic.Int64
			policy := &inputPolicy{
				Prompt: func(context.Context, string, elicitRequest, *elicitSchema) (elicitResult, error) {
					asked.Add(1)
					return elicitResult{Action: actionDecline}, nil
				},
				NoSampling: "no model in this test",
			}
			_, c := startMRTRServer(t, policy, func(string, map[string]json.RawMessage) any {
				return inputRequired("", questions(tt.perRound))
			})
			_, err := c.callTool(t.Context(), "ask", json.RawMessage(`{}`))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("callTool = %v, want an error saying %q", err, tt.want)
			}
			if got := asked.Load(); got != int64(tt.wantAsked) {
				t.Errorf("questions asked = %d, want %d", got, tt.wantAsked)
			}
		})
	}
}

// TestInputRequiredRunBound counts questions over calls of one run: past
// maxInputsPerRun the next call fails.
func TestInputRequiredRunBound(t *testing.T) {
	t.Parallel()
	run := &inputPolicy{DeclineReason: "not interactive", NoSampling: "no model in this test"}
	_, c := startMRTRServer(t, nil, func(_ string, params map[string]json.RawMessage) any {
		if params["inputResponses"] == nil {
			return inputRequired("", questions(maxInputsPerRound))
		}
		return textResult("done")
	})
	ctx := withInputAnswerer(t.Context(), run)
	calls := maxInputsPerRun / maxInputsPerRound
	for i := range calls {
		if _, err := c.callTool(ctx, "ask", json.RawMessage(`{}`)); err != nil {
			t.Fatalf("call %d: %v, want it to pass", i+1, err)
		}
	}
	if _, err := c.callTool(ctx, "ask", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "limit is 256 per run") {
		t.Errorf("call past the run's bound = %v, want an error naming the bound", err)
	}
}

// TestLogThrottle lets one line a second through and reports the rest.
func TestLogThrottle(t *testing.T) {
	t.Parallel()
	var th logThrottle
	ok, held := th.allow()
	if !ok || held != 0 {
		t.Fatalf("first allow = %v, %d, want true, 0", ok, held)
	}
	for range 1000 {
		if ok, _ := th.allow(); ok {
			t.Fatal("a repeated line within the interval was let through")
		}
	}
	th.mu.Lock()
	th.next = th.next.Add(-2 * time.Second) // the interval has passed
	th.mu.Unlock()
	if ok, held := th.allow(); !ok || held != 1000 {
		t.Errorf("allow after the interval = %v, %d, want true, 1000", ok, held)
	}
}
