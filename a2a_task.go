package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// This file holds A2A's objects as /a2a sends and reads them (A2A 1.0's
// ProtoJSON: camelCase fields, TASK_STATE_* and ROLE_* enums, parts told
// apart by their member) and the task a run is: its state from the run's
// status, its output as an artifact, its history from the run's messages;
// and the GetTask and CancelTask methods.

// Task states (A2A 1.0 TaskState).
const (
	taskSubmitted     = "TASK_STATE_SUBMITTED"
	taskWorking       = "TASK_STATE_WORKING"
	taskCompleted     = "TASK_STATE_COMPLETED"
	taskFailed        = "TASK_STATE_FAILED"
	taskCanceled      = "TASK_STATE_CANCELED"
	taskInputRequired = "TASK_STATE_INPUT_REQUIRED"
)

// Message roles (A2A 1.0 Role).
const (
	roleA2AUser  = "ROLE_USER"
	roleA2AAgent = "ROLE_AGENT"
)

// a2aOutputArtifact is the id of the artifact that holds a run's output.
const a2aOutputArtifact = "output"

// An a2aPart is one part of a message or an artifact: text, data, a url
// or raw bytes (base64), exactly one of them.
type a2aPart struct {
	Text      *string         `json:"text,omitempty"`
	Data      json.RawMessage `json:"data,omitempty"`
	URL       string          `json:"url,omitempty"`
	Raw       string          `json:"raw,omitempty"`
	Filename  string          `json:"filename,omitempty"`
	MediaType string          `json:"mediaType,omitempty"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// textPart returns a text part.
func textPart(s string) a2aPart { return a2aPart{Text: &s} }

// An a2aMessage is one message of a task's history or status.
type a2aMessage struct {
	MessageID        string          `json:"messageId"`
	ContextID        string          `json:"contextId,omitempty"`
	TaskID           string          `json:"taskId,omitempty"`
	Role             string          `json:"role"`
	Parts            []a2aPart       `json:"parts"`
	Metadata         json.RawMessage `json:"metadata,omitempty"`
	Extensions       []string        `json:"extensions,omitempty"`
	ReferenceTaskIDs []string        `json:"referenceTaskIds,omitempty"`
}

// An a2aTaskStatus is a task's state, with a message saying what it waits
// for when input is required, or why it failed.
type a2aTaskStatus struct {
	State     string      `json:"state"`
	Message   *a2aMessage `json:"message,omitempty"`
	Timestamp string      `json:"timestamp,omitempty"`
}

// An a2aArtifact is an output of a task.
type a2aArtifact struct {
	ArtifactID string    `json:"artifactId"`
	Name       string    `json:"name,omitempty"`
	Parts      []a2aPart `json:"parts"`
}

// An a2aTask is a run as A2A shows it.
type a2aTask struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId"`
	Status    a2aTaskStatus  `json:"status"`
	Artifacts []a2aArtifact  `json:"artifacts,omitempty"`
	History   []a2aMessage   `json:"history,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`
}

// a2aState returns the task state of a run with status.
func a2aState(status string) string {
	switch status {
	case runQueued:
		return taskSubmitted
	case runWaitingApproval, runWaitingInput:
		return taskInputRequired
	case runCompleted:
		return taskCompleted
	case runFailed:
		return taskFailed
	case runCancelled:
		return taskCanceled
	}
	return taskWorking
}

// a2aTerminal reports whether a task in state has ended.
func a2aTerminal(state string) bool {
	return state == taskCompleted || state == taskFailed || state == taskCanceled
}

// a2aTimestamp formats t as A2A wants it (UTC, milliseconds).
func a2aTimestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// taskStatus returns the status of the run seen as v: for input required,
// an agent message saying what is waited on and how to answer, with the
// open approval or question as a data part; for a failure, the error.
func taskStatus(v runView) a2aTaskStatus {
	at := v.CreatedAt
	switch {
	case v.EndedAt != nil:
		at = *v.EndedAt
	case v.StartedAt != nil:
		at = *v.StartedAt
	}
	st := a2aTaskStatus{State: a2aState(v.Status), Timestamp: a2aTimestamp(at)}
	msg := func(text string, data any) *a2aMessage {
		parts := []a2aPart{textPart(text)}
		if data != nil {
			b, _ := json.Marshal(data)
			parts = append(parts, a2aPart{Data: b, MediaType: "application/json"})
		}
		return &a2aMessage{MessageID: v.ID + "-status", ContextID: v.ConversationID, TaskID: v.ID, Role: roleA2AAgent, Parts: parts}
	}
	switch {
	case len(v.Approvals) > 0:
		ap := v.Approvals[0]
		st.Message = msg(fmt.Sprintf("approval needed: the run wants to call %s with %s. Answer with a message naming this task whose text is \"approve\" or \"deny\" (\"deny: reason\"), or whose data part is {\"approve\": true|false, \"reason\": \"...\"}.", ap.Tool, ap.Arguments),
			map[string]any{"approval": ap})
	case len(v.InputRequests) > 0:
		q := v.InputRequests[0]
		st.Message = msg(fmt.Sprintf("server %q asks: %s. Answer with a message naming this task whose data part is the content the question's requested_schema asks for (or {\"action\": \"decline\"|\"cancel\"}), or whose text is \"decline\" or \"cancel\".", q.Server, q.Message),
			map[string]any{"input_request": q})
	case v.Status == runFailed && v.Error != "":
		st.Message = msg(v.Error, nil)
	}
	return st
}

// taskOf returns the task run is, seen as v, with at most historyLength
// messages of its history (nil: all; 0: none). The caller redacts it.
func taskOf(run *run, v runView, historyLength *int) (a2aTask, error) {
	t := a2aTask{ID: v.ID, ContextID: v.ConversationID, Status: taskStatus(v),
		Metadata: map[string]any{"harnessd": map[string]any{"status": v.Status, "owner": v.Owner, "steps": v.Steps, "run_url": "/v1/runs/" + v.ID}}}
	if v.Output != "" {
		t.Artifacts = []a2aArtifact{{ArtifactID: a2aOutputArtifact, Name: "output", Parts: []a2aPart{textPart(v.Output)}}}
	}
	if historyLength != nil && *historyLength <= 0 {
		return t, nil
	}
	history, err := taskHistory(run, v)
	if err != nil {
		return t, err
	}
	if historyLength != nil && len(history) > *historyLength {
		history = history[len(history)-*historyLength:]
	}
	t.History = history
	return t, nil
}

// taskHistory returns the user's and the model's messages of run's
// transcript (not the system prompt nor tool calls and results), as A2A
// messages.
func taskHistory(run *run, v runView) ([]a2aMessage, error) {
	lines, _, err := run.messages()
	if err != nil {
		return nil, fmt.Errorf("task %s: read its history: %v", run.id, err)
	}
	var out []a2aMessage
	for i, line := range lines {
		var m transcriptMessage
		if json.Unmarshal(line, &m) != nil || m.Content == "" {
			continue
		}
		role := roleA2AUser
		switch m.Role {
		case roleAssistant:
			role = roleA2AAgent
		case roleUser:
		default:
			continue
		}
		out = append(out, a2aMessage{MessageID: fmt.Sprintf("%s-%d", run.id, i+1), ContextID: v.ConversationID, TaskID: run.id, Role: role, Parts: []a2aPart{textPart(m.Content)}})
	}
	return out, nil
}

// taskResult returns run's task, redacted, as a method's result.
func taskResult(run *run, historyLength *int) (json.RawMessage, error) {
	t, err := taskOf(run, run.view(), historyLength)
	if err != nil {
		return nil, err
	}
	return redacted(run, t), nil
}

// An a2aTaskIDParams is the params of GetTask, CancelTask and
// SubscribeToTask.
type a2aTaskIDParams struct {
	Tenant        string          `json:"tenant,omitempty"`
	ID            string          `json:"id"`
	HistoryLength *int            `json:"historyLength,omitempty"`
	Metadata      json.RawMessage `json:"metadata,omitempty"`
}

// getTask serves GetTask: the task with historyLength messages of its
// history (all when unset).
func (g *a2aAgent) getTask(_ http.ResponseWriter, _ *http.Request, info authInfo, _, params json.RawMessage) (any, error) {
	var p a2aTaskIDParams
	if err := decodeParams("GetTask", params, &p); err != nil {
		return nil, err
	}
	if p.HistoryLength != nil && *p.HistoryLength < 0 {
		return nil, rpcErrorf(codeInvalidParams, "historyLength %d: want 0 or more (unset for the whole history)", *p.HistoryLength)
	}
	run, err := g.findTask("id", p.ID, info)
	if err != nil {
		return nil, err
	}
	return taskResult(run, p.HistoryLength)
}

// cancelTask serves CancelTask: it cancels the run and waits up to
// cancelWait for it to end, then answers the task as it is; a task that
// has ended is TaskNotCancelable.
func (g *a2aAgent) cancelTask(_ http.ResponseWriter, r *http.Request, info authInfo, _, params json.RawMessage) (any, error) {
	var p a2aTaskIDParams
	if err := decodeParams("CancelTask", params, &p); err != nil {
		return nil, err
	}
	run, err := g.findTask("id", p.ID, info)
	if err != nil {
		return nil, err
	}
	if _, err := g.api.cancelAndWait(r.Context(), run, info); err != nil {
		return nil, rpcErrorf(a2aTaskNotCancelable, "task %q: already %s; only submitted, working or input-required tasks can be canceled", run.id, run.view().Status)
	}
	no := 0
	return taskResult(run, &no)
}
