package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file tests harnessd's client against the official Go SDK's server in
// its -full mode (interop/cmd/echoserver): resources, the tools that ask for
// input, and list changes, over stdio and Streamable HTTP.

// sdkFullPeers are the ways to reach the Go SDK server in -full mode, with
// the revision harnessd negotiates with each (its stateful HTTP handler
// cannot serve 2026-07-28, so that one stays at 2025-11-25; its stateless
// one serves 2026-07-28).
func sdkFullPeers() []struct {
	name        string
	config      func(t *testing.T) serverConfig
	wantVersion string
} {
	return []struct {
		name        string
		config      func(t *testing.T) serverConfig
		wantVersion string
	}{
		{"stdio", func(t *testing.T) serverConfig {
			return stdioPeerConfig("sdk", peerCommand{Command: buildEchoServer(t), Args: []string{"stdio", "-full", "-ttl", "1m"}})
		}, sessionlessProtocolVersion},
		{"http", func(t *testing.T) serverConfig {
			return httpPeerConfig("sdk", transportHTTP, startEchoServerHTTP(t, "http", "-full", "-ttl", "1m"))
		}, "2025-11-25"},
		{"http-stateless", func(t *testing.T) serverConfig {
			return httpPeerConfig("sdk", transportHTTP, startEchoServerHTTP(t, "http-stateless", "-full", "-ttl", "1m"))
		}, sessionlessProtocolVersion},
	}
}

// sdkInputOptions answer the Go SDK server's questions: elicitations
// accepted with content fitting each question, sampling with a fixed text
// (through the conformance hook, as no model runs here).
func sdkInputOptions() clientOptions {
	return clientOptions{
		Input: &inputPolicy{Prompt: answerSDKQuestion},
		HandleRequest: func(method string, _ json.RawMessage) (any, *rpcError, bool) {
			if method != "sampling/createMessage" {
				return nil, nil, false
			}
			return map[string]any{"role": "assistant", "model": "fixed", "content": map[string]any{"type": "text", "text": "Paris"}}, nil, true
		},
	}
}

func TestGoSDKFullServer(t *testing.T) {
	t.Parallel()
	for _, peer := range sdkFullPeers() {
		t.Run(peer.name, func(t *testing.T) {
			t.Parallel()
			toolsChanged := make(chan struct{}, 1)
			opts := sdkInputOptions()
			opts.OnToolsChanged = func() {
				select {
				case toolsChanged <- struct{}{}:
				default:
				}
			}
			cfg := peer.config(t)
			cfg.Roots = []string{"/srv/data"}
			c := connectPeer(t, cfg, opts)
			if got := c.protocolVersion(); got != peer.wantVersion {
				t.Errorf("protocol version = %q, want %q", got, peer.wantVersion)
			}
			ctx := t.Context()
			calls := []struct {
				tool, args, want string
			}{
				{"confirm", `{"action":"deploy"}`, "confirmed deploy"},
				{"ask_model", `{"question":"Capital of France?"}`, "Paris"},
				{"list_roots", `{}`, "file:///srv/data"},
			}
			// Below 2026-07-28 the SDK asks by server requests and re-runs
			// the tool once, so only one round of questions works there.
			if peer.wantVersion >= sessionlessProtocolVersion {
				calls = append(calls, struct{ tool, args, want string }{"survey", `{}`, "Ada likes green"})
			}
			for _, call := range calls {
				res, err := c.callTool(ctx, call.tool, json.RawMessage(call.args))
				if err != nil || res.IsError || resultToText(res) != call.want {
					t.Errorf("callTool(%s, %s) = %v, %v, want %q", call.tool, call.args, res, err, call.want)
				}
			}
			read, err := c.readResource(ctx, "echo://greeting")
			if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "hello from echoserver" {
				t.Errorf("readResource(echo://greeting) = %+v, %v, want its text", read, err)
			}
			if peer.wantVersion >= sessionlessProtocolVersion {
				_, err := c.callTool(ctx, "nag", nil)
				if err == nil || !strings.Contains(err.Error(), `server "sdk" still asks for input after 8 answered rounds`) {
					t.Errorf("callTool(nag) error = %v, want the bound on rounds, naming the server", err)
				}
			}

			// A list change reaches harnessd: through the GET stream below
			// 2026-07-28, through subscriptions/listen on it.
			if _, err := c.callTool(ctx, "add_tool", json.RawMessage(`{"name":"shout"}`)); err != nil {
				t.Fatalf("callTool(add_tool) = %v", err)
			}
			select {
			case <-toolsChanged:
			case <-time.After(waitLimit):
				t.Fatal("no tools list_changed within the wait limit of add_tool")
			}
			tools, err := c.listTools(ctx)
			if err != nil || !slices.ContainsFunc(tools, func(tool toolInfo) bool { return tool.Name == "shout" }) {
				t.Errorf("listTools() after list_changed = %v, %v, want it to hold %q", tools, err, "shout")
			}
		})
	}
}

// answerSDKQuestion accepts the Go SDK server's elicitations: a name, a
// colour, or a confirmation.
func answerSDKQuestion(_ context.Context, _ string, req elicitRequest, _ *elicitSchema) (elicitResult, error) {
	switch {
	case strings.Contains(req.Message, "name"):
		return elicitResult{Action: actionAccept, Content: map[string]any{"name": "Ada"}}, nil
	case strings.Contains(req.Message, "colour"):
		return elicitResult{Action: actionAccept, Content: map[string]any{"colour": "green"}}, nil
	}
	return elicitResult{Action: actionAccept, Content: map[string]any{"confirmed": true}}, nil
}

// TestGoSDKInputRequiredThroughRun runs the Go SDK server's confirm tool
// at 2026-07-28 through the API: its input-required result becomes the
// run's open question, answered over HTTP in an interactive run and
// declined at once in another.
func TestGoSDKInputRequiredThroughRun(t *testing.T) {
	t.Parallel()
	cfg := stdioPeerConfig("sdk", peerCommand{Command: buildEchoServer(t), Args: []string{"stdio", "-full"}})
	confirm := fakeTurn{ToolCalls: calls("mcp_sdk_confirm", `{"action":"deploy"}`)}
	at := newAPITest(t, newFakeModel(t, providerOpenAI, confirm, answerWithResults, confirm, answerWithResults), nil, cfg)

	r := at.startRun(t, `{"prompt":"deploy","interactive":true}`)
	id := requestedID(t, r)
	if status, open := at.openInputs(t, r); status != runWaitingInput || len(open) != 1 || open[0].Server != "sdk" || !strings.Contains(open[0].Message, "deploy") {
		t.Fatalf("GET run = %s %+v, want waiting_input with the sdk server's question", status, open)
	}
	path := fmt.Sprintf("/v1/runs/%s/input/%s", r.id, id)
	if resp, data := at.do(t, http.MethodPost, path, "", `{"action":"accept","content":{"confirmed":true}}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d %s, want 200", path, resp.StatusCode, data)
	}
	v := waitRun(t, r)
	requireCompleted(t, v)
	if !strings.Contains(v.Output, "confirmed deploy") {
		t.Errorf("interactive run output = %q, want the tool's answer to the accepted question", v.Output)
	}

	r = at.startRun(t, `{"prompt":"deploy"}`)
	v = waitRun(t, r)
	requireCompleted(t, v)
	if !strings.Contains(v.Output, "not confirmed: deploy (decline)") {
		t.Errorf("non-interactive run output = %q, want the tool's answer to the declined question", v.Output)
	}
}
