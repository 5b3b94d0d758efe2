package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file holds fakeModel, a scripted model server speaking the OpenAI
// Chat Completions or the Anthropic Messages wire format, for the tests of
// the providers, the agent loop and the API.

// fakeModelKey is the API key fakeModel.getenv hands out.
const fakeModelKey = "fake-key-0123456789"

// A fakeTurn is one scripted answer of a fakeModel. Each request, retries
// included, takes the next turn of the script.
type fakeTurn struct {
	// Check, when set, inspects the request; an error fails the test.
	Check func(req fakeRequest) error
	// Reply, when set, computes the answer from the request (to echo tool
	// results, say); the Check and Reply of the turn it returns are ignored.
	Reply func(req fakeRequest) fakeTurn

	Text       string
	ToolCalls  []toolCall // an empty ID is generated; empty Arguments are sent as {}
	Usage      modelUsage
	StopReason string // in the wire's own words; derived from ToolCalls when empty
	// Thinking, when set, is sent first by the Anthropic wire as a
	// thinking block signed "sig:" + Thinking, as extended thinking is.
	Thinking string

	// Status, when neither 0 nor 200, answers with that status and an error
	// body in the wire's shape whose message is Text.
	Status     int
	RetryAfter string // the Retry-After header, when set
	Body       string // sent verbatim as the body (malformed JSON, say)
	// Hang answers nothing until the request is abandoned or the test ends.
	Hang bool

	// Streamed answers (model_fake_stream_test.go), to a request asking
	// for a stream when the fake streams (streamChunks) or Chunks is set.
	// Chunks are the pieces of the text as streamed; Text is their
	// concatenation when empty.
	Chunks []string
	// BreakAfter, when positive, fails the stream after that many text
	// pieces: the OpenAI stream stops without finishing, the Anthropic
	// one sends an overloaded_error event.
	BreakAfter int
	// OnChunk, when set, is called before text piece i is written; it may
	// block to pace the stream.
	OnChunk func(i int)
}

// A fakeRequest is one request a fakeModel received: decoded into the
// neutral shape (a tool result sent to OpenAI as "Error: ..." reads back
// with IsError set), plus its headers and raw body.
type fakeRequest struct {
	modelRequest
	Header http.Header
	Raw    []byte
	Turn   int  // the index of the turn that answered it
	Stream bool // the request asked for a streamed answer
}

// toolNames returns the names of the tools offered, in order.
func (r fakeRequest) toolNames() []string {
	var names []string
	for _, t := range r.Tools {
		names = append(names, t.Name)
	}
	return names
}

// toolResults returns the tool messages at the end of the conversation:
// the results of the model's last tool calls. It returns nil when the last
// message is not a tool result.
func (r fakeRequest) toolResults() []chatMessage {
	i := len(r.Messages)
	for i > 0 && r.Messages[i-1].Role == roleTool {
		i--
	}
	if i == len(r.Messages) {
		return nil
	}
	return r.Messages[i:]
}

// A fakeModel is an httptest server that answers model requests from a
// script. It is safe for concurrent use.
type fakeModel struct {
	t      testing.TB
	wire   string // providerOpenAI or providerAnthropic
	srv    *httptest.Server
	script []fakeTurn
	done   chan struct{} // closed when the test ends, to release hanging turns
	// chunkSize, when positive, streams every answer to a request asking
	// for it, in pieces of this many bytes (set by streamChunks before use).
	chunkSize int

	mu sync.Mutex
	// guards next and received
	next     int
	received []fakeRequest
}

// newFakeModel starts a fake model speaking wire (providerOpenAI or
// providerAnthropic) that answers with script, one turn per request. A
// request beyond the script, or a turn left unused at the end of the test,
// fails the test. The server is closed when the test ends.
func newFakeModel(t testing.TB, wire string, script ...fakeTurn) *fakeModel {
	t.Helper()
	if wire != providerOpenAI && wire != providerAnthropic {
		t.Fatalf("newFakeModel(%q): want %q or %q", wire, providerOpenAI, providerAnthropic)
	}
	f := &fakeModel{t: t, wire: wire, script: script, done: make(chan struct{})}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(func() {
		close(f.done)
		f.srv.Close()
		if used := len(f.requests()); used < len(f.script) {
			t.Errorf("fake %s model: %d of %d scripted turns were never requested", f.wire, len(f.script)-used, len(f.script))
		}
	})
	return f
}

// URL returns the base URL to configure: with /v1 for OpenAI, without for
// Anthropic, as their public base URLs are.
func (f *fakeModel) URL() string {
	if f.wire == providerOpenAI {
		return f.srv.URL + "/v1"
	}
	return f.srv.URL
}

// spec returns a modelSpec for this server, model "fake-model".
func (f *fakeModel) spec() modelSpec {
	return modelSpec{Provider: f.wire, Model: "fake-model", BaseURL: f.URL()}
}

// getenv is an environment that points both providers at this server with
// fakeModelKey, for code that reads the model settings from the environment.
func (f *fakeModel) getenv(key string) (string, bool) {
	switch key {
	case "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL":
		return f.URL(), true
	case "OPENAI_API_KEY", "ANTHROPIC_API_KEY":
		return fakeModelKey, true
	}
	return "", false
}

// provider returns a provider for this server with fakeModelKey whose
// retries wait milliseconds, not seconds.
func (f *fakeModel) provider(t testing.TB) modelProvider {
	t.Helper()
	p, err := newModelProvider(f.spec(), f.getenv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("newModelProvider(%+v) = %v", f.spec(), err)
	}
	modelEndpointOf(t, p).retry = fakeRetryPolicy
	return p
}

// fakeRetryPolicy retries like the default policy, in milliseconds.
var fakeRetryPolicy = retryPolicy{attempts: 4, backoffBase: time.Millisecond, backoffCap: 4 * time.Millisecond, retryAfterCap: 20 * time.Millisecond}

// modelEndpointOf returns the endpoint of a provider built by newModelProvider.
func modelEndpointOf(t testing.TB, p modelProvider) *modelEndpoint {
	t.Helper()
	switch p := p.(type) {
	case *openaiProvider:
		return p.modelEndpoint
	case *anthropicProvider:
		return p.modelEndpoint
	}
	t.Fatalf("modelEndpointOf(%T): not a provider of newModelProvider", p)
	return nil
}

// requests returns a copy of the requests received so far, in order.
func (f *fakeModel) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.received...)
}

// serve answers one request with the next turn of the script.
func (f *fakeModel) serve(w http.ResponseWriter, r *http.Request) {
	wantPath := "/v1/messages"
	if f.wire == providerOpenAI {
		wantPath = "/v1/chat/completions"
	}
	if r.Method != http.MethodPost || r.URL.Path != wantPath {
		f.t.Errorf("fake %s model: got %s %s, want POST %s", f.wire, r.Method, r.URL.Path, wantPath)
		http.NotFound(w, r)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		f.t.Errorf("fake %s model: read request: %v", f.wire, err)
		return
	}
	req := fakeRequest{Header: r.Header.Clone(), Raw: raw}
	if f.wire == providerOpenAI {
		req.modelRequest, err = decodeFakeOpenAIRequest(raw)
	} else {
		req.modelRequest, err = decodeFakeAnthropicRequest(raw)
	}
	if err != nil {
		f.t.Errorf("fake %s model: decode request %s: %v", f.wire, raw, err)
	}
	// As the real APIs do, refuse a conversation whose tool calls are not
	// each answered right after, without taking a turn.
	if msg := unansweredToolCalls(f.wire, req.modelRequest); msg != "" {
		f.t.Logf("fake %s model: refused a request: %s", f.wire, msg)
		f.writeError(w, http.StatusBadRequest, "", msg)
		return
	}

	req.Stream = fakeAsksStream(raw)
	f.mu.Lock()
	req.Turn = f.next
	f.next++
	f.received = append(f.received, req)
	f.mu.Unlock()
	if req.Turn >= len(f.script) {
		last := ""
		if n := len(req.Messages); n > 0 {
			last = req.Messages[n-1].Content
		}
		f.t.Errorf("fake %s model: request %d has no scripted turn (the script has %d); its last message: %q", f.wire, req.Turn+1, len(f.script), last)
		f.writeError(w, http.StatusBadRequest, "", "fake model: script exhausted")
		return
	}

	turn := f.script[req.Turn]
	if turn.Check != nil {
		if err := turn.Check(req); err != nil {
			f.t.Errorf("fake %s model: turn %d: %v", f.wire, req.Turn, err)
		}
	}
	if turn.Reply != nil {
		turn = turn.Reply(req)
	}
	switch {
	case turn.Hang:
		select {
		case <-r.Context().Done():
		case <-f.done:
		}
	case turn.Body != "":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(cmp.Or(turn.Status, http.StatusOK))
		io.WriteString(w, turn.Body)
	case turn.Status != 0 && turn.Status != http.StatusOK:
		f.writeError(w, turn.Status, turn.RetryAfter, cmp.Or(turn.Text, fmt.Sprintf("fake status %d", turn.Status)))
	case req.Stream && (turn.Chunks != nil || f.chunkSize > 0):
		f.writeStream(w, req, turn)
	default:
		f.writeAnswer(w, req, turn)
	}
}

// writeError answers with status and an error body in the wire's shape.
func (f *fakeModel) writeError(w http.ResponseWriter, status int, retryAfter, msg string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	body := map[string]any{"error": map[string]any{"message": msg, "type": "fake_error"}}
	if f.wire == providerAnthropic {
		body["type"] = "error"
	}
	writeFakeJSON(w, status, body)
}

// writeAnswer answers with turn's text and tool calls in the wire's shape.
func (f *fakeModel) writeAnswer(w http.ResponseWriter, req fakeRequest, turn fakeTurn) {
	args := func(tc toolCall) json.RawMessage { return json.RawMessage(cmp.Or(string(tc.Arguments), "{}")) }
	if f.wire == providerOpenAI {
		var content any
		if turn.Text != "" {
			content = turn.Text
		}
		var calls []map[string]any
		for i, tc := range turn.ToolCalls {
			calls = append(calls, map[string]any{
				"id":       cmp.Or(tc.ID, fmt.Sprintf("call_%d_%d", req.Turn, i)),
				"type":     "function",
				"function": map[string]any{"name": tc.Name, "arguments": string(args(tc))},
			})
		}
		message := map[string]any{"role": "assistant", "content": content}
		if calls != nil {
			message["tool_calls"] = calls
		}
		reason := cmp.Or(turn.StopReason, "stop")
		if turn.StopReason == "" && len(calls) > 0 {
			reason = "tool_calls"
		}
		writeFakeJSON(w, http.StatusOK, map[string]any{
			"id": fmt.Sprintf("chatcmpl-fake-%d", req.Turn), "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": reason}},
			"usage": map[string]any{"prompt_tokens": turn.Usage.InputTokens, "completion_tokens": turn.Usage.OutputTokens,
				"total_tokens": turn.Usage.InputTokens + turn.Usage.OutputTokens},
		})
		return
	}
	blocks := []any{}
	if turn.Thinking != "" {
		blocks = append(blocks, map[string]any{"type": "thinking", "thinking": turn.Thinking, "signature": "sig:" + turn.Thinking})
	}
	if turn.Text != "" {
		blocks = append(blocks, map[string]any{"type": "text", "text": turn.Text})
	}
	for i, tc := range turn.ToolCalls {
		blocks = append(blocks, map[string]any{"type": "tool_use", "id": cmp.Or(tc.ID, fmt.Sprintf("toolu_%d_%d", req.Turn, i)),
			"name": tc.Name, "input": args(tc)})
	}
	reason := cmp.Or(turn.StopReason, "end_turn")
	if turn.StopReason == "" && len(turn.ToolCalls) > 0 {
		reason = "tool_use"
	}
	writeFakeJSON(w, http.StatusOK, map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", req.Turn), "type": "message", "role": "assistant", "model": req.Model,
		"content": blocks, "stop_reason": reason,
		"usage": map[string]any{"input_tokens": turn.Usage.InputTokens, "output_tokens": turn.Usage.OutputTokens},
	})
}

// writeFakeJSON answers with status and v as JSON.
func writeFakeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// decodeFakeOpenAIRequest reads a Chat Completions request into the neutral
// shape, independently of the provider's encoder.
func decodeFakeOpenAIRequest(raw []byte) (modelRequest, error) {
	var in struct {
		Model    string `json:"model"`
		Messages []struct {
			Role       string  `json:"role"`
			Content    *string `json:"content"`
			ToolCallID string  `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
		MaxTokens           int `json:"max_tokens"`
		MaxCompletionTokens int `json:"max_completion_tokens"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return modelRequest{}, err
	}
	out := modelRequest{Model: in.Model, MaxTokens: cmp.Or(in.MaxTokens, in.MaxCompletionTokens)}
	for _, m := range in.Messages {
		msg := chatMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		if m.Content != nil {
			msg.Content = *m.Content
		}
		if m.Role == "system" {
			out.System = msg.Content
			continue
		}
		if m.Role == roleTool {
			msg.Content, msg.IsError = strings.CutPrefix(msg.Content, "Error: ")
		}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: json.RawMessage(tc.Function.Arguments)})
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, t := range in.Tools {
		out.Tools = append(out.Tools, toolDef{Name: t.Function.Name, Description: t.Function.Description, InputSchema: t.Function.Parameters})
	}
	return out, nil
}

// decodeFakeAnthropicRequest reads a Messages request into the neutral
// shape: each tool_result block becomes one tool message.
func decodeFakeAnthropicRequest(raw []byte) (modelRequest, error) {
	var in struct {
		Model     string `json:"model"`
		MaxTokens int    `json:"max_tokens"`
		System    string `json:"system"`
		Messages  []struct {
			Role    string `json:"role"`
			Content []struct {
				Type      string          `json:"type"`
				Text      string          `json:"text"`
				ID        string          `json:"id"`
				Name      string          `json:"name"`
				Input     json.RawMessage `json:"input"`
				ToolUseID string          `json:"tool_use_id"`
				Content   string          `json:"content"`
				IsError   bool            `json:"is_error"`
				Thinking  string          `json:"thinking"`
				Signature string          `json:"signature"`
			} `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &in); err != nil {
		return modelRequest{}, err
	}
	out := modelRequest{Model: in.Model, MaxTokens: in.MaxTokens, System: in.System}
	for _, m := range in.Messages {
		msg := chatMessage{Role: m.Role}
		for _, b := range m.Content {
			switch b.Type {
			case "text":
				msg.Content += b.Text
			case "tool_use":
				msg.ToolCalls = append(msg.ToolCalls, toolCall{ID: b.ID, Name: b.Name, Arguments: b.Input})
			case "tool_result":
				out.Messages = append(out.Messages, chatMessage{Role: roleTool, ToolCallID: b.ToolUseID, Content: b.Content, IsError: b.IsError})
			case "thinking":
				block, _ := json.Marshal(map[string]string{"type": b.Type, "thinking": b.Thinking, "signature": b.Signature})
				msg.Thinking = append(msg.Thinking, block)
			default:
				return modelRequest{}, fmt.Errorf("unknown content block type %q", b.Type)
			}
		}
		if msg.Content != "" || msg.ToolCalls != nil {
			out.Messages = append(out.Messages, msg)
		}
	}
	for _, t := range in.Tools {
		out.Tools = append(out.Tools, toolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
	}
	return out, nil
}

// unansweredToolCalls returns the error the wire's real API gives for a
// conversation in which a model answer's tool calls are not each answered
// by the tool results right after it, or a tool result answers no such
// call; "" for a valid conversation.
func unansweredToolCalls(wire string, req modelRequest) string {
	var open []string
	check := func(i int) string {
		if len(open) == 0 {
			return ""
		}
		if wire == providerAnthropic {
			return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, strings.Join(open, ", "))
		}
		return fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", strings.Join(open, ", "))
	}
	for i, m := range req.Messages {
		if m.Role == roleTool {
			at := slices.Index(open, m.ToolCallID)
			if at < 0 {
				if wire == providerAnthropic {
					return fmt.Sprintf("messages.%d.content: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, m.ToolCallID)
				}
				return fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (tool_call_id %s).", m.ToolCallID)
			}
			open = slices.Delete(open, at, at+1)
			continue
		}
		if msg := check(i); msg != "" {
			return msg
		}
		for _, tc := range m.ToolCalls {
			open = append(open, tc.ID)
		}
	}
	return check(len(req.Messages))
}
