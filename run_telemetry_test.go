package main

import (
	"context"
	"encoding/hex"
	"slices"
	"testing"
	"time"
)

// This file tests the spans of a run: their nesting and attributes, the
// trace context a model endpoint receives, and a run's pace with a
// collector that hangs.

// traceRunWithTwoCalls runs a run whose model calls mcp_fake_echo twice
// at once, then answers, with its spans exported through tr, and
// returns the model's requests.
func traceRunWithTwoCalls(t *testing.T, tr *tracer) []fakeRequest {
	t.Helper()
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{
			{ID: "call_a", Name: "mcp_fake_echo", Arguments: []byte(`{"message":"a"}`)},
			{ID: "call_b", Name: "mcp_fake_echo", Arguments: []byte(`{"message":"b"}`)},
		}, Usage: modelUsage{InputTokens: 11, OutputTokens: 7}},
		fakeTurn{Text: "done", Usage: modelUsage{InputTokens: 13, OutputTokens: 3}},
	)
	reg := newRegistry([]serverConfig{fakeServerConfig(t, "normal")}, registryOptions{Client: clientOptions{}})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.Tracer = tr
	m := newRunsWith(t, opts)
	r, err := m.start(runRequest{Prompt: "echo twice"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := waitRun(t, r); v.Status != runCompleted {
		t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
	}
	return f.requests()
}

func TestRunSpansNest(t *testing.T) {
	t.Parallel()
	c := newFakeCollector(t, false, 0)
	tr := newTestTracer(t, c.URL, spanBatchSize, time.Minute)
	requests := traceRunWithTwoCalls(t, tr)
	if err := tr.shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	spans := c.received()
	byName := map[string][]otlpSpan{}
	for _, s := range spans {
		byName[s.Name] = append(byName[s.Name], s)
	}
	runs, chats, tools, mcps := byName["invoke_agent harnessd"], byName["chat fake-model"], byName["execute_tool mcp_fake_echo"], byName["tools/call echo"]
	if len(runs) != 1 || len(chats) != 2 || len(tools) != 2 || len(mcps) != 2 {
		t.Fatalf("spans = %v, want 1 run, 2 model calls, 2 tool calls, 2 MCP requests", spanNames(spans))
	}
	run := runs[0]
	for _, s := range spans {
		if s.TraceID != run.TraceID {
			t.Errorf("span %q is in trace %s, not the run's %s", s.Name, s.TraceID, run.TraceID)
		}
	}
	if run.ParentSpanID != "" {
		t.Errorf("run span has parent %s, want none (no API request)", run.ParentSpanID)
	}
	for _, s := range slices.Concat(chats, tools) {
		if s.ParentSpanID != run.SpanID {
			t.Errorf("span %q has parent %s, want the run's %s", s.Name, s.ParentSpanID, run.SpanID)
		}
	}
	toolIDs := []string{tools[0].SpanID, tools[1].SpanID}
	for _, s := range mcps {
		if !slices.Contains(toolIDs, s.ParentSpanID) {
			t.Errorf("MCP span has parent %s, want one of the tool calls' %v", s.ParentSpanID, toolIDs)
		}
		wantAttrs(t, s, map[string]string{"mcp.method.name": "tools/call", "gen_ai.tool.name": "echo",
			"harnessd.mcp.server": "fake", "network.transport": "pipe"})
	}
	wantAttrs(t, run, map[string]string{"harnessd.run.status": runCompleted, "gen_ai.operation.name": "invoke_agent",
		"gen_ai.usage.input_tokens": "24", "gen_ai.usage.output_tokens": "10"})
	wantAttrs(t, chats[0], map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
		"gen_ai.request.model": "fake-model"})
	wantAttrs(t, tools[0], map[string]string{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "mcp_fake_echo"})
	if chats[0].Kind != spanClient || mcps[0].Kind != spanClient {
		t.Errorf("model call and MCP request kinds = %d, %d, want client (%d)", chats[0].Kind, mcps[0].Kind, spanClient)
	}
	// Each model request carries its own span's traceparent.
	chatIDs := []string{chats[0].SpanID, chats[1].SpanID}
	for i, req := range requests {
		sc, err := parseTraceparent(req.Header.Get("Traceparent"))
		if err != nil {
			t.Fatalf("model request %d: %v", i, err)
		}
		if hex.EncodeToString(sc.TraceID[:]) != run.TraceID || !slices.Contains(chatIDs, hex.EncodeToString(sc.SpanID[:])) {
			t.Errorf("model request %d: traceparent %s is not a model call span of the run's trace", i, sc.traceparent())
		}
	}
	// No content without include_content.
	for _, s := range spans {
		for _, a := range s.Attributes {
			if a.Key == "gen_ai.tool.call.arguments" || a.Key == "harnessd.run.prompt" {
				t.Errorf("span %q holds %s without include_content", s.Name, a.Key)
			}
		}
	}
}

// spanNames returns the names of spans.
func spanNames(spans []otlpSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name)
	}
	return out
}

// wantAttrs checks that s has each of the attributes want, as text.
func wantAttrs(t *testing.T, s otlpSpan, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, a := range s.Attributes {
		switch v := a.Value; {
		case v.StringValue != nil:
			got[a.Key] = *v.StringValue
		case v.IntValue != "":
			got[a.Key] = v.IntValue
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name, k, got[k], v)
		}
	}
}

func TestRunNotSlowedByHangingCollector(t *testing.T) {
	t.Parallel()
	c := newFakeCollector(t, true, 0)
	// Batches of one: the first span ended holds the exporter in an export
	// that never ends, for as long as the run lasts.
	tr := newTestTracer(t, c.URL, 1, time.Hour)
	// The run ends (waitRun fails the test if not) while the exporter is
	// stuck in its first export.
	traceRunWithTwoCalls(t, tr)
	select {
	case <-c.posted:
	default:
		t.Fatal("the collector received no export")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	tr.shutdown(ctx)
	if got := tr.counts(); got.exported != 0 || got.dropped < 7 {
		t.Errorf("counts = %+v, want nothing exported and the run's 7 spans dropped", got)
	}
}
