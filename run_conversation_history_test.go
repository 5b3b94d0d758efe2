package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// This file checks a conversation's history, assembled a run at a time,
// against the whole transcript made valid and trimmed, on conversations
// drawn at random.

// randomRun returns the transcript lines of a run drawn from rng: a
// system prompt now and then, a prompt (rarely none), model answers with
// tool calls, results of any size, some missing, some answering nothing,
// and now and then a line that is not JSON.
func randomRun(rng *rand.Rand, n int) []json.RawMessage {
	var msgs []transcriptMessage
	text := func(max int) string { return strings.Repeat("x", rng.IntN(max)) }
	if rng.IntN(4) == 0 {
		msgs = append(msgs, transcriptMessage{Role: roleSystem, Content: fmt.Sprintf("system %d", n)})
	}
	if rng.IntN(10) == 0 {
		// A result at the start, answering the last run's open call or
		// nothing.
		msgs = append(msgs, transcriptMessage{Role: roleTool, ToolCallID: fmt.Sprintf("c%d_0", n-1), Content: text(400)})
	}
	if rng.IntN(12) != 0 {
		msgs = append(msgs, transcriptMessage{Role: roleUser, Content: fmt.Sprintf("prompt %d %s", n, text(200))})
	}
	for step := range rng.IntN(4) {
		var calls []transcriptToolCall
		for c := range rng.IntN(3) {
			calls = append(calls, transcriptToolCall{ID: fmt.Sprintf("c%d_%d", n, step*3+c), Name: "tool", Arguments: json.RawMessage(`{"a":1}`)})
		}
		msgs = append(msgs, transcriptMessage{Role: roleAssistant, Content: text(300), ToolCalls: calls})
		for _, c := range calls {
			if rng.IntN(6) == 0 {
				continue // no result kept
			}
			sizes := []int{20, 150, 2000, 9000}
			msgs = append(msgs, transcriptMessage{Role: roleTool, ToolCallID: c.ID, Content: text(sizes[rng.IntN(len(sizes))])})
		}
		if rng.IntN(10) == 0 {
			msgs = append(msgs, transcriptMessage{Role: roleTool, ToolCallID: "nobody", Content: text(100)})
		}
	}
	var out []json.RawMessage
	for _, m := range msgs {
		b, _ := json.Marshal(m)
		out = append(out, b)
		if rng.IntN(30) == 0 {
			out = append(out, json.RawMessage("{not json"))
		}
	}
	return out
}

// TestConversationHistoryMatchesWhole adds random runs to a history one
// at a time and checks, after each, that what it assembles for prompts
// of several sizes, and its system prompt, are what the whole transcript
// gives, and that what it keeps stays within the limit and a turn.
func TestConversationHistoryMatchesWhole(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		limit int
		runs  int
		drops bool // the history drops turns as it goes
	}{
		{name: "never trimmed", limit: 1 << 30, runs: 40},
		{name: "results trimmed", limit: 100000, runs: 40},
		{name: "turns dropped", limit: 4000, runs: 120, drops: true},
		{name: "tiny", limit: 50, runs: 60, drops: true},
		{name: "nothing", limit: -1, runs: 20, drops: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(8) {
				rng := rand.New(rand.NewPCG(seed, 38))
				h := &conversationHistory{historyState: historyState{limit: tc.limit}}
				var whole []chatMessage
				system := ""
				for n := range tc.runs {
					raw := randomRun(rng, n)
					h.add(raw)
					for _, line := range raw {
						var m transcriptMessage
						if json.Unmarshal(line, &m) != nil {
							continue
						}
						if m.Role == roleSystem {
							system = m.Content
							continue
						}
						whole = append(whole, m.chat())
					}
					if h.system != system {
						t.Fatalf("seed %d run %d: system %q, want %q", seed, n, h.system, system)
					}
					for _, prompt := range []int{0, 10, 3000} {
						want, wantTrim := trimConversation(validTranscript(whole), prompt, tc.limit)
						got, gotTrim := h.assemble(prompt)
						if !reflect.DeepEqual(got, want) || gotTrim != wantTrim {
							t.Fatalf("seed %d run %d prompt %d: assembled %d messages %+v, want %d %+v",
								seed, n, prompt, len(got), gotTrim, len(want), wantTrim)
						}
					}
					if kept := historyBytes(h.msgs); kept != h.bytes {
						t.Fatalf("seed %d run %d: history counts %d bytes, holds %d", seed, n, h.bytes, kept)
					}
					// Past the limit it keeps only the first turn after
					// the first prompt, which could not be dropped, or the
					// first prompt and one turn.
					if len(h.msgs) > 1 && h.msgs[0].Role == roleUser {
						end := turnEnd(h.msgs, 1)
						if h.bytes > tc.limit+historyBytes(h.msgs[1:end]) && end < len(h.msgs) {
							t.Fatalf("seed %d run %d: history keeps %d bytes in %d messages, limit %d", seed, n, h.bytes, len(h.msgs), tc.limit)
						}
					}
				}
				if dropped := h.trimmed.Turns > 0; dropped != tc.drops {
					t.Errorf("seed %d: history dropped %d turns of its own, want some: %v", seed, h.trimmed.Turns, tc.drops)
				}
			}
		})
	}
}
