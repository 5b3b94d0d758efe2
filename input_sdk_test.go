package main

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests server input against the official TypeScript SDK's
// example servers: form elicitation over Streamable HTTP
// (elicitationFormExample.js), URL elicitation behind the SDK's demo
// OAuth server (elicitationUrlExample.js) and sampling over stdio
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
	policy := &inputPolicy{Queue: queue, Interactive: true, Events: runInputEvents(func(typ string, data any) {
		if r, ok := data.(*inputRequest); ok {
			requested <- r
		}
	})}
	c := connectPeer(t, httpPeerConfig("forms", transportHTTP, endpoint), clientOptions{})
	ctx := withInputAnswerer(t.Context(), policy)
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
			done <- errors.New("answer with a 2-character username = " + errString(err) + ", want a field error naming username (minLength 3)")
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
	policy := &inputPolicy{Sampler: &samplingModel{Provider: model.provider(t), Budget: newSamplingBudget(0, 0)}}
	c := connectPeer(t, cfg, clientOptions{})
	res, err := c.callTool(withInputAnswerer(t.Context(), policy), "summarize", json.RawMessage(`{"text":"MCP lets servers ask their client for a completion."}`))
	if err != nil {
		t.Fatalf("callTool(summarize) = %v", err)
	}
	if got := resultText(t, res); got != "A short summary." {
		t.Errorf("summarize = %q, want the model's answer", got)
	}
}

// TestServerInputSDKURLExample drives the SDK's URL elicitation example
// (behind its demo OAuth server) as a person would with harnessd: log in,
// and call payment-confirm, whose -32042 error is asked as a URL
// elicitation; the browser, holding the demo's login cookie, confirms on
// the page, and the server's notifications/elicitation/complete (on the
// GET stream) shows as input.completed. payment-confirm answers -32042 on
// every call, so the one retry fails too. The example's API-key question
// is not driven: it sends it only once the GET request's handler has
// returned, which is when the GET stream has ended, so no stream carries
// it (see the README's server-input section).
func TestServerInputSDKURLExample(t *testing.T) {
	t.Parallel()
	endpoint := startSDKOAuthExample(t, "elicitationUrlExample.js")
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	browser := &http.Client{Jar: jar}
	cfg, store := loginOAuthDemo(t, endpoint, browser, discardLogger())

	requested := make(chan *inputRequest, 4)
	completed := make(chan string, 4)
	queue := &inputQueue{}
	policy := &inputPolicy{Queue: queue, Interactive: true, Events: runInputEvents(func(typ string, data any) {
		switch typ {
		case "input.requested":
			requested <- data.(*inputRequest)
		case "input.completed":
			completed <- data.(map[string]any)["elicitation_id"].(string)
		}
	})}
	c := connectPeer(t, cfg, clientOptions{OAuth: newOAuthClients(store, discardLogger()), Input: policy})

	// submit answers r in harnessd, then posts the page's form as the
	// person's browser and waits for the server's completion notice.
	submit := func(r *inputRequest, form url.Values) {
		t.Helper()
		if _, err := queue.answer(r.ID, inputAnswer{Action: actionAccept}); err != nil {
			t.Fatalf("answer %s: %v", r.ID, err)
		}
		page, err := url.Parse(r.URL)
		if err != nil {
			t.Fatal(err)
		}
		form.Set("session", page.Query().Get("session"))
		form.Set("elicitation", r.ElicitationID)
		resp, err := browser.PostForm(page.Scheme+"://"+page.Host+page.Path, form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST %s = %d %s", page.Path, resp.StatusCode, body)
		}
		select {
		case id := <-completed:
			if id != r.ElicitationID {
				t.Errorf("input.completed for %q, want %q", id, r.ElicitationID)
			}
		case <-t.Context().Done():
			t.Fatalf("no notifications/elicitation/complete for %s", r.ElicitationID)
		}
	}

	ctx := withInputAnswerer(t.Context(), policy)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r := <-requested
		if !strings.Contains(r.URL, "/confirm-payment?") || !strings.Contains(r.URL, "cartId=cart-7") {
			t.Errorf("payment-confirm elicitation URL = %q, want its confirm-payment page for cart-7", r.URL)
		}
		submit(r, url.Values{"cartId": {"cart-7"}, "action": {"confirm"}})
	}()
	_, err = c.callTool(ctx, "payment-confirm", json.RawMessage(`{"cartId":"cart-7"}`))
	<-done
	var rpcErr *rpcError
	if !errors.As(err, &rpcErr) || rpcErr.Code != codeURLElicitationRequired {
		t.Errorf("callTool(payment-confirm) = %v, want its -32042 after the one retry", err)
	}
}
