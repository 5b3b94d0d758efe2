package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// This file holds a run's side of tool approvals: which of its calls wait
// for an operator's approval (a server's approval and approval_tools,
// tightened by the run's approval), the wait itself in the run's input
// queue, and the check of a run request's approval. The modes and the
// answer over the API are input_approval.go's.

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
