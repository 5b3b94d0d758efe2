package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests the run manager's admission (concurrency, the queue,
// 429) and its memory bounds, with a model the test releases call by call.

// A gateModel is a model provider whose answers wait for the test: each
// call reports its prompt on entered, then answers "done <prompt>" once
// release(prompt) was called. Safe for concurrent use.
type gateModel struct {
	entered chan string

	mu sync.Mutex
	// guards gates
	gates map[string]chan struct{}
}

func newGateModel() *gateModel {
	return &gateModel{entered: make(chan string, 1024), gates: map[string]chan struct{}{}}
}

func (g *gateModel) gate(prompt string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	ch, ok := g.gates[prompt]
	if !ok {
		ch = make(chan struct{})
		g.gates[prompt] = ch
	}
	return ch
}

// release lets the call for prompt answer.
func (g *gateModel) release(prompt string) { close(g.gate(prompt)) }

func (g *gateModel) name() string { return "gate/model" }

func (g *gateModel) complete(ctx context.Context, req modelRequest) (*modelResponse, error) {
	prompt := req.Messages[0].Content
	gate := g.gate(prompt)
	g.entered <- prompt
	select {
	case <-gate:
		return &modelResponse{Content: "done " + prompt}, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("gate: %w", ctx.Err())
	}
}

// waitEntered returns the prompt of the next model call.
func (g *gateModel) waitEntered(t *testing.T) string {
	t.Helper()
	select {
	case p := <-g.entered:
		return p
	case <-t.Context().Done():
		t.Fatal("no model call")
		return ""
	}
}

// newGateRuns returns a run manager with no servers over model g, with
// limits, shut down at cleanup.
func newGateRuns(t *testing.T, g modelProvider, limits runLimits) *runManager {
	t.Helper()
	reg := newRegistry(nil, registryOptions{Logger: discardLogger()})
	t.Cleanup(reg.close)
	return newRunsWith(t, runManagerOptions{
		Registry: reg,
		Logger:   discardLogger(),
		Home:     t.TempDir(),
		Model:    modelSpec{Provider: providerOpenAI, Model: "gate"},
		Metrics:  newMetrics(),
		Limits:   limits,
		newProvider: func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error) {
			return g, nil
		},
	})
}

func TestAdmissionQueuesInOrderThenRefuses(t *testing.T) {
	t.Parallel()
	g := newGateModel()
	m := newGateRuns(t, g, runLimits{MaxConcurrentRuns: 2, MaxQueuedRuns: 3})
	srv := httptest.NewServer(newAPI(m, m.opts.Registry, nil, m.opts.Metrics, nil, nil))
	t.Cleanup(srv.Close)

	var runs []*run
	for i := range 5 {
		r, err := m.start(runRequest{Prompt: fmt.Sprint("p", i)}, false)
		if err != nil {
			t.Fatalf("start(p%d) = %v", i, err)
		}
		runs = append(runs, r)
	}
	running := map[string]bool{g.waitEntered(t): true, g.waitEntered(t): true}
	if !running["p0"] || !running["p1"] {
		t.Fatalf("running = %v, want p0 and p1", running)
	}
	for i, r := range runs[2:] {
		if v := r.view(); v.Status != runQueued || v.QueuePosition != i+1 {
			t.Errorf("run p%d = %s at %d, want queued at %d", i+2, v.Status, v.QueuePosition, i+1)
		}
	}

	// Over the limit: 1000 requests, each refused with 429 and Retry-After.
	body := `{"prompt":"one too many"}`
	for i := range 1000 {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/runs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		apiErr, decodeErr := decodeAPIError(data)
		secs, convErr := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.StatusCode != http.StatusTooManyRequests || convErr != nil || secs < 1 || decodeErr != nil ||
			apiErr.Error.Code != "too_many_runs" || !strings.Contains(apiErr.Error.Message, "max_queued_runs") {
			t.Fatalf("POST %d over the limit = %d Retry-After %q %s, want 429 with Retry-After seconds and a too_many_runs error",
				i, resp.StatusCode, resp.Header.Get("Retry-After"), data)
		}
	}

	// A queued run cancelled leaves the queue; the others move up.
	runs[3].cancel()
	if v := waitRun(t, runs[3]); v.Status != runCancelled {
		t.Errorf("cancelled queued run = %s, want cancelled", v.Status)
	}
	if v := runs[4].view(); v.QueuePosition != 2 {
		t.Errorf("p4 after p3 left = at %d, want 2", v.QueuePosition)
	}

	// Queued runs start in order as slots free up.
	g.release("p0")
	if p := g.waitEntered(t); p != "p2" {
		t.Errorf("first queued run to start = %s, want p2", p)
	}
	g.release("p1")
	if p := g.waitEntered(t); p != "p4" {
		t.Errorf("second queued run to start = %s, want p4", p)
	}
	g.release("p2")
	g.release("p4")
	for i, r := range runs {
		want := runCompleted
		if i == 3 {
			want = runCancelled
		}
		if v := waitRun(t, r); v.Status != want {
			t.Errorf("run p%d = %s (%s), want %s", i, v.Status, v.Error, want)
		}
	}
	if _, err := m.start(runRequest{Prompt: "after"}, false); err != nil {
		t.Errorf("start after the queue drained = %v, want accepted", err)
	}
	g.release("after")
}

func TestAdmissionShutdownEndsQueuedRuns(t *testing.T) {
	t.Parallel()
	g := newGateModel()
	m := newGateRuns(t, g, runLimits{MaxConcurrentRuns: 1, MaxQueuedRuns: 10})
	var runs []*run
	for i := range 4 {
		r, err := m.start(runRequest{Prompt: fmt.Sprint("s", i)}, false)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	g.waitEntered(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := m.shutdown(ctx); err != nil {
		t.Fatalf("shutdown = %v", err)
	}
	for i, r := range runs {
		if v := waitRun(t, r); v.Status != runCancelled {
			t.Errorf("run s%d after shutdown = %s, want cancelled", i, v.Status)
		}
		if types := eventTypes(r); i > 0 && (len(types) != 1 || types[0] != "run.cancelled") {
			t.Errorf("events of queued run s%d = %v, want only run.cancelled", i, types)
		}
	}
	if _, err := m.start(runRequest{Prompt: "late"}, false); !errors.Is(err, errShuttingDown) {
		t.Errorf("start after shutdown = %v, want errShuttingDown", err)
	}
}

func TestRunMemoryBounds(t *testing.T) {
	t.Parallel()
	g := newGateModel()
	m := newGateRuns(t, g, runLimits{MaxPromptBytes: 64, MaxOutputBytes: 16})

	_, err := m.start(runRequest{Prompt: "p", SystemPrompt: strings.Repeat("s", 64)}, false)
	var reqErr *requestError
	if !errors.As(err, &reqErr) || !strings.Contains(err.Error(), "prompt: 65 bytes with system_prompt, over max_prompt_bytes (64)") {
		t.Errorf("start with a 65-byte prompt = %v, want a 400 naming prompt and max_prompt_bytes", err)
	}

	// The output, and the answer in model.response, are cut.
	prompt := "a prompt whose answer is long"
	g.release(prompt)
	r, err := m.start(runRequest{Prompt: prompt}, false)
	if err != nil {
		t.Fatal(err)
	}
	v := waitRun(t, r)
	want := truncate("done "+prompt, 16)
	if v.Output != want {
		t.Errorf("output = %q, want %q", v.Output, want)
	}
	responses, ended := eventData(r, "model.response"), eventData(r, "run."+runCompleted)
	if len(responses) != 1 || responses[0]["content"] != want {
		t.Errorf("model.response events = %v, want the content cut to %q", responses, want)
	}
	if len(ended) != 1 || ended[0]["output"] != want || ended[0]["output_bytes"] != len("done "+prompt) {
		t.Errorf("run.completed events = %v, want the output cut and its full size", ended)
	}
}

// A per-run server's stderr tail is shown while the run lasts, not kept
// once it has ended.
func TestRunDropsStderrTailsAtEnd(t *testing.T) {
	t.Parallel()
	fake := fakeServerConfig(t, "exit-in-initialize")
	body := fmt.Sprintf(`[{"name":"db","command":%q,"env":{%q:"exit-in-initialize"},"required":false}]`, fake.Command, fakeServerEnv)
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "fine without it"})
	m := newTestRuns(t, f)
	r, err := m.start(runRequest{Prompt: "go", MCPServers: []byte(body)}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := waitRun(t, r)
	if len(v.Servers) != 1 || v.Servers[0].Status != statusFailed || v.Servers[0].StderrTail != "" || !strings.Contains(v.Servers[0].Error, "status 7") {
		t.Errorf("servers of the ended run = %+v, want db failed, its error kept, without a stderr tail", v.Servers)
	}
}

func TestStartGateBounds(t *testing.T) {
	t.Parallel()
	gate := newStartGate(1)
	inFirst, releaseFirst := make(chan struct{}), make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- gate.run(t.Context(), func() error {
			close(inFirst)
			<-releaseFirst
			return nil
		})
	}()
	<-inFirst
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := gate.run(ctx, func() error { t.Error("second start ran while the only slot was taken"); return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("run with the slot taken and ctx cancelled = %v, want context.Canceled", err)
	}
	close(releaseFirst)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	ran := false
	if err := gate.run(t.Context(), func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("run with the slot free = %v (ran %v), want it run", err, ran)
	}
}

// A per-run server that cannot start fails its run, naming it, unless the
// run marks it "required": false.
func TestRunRequiredServers(t *testing.T) {
	t.Parallel()
	fake := fakeServerConfig(t, "exit-in-initialize")
	server := func(required string) string {
		return fmt.Sprintf(`[{"name":"db","command":%q,"env":{%q:"exit-in-initialize"}%s}]`, fake.Command, fakeServerEnv, required)
	}
	tests := []struct {
		name, required string
		turns          []fakeTurn
		wantStatus     string
		wantError      string
	}{
		{name: "required by default", wantStatus: runFailed, wantError: `required server failed to start: server "db": `},
		{name: "required true", required: `,"required":true`, wantStatus: runFailed, wantError: `mark it "required": false`},
		{name: "not required", required: `,"required":false`, turns: []fakeTurn{{Text: "done without db"}}, wantStatus: runCompleted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeModel(t, providerOpenAI, tt.turns...)
			m := newTestRuns(t, f)
			r, err := m.start(runRequest{Prompt: "go", MCPServers: []byte(server(tt.required))}, true)
			if err != nil {
				t.Fatal(err)
			}
			v := waitRun(t, r)
			if v.Status != tt.wantStatus || !strings.Contains(v.Error, tt.wantError) {
				t.Errorf("run = %s %q, want %s with an error containing %q", v.Status, v.Error, tt.wantStatus, tt.wantError)
			}
			if failed := eventData(r, "mcp.server.failed"); len(failed) != 1 || failed[0]["server"] != "db" {
				t.Errorf("mcp.server.failed events = %v, want one for db", failed)
			}
		})
	}
}

// A required global server that is down keeps /readyz at 503; one that
// is not required does not.
func TestAPIReadyzRequiredServer(t *testing.T) {
	t.Parallel()
	for _, required := range []bool{true, false} {
		t.Run(fmt.Sprint("required=", required), func(t *testing.T) {
			t.Parallel()
			down := fakeServerConfig(t, "exit-in-initialize")
			down.Name = "db"
			down.Required = required
			reg := newRegistry([]serverConfig{down}, registryOptions{Logger: discardLogger()})
			t.Cleanup(reg.close)
			if err := reg.waitReady(t.Context()); err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(newAPI(nil, reg, nil, nil, nil, nil))
			t.Cleanup(srv.Close)
			at := &apiTest{url: srv.URL, client: srv.Client()}
			resp, data := at.do(t, http.MethodGet, "/readyz", "", "")
			e, _ := decodeAPIError(data)
			if required && (resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(e.Error.Message, "required global MCP servers not ready: db")) {
				t.Errorf("GET /readyz with required db down = %d %s, want 503 naming db", resp.StatusCode, data)
			}
			if !required && resp.StatusCode != http.StatusOK {
				t.Errorf("GET /readyz with db down, not required = %d %s, want 200", resp.StatusCode, data)
			}
		})
	}
}
