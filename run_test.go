package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// newTestRuns returns a run manager over the given global servers whose
// model is the fake f.
func newTestRuns(t testing.TB, f *fakeModel, globals ...serverConfig) *runManager {
	t.Helper()
	reg := newRegistry(globals, registryOptions{Client: clientOptions{}})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	return newRunsOver(t, reg, f, "", nil)
}

// newRunsOver returns a run manager over reg's servers whose model is the
// fake f, shut down at cleanup. home "" means a fresh directory; a nil
// logger discards.
func newRunsOver(t testing.TB, reg *registry, f *fakeModel, home string, logger *slog.Logger) *runManager {
	t.Helper()
	return newRunsWith(t, runOptionsOver(t, reg, f, home, logger))
}

// runOptionsOver returns newRunsOver's options, for tests that change
// some.
func runOptionsOver(t testing.TB, reg *registry, f *fakeModel, home string, logger *slog.Logger) runManagerOptions {
	t.Helper()
	if home == "" {
		home = t.TempDir()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	provider := f.provider(t)
	return runManagerOptions{
		Registry: reg,
		Logger:   logger,
		Home:     home,
		Getenv:   f.getenv,
		Model:    modelSpec{Provider: f.wire, Model: "fake-model"},
		Metrics:  newMetrics(),
		newProvider: func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error) {
			return provider, nil
		},
	}
}

// newRunsWith returns a run manager with opts, shut down at cleanup.
func newRunsWith(t testing.TB, opts runManagerOptions) *runManager {
	t.Helper()
	m := newRunManager(opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := m.shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return m
}

// waitRun waits for r to end and returns its view.
func waitRun(t testing.TB, r *run) runView {
	t.Helper()
	select {
	case <-r.done:
	case <-t.Context().Done():
		t.Fatalf("run %s did not end", r.id)
	}
	return r.view()
}

// eventTypes returns the types of r's events in order.
func eventTypes(r *run) []string {
	events, _, _ := r.eventsAfter(0)
	var types []string
	for _, ev := range events {
		types = append(types, ev.Type)
	}
	return types
}

func call(name, args string) toolCall {
	return toolCall{ID: "call_" + name, Name: name, Arguments: json.RawMessage(args)}
}

// offers checks the request offered exactly the named tools.
func offers(names ...string) func(fakeRequest) error {
	return func(req fakeRequest) error {
		if got := req.toolNames(); !slices.Equal(got, names) {
			return fmt.Errorf("offered tools = %v, want %v", got, names)
		}
		return nil
	}
}

func TestRunFindToolThenCall(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, "openai",
		fakeTurn{Check: offers("find_tool"), ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{Check: offers("find_tool", "mcp_fake_echo"), ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"hello"}`)}},
		fakeTurn{Reply: func(req fakeRequest) fakeTurn {
			res := req.toolResults()
			if len(res) != 1 || res[0].Content != "hello" || res[0].IsError {
				return fakeTurn{Text: fmt.Sprintf("unexpected results %+v", res)}
			}
			return fakeTurn{Text: "the server said " + res[0].Content}
		}},
	)
	m := newTestRuns(t, f, fakeServerConfig(t, "normal"))
	r, err := m.start(runRequest{Prompt: "echo hello"}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := waitRun(t, r)
	if v.Status != runCompleted || v.Output != "the server said hello" {
		t.Fatalf("run = %s %q %q, want completed with the echo", v.Status, v.Output, v.Error)
	}
	if v.Steps != 3 || v.ToolCalls != 2 {
		t.Errorf("steps, tool calls = %d, %d, want 3, 2", v.Steps, v.ToolCalls)
	}
	want := []string{"run.started", "model.response", "tool.call.started", "tool.call.completed",
		"model.response", "tool.call.started", "tool.call.completed", "model.response", "run.completed"}
	if got := eventTypes(r); !slices.Equal(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}
}

func TestRunToolErrorsGoBackToTheModel(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, "openai",
		// Three calls: one the server fails, one to no tool, one whose
		// arguments are not JSON.
		fakeTurn{Body: `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[
			{"id":"c1","type":"function","function":{"name":"mcp_fake_fail","arguments":"{}"}},
			{"id":"c2","type":"function","function":{"name":"no_such_tool","arguments":"{}"}},
			{"id":"c3","type":"function","function":{"name":"mcp_fake_echo","arguments":"{bad"}}]},
			"finish_reason":"tool_calls"}]}`},
		fakeTurn{Reply: func(req fakeRequest) fakeTurn {
			var parts []string
			for _, res := range req.toolResults() {
				parts = append(parts, fmt.Sprintf("%v:%s", res.IsError, res.Content))
			}
			return fakeTurn{Text: strings.Join(parts, " | ")}
		}},
	)
	m := newTestRuns(t, f, fakeServerConfig(t, "normal"))
	r, err := m.start(runRequest{Prompt: "try things"}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := waitRun(t, r)
	for _, want := range []string{"true:it failed", `true:unknown tool "no_such_tool"`, "true:tool mcp_fake_echo: the arguments are not valid JSON"} {
		if v.Status != runCompleted || !strings.Contains(v.Output, want) {
			t.Errorf("run = %s %q, want completed with %q", v.Status, v.Output, want)
		}
	}
}

func TestRunMaxSteps(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
	)
	m := newTestRuns(t, f, fakeServerConfig(t, "normal"))
	r, err := m.start(runRequest{Prompt: "loop", MaxSteps: 2}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := waitRun(t, r)
	if v.Status != runFailed || !strings.Contains(v.Error, "max_steps (2) reached") {
		t.Fatalf("run = %s %q, want failed on max_steps", v.Status, v.Error)
	}
}

func TestRunCancelStopsToolCall(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_hang", `{}`)}},
	)
	m := newTestRuns(t, f, fakeServerConfig(t, "normal"))
	r, err := m.start(runRequest{Prompt: "hang"}, true)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			events, ended, changed := r.eventsAfter(0)
			for _, ev := range events {
				if ev.Type == "tool.call.started" {
					close(started)
					return
				}
			}
			if ended {
				return
			}
			<-changed
		}
	}()
	<-started
	r.cancel()
	v := waitRun(t, r)
	if v.Status != runCancelled {
		t.Fatalf("run = %s %q, want cancelled", v.Status, v.Error)
	}
}

func TestRunRequestValidation(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, "openai")
	m := newTestRuns(t, f, fakeServerConfig(t, "normal"))
	tests := []struct {
		name         string
		req          runRequest
		allowCommand bool
		want         string
	}{
		{name: "empty prompt", req: runRequest{}, want: "prompt: is empty"},
		{name: "bad max_steps", req: runRequest{Prompt: "x", MaxSteps: -1}, want: "max_steps: -1 is out of range"},
		{name: "bad profile", req: runRequest{Prompt: "x", Profile: "../etc"}, want: `profile "../etc": invalid profile name`},
		{name: "bad model", req: runRequest{Prompt: "x", Model: "nonsense"}, want: `model "nonsense": want provider/model`},
		{name: "collision with global", req: runRequest{Prompt: "x", MCPServers: json.RawMessage(`[{"name":"fake","url":"http://127.0.0.1:1/mcp"}]`)}, want: `mcp_servers[0]: server "fake"`},
		{name: "command needs admin", req: runRequest{Prompt: "x", MCPServers: json.RawMessage(`[{"name":"local","command":"true"}]`)}, want: "needs the admin scope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.start(tt.req, tt.allowCommand)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("start(%+v) = %v, want error containing %q", tt.req, err, tt.want)
			}
		})
	}
}

func TestRunsWithSameNamedPerRunServersAreIsolated(t *testing.T) {
	t.Parallel()
	exe := fakeServerConfig(t, "normal").Command
	// Requests of the two runs interleave in any order: each turn answers
	// from its own request.
	turn := fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		if res := req.toolResults(); len(res) > 0 {
			return fakeTurn{Text: res[0].Content}
		}
		return fakeTurn{ToolCalls: []toolCall{call("mcp_mine_echo", fmt.Sprintf(`{"message":%q}`, req.Messages[0].Content))}}
	}}
	f := newFakeModel(t, "openai", turn, turn, turn, turn)
	m := newTestRuns(t, f)
	server := json.RawMessage(fmt.Sprintf(`[{"name":"mine","command":%q,"env":{%q:"normal"}}]`, exe, fakeServerEnv))
	var runs []*run
	for _, prompt := range []string{"first", "second"} {
		r, err := m.start(runRequest{Prompt: prompt, MCPServers: server}, true)
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	for i, r := range runs {
		v := waitRun(t, r)
		want := []string{"first", "second"}[i]
		if v.Status != runCompleted || v.Output != want {
			t.Errorf("run %d = %s %q %q, want completed %q", i, v.Status, v.Output, v.Error, want)
		}
		if len(v.Servers) != 1 || v.Servers[0].Status != statusClosed {
			t.Errorf("run %d servers = %+v, want mine closed", i, v.Servers)
		}
	}
}

func TestStartAfterShutdownIsRefused(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, "openai")
	m := newTestRuns(t, f)
	if err := m.shutdown(t.Context()); err != nil {
		t.Fatalf("shutdown() = %v, want nil", err)
	}
	if r, err := m.start(runRequest{Prompt: "late"}, false); !errors.Is(err, errShuttingDown) {
		t.Errorf("start(late) = %v, %v, want errShuttingDown", r, err)
	}
	if got := len(m.list()); got != 0 {
		t.Errorf("list() after a refused start has %d runs, want 0", got)
	}
}

// eventsAfter returns the events with Seq > seq, whether the run has
// ended, and a channel closed at the next event: the history alone, for
// the tests (followers read it merged with the live events: run.follow).
func (r *run) eventsAfter(seq int) ([]runEvent, bool, <-chan struct{}) {
	r.mu.Lock()
	if r.final != nil && r.events == nil {
		changed := r.changed
		r.mu.Unlock()
		events, _ := r.disk.store.readEvents(r.id)
		return slices.DeleteFunc(events, func(ev runEvent) bool { return ev.Seq <= seq }), true, changed
	}
	defer r.mu.Unlock()
	if seq < 0 {
		seq = 0
	}
	var out []runEvent
	if seq < len(r.events) {
		out = append(out, r.events[seq:]...)
	}
	return out, isTerminal(r.status), r.changed
}
