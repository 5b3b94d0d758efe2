package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// This file holds the tests of what a run shows of what it did: the
// arguments and results of its tool calls in its events, cut and
// redacted, and its transcript (GET /v1/runs/{id}/messages), in memory and
// on disk, across a restart, bounded.

// transcriptSecret is the env value of the fake server the tests here
// configure: every run may quote it, and nothing may show it.
const transcriptSecret = "tr-secret-0123456789"

// secretFakeServer returns the fake server with transcriptSecret in its
// env.
func secretFakeServer(t *testing.T) serverConfig {
	t.Helper()
	s := fakeServerConfig(t, "normal")
	s.Env["API_TOKEN"] = transcriptSecret
	return s
}

// eventsOf returns the data of r's events of type typ, in order.
func eventsOf(r *run, typ string) []map[string]any {
	events, _, _ := r.eventsAfter(0)
	var out []map[string]any
	for _, ev := range events {
		if ev.Type == typ {
			d, _ := ev.Data.(map[string]any)
			out = append(out, d)
		}
	}
	return out
}

func TestToolEventsCarryArgumentsAndResult(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("L", 3000)
	tests := []struct {
		name, message string
		// want is what the event's arguments and result contain; wantCut
		// says whether they were cut (and carry their full size).
		wantArgs, wantResult string
		wantCut              bool
	}{
		{name: "short", message: "hello", wantArgs: `{"message":"hello"}`, wantResult: "hello"},
		{name: "secret", message: "token " + transcriptSecret, wantArgs: `{"message":"token [redacted]"}`, wantResult: "token [redacted]"},
		{name: "long", message: long, wantArgs: `{"message":"` + long[:1024-len(`{"message":"`)] + "…", wantResult: long[:1024] + "…", wantCut: true},
	}
	var calls []toolCall
	for i, tt := range tests {
		args := fmt.Sprintf(`{"message":%q}`, tt.message)
		calls = append(calls, toolCall{ID: fmt.Sprintf("call_%d", i), Name: "mcp_fake_echo", Arguments: []byte(args)})
	}
	f := newFakeModel(t, "openai", fakeTurn{ToolCalls: calls}, fakeTurn{Text: "done"})
	reg := newPeerRegistry(t, secretFakeServer(t))
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.Limits.MaxToolEventBytes = 1024
	m := newRunsWith(t, opts)
	r := startRun(t, m, runRequest{Prompt: "echo them"})
	if v := waitRun(t, r); v.Status != runCompleted {
		t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
	}
	started, completed := eventsOf(r, "tool.call.started"), eventsOf(r, "tool.call.completed")
	byCall := func(events []map[string]any, id string) map[string]any {
		for _, d := range events {
			if d["call_id"] == id {
				return d
			}
		}
		t.Fatalf("no event of call %s in %v", id, events)
		return nil
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := fmt.Sprintf("call_%d", i)
			s, c := byCall(started, id), byCall(completed, id)
			if s["arguments"] != tt.wantArgs {
				t.Errorf("tool.call.started arguments = %.80q, want %.80q", s["arguments"], tt.wantArgs)
			}
			if c["result"] != tt.wantResult || c["is_error"] != false {
				t.Errorf("tool.call.completed result, is_error = %.80q, %v, want %.80q, false", c["result"], c["is_error"], tt.wantResult)
			}
			_, argsSized := s["arguments_bytes"]
			_, resultSized := c["result_bytes"]
			if argsSized != tt.wantCut || resultSized != tt.wantCut {
				t.Errorf("arguments_bytes, result_bytes present = %v, %v, want %v", argsSized, resultSized, tt.wantCut)
			}
			if tt.wantCut && (s["arguments_bytes"] != len(`{"message":""}`)+len(long) || c["result_bytes"] != len(long)) {
				t.Errorf("arguments_bytes, result_bytes = %v, %v, want the full sizes", s["arguments_bytes"], c["result_bytes"])
			}
		})
	}
}

// serveRuns serves the API over m, without auth.
func serveRuns(t *testing.T, m *runManager) *apiTest {
	t.Helper()
	a := newAPI(m, m.opts.Registry, nil, m.opts.Metrics, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &apiTest{url: srv.URL, client: srv.Client(), api: a, runs: m}
}

// A messagesBody is GET /v1/runs/{id}/messages decoded.
type messagesBody struct {
	RunID     string              `json:"run_id"`
	Status    string              `json:"status"`
	Messages  []transcriptMessage `json:"messages"`
	Truncated bool                `json:"truncated"`
}

// getMessages reads run id's transcript through the API, failing the
// test unless it answers 200 with a well-formed body; it also returns the
// raw body.
func getMessages(t *testing.T, at *apiTest, id string) (messagesBody, string) {
	t.Helper()
	resp, data := at.do(t, "GET", "/v1/runs/"+id+"/messages", "", "")
	var out messagesBody
	if err := json.Unmarshal(data, &out); err != nil || resp.StatusCode != 200 || out.RunID != id {
		t.Fatalf("GET /v1/runs/%s/messages = %d %s (%v), want 200 with the run's messages", id, resp.StatusCode, data, err)
	}
	return out, string(data)
}

// roles returns the roles of msgs, in order.
func roles(msgs []transcriptMessage) []string {
	var out []string
	for _, m := range msgs {
		out = append(out, m.Role)
	}
	return out
}

func TestTranscript(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 3000)
	for _, stored := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored=%v", stored), func(t *testing.T) {
			f := newFakeModel(t, "openai",
				fakeTurn{Text: "calling two tools", ToolCalls: []toolCall{
					{ID: "c1", Name: "mcp_fake_echo", Arguments: []byte(`{"message":"use ` + transcriptSecret + `"}`)},
					{ID: "c2", Name: "mcp_fake_echo", Arguments: []byte(`{"message":"` + long + `"}`)},
				}},
				fakeTurn{Text: "all done"},
			)
			reg := newPeerRegistry(t, secretFakeServer(t))
			opts := runOptionsOver(t, reg, f, "", nil)
			dir := filepath.Join(t.TempDir(), "runs")
			if stored {
				store, err := openRunStoreOnceFree(dir, discardLogger())
				if err != nil {
					t.Fatal(err)
				}
				opts.Store = store
			}
			m := newRunsWith(t, opts)
			at := serveRuns(t, m)
			r := startRun(t, m, runRequest{Prompt: "do it", SystemPrompt: "be brief"})
			if v := waitRun(t, r); v.Status != runCompleted {
				t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
			}
			got, raw := getMessages(t, at, r.id)
			if want := []string{"system", "user", "assistant", "tool", "tool", "assistant"}; !slices.Equal(roles(got.Messages), want) || got.Truncated || got.Status != runCompleted {
				t.Fatalf("messages = %s, want roles %v, not truncated, completed", raw, want)
			}
			if strings.Contains(raw, transcriptSecret) {
				t.Errorf("messages = %s: shows a server's secret", raw)
			}
			msgs := got.Messages
			for i, want := range []transcriptMessage{
				{Step: 0, Role: "system", Content: "be brief"},
				{Step: 0, Role: "user", Content: "do it"},
				{Step: 1, Role: "assistant", Content: "calling two tools"},
				{Step: 1, Role: "tool", ToolCallID: "c1", Name: "mcp_fake_echo", Content: "use [redacted]"},
				{Step: 1, Role: "tool", ToolCallID: "c2", Name: "mcp_fake_echo", Content: long},
				{Step: 2, Role: "assistant", Content: "all done"},
			} {
				m := msgs[i]
				if m.Step != want.Step || m.Role != want.Role || m.Content != want.Content || m.ToolCallID != want.ToolCallID || m.Name != want.Name || m.IsError || m.Time.IsZero() {
					t.Errorf("message %d = %+.200v, want %+.200v", i, m, want)
				}
			}
			var ids, args []string
			for _, c := range msgs[2].ToolCalls {
				ids = append(ids, c.ID+" "+c.Name)
				args = append(args, string(encodeCompact(c.Arguments)))
			}
			if want := []string{"c1 mcp_fake_echo", "c2 mcp_fake_echo"}; !slices.Equal(ids, want) {
				t.Errorf("tool calls = %v, want %v", ids, want)
			}
			if want := []string{`{"message":"use [redacted]"}`, `{"message":"` + long + `"}`}; !slices.Equal(args, want) {
				t.Errorf("tool call arguments = %.200q, want %.200q", args, want)
			}
			if !stored {
				return
			}
			// A second manager on the same directory, once the first has
			// stopped, serves the same transcript.
			stopRuns(t, m)
			opts2 := runOptionsOver(t, reg, f, "", nil)
			store, err := openRunStoreOnceFree(dir, discardLogger())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(store.close)
			opts2.Store = store
			_, again := getMessages(t, serveRuns(t, newRunsWith(t, opts2)), r.id)
			if again != raw {
				t.Errorf("messages after a restart:\n%s\nwant\n%s", again, raw)
			}
		})
	}
}

func TestTranscriptCutAtLimit(t *testing.T) {
	t.Parallel()
	for _, stored := range []bool{false, true} {
		t.Run(fmt.Sprintf("stored=%v", stored), func(t *testing.T) {
			f := newFakeModel(t, "openai",
				fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"`+strings.Repeat("x", 2000)+`"}`)}},
				fakeTurn{Text: "after the cut"},
			)
			reg := newPeerRegistry(t, fakeServerConfig(t, "normal"))
			opts := runOptionsOver(t, reg, f, "", nil)
			opts.Limits.MaxTranscriptBytes = 3000
			if stored {
				store, err := openRunStoreOnceFree(t.TempDir(), discardLogger())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(store.close)
				opts.Store = store
			}
			m := newRunsWith(t, opts)
			r := startRun(t, m, runRequest{Prompt: "make it big"})
			if v := waitRun(t, r); v.Status != runCompleted {
				t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
			}
			got, raw := getMessages(t, serveRuns(t, m), r.id)
			if want := []string{"user", "assistant"}; !got.Truncated || !slices.Equal(roles(got.Messages), want) {
				t.Errorf("messages = %s, want roles %v then truncated", raw, want)
			}
			if stored {
				f, _ := m.opts.Store.read(r.id)
				n := 0
				for _, line := range f.messages {
					n += len(line) + 1
				}
				if n > 3000+200 {
					t.Errorf("transcript file = %d bytes, want at most max_transcript_bytes plus the marker", n)
				}
			}
		})
	}
}

func TestTranscriptWhileRunning(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"so far"}`)}},
		fakeTurn{Hang: true, Check: func(fakeRequest) error { close(entered); return nil }},
	)
	reg := newPeerRegistry(t, fakeServerConfig(t, "normal"))
	opts := runOptionsOver(t, reg, f, "", nil)
	store, err := openRunStoreOnceFree(t.TempDir(), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.close)
	opts.Store = store
	m := newRunsWith(t, opts)
	at := serveRuns(t, m)
	r := startRun(t, m, runRequest{Prompt: "wait"})
	select {
	case <-entered:
	case <-t.Context().Done():
		t.Fatal("the run never made its second model call")
	}
	got, raw := getMessages(t, at, r.id)
	if want := []string{"user", "assistant", "tool"}; got.Status != runRunning || !slices.Equal(roles(got.Messages), want) || got.Messages[2].Content != "so far" {
		t.Errorf("messages of the running run = %s, want status running and roles %v ending with the echo", raw, want)
	}
	r.cancel()
	waitRun(t, r)
	if resp, data := at.do(t, "GET", "/v1/runs/run_missing/messages", "", ""); resp.StatusCode != 404 {
		t.Errorf("GET /v1/runs/run_missing/messages = %d %s, want 404", resp.StatusCode, data)
	}
}

// BenchmarkTranscriptStep measures what keeping the transcript adds to one
// step of a run kept on disk: a model answer with one tool call and its
// result, encoded, redacted and appended (two writes, no fsync).
func BenchmarkTranscriptStep(b *testing.B) {
	reg := newRegistry(nil, registryOptions{Logger: benchLogger})
	b.Cleanup(reg.close)
	store, err := openRunStoreOnceFree(b.TempDir(), benchLogger)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(store.close)
	m := newRunManager(runManagerOptions{Registry: reg, Logger: benchLogger, Home: b.TempDir(), Metrics: newMetrics(),
		Store: store, Limits: runLimits{MaxTranscriptBytes: 1 << 40}})
	r := newRun(m.env, runRequest{Prompt: "bench"})
	r.provider = newGateModel()
	r.secrets = m.env.secrets.derive(transcriptSecret)
	if err := m.persistNew(r); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { r.disk.discard(r.id) })
	calls := []toolCall{{ID: "call_1", Name: "mcp_bench_echo", Arguments: json.RawMessage(`{"message":"hello from the benchmark"}`)}}
	answer := []chatMessage{{Role: roleAssistant, Content: "Let me echo that.", ToolCalls: calls}}
	results := []chatMessage{{Role: roleTool, ToolCallID: "call_1", Content: strings.Repeat("result text ", 40)}}
	b.ReportAllocs()
	for b.Loop() {
		r.record(1, answer, nil)
		r.record(1, results, calls)
	}
}
