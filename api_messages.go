package main

import (
	"encoding/json"
	"net/http"
)

// This file holds the route of a run's messages: its transcript
// (run_transcript.go) as the API answers it.

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

// runMessages answers GET /v1/runs/{id}/messages: the run's conversation
// so far, in order, redacted; 404 for an unknown run.
func (a *api) runMessages(w http.ResponseWriter, r *http.Request, info authInfo) {
	run := a.findRun(w, r, info)
	if run == nil {
		return
	}
	// The status first: a run seen ended has all its messages kept.
	summary := run.summary()
	msgs, cut, err := run.messages()
	if err != nil {
		run.logger.Warn("reading the run's transcript failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "run "+run.id+": read transcript: "+err.Error())
		return
	}
	writeBody(w, http.StatusOK, run.redactor().marshal(messagesAnswer{RunID: run.id, Status: summary.Status, Messages: msgs, Truncated: cut || summary.Damaged != nil}, true))
}
