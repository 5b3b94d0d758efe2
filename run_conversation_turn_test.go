package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
)

// This file tests what a turn of a long conversation sends the model and
// measures what it costs: its time and the bytes the run store reads.

// BenchmarkConversationTurn times a short turn (a prompt and a short
// answer) of a conversation that already has turn-1 such turns, through
// a run manager with a store, and reports the bytes the store read per
// turn. The time and the bytes should not grow with the turn's number
// but for what the turn sends: with the default max_conversation_bytes
// the whole conversation is sent (its encoding, and its decoding by the
// fake model, grow with it); capped at 256 bytes, what is sent is the
// same at turn 10 and at turn 500.
func BenchmarkConversationTurn(b *testing.B) {
	for _, limit := range []struct {
		name  string
		bytes int
	}{{"default", 0}, {"capped", 256}} {
		for _, turn := range []int{10, 500} {
			b.Run(fmt.Sprintf("%s/turn=%d", limit.name, turn), func(b *testing.B) {
				benchConversationTurn(b, turn, limit.bytes)
			})
		}
	}
}

// benchConversationTurn is BenchmarkConversationTurn at turn, with
// max_conversation_bytes limit (0: the default).
func benchConversationTurn(b *testing.B, turn, limit int) {
	script := make([]fakeTurn, turn-1+b.N)
	for i := range script {
		script[i] = fakeTurn{Text: "noted, thank you"}
	}
	f := newFakeModel(b, providerOpenAI, script...)
	reg := newRegistry(nil, registryOptions{Logger: slog.New(slog.DiscardHandler)})
	b.Cleanup(reg.close)
	m := conversationRuns(b, reg, f, b.TempDir(), limit)
	conv := ""
	next := func(i int) {
		r, err := m.start(runRequest{Prompt: fmt.Sprintf("remember item %d", i), ConversationID: conv}, true)
		if err != nil {
			b.Fatal(err)
		}
		if v := waitRun(b, r); v.Status != runCompleted {
			b.Fatalf("turn %d = %s %q, want completed", i, v.Status, v.Error)
		}
		conv = r.conversationID()
	}
	for i := 1; i < turn; i++ {
		next(i)
	}
	store := m.opts.Store
	read := store.log.readBytes.Load()
	b.ResetTimer()
	for i := range b.N {
		next(turn + i)
	}
	b.StopTimer()
	b.ReportMetric(float64(store.log.readBytes.Load()-read)/float64(b.N), "read-B/turn")
}

// wholeConversation returns what the model was sent of earlier runs
// before a run with prompt, assembled the way every turn once did: every
// earlier run's transcript read whole, made valid, then cut to limit.
func wholeConversation(t *testing.T, earlier []*run, prompt string, limit int) ([]chatMessage, conversationTrim) {
	t.Helper()
	var history []chatMessage
	for _, e := range earlier {
		raw, _, err := e.messages()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range raw {
			var m transcriptMessage
			if json.Unmarshal(line, &m) == nil && m.Role != roleSystem {
				history = append(history, m.chat())
			}
		}
	}
	return trimConversation(validTranscript(history), len(prompt), limit)
}

// TestConversationTurnsMatchWhole runs a conversation whose runs call a
// tool with results of various sizes, through a store, with a restart
// half way, and checks that each run sent the model exactly what
// assembling its earlier runs whole gives, and emitted the same
// conversation.trimmed event.
func TestConversationTurnsMatchWhole(t *testing.T) {
	t.Parallel()
	const limit = 6000
	turns := []struct{ result, answer int }{
		{100, 50}, {3000, 20}, {0, 1500}, {2500, 10}, {50, 4000}, {4000, 30},
		{0, 10}, {1200, 600}, {7000, 20}, {0, 300}, {200, 200}, {0, 9000}, {10, 10},
	}
	var script []fakeTurn
	for _, turn := range turns {
		if turn.result > 0 {
			script = append(script, fakeTurn{ToolCalls: []toolCall{call("mcp_fake_big", fmt.Sprintf(`{"size":%d}`, turn.result))}})
		}
		script = append(script, fakeTurn{Text: strings.Repeat("y", turn.answer)})
	}
	f := newFakeModel(t, providerOpenAI, script...)
	big := fakeServerConfig(t, "normal")
	big.Env[faultTagEnv] = "1" // offers the tool "big"
	dir := t.TempDir()
	start := func() *runManager {
		reg := newRegistry([]serverConfig{big}, registryOptions{Client: clientOptions{}})
		t.Cleanup(reg.close)
		if err := reg.waitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
		return conversationRuns(t, reg, f, dir, limit)
	}
	m := start()
	conv := ""
	for i := range turns {
		if i == len(turns)/2 {
			stopRuns(t, m)
			m = start()
		}
		sent := len(f.requests())
		prompt := fmt.Sprintf("turn %d", i+1)
		r, err := m.start(runRequest{Prompt: prompt, ConversationID: conv}, true)
		if err != nil {
			t.Fatal(err)
		}
		if v := waitRun(t, r); v.Status != runCompleted {
			t.Fatalf("run %d = %s %q, want completed", i+1, v.Status, v.Error)
		}
		conv = r.conversationID()
		runs := m.conversationRuns(m.conversation(conv), nil)
		want, trim := wholeConversation(t, runs[:len(runs)-1], prompt, limit)
		got := f.requests()[sent].Messages
		if len(got) != len(want)+1 {
			t.Fatalf("run %d sent %d messages, want %d and its prompt", i+1, len(got), len(want))
		}
		for j, w := range want {
			g := got[j]
			if g.Role != w.Role || g.Content != w.Content || g.ToolCallID != w.ToolCallID || len(g.ToolCalls) != len(w.ToolCalls) {
				t.Errorf("run %d message %d = %s %q (%s, %d calls), want %s %q (%s, %d calls)", i+1, j,
					g.Role, trunc(g.Content), g.ToolCallID, len(g.ToolCalls), w.Role, trunc(w.Content), w.ToolCallID, len(w.ToolCalls))
			}
		}
		var wantEvents []string
		if trim.Messages > 0 || trim.ToolResults > 0 {
			wantEvents = append(wantEvents, string(mustJSON(t, conversationTrimmedEvent(conv, trim, limit))))
		}
		var gotEvents []string
		events, _, _ := r.eventsAfter(0)
		for _, ev := range events {
			if ev.Type == evConversationTrimmed {
				gotEvents = append(gotEvents, string(mustJSON(t, ev.Data)))
			}
		}
		if !slices.Equal(gotEvents, wantEvents) {
			t.Errorf("run %d conversation.trimmed = %v, want %v", i+1, gotEvents, wantEvents)
		}
		t.Logf("run %d: %d messages sent, trimmed %+v", i+1, len(want), trim)
	}
}

// trunc returns s cut to 60 bytes, for messages.
func trunc(s string) string {
	if len(s) > 60 {
		return s[:60] + "..."
	}
	return s
}

// conversationRuns returns a run manager over reg and f whose runs are
// kept in a store in dir, with max_conversation_bytes limit (0: the
// default).
func conversationRuns(tb testing.TB, reg *registry, f *fakeModel, dir string, limit int) *runManager {
	tb.Helper()
	store, err := openRunStoreOnceFree(dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(store.close)
	opts := runOptionsOver(tb, reg, f, "", nil)
	opts.Store = store
	opts.Limits = runLimits{MaxConversationBytes: limit}
	return newRunsWith(tb, opts)
}
