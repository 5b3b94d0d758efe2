package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds the soak test: many concurrent runs over several
// servers, one of them crashing periodically, driven and followed through
// the HTTP API, some cancelled midway.

// Soak sizes: soakRuns runs of soakSteps steps with soakCallsPerStep calls
// each, every soakCancelEvery-th run cancelled once its first call is done.
const (
	soakRuns         = 60
	soakSteps        = 5
	soakCallsPerStep = 2
	soakCancelEvery  = 5
	// soakHeapSlack is how much more heap may be in use after the soak
	// than before it: generous, it only catches unbounded growth.
	soakHeapSlack = 64 << 20
)

// soakServers are the servers a soak run's calls rotate over; "flaky"
// exits after every 25 calls (testdata/fakeserver's flakyEvery) and is restarted.
var soakServers = []string{"alpha", "beta", "flaky"}

// A soakModel is an in-process model for the soak: each step calls echo
// on the servers in turn with a token unique to the run, step and call,
// and checks that every result carries the token of its own call. It is
// safe for concurrent use.
type soakModel struct {
	mu sync.Mutex
	// guards problems
	problems []string
}

func (m *soakModel) name() string { return "fake/soak" }

func (m *soakModel) complete(ctx context.Context, req modelRequest) (*modelResponse, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("model fake: %w", err)
	}
	prompt := req.Messages[0].Content
	// Every tool message answers the call of the same ID: check them all.
	calls := map[string]toolCall{}
	step := 0
	for _, msg := range req.Messages {
		for _, tc := range msg.ToolCalls {
			calls[tc.ID] = tc
		}
		if msg.Role == roleAssistant {
			step++
		}
		if msg.Role != roleTool {
			continue
		}
		tc := calls[msg.ToolCallID]
		var args struct {
			Message string `json:"message"`
		}
		json.Unmarshal(tc.Arguments, &args)
		switch {
		case !msg.IsError && msg.Content == args.Message:
		case msg.IsError && tc.Name == "mcp_flaky_echo" && strings.Contains(msg.Content, `"flaky"`):
			// The crashing server's calls may fail, naming it.
		default:
			m.report("run %q: call %s (%s %s) got %q (error %v)", prompt, tc.ID, tc.Name, args.Message, msg.Content, msg.IsError)
		}
	}
	if step >= soakSteps {
		return &modelResponse{Content: "done " + prompt, StopReason: "end_turn"}, nil
	}
	resp := &modelResponse{StopReason: "tool_use"}
	for i := range soakCallsPerStep {
		n := step*soakCallsPerStep + i
		token := fmt.Sprintf("%s-step%d-call%d", prompt, step, i)
		resp.ToolCalls = append(resp.ToolCalls, toolCall{
			ID:        fmt.Sprintf("call_%d_%d", step, i),
			Name:      "mcp_" + soakServers[n%len(soakServers)] + "_echo",
			Arguments: json.RawMessage(fmt.Sprintf(`{"message":%q}`, token)),
		})
	}
	return resp, nil
}

func (m *soakModel) report(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.problems = append(m.problems, fmt.Sprintf(format, args...))
}

func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak test skipped in -short mode")
	}
	tag := checkNoLeaks(t)
	heapBefore := heapInUse()
	model := &soakModel{}
	logger := slog.New(slog.DiscardHandler)
	var globals []serverConfig
	for _, name := range soakServers {
		mode := "normal"
		if name == "flaky" {
			mode = "flaky"
		}
		globals = append(globals, taggedServer(t, name, mode, tag))
	}
	reg := newRegistry(globals, registryOptions{Logger: logger, Client: clientOptions{},
		Restart: true, BackoffMin: 10 * time.Millisecond, BackoffMax: 100 * time.Millisecond})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	metrics := newMetrics()
	runs := newRunManager(runManagerOptions{
		Registry: reg, Logger: logger, Home: t.TempDir(), Model: modelSpec{Provider: providerOpenAI, Model: "soak"}, Metrics: metrics,
		Getenv: func(string) (string, bool) { return "", false },
		newProvider: func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error) {
			return model, nil
		},
	})
	stopping := make(chan struct{})
	srv := httptest.NewServer(newAPI(runs, reg, nil, metrics, logger, stopping))
	teardown := sync.OnceFunc(func() {
		close(stopping)
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := runs.shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
		reg.close()
	})
	t.Cleanup(teardown)

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]string, soakRuns)
	for i := range soakRuns {
		wg.Add(1)
		// Owned by the test; ends when the run's event stream ends.
		go func() {
			defer wg.Done()
			status, err := soakRun(ctx, srv.URL, fmt.Sprintf("run%02d", i), i%soakCancelEvery == soakCancelEvery-1)
			if err != nil {
				model.report("run%02d: %v", i, err)
			}
			results[i] = status
		}()
	}
	wg.Wait()
	for _, p := range model.problems {
		t.Error(p)
	}
	counts := map[string]int{}
	for i, status := range results {
		counts[status]++
		cancelled := i%soakCancelEvery == soakCancelEvery-1
		if (!cancelled && status != runCompleted) || (cancelled && status != runCancelled && status != runCompleted) {
			t.Errorf("run%02d ended %q, want completed (or cancelled when cancelled)", i, status)
		}
	}
	st := reg.server("flaky").snapshot()
	t.Logf("soak: runs by status %v; flaky server restarted %d times", counts, st.Restarts)
	if st.Restarts == 0 {
		t.Errorf("flaky server restarts = 0, want the soak to crash it at least once")
	}
	checkNoPending(t, reg)

	teardown()
	if heapAfter := heapInUse(); heapAfter > heapBefore+soakHeapSlack {
		t.Errorf("heap in use grew from %d to %d bytes, want at most %d more", heapBefore, heapAfter, soakHeapSlack)
	}
}

// heapInUse returns the bytes of heap in use after a garbage collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// soakRun starts one run through the API, follows its event stream to the
// end (cancelling the run after its first tool call when cancel is set),
// and returns the status of the terminal event.
func soakRun(ctx context.Context, base, prompt string, cancel bool) (string, error) {
	body := fmt.Sprintf(`{"prompt":%q}`, prompt)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("start: %w", err)
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("start: status %d: %v", resp.StatusCode, err)
	}
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+started.RunID+"/events", nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("events: %w", err)
	}
	defer resp.Body.Close()
	var last runEvent
	seq := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if err := json.Unmarshal([]byte(data), &last); err != nil {
			return "", fmt.Errorf("events: %w", err)
		}
		if last.Seq != seq+1 {
			return "", fmt.Errorf("events: seq %d after %d", last.Seq, seq)
		}
		seq = last.Seq
		if cancel && last.Type == "tool.call.completed" {
			cancel = false
			creq, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs/"+started.RunID+"/cancel", nil)
			cresp, err := http.DefaultClient.Do(creq)
			if err != nil {
				return "", fmt.Errorf("cancel: %w", err)
			}
			cresp.Body.Close()
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("events: %w", err)
	}
	status, ok := strings.CutPrefix(last.Type, "run.")
	if !ok || !isTerminal(status) {
		return "", fmt.Errorf("event stream ended with %q, want a terminal event", last.Type)
	}
	return status, nil
}
