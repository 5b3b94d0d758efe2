package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file holds the limits of runs against the real reference servers:
// max_steps, and cancellation while a stdio or Streamable HTTP call is
// in flight.

func TestRealRunLimits(t *testing.T) {
	t.Parallel()
	everythingHTTP := startEverythingHTTP(t, "streamableHttp")
	proxy := startRecordingProxy(t, everythingHTTP, nil)
	holding := startRecordingProxy(t, everythingHTTP, func(req proxiedRequest) bool {
		return req.RPC == "tools/call" && strings.Contains(string(req.Body), `"name":"trigger-long-running-operation"`)
	})
	reg := newPeerRegistry(t,
		stdioPeerConfig("local", everythingStdioCommand(t)),
		httpPeerConfig("remote", transportHTTP, proxy.URL),
		httpPeerConfig("held", transportHTTP, holding.URL))

	t.Run("max_steps", func(t *testing.T) {
		echo := fakeTurn{ToolCalls: calls("mcp_local_echo", `{"message":"again"}`)}
		f := newFakeModel(t, providerOpenAI, echo, echo)
		m := newRunsOver(t, reg, f, "", nil)
		v := waitRun(t, startRun(t, m, runRequest{Prompt: "loop", MaxSteps: 2}))
		if v.Status != runFailed || !strings.Contains(v.Error, "max_steps (2) reached") {
			t.Errorf("run = %s %q, want failed on max_steps", v.Status, v.Error)
		}
		if v.Steps != 2 || v.ToolCalls != 2 {
			t.Errorf("steps, tool calls = %d, %d, want 2, 2", v.Steps, v.ToolCalls)
		}
	})

	// The tool would take a minute; cancelling must end the run at once,
	// tell the server, and leave the global session usable. Over HTTP the
	// cancel comes either while the answer streams (progress events) or
	// before its first byte.
	const longCall = `{"duration":60,"steps":60}`
	tests := []struct {
		name      string
		server    string
		proxy     *recordingProxy // sees the server's side of an HTTP server
		streaming bool            // cancel only once the answer streams
	}{
		{"cancel stdio", "local", nil, false},
		{"cancel streamable http while streaming", "remote", proxy, true},
		{"cancel streamable http before the answer", "held", holding, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tool := mcpToolName(tt.server, "trigger-long-running-operation")
			f := newFakeModel(t, providerAnthropic, fakeTurn{ToolCalls: calls(tool, longCall)})
			m := newRunsOver(t, reg, f, "", nil)
			r := startRun(t, m, runRequest{Prompt: "wait"})
			waitEvent(t, r, "tool.call.started")
			var call proxiedRequest
			if tt.proxy == holding {
				seen := tt.proxy.waitUntil(t, "the tool call's answer held", func(seen []proxiedRequest) bool {
					return slices.ContainsFunc(seen, func(req proxiedRequest) bool { return req.Held })
				})
				call = seen[slices.IndexFunc(seen, func(req proxiedRequest) bool { return req.Held })]
			}
			if tt.streaming {
				// The second progress event: the first one's headers have
				// surely reached the client by then.
				tt.proxy.waitUntil(t, "two progress events of the tool call", func(seen []proxiedRequest) bool {
					writes := map[string]int{}
					for _, req := range seen {
						if req.Answering && req.RPC == "tools/call" && !cancelledCall(seen, req.Body) {
							if writes[string(req.Body)]++; writes[string(req.Body)] == 2 {
								call = req
								return true
							}
						}
					}
					return false
				})
			}
			cancelled := time.Now()
			r.cancel()
			v := waitRun(t, r)
			if took := time.Since(cancelled); took > 5*time.Second {
				t.Errorf("run ended %v after cancel, want well under the tool's minute", took)
			}
			if v.Status != runCancelled {
				t.Errorf("run = %s %q, want cancelled", v.Status, v.Error)
			}
			c, err := reg.server(tt.server).current()
			if err != nil {
				t.Fatalf("server %s after cancel: %v", tt.server, err)
			}
			res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"still here"}`))
			if err != nil || resultToText(res) != "Echo: still here" {
				t.Errorf("echo on %s after cancel = %v, %v, want Echo: still here", tt.server, res, err)
			}
			if tt.proxy == nil {
				return
			}
			tt.proxy.waitUntil(t, "notifications/cancelled for the tool call", func(seen []proxiedRequest) bool {
				return cancelledCall(seen, call.Body)
			})
		})
	}
}

// cancelledCall reports whether seen holds a notifications/cancelled for
// the request whose body is call.
func cancelledCall(seen []proxiedRequest, call []byte) bool {
	var request struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(call, &request) != nil || request.ID == nil {
		return false
	}
	for _, req := range seen {
		var msg struct {
			Params struct {
				RequestID json.RawMessage `json:"requestId"`
			} `json:"params"`
		}
		if req.RPC == "notifications/cancelled" && !req.Answering && json.Unmarshal(req.Body, &msg) == nil &&
			string(msg.Params.RequestID) == string(request.ID) {
			return true
		}
	}
	return false
}
