package main

import (
	"context"
	"testing"
	"time"
)

// turnBlock is how many calls BenchmarkStdioTurn makes one way before
// switching to the other.
const turnBlock = 250

// BenchmarkStdioTurn measures what a call reading its own answer saves,
// on one session with the echoserver at each revision (negotiated:
// 2026-07-28; 2025: pinned to 2025-11-25): blocks of
// turnBlock sequential calls alternate between calls that read their own
// answers and calls whose answers a goroutine holding the turn reads and
// hands over, as the stdout reader once did for every call. Alternating
// within one process keeps the machine's drift out of the comparison. It
// reports the mean time per call of each and their ratio.
func BenchmarkStdioTurn(b *testing.B) {
	for _, rev := range []struct{ name, pin string }{{"negotiated", ""}, {"2025", "2025-11-25"}} {
		b.Run(rev.name, func(b *testing.B) {
			cfg := benchStdioConfig(b, "bench")
			cfg.ProtocolVersion = rev.pin
			c := benchConnect(b, cfg)
			tr, ok := c.t.(*stdioTransport)
			if !ok {
				b.Fatalf("transport %T, want stdio", c.t)
			}
			var own, handed time.Duration
			var nOwn, nHanded int
			b.ResetTimer()
			for i := 0; i < b.N; {
				n := min(turnBlock, b.N-i)
				handOver := (i/turnBlock)%2 == 1
				var release func()
				if handOver {
					release = holdTurn(b, tr)
				}
				start := time.Now()
				for range n {
					if err := benchEcho(b.Context(), c); err != nil {
						b.Fatal(err)
					}
				}
				elapsed := time.Since(start)
				if handOver {
					release()
					handed, nHanded = handed+elapsed, nHanded+n
				} else {
					own, nOwn = own+elapsed, nOwn+n
				}
				i += n
			}
			if nOwn > 0 && nHanded > 0 {
				perOwn := float64(own.Nanoseconds()) / float64(nOwn)
				perHanded := float64(handed.Nanoseconds()) / float64(nHanded)
				b.ReportMetric(perOwn/1000, "µs/own-call")
				b.ReportMetric(perHanded/1000, "µs/handed-call")
				b.ReportMetric(perOwn/perHanded, "own/handed")
			}
		})
	}
}

// neverAnswered is a call whose answer never comes: readFor with it reads
// for the others until its context ends.
type neverAnswered struct{}

func (neverAnswered) answered() bool { return false }

// holdTurn starts a goroutine that takes the turn and reads every
// message, handing each answer over to its call, until the func it
// returns is called.
func holdTurn(b *testing.B, tr *stdioTransport) (release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	held, done := make(chan struct{}), make(chan struct{})
	turn := tr.wantTurn()
	go func() {
		defer close(done)
		select {
		case <-turn:
		case <-ctx.Done():
			return
		}
		close(held)
		tr.readFor(ctx, neverAnswered{})
	}()
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		cancel()
		b.Fatal("the turn was not free within 10s")
	}
	return func() {
		cancel()
		<-done
	}
}
