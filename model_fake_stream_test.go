package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// This file holds the streamed answers of fakeModel: Chat Completions
// chunks and Anthropic Messages events, with text and tool-call arguments
// in pieces, and a stream that fails midway.

// streamChunks makes f stream every answer to a request that asks for a
// stream, the text in pieces of size bytes. It returns f.
func (f *fakeModel) streamChunks(size int) *fakeModel {
	f.chunkSize = size
	return f
}

// fakeAsksStream reports whether a request body asks for a stream.
func fakeAsksStream(raw []byte) bool {
	var body struct {
		Stream bool `json:"stream"`
	}
	return json.Unmarshal(raw, &body) == nil && body.Stream
}

// textPieces returns the pieces turn's text is streamed in.
func (f *fakeModel) textPieces(turn fakeTurn) []string {
	if turn.Chunks != nil {
		return turn.Chunks
	}
	var pieces []string
	for text := turn.Text; text != ""; {
		n := min(max(f.chunkSize, 1), len(text))
		pieces = append(pieces, text[:n])
		text = text[n:]
	}
	return pieces
}

// A fakeStreamWriter writes one streamed answer's events and flushes each.
type fakeStreamWriter struct {
	w    http.ResponseWriter
	rc   *http.ResponseController
	wire string
}

// send writes one event; name is used by the Anthropic wire only.
func (s fakeStreamWriter) send(name string, data any) {
	b, _ := json.Marshal(data)
	if s.wire == providerAnthropic {
		fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	} else {
		fmt.Fprintf(s.w, "data: %s\n\n", b)
	}
	s.rc.Flush()
}

// writeStream answers with turn streamed in the wire's shape.
func (f *fakeModel) writeStream(w http.ResponseWriter, req fakeRequest, turn fakeTurn) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	s := fakeStreamWriter{w: w, rc: http.NewResponseController(w), wire: f.wire}
	pieces := f.textPieces(turn)
	if f.wire == providerOpenAI {
		f.streamOpenAI(s, req, turn, pieces)
	} else {
		f.streamAnthropic(s, req, turn, pieces)
	}
}

// streamOpenAI writes Chat Completions chunks, then the usage and [DONE].
func (f *fakeModel) streamOpenAI(s fakeStreamWriter, req fakeRequest, turn fakeTurn, pieces []string) {
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", req.Turn), "object": "chat.completion.chunk", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}
	}
	s.send("", chunk(map[string]any{"role": "assistant", "content": ""}, nil))
	for i, piece := range pieces {
		if turn.BreakAfter > 0 && i == turn.BreakAfter {
			return // the stream ends unfinished
		}
		if turn.OnChunk != nil {
			turn.OnChunk(i)
		}
		s.send("", chunk(map[string]any{"content": piece}, nil))
	}
	for i, tc := range turn.ToolCalls {
		id := cmp.Or(tc.ID, fmt.Sprintf("call_%d_%d", req.Turn, i))
		s.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": tc.Name, "arguments": ""}}}}, nil))
		for _, part := range halves(cmp.Or(string(tc.Arguments), "{}")) {
			s.send("", chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil))
		}
	}
	reason := cmp.Or(turn.StopReason, "stop")
	if turn.StopReason == "" && len(turn.ToolCalls) > 0 {
		reason = "tool_calls"
	}
	s.send("", chunk(map[string]any{}, reason))
	s.send("", map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", req.Turn), "object": "chat.completion.chunk", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": turn.Usage.InputTokens, "completion_tokens": turn.Usage.OutputTokens,
			"total_tokens": turn.Usage.InputTokens + turn.Usage.OutputTokens}})
	fmt.Fprint(s.w, "data: [DONE]\n\n")
	s.rc.Flush()
}

// streamAnthropic writes Messages events from message_start to
// message_stop, with a ping among them.
func (f *fakeModel) streamAnthropic(s fakeStreamWriter, req fakeRequest, turn fakeTurn, pieces []string) {
	s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": fmt.Sprintf("msg_fake_%d", req.Turn), "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "usage": map[string]any{"input_tokens": turn.Usage.InputTokens, "output_tokens": 1}}})
	s.send("ping", map[string]any{"type": "ping"})
	index := 0
	if turn.Thinking != "" {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "thinking", "thinking": ""}})
		for _, part := range halves(turn.Thinking) {
			s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "thinking_delta", "thinking": part}})
		}
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "signature_delta", "signature": "sig:" + turn.Thinking}})
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	if len(pieces) > 0 {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": index, "content_block": map[string]any{"type": "text", "text": ""}})
		for i, piece := range pieces {
			if turn.BreakAfter > 0 && i == turn.BreakAfter {
				s.send("error", map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "Overloaded"}})
				return
			}
			if turn.OnChunk != nil {
				turn.OnChunk(i)
			}
			s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "text_delta", "text": piece}})
		}
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for i, tc := range turn.ToolCalls {
		id := cmp.Or(tc.ID, fmt.Sprintf("toolu_%d_%d", req.Turn, i))
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": id, "name": tc.Name, "input": map[string]any{}}})
		for _, part := range halves(cmp.Or(string(tc.Arguments), "{}")) {
			s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": index, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
		}
		s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	reason := cmp.Or(turn.StopReason, "end_turn")
	if turn.StopReason == "" && len(turn.ToolCalls) > 0 {
		reason = "tool_use"
	}
	s.send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": reason, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": turn.Usage.OutputTokens}})
	s.send("message_stop", map[string]any{"type": "message_stop"})
}

// halves splits s in two pieces at a rune boundary near its middle, as
// streamed arguments arrive in pieces.
func halves(s string) []string {
	mid := len(s) / 2
	for mid > 0 && !utf8.RuneStart(s[mid]) {
		mid--
	}
	return []string{s[:mid], s[mid:]}
}
