package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"time"
)

// This file holds a run's transcript: every message of its conversation
// (the system prompt, the prompt, each model answer with its tool calls,
// each tool result), in order and redacted, kept as one JSON line per
// message in <id>.messages next to the run's record (in memory for a run
// manager without a store), bounded by max_transcript_bytes; and GET
// /v1/runs/{id}/messages, which serves it.

// Roles a transcript has besides the model's own (roleUser, ...).
const roleSystem = "system"

// transcriptCutMarker opens the line that ends a transcript cut at
// max_transcript_bytes; no message line starts with it.
const transcriptCutMarker = `{"truncated":true`

// A transcriptCut is the line that ends a cut transcript; its encoding
// starts with transcriptCutMarker.
type transcriptCut struct {
	Truncated  bool   `json:"truncated"`
	LimitBytes int64  `json:"limit_bytes"`
	Message    string `json:"message"`
}

// A transcriptMessage is one message of a run's conversation as GET
// /v1/runs/{id}/messages shows it.
type transcriptMessage struct {
	// Step is the model call the message belongs to: 0 for the system
	// prompt and the prompt, then 1, 2... for each answer and its results.
	Step      int                  `json:"step"`
	Time      time.Time            `json:"time"`
	Role      string               `json:"role"` // system, user, assistant or tool
	Content   string               `json:"content"`
	ToolCalls []transcriptToolCall `json:"tool_calls,omitempty"`
	// ToolCallID, Name and IsError describe a tool result: the call it
	// answers, the tool called, and whether the result is an error.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	IsError    bool   `json:"is_error,omitempty"`
}

// A transcriptToolCall is one tool call of a model answer.
type transcriptToolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	// ArgumentsError says why the arguments the model sent were not
	// used (not a JSON object); Arguments is then {}.
	ArgumentsError string `json:"arguments_error,omitempty"`
}

// A transcript is what a run has kept of its conversation. Guarded by its
// run's mu.
type transcript struct {
	size int64 // bytes kept, newlines included
	cut  bool  // max_transcript_bytes was reached: nothing more is kept
	// open are the tool calls of the last model answer without a result
	// yet (run_conversation_messages.go).
	open []toolCall
	// lines are the messages of a run without a store; with one they are
	// in its messages log only.
	lines [][]byte
}

// record keeps msgs, the messages step added to the conversation; for
// tool results, calls are the calls they answer, in the same order. Each
// message is encoded with the run's secrets redacted; the one that would
// take the transcript over max_transcript_bytes is replaced by the cut
// marker, and nothing is kept after it.
func (r *run) record(step int, msgs []chatMessage, calls []toolCall) {
	now := time.Now().UTC()
	lines := make([][]byte, 0, len(msgs))
	for i, msg := range msgs {
		m := transcriptMessage{Step: step, Time: now, Role: msg.Role, Content: msg.Content, ToolCallID: msg.ToolCallID, IsError: msg.IsError}
		if msg.Role == roleTool && i < len(calls) {
			m.Name = calls[i].Name
		}
		for _, tc := range msg.ToolCalls {
			args := tc.Arguments
			if !json.Valid(args) {
				args = json.RawMessage("{}")
			}
			m.ToolCalls = append(m.ToolCalls, transcriptToolCall{ID: tc.ID, Name: tc.Name, Arguments: args, ArgumentsError: tc.ArgumentsError})
		}
		lines = append(lines, r.secrets.load().marshal(m, false))
	}
	limit := int64(r.env.limits.MaxTranscriptBytes)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.transcript.open = openToolCalls(r.transcript.open, msgs)
	for _, line := range lines {
		if r.transcript.cut {
			return
		}
		if r.transcript.size+int64(len(line))+1 > limit {
			r.transcript.cut = true
			line = encodeCompact(transcriptCut{Truncated: true, LimitBytes: limit,
				Message: "the transcript reached max_transcript_bytes: later messages were not kept"})
		}
		r.transcript.size += int64(len(line)) + 1
		if r.disk == nil {
			r.transcript.lines = append(r.transcript.lines, line)
			continue
		}
		r.disk.appendMessageLocked(line)
	}
}

// messages returns the run's transcript so far, each message as the JSON
// it was kept as, and whether it was cut at max_transcript_bytes. A run
// kept on disk is read from there, also while it runs (a line being
// written is not yet read); one without a transcript file (kept by an
// older harnessd) has no messages.
func (r *run) messages() ([]json.RawMessage, bool, error) {
	r.mu.Lock()
	if r.disk == nil {
		defer r.mu.Unlock()
		out := make([]json.RawMessage, 0, len(r.transcript.lines))
		for _, line := range r.transcript.lines {
			if !bytes.HasPrefix(line, []byte(transcriptCutMarker)) {
				out = append(out, line)
			}
		}
		return out, r.transcript.cut, nil
	}
	store := r.disk.store
	r.mu.Unlock()
	lines, err := store.readMessages(r.id)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	msgs, cut := transcriptMessages(lines)
	return msgs, cut, nil
}

// transcriptMessages returns the messages of a transcript's lines as read
// from its run's lines on disk and whether they end with the cut marker. A line
// that is not JSON, which only outside damage makes, is skipped.
func transcriptMessages(lines [][]byte) ([]json.RawMessage, bool) {
	out := []json.RawMessage{}
	cut := false
	for _, line := range lines {
		switch {
		case bytes.HasPrefix(line, []byte(transcriptCutMarker)):
			cut = true
		case json.Valid(line):
			out = append(out, slices.Clip(line))
		}
	}
	return out, cut
}

// A messagesAnswer is the body of GET /v1/runs/{id}/messages.
type messagesAnswer struct {
	RunID    string            `json:"run_id"`
	Status   string            `json:"status"`
	Messages []json.RawMessage `json:"messages"`
	// Truncated says the transcript reached max_transcript_bytes: the
	// messages after that point were not kept; or the run is damaged on
	// disk (its view's "damaged"), and some may be lost.
	Truncated bool `json:"truncated"`
}

// messagesBody returns what GET /v1/runs/{id}/messages answers: the run's
// messages, redacted; its error says the transcript could not be read.
func (r *run) messagesBody() ([]byte, error) {
	// The status first: a run seen ended has all its messages kept.
	summary := r.summary()
	msgs, cut, err := r.messages()
	if err != nil {
		r.logger.Warn("reading the run's transcript failed", "err", err)
		return nil, fmt.Errorf("run %s: read transcript: %w", r.id, err)
	}
	return r.redactor().marshal(messagesAnswer{RunID: r.id, Status: summary.Status, Messages: msgs, Truncated: cut || summary.Damaged != nil}, true), nil
}
