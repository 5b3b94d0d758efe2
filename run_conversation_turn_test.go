package main

import (
	"fmt"
	"testing"
)

// This file measures what a turn of a long conversation costs: its time
// and the bytes the run store reads for it.

// BenchmarkConversationTurn times a short turn (a prompt and a short
// answer) of a conversation that already has turn-1 such turns, through
// a run manager with a store, and reports the bytes the store read per
// turn. The time and the bytes should not grow with the turn's number.
func BenchmarkConversationTurn(b *testing.B) {
	for _, turn := range []int{10, 500} {
		b.Run(fmt.Sprintf("turn=%d", turn), func(b *testing.B) {
			script := make([]fakeTurn, turn-1+b.N)
			for i := range script {
				script[i] = fakeTurn{Text: "noted, thank you"}
			}
			f := newFakeModel(b, providerOpenAI, script...)
			m := newStoredRuns(b, f, b.TempDir(), nil)
			conv := ""
			for i := 1; i < turn; i++ {
				r, err := m.start(runRequest{Prompt: fmt.Sprintf("remember item %d", i), ConversationID: conv}, true)
				if err != nil {
					b.Fatal(err)
				}
				if v := waitRun(b, r); v.Status != runCompleted {
					b.Fatalf("turn %d = %s %q, want completed", i, v.Status, v.Error)
				}
				conv = r.conversationID()
			}
			read := m.opts.Store.log.readBytes.Load()
			b.ResetTimer()
			for i := range b.N {
				r, err := m.start(runRequest{Prompt: fmt.Sprintf("remember item %d", turn+i), ConversationID: conv}, true)
				if err != nil {
					b.Fatal(err)
				}
				if v := waitRun(b, r); v.Status != runCompleted {
					b.Fatalf("turn %d = %s %q, want completed", turn+i, v.Status, v.Error)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(m.opts.Store.log.readBytes.Load()-read)/float64(b.N), "read-B/turn")
		})
	}
}
