package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// This file holds tool approvals: which calls wait for an operator's
// approval (a server's approval and approval_tools, tightened by the run's
// approval), the wait itself in the run's input queue, and its answer
// over POST /v1/runs/{id}/approvals/{approval_id}.

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

// checkRunApproval validates a run request's approval: empty, writes or
// always. It can only tighten the servers' own modes, so never is
// refused rather than silently ignored. Errors are *requestError.
func checkRunApproval(mode string) error {
	switch mode {
	case "", approvalWrites, approvalAlways:
		return nil
	case approvalNever:
		return badRequest("approval", "\"never\": a run can only tighten approval, never loosen it; use writes or always, or leave it out to keep each server's own approval")
	}
	return badRequest("approval", "%q: want writes or always", mode)
}

// isReadOnly reports whether tool annotations say readOnlyHint: true.
// Missing or malformed annotations are not read-only.
func isReadOnly(annotations json.RawMessage) bool {
	var hints struct {
		ReadOnly bool `json:"readOnlyHint"`
	}
	return json.Unmarshal(annotations, &hints) == nil && hints.ReadOnly
}

// needsApproval reports whether a call of entry needs approval in a run
// whose request asks runMode. A built-in needs it only when it is
// connect_mcp, which counts as a write, under a run mode of writes or
// always; an MCP tool when the stricter of its server's mode (cfg) and
// runMode says so, or when approval_tools names it.
func needsApproval(entry toolEntry, cfg serverConfig, runMode string) bool {
	if entry.Server == "" {
		return entry.Name == toolConnectMCP && approvalRank(runMode) >= approvalRank(approvalWrites)
	}
	switch stricterApproval(cfg.Approval, runMode) {
	case approvalAlways:
		return true
	case approvalWrites:
		if !isReadOnly(entry.Annotations) {
			return true
		}
	}
	return matchesAny(cfg.ApprovalTools, entry.ServerTool, false)
}

// approval asks for the approval of a call of entry with args when it
// needs one, and blocks until it is given, denied, timed out (the run's
// input_timeout, else approval_timeout) or ctx is done, whether the run is
// interactive or not. ok is true when the call may go ahead (denied then
// names the approval, if one was asked); otherwise denied is the tool
// error the model gets.
func (r *run) approval(ctx context.Context, entry toolEntry, args json.RawMessage) (denied toolResult, ok bool) {
	var cfg serverConfig
	if entry.Server != "" {
		ms := r.scope.server(entry.Server)
		if ms == nil {
			return toolResult{}, true // the call fails on its own, saying why
		}
		cfg = ms.cfg
	}
	if !needsApproval(entry, cfg, r.req.Approval) {
		return toolResult{}, true
	}
	a := approvalRequest{Tool: entry.Name, Server: entry.Server, ServerTool: entry.ServerTool, Annotations: entry.Annotations}
	if len(a.Annotations) == 0 {
		a.Annotations = json.RawMessage("{}")
	}
	a.Arguments, a.ArgumentsBytes = r.secrets.load().cutSized(string(args), r.env.limits.MaxToolEventBytes)
	p := r.input
	timeout, setting := p.approvalTimeout()
	req := &inputRequest{Server: entry.Server, approval: &a}
	asked := false // set by wait's callback, on this goroutine
	out := p.Queue.wait(ctx, req, "approval_", timeout, func(opened *inputRequest) {
		asked = true
		r.emit(evApprovalRequested, approvalRequestedEvent(opened.approvalView()))
		r.logger.Info("approval requested", "approval", opened.ID, "tool", entry.Name)
		r.env.webhooks.waiting(r, webhookType(runWaitingApproval))
	})
	if !asked { // refused at once: still on the record
		r.emit(evApprovalRequested, approvalRequestedEvent(req.approvalView()))
	}
	decision, by, reason := decisionDeny, out.how, out.decision.Reason
	switch out.how {
	case "timeout":
		by, reason = resolvedByTimeout, fmt.Sprintf("no answer within %s (%s)", timeout, setting)
	case "cancelled", "run ended":
		by, reason = resolvedByCancelled, "the run ended while the call waited"
	case "too many open requests":
		by, reason = resolvedByPolicy, fmt.Sprintf("the run already waits on %d questions and approvals", maxOpenInputs)
	default:
		decision = out.decision.Decision
	}
	r.resolveApproval(req.ID, decision, by, reason)
	if decision == decisionApprove {
		return toolResult{approvalID: req.ID, decidedBy: by}, true
	}
	if strings.TrimSpace(reason) == "" {
		reason = "no reason given"
	}
	denied = toolError(entry.Server, "the operator denied this call: %s", reason)
	denied.approvalID, denied.decidedBy, denied.denied = req.ID, by, true
	return denied, false
}

// resolveApproval records how an approval ended: the approval.resolved
// event and a log line.
func (r *run) resolveApproval(id, decision, by, reason string) {
	r.emit(evApprovalResolved, approvalResolvedEvent(id, decision, by, reason))
	r.logger.Info("approval resolved", "approval", id, "decision", decision, "by", by)
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
