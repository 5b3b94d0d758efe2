package main

import (
	"encoding/json"
	"slices"
	"time"
)

// This file holds tool approvals: their modes and decisions, an open
// approval as the API shows it, and its answer over
// POST /v1/runs/{id}/approvals/{approval_id}. Which calls of a run wait
// for one, and the wait itself, are the run's (run_approval.go).

// Decisions of an approval.
const (
	decisionApprove = "approve"
	decisionDeny    = "deny"
)

// Who resolved an approval, besides the API key that answered it.
const (
	resolvedByTimeout   = "timeout"   // nobody answered within approval_timeout (or input_timeout)
	resolvedByPolicy    = "policy"    // the run cannot ask (too many open)
	resolvedByCancelled = "cancelled" // the run ended while the call waited
	// resolvedByCaller answers for the caller when API auth is off and
	// requests carry no key name.
	resolvedByCaller = "caller"
)

// maxApprovalReasonBytes bounds the reason of a decision.
const maxApprovalReasonBytes = 1024

// An approvalRequest is one tool call waiting for approval, as the run
// view's approvals list shows it and approval.requested carries it. The
// arguments are redacted, then cut at max_tool_event_bytes.
type approvalRequest struct {
	ID             string          `json:"approval_id"`
	Tool           string          `json:"tool"`
	Server         string          `json:"server,omitempty"`
	ServerTool     string          `json:"server_tool,omitempty"`
	Arguments      string          `json:"arguments"`
	ArgumentsBytes int             `json:"arguments_bytes,omitempty"` // the whole arguments' length, when cut
	Annotations    json.RawMessage `json:"annotations"`
	CreatedAt      time.Time       `json:"created_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
}

// An approvalAnswer is the body of POST /v1/runs/{id}/approvals/{approval_id}.
type approvalAnswer struct {
	Decision string `json:"decision"`
	Reason   string `json:"reason,omitempty"`
}

// approvalRank orders the modes: never (and "") 0, writes 1, always 2.
func approvalRank(mode string) int {
	return max(slices.Index(approvalModes, mode), 0)
}

// stricterApproval returns the stricter of two modes ("" counts as never).
func stricterApproval(a, b string) string {
	if approvalRank(b) > approvalRank(a) {
		return b
	}
	if a == "" {
		return approvalNever
	}
	return a
}

// isReadOnly reports whether tool annotations say readOnlyHint: true.
// Missing or malformed annotations are not read-only.
func isReadOnly(annotations json.RawMessage) bool {
	var hints struct {
		ReadOnly bool `json:"readOnlyHint"`
	}
	return json.Unmarshal(annotations, &hints) == nil && hints.ReadOnly
}

// approvalView returns the open approval req as the API shows it: its
// id and times are the queue's.
func (req *inputRequest) approvalView() approvalRequest {
	a := *req.approval
	a.ID, a.CreatedAt, a.ExpiresAt = req.ID, req.CreatedAt, req.ExpiresAt
	return a
}

// answerApproval delivers a decision on the open approval id, made by by
// (an API key's name). It returns errInputNotFound when id is not an open
// approval, or a *requestError for a malformed answer; on any error the
// approval stays open.
func (q *inputQueue) answerApproval(id string, a approvalAnswer, by string) error {
	if a.Decision != decisionApprove && a.Decision != decisionDeny {
		return badRequest("decision", "%q: want approve or deny", a.Decision)
	}
	if len(a.Reason) > maxApprovalReasonBytes {
		return badRequest("reason", "%d bytes, over the limit of %d; send a shorter reason", len(a.Reason), maxApprovalReasonBytes)
	}
	q.mu.Lock()
	req := q.open[id]
	q.mu.Unlock()
	if req == nil || req.approval == nil || !q.remove(id) {
		return errInputNotFound
	}
	req.answered <- inputOutcome{how: by, decision: a}
	return nil
}
