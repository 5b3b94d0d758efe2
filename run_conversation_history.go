package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// This file holds a conversation's history: what its ended runs send the
// model of themselves, assembled a run at a time as the conversation
// grows and kept in memory, so that a turn reads only the runs it has not
// seen (the last one) instead of every run before it. What it keeps is
// bounded by max_conversation_bytes: the tool results and the turns that
// every later turn would trim, whatever its prompt, are trimmed once
// here, with what they counted kept as numbers. After a restart the
// history is empty, and the first turn reads the runs before it once.

// A conversationHistory is a conversation's assembled history, guarded
// by mu, held for a whole turn's assembly.
type conversationHistory struct {
	mu sync.Mutex
	historyState
}

// A historyState is what a conversationHistory holds.
type historyState struct {
	// limit is the max_conversation_bytes it was trimmed for.
	limit int
	// runs are how many of the conversation's runs it holds, the first
	// ones; lastRun is the id of the last of them.
	runs    int
	lastRun string
	// system is the last system prompt a run gave; activated are the
	// tools the runs activated, each once, in order.
	system    string
	activated []string
	// valid makes msgs valid; its open calls get their results when the
	// next message comes, or at assemble.
	valid transcriptValidator
	// msgs are the runs' messages, valid, less the turns dropped; the
	// tool results of msgs[:scanned] that every assembly replaces by a
	// note are replaced already.
	msgs    []chatMessage
	scanned int
	// bytes is what msgs count; rawBytes what every message held
	// counted before it was trimmed.
	bytes    int
	rawBytes int
	// trimmed counts the tool results replaced and the turns and
	// messages dropped so far.
	trimmed conversationTrim
}

// update brings h up to the runs of conversation id before a run (earlier,
// in order, all ended), trimmed for limit: it reads the messages of those
// it does not hold yet. A history made for another limit, or other runs,
// is made again from the first run.
func (h *conversationHistory) update(id string, earlier []*run, limit int) error {
	if h.limit != limit || h.runs > len(earlier) || (h.runs > 0 && earlier[h.runs-1].id != h.lastRun) {
		h.historyState = historyState{limit: limit}
	}
	for _, e := range earlier[h.runs:] {
		raw, _, err := e.messages()
		if err != nil {
			return fmt.Errorf("conversation %s: read the messages of run %s: %v", id, e.id, err)
		}
		h.add(raw)
		for _, name := range e.summary().ActivatedTools {
			if !slices.Contains(h.activated, name) {
				h.activated = append(h.activated, name)
			}
		}
		h.runs++
		h.lastRun = e.id
	}
	return nil
}

// add appends the messages of a run's transcript (raw, as kept) to h and
// trims what every later assembly would trim. A line that does not
// decode is skipped.
func (h *conversationHistory) add(raw []json.RawMessage) {
	for _, line := range raw {
		var m transcriptMessage
		if json.Unmarshal(line, &m) != nil {
			continue
		}
		if m.Role == roleSystem {
			h.system = m.Content
			continue
		}
		n := len(h.msgs)
		h.msgs = h.valid.add(h.msgs, m.chat())
		added := historyBytes(h.msgs[n:])
		h.bytes += added
		h.rawBytes += added
	}
	h.settle()
}

// settle trims what every assembly of h would trim, whatever its prompt
// (the prompt only adds bytes). While h is over the limit without a
// prompt, the oldest tool results are replaced by a note, as
// trimConversation does; once every one is and h is still over the
// limit, the oldest turn after the first prompt is dropped as long as
// what is left stays over it: trimConversation would drop it too. The
// turn h ends with is never dropped: the results closing its calls, given
// at assemble or by the next run, belong to it.
func (h *conversationHistory) settle() {
	if h.bytes <= h.limit || len(h.msgs) == 0 {
		return
	}
	h.scanned, h.bytes = trimToolResults(h.msgs, h.scanned, h.bytes, h.limit, &h.trimmed)
	if h.scanned < len(h.msgs) || h.msgs[0].Role != roleUser {
		return
	}
	for {
		end := turnEnd(h.msgs, 1)
		if end >= len(h.msgs) {
			return
		}
		n := historyBytes(h.msgs[1:end])
		if h.bytes-n <= h.limit {
			return
		}
		h.bytes -= n
		h.trimmed.Messages += end - 1
		h.trimmed.Turns++
		h.msgs = slices.Delete(h.msgs, 1, end)
		h.scanned -= end - 1
	}
}

// assemble returns what the model is sent of h with a prompt of
// promptBytes, cut to h's limit, and what was left out: the same as
// trimConversation of the whole valid transcript. h is not changed.
func (h *conversationHistory) assemble(promptBytes int) ([]chatMessage, conversationTrim) {
	closing := closingResults(h.valid.open, closedLost)
	out := make([]chatMessage, 0, len(h.msgs)+len(closing))
	out = append(append(out, h.msgs...), closing...)
	t := h.trimmed
	total := promptBytes + h.bytes + historyBytes(closing)
	t.BytesBefore = promptBytes + h.rawBytes + historyBytes(closing)
	_, total = trimToolResults(out, h.scanned, total, h.limit, &t)
	out, total = dropTurns(out, total, h.limit, &t)
	t.BytesAfter = total
	return out, t
}
