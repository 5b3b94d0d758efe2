package interop

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"harnessd/interop/floor"
)

// This file holds the tool-call benchmarks on the official Go SDK client, the
// same calls harnessd's root benchmarks make, so the two compare in one run.
// HARNESS_BENCH_STDIO_SERVER (a command line, split on spaces) and
// HARNESS_BENCH_HTTP_URL (a Streamable HTTP endpoint) replace the default
// server, cmd/echoserver.

// benchHTTPClient keeps enough idle connections for b.RunParallel; the
// default of two per host would make the parallel case measure dialing.
var benchHTTPClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// BenchmarkStdioToolCall calls over stdio at the revision both sides
// negotiate (2026-07-28 with the echoserver); BenchmarkStdioToolCall2025
// pins 2025-11-25.
func BenchmarkStdioToolCall(b *testing.B)     { benchStdioToolCall(b, "") }
func BenchmarkStdioToolCall2025(b *testing.B) { benchStdioToolCall(b, "2025-11-25") }

// benchStdioCommand returns the stdio server the benchmarks call:
// HARNESS_BENCH_STDIO_SERVER (a command line, split on spaces), or the
// echoserver.
func benchStdioCommand(b *testing.B) *exec.Cmd {
	var cmd *exec.Cmd
	if line := os.Getenv("HARNESS_BENCH_STDIO_SERVER"); line != "" {
		fields := strings.Fields(line)
		cmd = exec.Command(fields[0], fields[1:]...)
	} else {
		cmd = exec.Command(buildEchoServer(b), "stdio")
	}
	cmd.Stderr = os.Stderr
	return cmd
}

func benchStdioToolCall(b *testing.B, version string) {
	cmd := benchStdioCommand(b)
	benchToolCall(b, connectVersion(b, &mcp.CommandTransport{Command: cmd}, version))
}

// BenchmarkHTTPToolCall calls the echoserver's stateful handler, which
// serves revisions up to 2025-11-25; BenchmarkHTTPStatelessToolCall its
// stateless one, at 2026-07-28 (HARNESS_BENCH_HTTP_URL replaces the
// server of both).
func BenchmarkHTTPToolCall(b *testing.B)          { benchHTTPToolCall(b, "http") }
func BenchmarkHTTPStatelessToolCall(b *testing.B) { benchHTTPToolCall(b, "http-stateless") }

func benchHTTPToolCall(b *testing.B, mode string) {
	url := benchHTTPEndpoint(b, mode)
	benchToolCall(b, connectTransport(b, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: benchHTTPClient}))
}

// benchHTTPEndpoint returns the HTTP server the benchmarks call:
// HARNESS_BENCH_HTTP_URL, or the echoserver started in mode.
func benchHTTPEndpoint(b *testing.B, mode string) string {
	if url := os.Getenv("HARNESS_BENCH_HTTP_URL"); url != "" {
		return url
	}
	return startEchoServerHTTP(b, mode)
}

// connectVersion connects like connectTransport, offering version ("" for
// the newest); the revision negotiated is logged.
func connectVersion(b *testing.B, transport mcp.Transport, version string) *mcp.ClientSession {
	b.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-test", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	b.Cleanup(cancel)
	session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		b.Fatalf("connect: %v", err)
	}
	b.Cleanup(func() { session.Close() })
	return session
}

// benchCallers is how many goroutines the parallel benchmarks run, whatever
// the number of cores, as harnessd's root benchmarks do.
const benchCallers = 8

// benchToolCall measures echo({"message":"hello"}) on one session, one call
// at a time (seq) and from benchCallers goroutines at once (parallel), with
// the client process's CPU time per call (cpu-ns/op).
func benchToolCall(b *testing.B, session *mcp.ClientSession) {
	b.Logf("protocol version %s", session.InitializeResult().ProtocolVersion)
	args := map[string]any{"message": "hello"}
	call := func(ctx context.Context) error {
		got, err := callText(ctx, session, "echo", args)
		if err == nil && got != "hello" {
			b.Errorf("echo(hello) = %q, want %q", got, "hello")
		}
		return err
	}
	benchSeq(b, call)
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		procs := runtime.GOMAXPROCS(0)
		b.SetParallelism((benchCallers + procs - 1) / procs)
		ctx := b.Context()
		cpu := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := call(ctx); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// benchSeq measures call one at a time ("seq"), with the client process's
// CPU time per call.
func benchSeq(b *testing.B, call func(context.Context) error) {
	b.Run("seq", func(b *testing.B) {
		b.ReportAllocs()
		ctx := b.Context()
		cpu := processCPU()
		for b.Loop() {
			if err := call(ctx); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}

// processCPU returns the user and system CPU time this process has used.
func processCPU() time.Duration {
	var usage syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		return 0
	}
	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// The floor benchmarks make the same calls with the floor client (package
// floor: one goroutine, a fixed request, no decoding beyond the id), one at
// a time, on the same servers: BenchmarkFloorStdioToolCall at 2026-07-28,
// BenchmarkFloorStdioToolCall2025 at 2025-11-25, BenchmarkFloorHTTPToolCall
// on the stateful handler at 2025-11-25 and
// BenchmarkFloorHTTPStatelessToolCall on the stateless one at 2026-07-28.
// bench.sh reports harnessd and the Go SDK client as ratios of these.
func BenchmarkFloorStdioToolCall(b *testing.B)     { benchFloorStdio(b, floor.Rev2026, floor.Fixed) }
func BenchmarkFloorStdioToolCall2025(b *testing.B) { benchFloorStdio(b, floor.Rev2025, floor.Fixed) }
func BenchmarkFloorHTTPToolCall(b *testing.B)      { benchFloorHTTP(b, "http", floor.Rev2025, floor.Fixed) }
func BenchmarkFloorHTTPStatelessToolCall(b *testing.B) {
	benchFloorHTTP(b, "http-stateless", floor.Rev2026, floor.Fixed)
}

// The floor-same benchmarks are the floor's making the same protocol
// requests as harnessd (floor.SameRequests: its capabilities, a progress
// token on every call, the stream it holds open), so that on the same
// server harnessd/floor-same is the client's own overhead and
// floor-same/floor the server's work for what harnessd asks.
func BenchmarkFloorSameStdioToolCall(b *testing.B) {
	benchFloorStdio(b, floor.Rev2026, floor.SameRequests)
}
func BenchmarkFloorSameStdioToolCall2025(b *testing.B) {
	benchFloorStdio(b, floor.Rev2025, floor.SameRequests)
}
func BenchmarkFloorSameHTTPToolCall(b *testing.B) {
	benchFloorHTTP(b, "http", floor.Rev2025, floor.SameRequests)
}
func BenchmarkFloorSameHTTPStatelessToolCall(b *testing.B) {
	benchFloorHTTP(b, "http-stateless", floor.Rev2026, floor.SameRequests)
}

func benchFloorStdio(b *testing.B, version string, shape floor.Shape) {
	cmd := benchStdioCommand(b)
	c, err := floor.Stdio(b.Context(), cmd, version, shape)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	benchFloorCalls(b, c)
}

func benchFloorHTTP(b *testing.B, mode, version string, shape floor.Shape) {
	c, err := floor.HTTP(b.Context(), benchHTTPEndpoint(b, mode), benchHTTPClient, version, shape)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	benchFloorCalls(b, c)
}

// benchFloorCalls measures one call at a time ("seq", as benchToolCall
// names it) with the client's CPU time per call.
func benchFloorCalls(b *testing.B, c floor.Client) { benchSeq(b, c.Call) }
