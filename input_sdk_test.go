package main

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests server input against the official TypeScript SDK's
// example servers: form elicitation over Streamable HTTP
// (elicitationFormExample.js) and sampling over stdio
// (toolWithSampleServer.js).

// sdkExample returns the node command line of one of the TypeScript SDK's
// example servers, with testdata/npm's preloads.
func sdkExample(t *testing.T, file string, preloads ...string) []string {
	t.Helper()
	modules := requireNode(t)
	script := filepath.Join(modules, "@modelcontextprotocol", "sdk", "dist", "esm", "examples", "server", file)
	if _, err := os.Stat(script); err != nil {
		t.Fatalf("TypeScript SDK example %s: %v: run npm ci in testdata/npm", file, err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	args := []string{node}
	for _, p := range preloads {
		args = append(args, "--import", filepath.Join(filepath.Dir(modules), p))
	}
	return append(args, script)
}

func TestServerInputSDKFormExample(t *testing.T) {
	t.Parallel()
	argv := sdkExample(t, "elicitationFormExample.js", "loopback.mjs")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "PORT=0")
	endpoint := startHTTPPeer(t, "elicitationFormExample", cmd, false, func(line string) (string, bool) {
		addr, found := strings.CutPrefix(line, "loopback.mjs: listening on ")
		return "http://" + addr + "/mcp", found
	})
	requested := make(chan *inputRequest, 1)
	queue := &inputQueue{}
	policy := &inputPolicy{Queue: queue, Emit: func(typ string, data any) {
		if r, ok := data.(*inputRequest); ok {
			requested <- r
		}
	}}
	c := connectPeer(t, httpPeerConfig("forms", transportHTTP, endpoint), clientOptions{})
	ctx := withInputPolicy(t.Context(), policy)
	// The example sends its elicitation on the GET stream, which opens
	// after the first POST of the session.
	if _, err := c.listTools(t.Context()); err != nil {
		t.Fatalf("listTools() = %v", err)
	}
	st, ok := c.t.(interface{ getStreamSettled() <-chan struct{} })
	if !ok {
		t.Fatalf("transport %T has no GET stream", c.t)
	}
	select {
	case <-st.getStreamSettled():
	case <-t.Context().Done():
		t.Fatal("the GET stream never settled")
	}

	done := make(chan error, 1)
	go func() {
		r := <-requested
		_, err := queue.answer(r.ID, inputAnswer{Action: actionAccept, Content: map[string]json.RawMessage{
			"username": json.RawMessage(`"ad"`), "email": json.RawMessage(`"ada@example.com"`), "password": json.RawMessage(`"correct horse"`)}})
		var fe *fieldError
		if !errors.As(err, &fe) || fe.Field != "username" {
			done <- errors.New("answer with a 2-character username = " + errorString(err) + ", want a field error naming username (minLength 3)")
			return
		}
		_, err = queue.answer(r.ID, inputAnswer{Action: actionAccept, Content: map[string]json.RawMessage{
			"username": json.RawMessage(`"ada"`), "email": json.RawMessage(`"ada@example.com"`), "password": json.RawMessage(`"correct horse"`), "interests": json.RawMessage(`["ai"]`)}})
		done <- err
	}()
	res, err := c.callTool(ctx, "register_user", nil)
	if err != nil {
		t.Fatalf("callTool(register_user) = %v", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := resultText(t, res); !strings.Contains(got, "Registration successful") || !strings.Contains(got, "Username: ada") || !strings.Contains(got, "Newsletter: No") {
		t.Errorf("register_user = %q, want a registration of ada with the newsletter default", got)
	}
}

func TestServerInputSDKSamplingExample(t *testing.T) {
	t.Parallel()
	argv := sdkExample(t, "toolWithSampleServer.js")
	model := newFakeModel(t, providerAnthropic, fakeTurn{
		Check: func(req fakeRequest) error {
			if len(req.Messages) != 1 || !strings.Contains(req.Messages[0].Content, "summarize the following text") || req.MaxTokens != 500 {
				return errors.New("sampling request = " + req.Messages[0].Content + ", want the server's summarize prompt with maxTokens 500")
			}
			return nil
		},
		Text:  "A short summary.",
		Usage: modelUsage{InputTokens: 30, OutputTokens: 4},
	})
	cfg := stdioPeerConfig("summarizer", peerCommand{Command: argv[0], Args: argv[1:]})
	cfg.Sampling = true
	policy := &inputPolicy{Sampler: &sampler{Provider: model.provider(t), Budget: newSamplingBudget(0, 0)}}
	c := connectPeer(t, cfg, clientOptions{})
	res, err := c.callTool(withInputPolicy(t.Context(), policy), "summarize", json.RawMessage(`{"text":"MCP lets servers ask their client for a completion."}`))
	if err != nil {
		t.Fatalf("callTool(summarize) = %v", err)
	}
	if got := resultText(t, res); got != "A short summary." {
		t.Errorf("summarize = %q, want the model's answer", got)
	}
}

// errorString returns err's message, or "nil".
func errorString(err error) string {
	if err == nil {
		return "nil"
	}
	return err.Error()
}
