package main

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// This file tests streamed model calls against the fake models of both
// wires: the text pieces add up to the answer, tool calls are assembled
// from their pieces, a refusal to stream falls back for good, a stream
// that breaks is retried and says so.

// streamedCall calls p with req, collecting the text pieces and retries.
func streamedCall(t *testing.T, p modelProvider, req modelRequest) (resp *modelResponse, pieces []string, retries []int, err error) {
	t.Helper()
	req.OnText = func(text string) { pieces = append(pieces, text) }
	req.OnRetry = func(attempt int, _ error) { retries = append(retries, attempt) }
	resp, err = p.complete(t.Context(), req)
	return resp, pieces, retries, err
}

var streamTestRequest = modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}}

func TestModelStreamPiecesAddUp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		turn      fakeTurn
		wantCalls []toolCall
		wantStop  string
	}{
		{name: "text", turn: fakeTurn{Text: "The quick brown fox jumps over the lazy dog.", Usage: modelUsage{InputTokens: 12, OutputTokens: 9}},
			wantStop: stopEndTurn},
		{name: "unicode pieces", turn: fakeTurn{Chunks: []string{"héllo ", "wörld ", "✓"}, Usage: modelUsage{InputTokens: 1, OutputTokens: 3}},
			wantStop: stopEndTurn},
		{name: "text and tool calls", turn: fakeTurn{Text: "Let me look.", ToolCalls: []toolCall{
			{ID: "c1", Name: "find_tool", Arguments: json.RawMessage(`{"query":"files in the workspace"}`)},
			{ID: "c2", Name: "mcp_fs_list", Arguments: json.RawMessage(`{"path":"/tmp"}`)}}, Usage: modelUsage{InputTokens: 5, OutputTokens: 7}},
			wantCalls: []toolCall{{ID: "c1", Name: "find_tool", Arguments: json.RawMessage(`{"query":"files in the workspace"}`)},
				{ID: "c2", Name: "mcp_fs_list", Arguments: json.RawMessage(`{"path":"/tmp"}`)}},
			wantStop: stopToolUse},
		{name: "tool call only", turn: fakeTurn{ToolCalls: []toolCall{{ID: "c1", Name: "x"}}},
			wantCalls: []toolCall{{ID: "c1", Name: "x", Arguments: json.RawMessage(`{}`)}}, wantStop: stopToolUse},
	}
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		for _, tt := range tests {
			t.Run(wire+"/"+tt.name, func(t *testing.T) {
				f := newFakeModel(t, wire, tt.turn).streamChunks(4)
				resp, pieces, retries, err := streamedCall(t, f.provider(t), streamTestRequest)
				if err != nil {
					t.Fatalf("complete = %v", err)
				}
				want := tt.turn.Text + strings.Join(tt.turn.Chunks, "")
				if resp.Content != want || strings.Join(pieces, "") != want {
					t.Errorf("content %q, pieces %q; want both to be %q", resp.Content, pieces, want)
				}
				if want != "" && len(pieces) < 2 {
					t.Errorf("pieces %q: want the text in several pieces", pieces)
				}
				if len(retries) != 0 {
					t.Errorf("retries %v, want none", retries)
				}
				if len(resp.ToolCalls) != len(tt.wantCalls) {
					t.Fatalf("tool calls %+v, want %+v", resp.ToolCalls, tt.wantCalls)
				}
				for i, c := range resp.ToolCalls {
					w := tt.wantCalls[i]
					if c.ID != w.ID || c.Name != w.Name || string(c.Arguments) != string(w.Arguments) || c.ArgumentsError != "" {
						t.Errorf("tool call %d = %+v, want %+v", i, c, w)
					}
				}
				if resp.Usage != tt.turn.Usage || resp.StopReason != tt.wantStop {
					t.Errorf("usage %+v stop %q, want %+v %q", resp.Usage, resp.StopReason, tt.turn.Usage, tt.wantStop)
				}
				req := f.requests()[0]
				if !req.Stream || req.Header.Get("Accept") != "text/event-stream" {
					t.Errorf("request stream %v, Accept %q: want a streamed request", req.Stream, req.Header.Get("Accept"))
				}
				if wire == providerOpenAI && !strings.Contains(string(req.Raw), `"stream_options":{"include_usage":true}`) {
					t.Errorf("request %s: want stream_options.include_usage", req.Raw)
				}
			})
		}
	}
}

// TestModelStreamOff checks that [model] stream = false sends whole
// requests, and that an answer that is not a stream is read whole.
func TestModelStreamOff(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire, fakeTurn{Text: "whole"}, fakeTurn{Text: "ignored stream"})
			spec := f.spec()
			spec.NoStream = true
			p, err := newModelProvider(spec, f.getenv, modelTestLogger)
			if err != nil {
				t.Fatal(err)
			}
			resp, pieces, _, err := streamedCall(t, p, streamTestRequest)
			if err != nil || resp.Content != "whole" || len(pieces) != 0 || f.requests()[0].Stream {
				t.Errorf("complete with stream off = %+v, %v, pieces %q, request streamed %v; want a whole answer", resp, err, pieces, f.requests()[0].Stream)
			}
			// A server that ignores "stream" answers whole: understood.
			resp, _, _, err = streamedCall(t, f.provider(t), streamTestRequest)
			if err != nil || resp.Content != "ignored stream" || !f.requests()[1].Stream {
				t.Errorf("complete streamed, answered whole = %+v, %v; want the answer", resp, err)
			}
		})
	}
}

func TestModelStreamRefusedFallsBack(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire,
				fakeTurn{Status: http.StatusBadRequest, Text: "'stream' is not supported on this server"},
				fakeTurn{Text: "first"},
				fakeTurn{Text: "second"},
			).streamChunks(2)
			var log lockedBuffer
			logger := slog.New(slog.NewTextHandler(&log, nil))
			for _, want := range []string{"first", "second"} {
				// A provider per call, as each run has its own: the
				// refusal is remembered for the endpoint.
				p, err := newModelProvider(f.spec(), f.getenv, logger)
				if err != nil {
					t.Fatal(err)
				}
				modelEndpointOf(t, p).retry = fakeRetryPolicy
				resp, pieces, retries, err := streamedCall(t, p, streamTestRequest)
				if err != nil || resp.Content != want || len(pieces) != 0 || len(retries) != 0 {
					t.Fatalf("complete = %+v, %v, pieces %q, retries %v; want %q whole, without retries", resp, err, pieces, retries, want)
				}
			}
			var streamed []bool
			for _, req := range f.requests() {
				streamed = append(streamed, req.Stream)
			}
			if want := []bool{true, false, false}; !slices.Equal(streamed, want) {
				t.Errorf("requests streamed %v, want %v", streamed, want)
			}
			if n := strings.Count(log.String(), "model refuses streaming"); n != 1 {
				t.Errorf("log has %d refusal lines, want 1:\n%s", n, log.String())
			}
		})
	}
}

func TestModelStreamBrokenIsRetried(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire,
				fakeTurn{Text: "Once upon a time", BreakAfter: 2},
				fakeTurn{Text: "Once upon a time, a model"},
			).streamChunks(3)
			var got []string
			req := streamTestRequest
			req.OnText = func(text string) { got = append(got, text) }
			var retried []error
			req.OnRetry = func(attempt int, err error) {
				if attempt != 2 {
					t.Errorf("OnRetry attempt %d, want 2", attempt)
				}
				retried = append(retried, err)
				got = nil // the text so far is void
			}
			resp, err := f.provider(t).complete(t.Context(), req)
			if err != nil {
				t.Fatalf("complete = %v", err)
			}
			if len(retried) != 1 || strings.Join(got, "") != resp.Content || resp.Content != "Once upon a time, a model" {
				t.Errorf("retries %v, text after the retry %q, content %q; want one retry, then the whole text once", retried, got, resp.Content)
			}
		})
	}
}

// TestModelStreamEvents checks the decoders on streams the fakes do not
// write: several text blocks, errors in the stream, a missing end.
func TestModelStreamEvents(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		dec      streamDecoder
		events   []string
		want     string // the text, or the error's substring when wantErr
		wantErr  bool
		retry    bool
		complete bool
	}{
		{name: "anthropic text blocks joined by a newline", dec: newAnthropicStream(), events: []string{
			`{"type":"message_start","message":{"usage":{"input_tokens":3}}}`,
			`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"one"}}`,
			`{"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"two"}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
			`{"type":"message_stop"}`}, want: "one\ntwo", complete: true},
		{name: "anthropic overloaded is retried", dec: newAnthropicStream(), events: []string{
			`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`}, want: "Overloaded", wantErr: true, retry: true},
		{name: "anthropic invalid request is not", dec: newAnthropicStream(), events: []string{
			`{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`}, want: "bad", wantErr: true},
		{name: "anthropic delta of no block", dec: newAnthropicStream(), events: []string{
			`{"type":"content_block_delta","index":4,"delta":{"type":"text_delta","text":"x"}}`}, want: "never started", wantErr: true},
		{name: "openai error in the stream", dec: newOpenAIStream(), events: []string{
			`{"error":{"message":"upstream died"}}`}, want: "upstream died", wantErr: true, retry: true},
		{name: "openai not json", dec: newOpenAIStream(), events: []string{`{"choices":`}, want: "the event begins", wantErr: true},
		{name: "openai without [DONE] but finished", dec: newOpenAIStream(), events: []string{
			`{"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}`}, want: "ok"},
		{name: "openai unfinished", dec: newOpenAIStream(), events: []string{
			`{"choices":[{"index":0,"delta":{"content":"o"},"finish_reason":null}]}`}, want: "o", complete: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var text strings.Builder
			var err error
			done := false
			for _, ev := range tt.events {
				var piece string
				piece, done, err = tt.dec.event([]byte(ev))
				text.WriteString(piece)
				if err != nil {
					break
				}
			}
			if tt.wantErr {
				var failure *streamFailure
				if err == nil || !strings.Contains(err.Error(), tt.want) || (errors.As(err, &failure) && failure.retry) != tt.retry {
					t.Fatalf("events = %v, want an error with %q, retry %v", err, tt.want, tt.retry)
				}
				return
			}
			if err != nil || text.String() != tt.want || done != tt.complete {
				t.Fatalf("events = text %q, done %v, %v; want %q, done %v", text.String(), done, err, tt.want, tt.complete)
			}
			resp, err := tt.dec.response()
			unfinished := tt.name == "openai unfinished"
			if unfinished != (err != nil) || (err == nil && resp.Content != tt.want) {
				t.Errorf("response() = %+v, %v; want content %q (an error: %v)", resp, err, tt.want, unfinished)
			}
		})
	}
}

// FuzzModelStream feeds arbitrary events to both wires' stream decoders:
// they may fail, never panic, and a complete answer's tool calls always
// carry JSON object arguments.
func FuzzModelStream(f *testing.F) {
	f.Add([]byte(`{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"x","input":{}}}` + "\n" +
		`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}` + "\n" + `{"type":"message_stop"}`))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":3,"id":"c","function":{"name":"f","arguments":"{"}}]},"finish_reason":"tool_calls"}]}` + "\n[DONE]"))
	f.Add([]byte(`{"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, dec := range []streamDecoder{newOpenAIStream(), newAnthropicStream()} {
			for line := range strings.SplitSeq(string(data), "\n") {
				if _, done, err := dec.event([]byte(line)); err != nil || done {
					break
				}
			}
			resp, err := dec.response()
			if err != nil {
				continue
			}
			for _, c := range resp.ToolCalls {
				if !json.Valid(c.Arguments) || c.Arguments[0] != '{' {
					t.Errorf("tool call %+v: arguments are not a JSON object", c)
				}
			}
		}
	})
}
