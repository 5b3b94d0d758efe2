package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
)

// This file holds how a run calls one tool the model asked for: a built-in
// or an MCP tool of the run's scope, and the result as the model gets it.

// A toolResult is the outcome of one tool call as the model gets it.
type toolResult struct {
	text    string
	isError bool
	server  string // the server the call went to; "" for built-ins and unknown tools
	// approvalID and decidedBy are the approval that gated the call and
	// who decided it; "" when none was asked. denied: it was not approved.
	approvalID, decidedBy string
	denied                bool
}

// toolError is a toolResult with isError set.
func toolError(server, format string, args ...any) toolResult {
	return toolResult{text: fmt.Sprintf(format, args...), isError: true, server: server}
}

// callTool runs one tool call: a built-in from builtinTools, or an MCP
// tool of the run's scope (activating it).
func (r *run) callTool(ctx context.Context, tc toolCall) toolResult {
	if tc.ArgumentsError != "" {
		return toolError("", "tool %s: the arguments are not valid JSON (%s): send a JSON object", tc.Name, tc.ArgumentsError)
	}
	args := tc.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	entry, ok := r.catalog.lookup(tc.Name)
	if why, held := heldReason(r.catalog.reachable(), tc.Name); !ok && held {
		return toolError("", "%s; use another tool", why)
	}
	if !ok {
		return toolError("", "unknown tool %q: use find_tool to search for tools, then call them by the names it returns", tc.Name)
	}
	gate, ok := r.approval(ctx, entry, args)
	if !ok {
		return gate
	}
	res := r.callEntry(ctx, entry, args)
	res.approvalID, res.decidedBy = gate.approvalID, gate.decidedBy
	return res
}

// callEntry calls the tool entry, approved, with args.
func (r *run) callEntry(ctx context.Context, entry toolEntry, args json.RawMessage) toolResult {
	if b := builtinByName[entry.Name]; entry.Server == "" && b != nil {
		text, err := b.call(ctx, r, args)
		if err != nil {
			return toolError("", "%s", err.Error())
		}
		return toolResult{text: text}
	}
	r.catalog.activate(entry.Name)
	res, err := r.scope.callTool(ctx, entry.Server, entry.ServerTool, args)
	if err != nil {
		return toolError(entry.Server, "%s", err.Error())
	}
	text := resultToText(res)
	if text == "" {
		text = "(the tool returned no content)"
	}
	return toolResult{text: text, isError: res.IsError, server: entry.Server}
}

// auditCall records the call tc, with its result res, that started at
// start and took elapsed, in the audit trail: who, which run, server and
// tool, the arguments' SHA-256 and size (never the arguments), the
// approval, and the outcome.
func (r *run) auditCall(tc toolCall, res toolResult, start time.Time, elapsed time.Duration) {
	if r.env.audit == nil {
		return
	}
	outcome := "ok"
	switch {
	case res.denied:
		outcome = "denied"
	case res.isError:
		outcome = "error"
	}
	sum := sha256.Sum256(tc.Arguments)
	at := start.UTC()
	r.env.audit.record(auditRecord{Type: auditToolCall, Key: r.req.Owner, Tenant: r.req.Tenant, Run: r.id,
		Server: res.server, Tool: tc.Name, ArgsSHA256: hex.EncodeToString(sum[:]), ArgsBytes: len(tc.Arguments),
		ApprovalID: res.approvalID, DecidedBy: res.decidedBy, Start: &at,
		DurationMS: float64(elapsed.Microseconds()) / 1000, Outcome: outcome})
}
