package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A timedProvider is a model provider that adds up, per prompt, the time
// its calls to the wrapped provider take. Safe for concurrent use.
type timedProvider struct {
	modelProvider

	mu sync.Mutex
	// guards spent
	spent map[string]time.Duration
}

func (p *timedProvider) complete(ctx context.Context, req modelRequest) (*modelResponse, error) {
	start := time.Now()
	resp, err := p.modelProvider.complete(ctx, req)
	took := time.Since(start)
	p.mu.Lock()
	p.spent[req.Messages[0].Content] += took
	p.mu.Unlock()
	return resp, err
}

func (p *timedProvider) modelTime(prompt string) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.spent[prompt]
}

// fdCount returns the number of open file descriptors of this process.
func fdCount() int {
	entries, _ := os.ReadDir("/proc/self/fd")
	return len(entries)
}

// peakRSS returns the peak resident set size of this process in bytes
// (VmHWM), or 0 where /proc does not say.
func peakRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

// BenchmarkRunsThroughAPI sends runs through the HTTP API from several
// clients at once: each POSTs a run, follows its events with 10 streams
// and waits for the terminal event. Each run calls the scripted model
// twice and one server's echo once. It reports runs per second, the p50
// and p99 time from POST to the terminal event less the model's own time,
// and the process's peak RSS and open fds. With as many clients as
// max_concurrent_runs no run waits in the queue; with 50 most do, and the
// time includes the wait. -benchtime=1000x gives 1000 runs.
func BenchmarkRunsThroughAPI(b *testing.B) {
	for _, clients := range []int{defaultLimit("max_concurrent_runs"), 50} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) { benchRunsThroughAPI(b, clients, storeMode{}) })
	}
}

// defaultLimit returns the default of the run limit key.
func defaultLimit(key string) int {
	for _, s := range limitSettings {
		if s.key == key && s.dur == nil {
			return s.def()
		}
	}
	panic("no limit " + key)
}

// echoRunsModel returns a fake model for runs runs that each call the fake
// server's echo once, then answer with what it said.
func echoRunsModel(b *testing.B, runs int) *fakeModel {
	echo := mcpToolName("fake", "echo")
	smart := fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		if res := req.toolResults(); len(res) > 0 {
			return fakeTurn{Text: "the server said " + res[0].Content}
		}
		return fakeTurn{ToolCalls: []toolCall{{Name: echo, Arguments: []byte(`{"message":"hi"}`)}}}
	}}
	script := make([]fakeTurn, 2*runs)
	for i := range script {
		script[i] = smart
	}
	return newFakeModel(b, providerOpenAI, script...)
}

// benchRunsThroughAPI runs the benchmark with clients; with mode.on the
// runs are kept on disk, in a directory under the test's temporary one, and
// with mode.floor the store is off and each client makes the commits a
// store's promises need itself (storeFloorCommits). Besides its wall time
// it reports the process's CPU time per run (cpu-ms/run).
func benchRunsThroughAPI(b *testing.B, clients int, mode storeMode) {
	const followers = 10
	f := echoRunsModel(b, b.N)
	reg := newRegistry([]serverConfig{fakeServerConfig(b, "normal")}, registryOptions{Logger: benchLogger})
	b.Cleanup(reg.close)
	if err := reg.waitReady(b.Context()); err != nil {
		b.Fatal(err)
	}
	timed := &timedProvider{modelProvider: f.provider(b), spent: map[string]time.Duration{}}
	var runStore *runStore
	storeDir := filepath.Join(b.TempDir(), "runs")
	// Retention keeps every run (and at least its default 1000), so that
	// reportStoreCost can set the bytes written against the files' own.
	kept := defaultRetention()
	kept.MaxRuns = max(kept.MaxRuns, b.N)
	var floor *storeFloorCommits
	switch {
	case mode.floor:
		floor = newStoreFloorCommits(b, storeDir, mode)
	case mode.on:
		s, err := openRunStoreOnceFree(storeDir, benchLogger)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(s.close)
		runStore = s
	}
	m := newRunManager(runManagerOptions{
		Registry: reg, Logger: benchLogger, Home: b.TempDir(), Metrics: newMetrics(), Store: runStore, Retention: &kept,
		Model:  modelSpec{Provider: providerOpenAI, Model: "fake-model"},
		Limits: runLimits{MaxQueuedRuns: clients},
		newProvider: func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error) {
			return timed, nil
		},
	})
	b.Cleanup(func() { m.shutdown(context.Background()) })
	srv := httptest.NewServer(newAPI(m, reg, nil, m.opts.Metrics, nil, nil))
	b.Cleanup(srv.Close)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients * (followers + 1)}}

	var peakFDs atomic.Int64
	sampling := make(chan struct{})
	sampled := make(chan struct{})
	// Owned by the benchmark; ends when sampling is closed. It lists
	// /proc/self/fd every 20 ms: every 5 ms took up to 8% of the CPU the
	// runs are measured with, and more per run the slower they went.
	go func() {
		defer close(sampled)
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			if n := int64(fdCount()); n > peakFDs.Load() {
				peakFDs.Store(n)
			}
			select {
			case <-tick.C:
			case <-sampling:
				return
			}
		}
	}()

	overheads := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	costs := new(storeCosts) // none counted with the store off
	if runStore != nil {
		costs = &runStore.log.costs
	}
	syncs, written, wait := costs.syncs.Load(), costs.written.Load(), costs.wait.Load()
	cpu := processCPU()
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		// Owned by the benchmark; ends when every run is taken.
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				prompt := fmt.Sprintf("run %d", i)
				overhead, err := floor.run(func() (time.Duration, error) { return oneRun(client, srv.URL, prompt, followers) })
				if err != nil {
					failed.Store(err)
					return
				}
				overheads[i] = overhead - timed.modelTime(prompt)
			}
		}()
	}
	wg.Wait()
	elapsed, spent := time.Since(start), processCPU()-cpu
	b.StopTimer()
	close(sampling)
	<-sampled
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	slices.Sort(overheads)
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(overheads[len(overheads)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(overheads[len(overheads)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(peakRSS())/(1<<20), "peak-RSS-MiB")
	b.ReportMetric(float64(peakFDs.Load()), "peak-fds")
	b.ReportMetric(float64(spent.Microseconds())/1000/float64(b.N), "cpu-ms/run")
	switch {
	case mode.on:
		reportStoreCost(b, storeDir, costs.syncs.Load()-syncs, costs.written.Load()-written, costs.wait.Load()-wait)
	case mode.floor:
		b.ReportMetric(float64(floor.syncs)/float64(b.N), "fsyncs/run")
	}
}

// oneRun POSTs a run with prompt, follows its events with n streams and
// returns the time from the POST until the last stream saw the terminal
// event; an error when the run did not complete.
func oneRun(client *http.Client, url, prompt string, n int) (time.Duration, error) {
	start := time.Now()
	resp, err := client.Post(url+"/v1/runs", "application/json", strings.NewReader(fmt.Sprintf(`{"prompt":%q}`, prompt)))
	if err != nil {
		return 0, err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("POST /v1/runs = %d %s", resp.StatusCode, body)
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal(body, &started); err != nil {
		return 0, fmt.Errorf("POST /v1/runs: %v in %s", err, body)
	}
	id := started.RunID
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		last    time.Duration
		failure error
	)
	for range n {
		wg.Add(1)
		// Owned by oneRun; ends with the stream.
		go func() {
			defer wg.Done()
			resp, err := client.Get(url + "/v1/runs/" + id + "/events")
			if err != nil {
				mu.Lock()
				failure = err
				mu.Unlock()
				return
			}
			defer resp.Body.Close()
			scanner := bufio.NewScanner(resp.Body)
			terminal := ""
			for scanner.Scan() {
				if typ, ok := strings.CutPrefix(scanner.Text(), "event: "); ok && isTerminalEvent(typ) {
					terminal = typ
				}
			}
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if terminal != "run."+runCompleted {
				failure = fmt.Errorf("run %s: stream ended with %q (%v), want run.completed", id, terminal, scanner.Err())
			}
			last = max(last, took)
		}()
	}
	wg.Wait()
	return last, failure
}
