package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// This file holds the benchmark of a run through the MCP server against the
// same run through POST /v1/runs.

// BenchmarkMCPServeRun runs one scripted run (a model call, one echo tool
// call, a second model call) per op, one at a time: rest POSTs /v1/runs
// and waits for the run to end; mcp-2025 and mcp-2026 call the run tool of
// /mcp with harnessd's own client at 2025-11-25 and 2026-07-28, which holds
// until the run ends (with progress notifications). The difference is what
// the MCP path adds.
func BenchmarkMCPServeRun(b *testing.B) {
	for _, mode := range []string{"rest", "mcp-2025", "mcp-2026"} {
		b.Run(mode, func(b *testing.B) {
			f := echoRunsModel(b, b.N)
			at := newAPITest(b, f, []authKey{testKey("alice", mcpAliceToken, scopeRunsWrite)}, fakeServerConfig(b, "normal"))
			runOnce := at.benchREST
			if version, ok := strings.CutPrefix(mode, "mcp-"); ok {
				version = map[string]string{"2025": "2025-11-25", "2026": "2026-07-28"}[version]
				c, err := connect(b.Context(), mcpClientConfig(at, "harnessd", mcpAliceToken, version), clientOptions{Logger: discardLogger()})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { c.close() })
				runOnce = func(b *testing.B) {
					res, err := c.callTool(b.Context(), "run", json.RawMessage(`{"prompt":"say hi"}`))
					if err != nil || res.IsError || !strings.Contains(res.Content[0].Text, "the server said") {
						b.Fatalf("run = %+v (%v)", res, err)
					}
				}
			}
			b.ResetTimer()
			for range b.N {
				runOnce(b)
			}
		})
	}
}

// benchREST starts a run with POST /v1/runs and waits for it to end.
func (at *apiTest) benchREST(b *testing.B) {
	resp, data := at.do(b, http.MethodPost, "/v1/runs", "Bearer "+mcpAliceToken, `{"prompt":"say hi"}`)
	var out struct {
		RunID string `json:"run_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &out) != nil {
		b.Fatalf("POST /v1/runs = %d %s", resp.StatusCode, data)
	}
	r := at.runs.get(out.RunID)
	<-r.done
	if v := r.view(); !strings.Contains(v.Output, "the server said") {
		b.Fatalf("run = %s %q", v.Status, v.Output)
	}
}
