package main

import "net/http"

// This file holds the route of a run's messages: its transcript
// (run_transcript.go) as the API answers it.

// runMessages answers GET /v1/runs/{id}/messages: the run's conversation
// so far, in order, redacted; 404 for an unknown run.
func (a *api) runMessages(w http.ResponseWriter, r *http.Request, info authInfo) {
	run := a.findRun(w, r, info)
	if run == nil {
		return
	}
	body, err := run.messagesBody()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeBody(w, http.StatusOK, body)
}
