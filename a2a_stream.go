package main

import (
	"encoding/json"
	"io"
	"net/http"
	"time"
)

// This file holds A2A's streams, SendStreamingMessage and SubscribeToTask:
// SSE whose events are JSON-RPC responses carrying the task first, then
// artifact updates with the model's text as it streams (model.delta) and
// status updates as the run's state changes, derived from the run's events
// by the follower GET /v1/runs/{id}/events uses. The stream closes after
// the task's terminal status (A2A 1.0 has no "final" flag: the stream's
// end says it); it stays open while the task needs input, so that the
// answer, sent with SendMessage, is followed by the rest.

// An a2aStatusUpdate is a TaskStatusUpdateEvent.
type a2aStatusUpdate struct {
	TaskID    string        `json:"taskId"`
	ContextID string        `json:"contextId"`
	Status    a2aTaskStatus `json:"status"`
}

// An a2aArtifactUpdate is a TaskArtifactUpdateEvent.
type a2aArtifactUpdate struct {
	TaskID    string      `json:"taskId"`
	ContextID string      `json:"contextId"`
	Artifact  a2aArtifact `json:"artifact"`
	Append    bool        `json:"append,omitempty"`
	LastChunk bool        `json:"lastChunk,omitempty"`
}

// An a2aStreamResponse is one event of a stream (or a push notification):
// exactly one field set.
type a2aStreamResponse struct {
	Task           *a2aTask           `json:"task,omitempty"`
	StatusUpdate   *a2aStatusUpdate   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *a2aArtifactUpdate `json:"artifactUpdate,omitempty"`
}

// sendStreamingMessage serves SendStreamingMessage: send, then the task's
// stream.
func (g *a2aAgent) sendStreamingMessage(w http.ResponseWriter, r *http.Request, info authInfo, id, params json.RawMessage) (any, error) {
	// A new task is followed from before it begins, so that its stream
	// has all of the model's text however fast the model is.
	var cur followCursor
	run, _, err := g.send("SendStreamingMessage", params, info, &cur)
	if err != nil {
		if run != nil {
			run.unfollow(&cur) // started, but its push config was refused
		}
		return nil, err
	}
	g.stream(w, r, id, run, &cur)
	return nil, nil
}

// subscribeToTask serves SubscribeToTask: the stream of a task that has
// not ended (one that has is UnsupportedOperation: GetTask gives it).
func (g *a2aAgent) subscribeToTask(w http.ResponseWriter, r *http.Request, info authInfo, id, params json.RawMessage) (any, error) {
	var p a2aTaskIDParams
	if err := decodeParams("SubscribeToTask", params, &p); err != nil {
		return nil, err
	}
	run, err := g.findTask("id", p.ID, info)
	if err != nil {
		return nil, err
	}
	if status := run.view().Status; isTerminal(status) {
		return nil, rpcErrorf(a2aUnsupportedOperation, "task %q: already %s: there is nothing more to stream; GetTask gives its result", run.id, status)
	}
	g.stream(w, r, id, run, &followCursor{})
	return nil, nil
}

// stream writes run's task stream as the answer to request id: the task
// as it is, then its updates until it ends, the client goes away or stops
// reading (max_stream_write_seconds), or harnessd shuts down. cur is the
// stream's follower: attached as the run began (a new task), or not yet.
func (g *a2aAgent) stream(w http.ResponseWriter, r *http.Request, id json.RawMessage, run *run, cur *followCursor) {
	defer run.unfollow(cur)
	// Followed before the task is read: the task covers the history so
	// far, and the first frames bring the model's text the task does not
	// hold yet (since the run began, or the current step's so far).
	frames, _, changed := run.follow(cur)
	sw := newStreamWriter(w, g.api.streamWriteTimeout)
	defer sw.extend()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(resp a2aStreamResponse) error {
		b := redacted(run, a2aRPCResponse{JSONRPC: "2.0", ID: id, Result: resp})
		if _, err := io.WriteString(sw, "data: "); err != nil {
			return err
		}
		if _, err := sw.Write(append(b, "\n\n"...)); err != nil {
			return err
		}
		return nil
	}
	v := run.view()
	noHistory := 0
	t, err := taskOf(run, v, &noHistory)
	if err != nil || send(a2aStreamResponse{Task: &t}) != nil || sw.Flush() != nil {
		return
	}
	last := statusKey(v)
	step := -1 // the step whose text the output artifact holds
	heartbeat := time.NewTicker(g.api.heartbeat)
	defer heartbeat.Stop()
	// deltas sends the model's text of frames as updates of the output
	// artifact: a new step's text replaces the last step's, so that the
	// artifact ends as the output.
	deltas := func(frames []followFrame) error {
		for _, f := range frames {
			if f.ev.Type != evModelDelta {
				continue
			}
			var d struct {
				Data struct {
					Step int    `json:"step"`
					Text string `json:"text"`
				} `json:"data"`
			}
			if json.Unmarshal(f.ev.encoded, &d) != nil || d.Data.Text == "" {
				continue
			}
			up := a2aArtifactUpdate{TaskID: run.id, ContextID: v.ConversationID, Append: d.Data.Step == step,
				Artifact: a2aArtifact{ArtifactID: a2aOutputArtifact, Name: "output", Parts: []a2aPart{textPart(d.Data.Text)}}}
			step = d.Data.Step
			if err := send(a2aStreamResponse{ArtifactUpdate: &up}); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		if deltas(frames) != nil {
			return
		}
		v = run.view()
		if a2aTerminal(a2aState(v.Status)) {
			// The text streamed since the follow above, all of it: a
			// run's status is final after its model calls are over.
			if frames, _, _ := run.follow(cur); deltas(frames) != nil {
				return
			}
			if v.Output != "" {
				up := a2aArtifactUpdate{TaskID: run.id, ContextID: v.ConversationID, LastChunk: true,
					Artifact: a2aArtifact{ArtifactID: a2aOutputArtifact, Name: "output", Parts: []a2aPart{textPart(v.Output)}}}
				if send(a2aStreamResponse{ArtifactUpdate: &up}) != nil {
					return
				}
			}
			send(a2aStreamResponse{StatusUpdate: &a2aStatusUpdate{TaskID: run.id, ContextID: v.ConversationID, Status: taskStatus(v)}})
			sw.Flush()
			return
		}
		if key := statusKey(v); key != last {
			last = key
			if send(a2aStreamResponse{StatusUpdate: &a2aStatusUpdate{TaskID: run.id, ContextID: v.ConversationID, Status: taskStatus(v)}}) != nil {
				return
			}
		}
		if sw.Flush() != nil {
			return
		}
		if !g.api.waitRun(r.Context(), run, changed, heartbeat.C, sw) {
			return
		}
		frames, _, changed = run.follow(cur)
	}
}

// statusKey identifies what a status update says of the run seen as v:
// its state and what it waits for. Two views with the same key need one
// update.
func statusKey(v runView) string {
	key := a2aState(v.Status)
	if len(v.Approvals) > 0 {
		key += " " + v.Approvals[0].ID
	}
	if len(v.InputRequests) > 0 {
		key += " " + v.InputRequests[0].ID
	}
	return key
}
