package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file holds what a run of a conversation sends the model of the
// runs before it: their messages read back from their transcripts, every
// tool call left without a result closed with one saying what happened
// (so that OpenAI and Anthropic accept the transcript), the whole cut to
// max_conversation_bytes, and the tools they activated activated again.
// It also closes the open tool calls of a run that ends, and of a run
// found interrupted at start-up.

// Tool results that close a call a run left without one.
const (
	closedCancelled   = "no result: the run was cancelled before this tool call returned; it may or may not have taken effect"
	closedFailed      = "no result: the run failed before this tool call returned (%s); it may or may not have taken effect"
	closedInterrupted = "no result: harnessd stopped (a crash or a kill) before this tool call returned; it may or may not have taken effect"
	closedLost        = "no result: this tool call's result was not kept"
)

// trimmedResultNote replaces a tool result dropped to fit
// max_conversation_bytes.
const trimmedResultNote = "(result of %d bytes removed: the conversation reached max_conversation_bytes)"

// chat returns m as a message for the model.
func (m transcriptMessage) chat() chatMessage {
	c := chatMessage{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID, IsError: m.IsError}
	for _, tc := range m.ToolCalls {
		c.ToolCalls = append(c.ToolCalls, toolCall(tc))
	}
	return c
}

// openToolCalls returns the calls of the last model answer in msgs that
// no later tool result answers, given open, those of the messages
// before msgs.
func openToolCalls(open []toolCall, msgs []chatMessage) []toolCall {
	for _, m := range msgs {
		switch m.Role {
		case roleAssistant:
			open = slices.Clone(m.ToolCalls)
		case roleTool:
			open = slices.DeleteFunc(open, func(c toolCall) bool { return c.ID == m.ToolCallID })
		case roleUser:
			open = nil
		}
	}
	return open
}

// closingResults returns a tool result with text for each call.
func closingResults(calls []toolCall, text string) []chatMessage {
	out := make([]chatMessage, 0, len(calls))
	for _, c := range calls {
		out = append(out, chatMessage{Role: roleTool, ToolCallID: c.ID, Content: text, IsError: true})
	}
	return out
}

// closeOpenToolCalls records a result for each tool call the run leaves
// unanswered as it ends with status (its error errMsg), so that its
// conversation stays valid. Called by finish, before the terminal event.
func (r *run) closeOpenToolCalls(status, errMsg string) {
	r.mu.Lock()
	open, step := slices.Clone(r.transcript.open), r.steps
	r.mu.Unlock()
	if len(open) == 0 {
		return
	}
	text := closedCancelled
	if status != runCancelled {
		text = fmt.Sprintf(closedFailed, errMsg)
	}
	r.record(step, closingResults(open, text), open)
}

// cancelledResults returns the results of a step whose run was cancelled
// while its tool calls ran, each failed one saying so: the cancellation
// is what most likely cut it short.
func cancelledResults(results []chatMessage) []chatMessage {
	for i := range results {
		if results[i].IsError {
			results[i].Content = closedCancelled + " (" + results[i].Content + ")"
		}
	}
	return results
}

// A transcriptValidator makes a transcript valid a message at a time,
// as validTranscript does: open are the calls of the last model answer
// not answered yet.
type transcriptValidator struct {
	open []toolCall
}

// add appends m to out as a valid transcript keeps it: a result answering
// no open call is dropped, and the calls left open before any other
// message get a result saying it was not kept. It returns out.
func (v *transcriptValidator) add(out []chatMessage, m chatMessage) []chatMessage {
	if m.Role == roleTool {
		if !slices.ContainsFunc(v.open, func(c toolCall) bool { return c.ID == m.ToolCallID }) {
			return out
		}
		v.open = openToolCalls(v.open, []chatMessage{m})
		return append(out, m)
	}
	out = append(out, closingResults(v.open, closedLost)...)
	v.open = openToolCalls(nil, []chatMessage{m})
	return append(out, m)
}

// validTranscript returns msgs with every tool call answered: a call
// without a result gets one saying it was not kept, a result answering no
// open call is dropped. Both providers refuse a transcript otherwise.
func validTranscript(msgs []chatMessage) []chatMessage {
	out := make([]chatMessage, 0, len(msgs))
	var v transcriptValidator
	for _, m := range msgs {
		out = v.add(out, m)
	}
	return append(out, closingResults(v.open, closedLost)...)
}

// continueConversation returns what the model is sent of the runs before
// r in its conversation, in order and valid, cut to max_conversation_bytes
// (emitting conversation.trimmed when it was); it activates the tools they
// activated and gives r the conversation's system prompt (the last one a
// run gave) when r has none. Nothing for a run that starts its
// conversation. The conversation's history (run_conversation_history.go)
// keeps what the runs before sent, so only the runs it has not seen yet
// are read: the last one, unless harnessd restarted since.
func (r *run) continueConversation() ([]chatMessage, error) {
	if r.conv == nil || len(r.conv.earlier) == 0 {
		return nil, nil
	}
	h := r.conv.history
	if h == nil {
		h = &conversationHistory{}
	}
	limit := r.env.limits.MaxConversationBytes
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := h.update(r.conv.id, r.conv.earlier, limit); err != nil {
		return nil, err
	}
	r.catalog.activate(h.activated...)
	r.mu.Lock()
	if r.req.SystemPrompt == "" {
		r.req.SystemPrompt = h.system
	}
	r.mu.Unlock()
	history, trim := h.assemble(len(r.req.Prompt))
	if trim.Messages > 0 || trim.ToolResults > 0 {
		r.emit(evConversationTrimmed, conversationTrimmedEvent(r.conv.id, trim, limit))
		r.logger.Info("conversation trimmed", "conversation", r.conv.id, "tool_results", trim.ToolResults, "turns", trim.Turns, "bytes", trim.BytesAfter)
	}
	return history, nil
}

// A conversationTrim says what trimConversation left out.
type conversationTrim struct {
	ToolResults int // tool results replaced by a note
	Turns       int // turns dropped whole (the first prompt's answers count as one)
	Messages    int // messages dropped
	BytesBefore int
	BytesAfter  int
}

// messageBytes is what a message counts towards max_conversation_bytes:
// its text, its tool calls' names and arguments, and the ids.
func messageBytes(m chatMessage) int {
	n := len(m.Content) + len(m.ToolCallID)
	for _, tc := range m.ToolCalls {
		n += len(tc.ID) + len(tc.Name) + len(tc.Arguments)
	}
	return n
}

// historyBytes is what msgs count towards max_conversation_bytes.
func historyBytes(msgs []chatMessage) int {
	n := 0
	for _, m := range msgs {
		n += messageBytes(m)
	}
	return n
}

// trimConversation returns history cut so that it and a prompt of
// promptBytes fit limit bytes: first the oldest tool results are replaced
// by a one-line note, then the oldest turns (a prompt and what followed
// it) are dropped whole, the first prompt kept. Tool calls stay answered.
// history is not changed.
func trimConversation(history []chatMessage, promptBytes, limit int) ([]chatMessage, conversationTrim) {
	total := promptBytes + historyBytes(history)
	t := conversationTrim{BytesBefore: total}
	if total <= limit {
		t.BytesAfter = total
		return history, t
	}
	out := slices.Clone(history)
	_, total = trimToolResults(out, 0, total, limit, &t)
	out, total = dropTurns(out, total, limit, &t)
	t.BytesAfter = total
	return out, t
}

// trimToolResults replaces the tool results of out from index from on,
// oldest first, by a note, while total (what out and the prompt count)
// is over limit; a result no longer than its note is left. It returns
// the index of the first message it did not look at and the new total,
// and counts the results replaced in t.
func trimToolResults(out []chatMessage, from, total, limit int, t *conversationTrim) (int, int) {
	for i := from; i < len(out); i++ {
		if total <= limit {
			return i, total
		}
		if out[i].Role != roleTool {
			continue
		}
		note := fmt.Sprintf(trimmedResultNote, len(out[i].Content))
		if len(note) >= len(out[i].Content) {
			continue
		}
		total -= len(out[i].Content) - len(note)
		out[i].Content = note
		t.ToolResults++
	}
	return len(out), total
}

// turnEnd returns the end of the turn of msgs that starts at start: the
// next user message's index, or len(msgs).
func turnEnd(msgs []chatMessage, start int) int {
	end := start + 1
	for end < len(msgs) && msgs[end].Role != roleUser {
		end++
	}
	return end
}

// dropTurns drops from out what follows the first prompt, then each
// later turn, oldest first, while total is over limit, and returns out
// and the new total, counting what it dropped in t.
func dropTurns(out []chatMessage, total, limit int, t *conversationTrim) ([]chatMessage, int) {
	start := 0
	if len(out) > 0 && out[0].Role == roleUser {
		start = 1
	}
	for total > limit && start < len(out) {
		end := turnEnd(out, start)
		total -= historyBytes(out[start:end])
		t.Messages += end - start
		t.Turns++
		out = slices.Delete(out, start, end)
	}
	return out, total
}

// isContextLengthError reports whether a model call failed because the
// request was longer than the model's context.
func isContextLengthError(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"context length", "context_length", "context window", "prompt is too long", "maximum context", "too many tokens"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// modelFailure returns the error of a run whose model call at step failed
// with err; a context-length error names the conversation and
// max_conversation_bytes.
func (r *run) modelFailure(step int, err error) string {
	msg := fmt.Sprintf("step %d: %v", step, err)
	if isContextLengthError(err) && r.conv != nil {
		msg += fmt.Sprintf("; conversation %s is longer than the model's context: lower max_conversation_bytes (now %d) so that older messages are trimmed, or start a new conversation",
			r.conv.id, r.env.limits.MaxConversationBytes)
	}
	return msg
}

// closeToolCalls appends to b a transcript line for each tool call
// left open in lines (the transcript of a run found interrupted at
// start-up) saying harnessd stopped, and returns it. A transcript cut at
// max_transcript_bytes is left as it is: the next run closes its calls in
// what it sends.
func closeToolCalls(b []byte, lines [][]byte, now time.Time) []byte {
	raw, cut := transcriptMessages(lines)
	if cut {
		return b
	}
	var msgs []chatMessage
	step := 0
	for _, line := range raw {
		var m transcriptMessage
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		msgs = append(msgs, m.chat())
		step = max(step, m.Step)
	}
	for _, c := range openToolCalls(nil, msgs) {
		m := transcriptMessage{Step: step, Time: now.UTC(), Role: roleTool, Content: closedInterrupted, ToolCallID: c.ID, Name: c.Name, IsError: true}
		b = wrapLine(b, messageLinePrefix, encodeCompact(m))
	}
	return b
}
