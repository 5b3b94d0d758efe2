package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file holds the performance benchmarks: tool calls over stdio and
// Streamable HTTP (the same calls interop/client_bench_test.go makes with the
// official Go SDK client, under the same names, so benchstat compares
// them), start-up with one and ten servers, the harness's own overhead per
// tool call, the idle memory of a serving daemon and the binary's size.
// interop/bench.sh runs them side by side.
//
// HARNESS_BENCH_STDIO_SERVER (a command line, split on spaces) and
// HARNESS_BENCH_HTTP_URL (a Streamable HTTP endpoint) replace the default
// server, interop/cmd/echoserver.

// benchCallers is how many goroutines the parallel benchmarks run, whatever
// the number of cores: the load of several concurrent runs.
const benchCallers = 8

// benchParallelism returns the b.SetParallelism factor that runs at least
// benchCallers goroutines with the current GOMAXPROCS.
func benchParallelism() int {
	procs := runtime.GOMAXPROCS(0)
	return (benchCallers + procs - 1) / procs
}

// benchStdioConfig returns the config of the stdio server the benchmarks
// call: HARNESS_BENCH_STDIO_SERVER, or the echoserver.
func benchStdioConfig(b *testing.B, name string) serverConfig {
	b.Helper()
	command, args := buildEchoServer(b), []string{"stdio"}
	if line := os.Getenv("HARNESS_BENCH_STDIO_SERVER"); line != "" {
		fields := strings.Fields(line)
		command, args = fields[0], fields[1:]
	}
	return serverConfig{
		Name:            name,
		Transport:       transportStdio,
		Command:         command,
		Args:            args,
		Timeout:         defaultTimeout,
		StartupTimeout:  defaultStartupTimeout,
		Enabled:         true,
		MaxMessageBytes: defaultMaxMessageBytes,
		Source:          "benchmark",
	}
}

// benchHTTPConfig returns the config of the Streamable HTTP server the
// benchmarks call: HARNESS_BENCH_HTTP_URL, or the echoserver in mode (http
// or http-stateless).
func benchHTTPConfig(b *testing.B, mode string) serverConfig {
	b.Helper()
	url := os.Getenv("HARNESS_BENCH_HTTP_URL")
	if url == "" {
		url = startEchoServerHTTP(b, mode)
	}
	return serverConfig{
		Name:            "bench",
		Transport:       transportHTTP,
		URL:             url,
		Timeout:         defaultTimeout,
		StartupTimeout:  defaultStartupTimeout,
		Enabled:         true,
		MaxMessageBytes: defaultMaxMessageBytes,
		Source:          "benchmark",
	}
}

// benchConnect connects a session to cfg, closed when the benchmark ends.
func benchConnect(b *testing.B, cfg serverConfig) *mcpClient {
	b.Helper()
	c, err := connect(b.Context(), cfg, clientOptions{Logger: benchLogger})
	if err != nil {
		b.Fatalf("connect %s: %v", cfg.Name, err)
	}
	b.Cleanup(func() { c.close() })
	return c
}

var benchEchoArgs = json.RawMessage(`{"message":"hello"}`)

// benchLogger discards: a benchmark's output is its figures.
var benchLogger = slog.New(slog.DiscardHandler)

// benchEcho calls echo({"message":"hello"}) and checks the answer
// contains the message: echo servers word it differently (the echoserver
// answers "hello", server-everything "Echo: hello"). Safe for concurrent
// use.
func benchEcho(ctx context.Context, c *mcpClient) error {
	res, err := c.callTool(ctx, "echo", benchEchoArgs)
	if err != nil {
		return err
	}
	if got := resultToText(res); res.IsError || !strings.Contains(got, "hello") {
		return fmt.Errorf("echo(hello) = %q (isError %v), want an answer containing %q", got, res.IsError, "hello")
	}
	return nil
}

// BenchmarkStdioToolCall calls over stdio at the revision negotiated
// (2026-07-28 with the echoserver); BenchmarkStdioToolCall2025 pins
// 2025-11-25. BenchmarkHTTPToolCall calls the echoserver's stateful
// handler, which serves revisions up to 2025-11-25, and
// BenchmarkHTTPStatelessToolCall its stateless one, at 2026-07-28.
// interop/client_bench_test.go has their twins on the Go SDK client.
func BenchmarkStdioToolCall(b *testing.B) {
	benchToolCall(b, benchConnect(b, benchStdioConfig(b, "bench")))
}

func BenchmarkStdioToolCall2025(b *testing.B) {
	cfg := benchStdioConfig(b, "bench")
	cfg.ProtocolVersion = "2025-11-25"
	benchToolCall(b, benchConnect(b, cfg))
}

func BenchmarkHTTPToolCall(b *testing.B) {
	benchToolCall(b, benchConnect(b, benchHTTPConfig(b, "http")))
}

func BenchmarkHTTPStatelessToolCall(b *testing.B) {
	benchToolCall(b, benchConnect(b, benchHTTPConfig(b, "http-stateless")))
}

// benchToolCall measures echo on one session, one call at a time (seq) and
// from benchCallers goroutines at once (parallel). Besides the wall time it
// reports the client process's CPU time per call (cpu-ns/op), which the
// load of a shared machine disturbs far less.
func benchToolCall(b *testing.B, c *mcpClient) {
	b.Logf("protocol version %s", c.protocolVersion())
	b.Run("seq", func(b *testing.B) {
		b.ReportAllocs()
		ctx := b.Context()
		cpu := processCPU()
		for b.Loop() {
			if err := benchEcho(ctx, c); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(benchParallelism())
		ctx := b.Context()
		cpu := processCPU()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := benchEcho(ctx, c); err != nil {
					b.Error(err)
					return
				}
			}
		})
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

func BenchmarkStartup1Server(b *testing.B)   { benchStartup(b, 1, benchStdioConfig) }
func BenchmarkStartup10Servers(b *testing.B) { benchStartup(b, 10, benchStdioConfig) }

// BenchmarkStartup10LegacyServers starts ten servers that speak only the
// initialize handshake and answer an unknown method with -32601 at once:
// what probing for the current revision costs on older servers.
func BenchmarkStartup10LegacyServers(b *testing.B) { benchStartup(b, 10, legacyBenchConfig) }

// legacyBenchConfig returns the config of a fake server speaking only
// protocol revisions up to 2025-11-25.
func legacyBenchConfig(b *testing.B, name string) serverConfig {
	cfg := fakeServerConfig(b, "legacy")
	cfg.Name = name
	return cfg
}

// benchStartup measures a registry of n stdio servers, each configured by
// config, from its creation to all ready (connected and listed); closing
// it is not measured.
func benchStartup(b *testing.B, n int, config func(*testing.B, string) serverConfig) {
	servers := make([]serverConfig, n)
	for i := range servers {
		servers[i] = config(b, "echo"+strconv.Itoa(i))
	}
	opts := registryOptions{Logger: benchLogger, Client: clientOptions{}}
	ctx := b.Context()
	for b.Loop() {
		reg := newRegistry(servers, opts)
		err := reg.waitReady(ctx)
		b.StopTimer()
		for _, st := range reg.statuses() {
			if st.Status != statusReady && err == nil {
				err = fmt.Errorf("server %s is %s: %s", st.Name, st.Status, st.Error)
			}
		}
		reg.close()
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func BenchmarkStartupFloor1Server(b *testing.B)   { benchStartupFloor(b, 1) }
func BenchmarkStartupFloor10Servers(b *testing.B) { benchStartupFloor(b, 10) }

// startupExchange is the least a client sends to make a server ready:
// initialize, initialized and tools/list, written at once.
const startupExchange = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"floor","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
`

// benchStartupFloor measures the floor under benchStartup: n server
// processes started in parallel, each sent startupExchange at once and read
// until its tools/list answer, with no client logic at all. What the
// machine needs for this is what harnessd's start-up cannot go below.
// Stopping the servers is not measured.
func benchStartupFloor(b *testing.B, n int) {
	cfg := benchStdioConfig(b, "floor")
	type started struct {
		cmd   *exec.Cmd
		stdin io.Closer
		err   error
	}
	for b.Loop() {
		servers := make(chan started, n)
		for range n {
			// Owned by the loop; exits once its server answered tools/list
			// or failed.
			go func() {
				cmd, stdin, err := startupFloorOnce(cfg)
				servers <- started{cmd, stdin, err}
			}()
		}
		all := make([]started, 0, n)
		for range n {
			all = append(all, <-servers)
		}
		b.StopTimer()
		for _, s := range all {
			if s.err != nil {
				b.Fatal(s.err)
			}
			s.stdin.Close()
			s.cmd.Wait()
		}
		b.StartTimer()
	}
}

// startupFloorOnce starts cfg's server, sends startupExchange and returns
// once the answer to tools/list arrived. The caller closes stdin and waits
// for the command; on error nothing is left running.
func startupFloorOnce(cfg serverConfig) (*exec.Cmd, io.Closer, error) {
	cmd := exec.Command(cfg.Command, cfg.Args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	_, err = io.WriteString(stdin, startupExchange)
	if err == nil {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			if _, id := jsonrpcShape(scanner.Bytes()); string(id) == "2" {
				return cmd, stdin, nil
			}
		}
		err = scanner.Err()
	}
	stdin.Close()
	cmd.Process.Kill()
	cmd.Wait()
	return nil, nil, fmt.Errorf("start %s: no answer to tools/list (%v)", cfg.Command, err)
}

// BenchmarkHarnessOverhead measures what the agent adds to a tool call:
// each iteration calls echo once through run.runToolCalls (catalog
// lookup, activation, events, metrics, result conversion) and once directly
// on the client, on the same stdio session, and reports the difference of
// the median wall times and of the mean CPU times of this process.
func BenchmarkHarnessOverhead(b *testing.B) {
	cfg := benchStdioConfig(b, "bench")
	reg := newRegistry([]serverConfig{cfg}, registryOptions{Logger: benchLogger, Client: clientOptions{}})
	b.Cleanup(reg.close)
	ctx := b.Context()
	if err := reg.waitReady(ctx); err != nil {
		b.Fatal(err)
	}
	c, err := reg.server(cfg.Name).current()
	if err != nil {
		b.Fatal(err)
	}
	m := newRunManager(runManagerOptions{Registry: reg, Logger: benchLogger, Home: b.TempDir(), Metrics: newMetrics()})
	calls := []toolCall{{ID: "call_1", Name: mcpToolName(cfg.Name, "echo"), Arguments: benchEchoArgs}}

	var agent, direct []time.Duration
	var agentCPU, directCPU time.Duration
	var r *run
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// A run of the default max_steps; a fresh one keeps the event
		// history the size a real run's is.
		if i%defaultMaxSteps == 0 {
			r = newRun(m.env, runRequest{})
			r.status = runRunning
		}
		cpu, start := processCPU(), time.Now()
		results := r.runToolCalls(ctx, 1, calls)
		agent = append(agent, time.Since(start))
		agentCPU += processCPU() - cpu
		if got := results[0]; got.IsError || got.Content != "hello" {
			b.Fatalf("runToolCalls(echo hello) = %q (isError %v), want %q", got.Content, got.IsError, "hello")
		}
		cpu, start = processCPU(), time.Now()
		if err := benchEcho(ctx, c); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(start))
		directCPU += processCPU() - cpu
	}
	// Medians, because a shared machine's load spikes hit single calls.
	slices.Sort(agent)
	slices.Sort(direct)
	agentMedian, directMedian := agent[len(agent)/2], direct[len(direct)/2]
	b.ReportMetric(float64(agentMedian.Nanoseconds()), "agent-ns/call")
	b.ReportMetric(float64(directMedian.Nanoseconds()), "direct-ns/call")
	b.ReportMetric(float64((agentMedian - directMedian).Nanoseconds()), "overhead-ns/call")
	b.ReportMetric(float64((agentCPU-directCPU).Nanoseconds())/float64(b.N), "overhead-cpu-ns/call")
}

// BenchmarkBinarySize reports the size of the static release binary.
func BenchmarkBinarySize(b *testing.B) {
	info, err := os.Stat(buildHarnessd(b))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(info.Size()), "bytes")
}

// BenchmarkIdleRSS starts `harnessd serve` with ten echoserver stdio
// servers, waits for /readyz, lets it idle for a second and reports the
// daemon's resident memory (its own, not its servers').
func BenchmarkIdleRSS(b *testing.B) {
	const servers = 10
	binary := buildHarnessd(b)
	home := b.TempDir()
	var conf strings.Builder
	for i := range servers {
		cfg := benchStdioConfig(b, "echo"+strconv.Itoa(i))
		fmt.Fprintf(&conf, "[mcp_servers.%s]\ncommand = %q\nargs = [", cfg.Name, cfg.Command)
		for j, arg := range cfg.Args {
			if j > 0 {
				conf.WriteString(", ")
			}
			fmt.Fprintf(&conf, "%q", arg)
		}
		conf.WriteString("]\n\n")
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(conf.String()), 0o600); err != nil {
		b.Fatal(err)
	}

	var rss float64
	for b.Loop() {
		rss = idleRSS(b, binary, home)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(rss, "rss-bytes")
}

// idleRSS runs one daemon on home's config and returns its VmRSS in bytes
// one second after /readyz answered 200. The daemon is stopped on return.
func idleRSS(b *testing.B, binary, home string) float64 {
	b.Helper()
	cmd := exec.Command(binary, "serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--workspace", home)
	cmd.Env = []string{"HARNESS_HOME=" + home, "PATH=" + os.Getenv("PATH"), "HOME=" + home}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	}()

	addrs := make(chan string, 1)
	// Owned by idleRSS; exits at end of stderr, when the daemon is killed.
	go func() {
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			var line struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(scanner.Bytes(), &line) == nil && line.Msg == "harnessd listening" {
				addrs <- line.Addr
			}
		}
	}()
	ctx, cancel := context.WithTimeout(b.Context(), 60*time.Second)
	defer cancel()
	var addr string
	select {
	case addr = <-addrs:
	case <-ctx.Done():
		b.Fatal("harnessd serve: no \"harnessd listening\" log line within 60s")
	}
	// /readyz answers 503 until every server has made its first attempt;
	// there is no event to wait on from outside the process, so poll.
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-poll.C:
		case <-ctx.Done():
			b.Fatal("harnessd serve: /readyz not 200 within 60s")
		}
	}
	idle := time.NewTimer(time.Second)
	defer idle.Stop()
	<-idle.C
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Skipf("read VmRSS: %v (needs Linux /proc)", err)
	}
	for line := range strings.Lines(string(status)) {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				b.Fatalf("parse VmRSS %q: %v", line, err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no VmRSS line in /proc/PID/status")
	return 0
}
