package main

import (
	"context"
	"encoding/json"
	"errors"
	"sort"
	"strconv"
	"sync"
	"time"
)

// This file holds a run's open questions, from its servers (elicitations)
// and about its tool calls (approvals, input_approval.go): asked, listed,
// answered over the API, timed out or cancelled with the run. One queue
// per run holds both kinds.

// An inputAnswer is the body of POST /v1/runs/{id}/input/{request_id}.
type inputAnswer struct {
	Action  string                     `json:"action"`
	Content map[string]json.RawMessage `json:"content,omitempty"`
}

// An inputRequest is an elicitation waiting for the API's caller, as
// GET /v1/runs/{id} shows it and the input.requested event carries it.
type inputRequest struct {
	ID              string          `json:"id"`
	Server          string          `json:"server"`
	Mode            string          `json:"mode"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requested_schema,omitempty"`
	URL             string          `json:"url,omitempty"`
	ElicitationID   string          `json:"elicitation_id,omitempty"`
	CreatedAt       time.Time       `json:"created_at"`
	ExpiresAt       time.Time       `json:"expires_at"`

	schema   *elicitSchema
	answered chan inputOutcome // buffered 1; receives the one answer
	// approval is set when the request is a tool call waiting for
	// approval rather than an elicitation; it is answered by
	// answerApproval, never by answer.
	approval *approvalRequest
}

// An inputOutcome is how an open request ended: the answer, and who gave it
// ("caller" or an approval's key name, or "run ended" when the run closed
// its queue). decision is an approval's answer; empty for elicitations
// and for requests that ended unanswered.
type inputOutcome struct {
	res      elicitResult
	how      string
	decision approvalAnswer
}

// Errors of inputQueue.answer that the API tells apart.
var (
	// errInputNotFound: no open request has the id (never asked, answered,
	// timed out or cancelled).
	errInputNotFound = errors.New("no open input request with that id")
)

// An inputQueue holds one run's open elicitations until the API's caller
// answers them. Safe for concurrent use.
type inputQueue struct {
	mu sync.Mutex
	// guards seq, open and closed
	seq    int
	open   map[string]*inputRequest
	closed bool // set by closeAll: no request is opened after
}

// ask opens req, and blocks until it is answered, its timeout passes
// (cancel), or ctx is done (cancel). It returns the answer and how it came:
// "caller", "timeout" or "cancelled". A full queue declines at once.
func (q *inputQueue) ask(ctx context.Context, req *inputRequest, timeout time.Duration, opened func(*inputRequest)) (elicitResult, string) {
	out := q.wait(ctx, req, "input_", timeout, opened)
	return out.res, out.how
}

// wait gives req an id made of prefix and a number unique in the queue,
// opens it, calls opened (when set), and blocks until req is answered,
// its timeout passes or ctx is done, like ask; it returns the whole
// outcome. A request refused at once (a closed or full queue) keeps its id
// and is never opened.
func (q *inputQueue) wait(ctx context.Context, req *inputRequest, prefix string, timeout time.Duration, opened func(*inputRequest)) inputOutcome {
	q.mu.Lock()
	q.seq++
	req.ID = prefix + strconv.Itoa(q.seq)
	if q.closed {
		q.mu.Unlock()
		return inputOutcome{res: elicitResult{Action: actionCancel}, how: "run ended"}
	}
	if len(q.open) >= maxOpenInputs {
		q.mu.Unlock()
		return inputOutcome{res: elicitResult{Action: actionDecline}, how: "too many open requests"}
	}
	req.CreatedAt = time.Now().UTC()
	req.ExpiresAt = req.CreatedAt.Add(timeout)
	req.answered = make(chan inputOutcome, 1)
	if q.open == nil {
		q.open = map[string]*inputRequest{}
	}
	q.open[req.ID] = req
	q.mu.Unlock()
	if opened != nil {
		opened(req)
	}

	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case out := <-req.answered:
		return out
	case <-timer.C:
		if q.remove(req.ID) {
			return inputOutcome{res: elicitResult{Action: actionCancel}, how: "timeout"}
		}
	case <-ctx.Done():
		if q.remove(req.ID) {
			return inputOutcome{res: elicitResult{Action: actionCancel}, how: "cancelled"}
		}
	}
	// An answer or closeAll won the race: it removed the request and sent.
	return <-req.answered
}

// closeAll cancels every open request and refuses later ones: the run has
// ended, so its open questions go with it at once.
func (q *inputQueue) closeAll() {
	q.mu.Lock()
	q.closed = true
	open := q.open
	q.open = nil
	q.mu.Unlock()
	for _, req := range open {
		req.answered <- inputOutcome{res: elicitResult{Action: actionCancel}, how: "run ended"}
	}
}

// remove takes id out of the open requests; false if it was not open.
func (q *inputQueue) remove(id string) bool {
	q.mu.Lock()
	_, ok := q.open[id]
	delete(q.open, id)
	q.mu.Unlock()
	return ok
}

// counts returns the number of open elicitations and of open approvals.
func (q *inputQueue) counts() (questions, approvals int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, req := range q.open {
		if req.approval != nil {
			approvals++
		} else {
			questions++
		}
	}
	return questions, approvals
}

// answer delivers the caller's answer to the open request id. It returns
// errInputNotFound, a *fieldError for content that fails the requested
// schema, or a *requestError for a malformed answer; on any error the
// request stays open.
func (q *inputQueue) answer(id string, a inputAnswer) (elicitResult, error) {
	q.mu.Lock()
	req := q.open[id]
	q.mu.Unlock()
	if req == nil || req.approval != nil {
		return elicitResult{}, errInputNotFound
	}
	res := elicitResult{Action: a.Action}
	switch a.Action {
	case actionAccept:
		if req.Mode == modeURL {
			if len(a.Content) > 0 {
				return elicitResult{}, badRequest("content", "a URL-mode request takes no content: accept means the user opened the URL")
			}
			break
		}
		content, err := req.schema.validate(a.Content)
		if err != nil {
			return elicitResult{}, err
		}
		res.Content = content
	case actionDecline, actionCancel:
		if len(a.Content) > 0 {
			return elicitResult{}, badRequest("content", "only an accept carries content")
		}
	default:
		return elicitResult{}, badRequest("action", "%q: want accept, decline or cancel", a.Action)
	}
	if !q.remove(id) {
		return elicitResult{}, errInputNotFound
	}
	req.answered <- inputOutcome{res: res, how: "caller"}
	return res, nil
}

// list returns the open elicitations, oldest first.
func (q *inputQueue) list() []inputRequest {
	return q.listKind(false)
}

// listKind returns the open approvals (approvals true) or elicitations,
// oldest first.
func (q *inputQueue) listKind(approvals bool) []inputRequest {
	questions, open := q.snapshot()
	if approvals {
		return open
	}
	return questions
}

// snapshot returns the open elicitations and the open approvals, each
// oldest first, as one state of the queue (taken under one lock): a run's
// view derives its waiting status from it (run.waitingView).
func (q *inputQueue) snapshot() (questions, approvals []inputRequest) {
	q.mu.Lock()
	defer q.mu.Unlock()
	questions, approvals = []inputRequest{}, []inputRequest{}
	for _, r := range q.open {
		if r.approval != nil {
			approvals = append(approvals, *r)
		} else {
			questions = append(questions, *r)
		}
	}
	for _, out := range [][]inputRequest{questions, approvals} {
		sort.Slice(out, func(i, j int) bool {
			return out[i].CreatedAt.Before(out[j].CreatedAt) || out[i].ID < out[j].ID && out[i].CreatedAt.Equal(out[j].CreatedAt)
		})
	}
	return questions, approvals
}
