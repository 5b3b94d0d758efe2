package main

import (
	"slices"
	"strings"
	"time"
)

// This file holds the names of a run's events and the constructors of
// their payloads: every event a run emits is named here, and the rule of
// which event ends a run lives here alone.

// Event types, as they appear in a run's history, on disk and on
// GET /v1/runs/{id}/events. A run's last event is "run." plus its final
// status (see terminalEventType).
const (
	evRunStarted        = "run.started"
	evProfileMissing    = "profile.missing"
	evServerConnected   = "mcp.server.connected"
	evServerFailed      = "mcp.server.failed"
	evModelResponse     = "model.response"
	evModelRetry        = "model.retry"
	evToolCallStarted   = "tool.call.started"
	evToolCallCompleted = "tool.call.completed"
	evInputRequested    = "input.requested"
	evInputAnswered     = "input.answered"
	evInputCompleted    = "input.completed"
	evSamplingRequested = "sampling.requested"
	evSamplingRefused   = "sampling.refused"
	evSamplingCompleted = "sampling.completed"
	// evConversationTrimmed: the conversation's earlier messages were cut
	// to fit max_conversation_bytes before the run's first model call.
	evConversationTrimmed = "conversation.trimmed"
	evApprovalRequested   = "approval.requested"
	evApprovalResolved    = "approval.resolved"
	evBudgetExceeded      = "budget.exceeded"
	// evToolChanged: a server the run reaches listed a changed definition
	// of a pinned tool during the run (run_pins.go).
	evToolChanged = "mcp.tool.changed"
)

// Event types of a run's wait, before its first model call, for the global
// servers still in their first connection attempt (run_starting.go):
// waiting names them, waited says how each ended up.
const (
	evServersWaiting = "mcp.servers.waiting"
	evServersWaited  = "mcp.servers.waited"
)

// Live-only event types: followers connected at the time get them, the
// history and the disk never hold them (see run_live.go).
const (
	evModelDelta       = "model.delta"
	evToolCallProgress = "tool.call.progress"
)

// terminalEventPrefix starts the type of the event that ends a run.
const terminalEventPrefix = "run."

// terminalEventType returns the type of the event that ends a run with
// status (run.completed, run.failed, run.cancelled).
func terminalEventType(status string) string { return terminalEventPrefix + status }

// isTerminalEvent reports whether an event of type typ ends its run's
// history (run.completed, run.failed, run.cancelled).
func isTerminalEvent(typ string) bool {
	status, ok := strings.CutPrefix(typ, terminalEventPrefix)
	return ok && isTerminal(status)
}

// serverConnectedEvent is the payload of mcp.server.connected: a server of
// the run's scope (from source) came up offering tools tools.
func serverConnectedEvent(server, source string, tools int) map[string]any {
	return map[string]any{"server": server, "source": source, "tools": tools}
}

// serverFailedEvent is the payload of mcp.server.failed: a server of the
// run's scope (from source) could not be started or connected.
func serverFailedEvent(server, source string, err error) map[string]any {
	return map[string]any{"server": server, "source": source, "error": err.Error()}
}

// toolChangedEvent is the payload of mcp.tool.changed: server's tool
// (name as the agent sees it) listed a definition that differs from its
// pin, as ch says; under pin_tools mode "warn" the run goes on with the
// new definition, under "hold" the tool is not offered until an admin
// accepts it. The descriptions are there when the description changed.
func toolChangedEvent(server, name, mode string, ch toolChange) map[string]any {
	data := map[string]any{"server": server, "tool": ch.Tool, "name": name, "pin_tools": mode,
		"changed": ch.Changed, "old_digest": ch.OldDigest, "new_digest": ch.NewDigest, "seen_at": ch.SeenAt}
	if slices.Contains(ch.Changed, "description") {
		data["old_description"], data["new_description"] = ch.OldDescription, ch.NewDescription
	}
	return data
}

// serversWaitingEvent is the payload of mcp.servers.waiting: the run waits
// for the global servers named, each still in its first connection
// attempt, at most its startup_timeout.
func serversWaitingEvent(servers []string) map[string]any {
	return map[string]any{"servers": servers}
}

// serversWaitedEvent is the payload of mcp.servers.waited: how long the run
// waited, and each server it waited for, as it was then: its status, its
// tools once ready, why not otherwise.
func serversWaitedEvent(waited time.Duration, servers []serverStatus) map[string]any {
	list := make([]map[string]any, 0, len(servers))
	for _, st := range servers {
		s := map[string]any{"server": st.Name, "source": st.Source, "status": st.Status}
		if st.Status == statusReady {
			s["tools"] = len(st.Tools)
		}
		if st.Error != "" {
			s["error"] = st.Error
		}
		list = append(list, s)
	}
	return map[string]any{"duration_ms": float64(waited.Microseconds()) / 1000, "servers": list}
}

// conversationTrimmedEvent is the payload of conversation.trimmed: what
// was left out of conversation's earlier messages to fit limit bytes.
func conversationTrimmedEvent(conversation string, t conversationTrim, limit int) map[string]any {
	return map[string]any{
		"conversation_id":        conversation,
		"tool_results_trimmed":   t.ToolResults,
		"turns_dropped":          t.Turns,
		"messages_dropped":       t.Messages,
		"bytes_before":           t.BytesBefore,
		"bytes_after":            t.BytesAfter,
		"max_conversation_bytes": limit,
	}
}

// approvalRequestedEvent is the payload of approval.requested: a tool call
// waits for the caller's approval (or, when the run already waits on too
// many, is denied at once, with an approval.resolved right after).
func approvalRequestedEvent(a approvalRequest) map[string]any {
	data := map[string]any{"approval_id": a.ID, "tool": a.Tool, "server": a.Server, "server_tool": a.ServerTool,
		"arguments": a.Arguments, "annotations": a.Annotations}
	if a.ArgumentsBytes > 0 {
		data["arguments_bytes"] = a.ArgumentsBytes
	}
	if !a.ExpiresAt.IsZero() {
		data["expires_at"] = a.ExpiresAt
	}
	return data
}

// approvalResolvedEvent is the payload of approval.resolved: decision
// (approve or deny) made by by, an API key's name or timeout, policy or
// cancelled; reason when one was given.
func approvalResolvedEvent(id, decision, by, reason string) map[string]any {
	data := map[string]any{"approval_id": id, "decision": decision, "by": by}
	if reason != "" {
		data["reason"] = reason
	}
	return data
}

// modelDeltaEvent is the payload of model.delta: the next piece of the
// text the model is writing in step.
func modelDeltaEvent(step int, text string) map[string]any {
	return map[string]any{"step": step, "text": text}
}

// modelRetryEvent is the payload of model.retry: the model call of step
// failed (err) and starts again as attempt; the text streamed for the
// step so far is void.
func modelRetryEvent(step, attempt int, err error) map[string]any {
	return map[string]any{"step": step, "attempt": attempt, "error": err.Error()}
}

// toolCallProgressEvent is the payload of tool.call.progress: a server's
// progress notification for the call callID. total is 0 when the server
// gave none, message "" likewise.
func toolCallProgressEvent(callID string, note progressParams) map[string]any {
	data := map[string]any{"call_id": callID, "progress": note.Progress}
	if note.Total > 0 {
		data["total"] = note.Total
	}
	if note.Message != "" {
		data["message"] = note.Message
	}
	return data
}

// runStartedEvent is the payload of run.started: the model the run calls
// and its step limit.
func runStartedEvent(model string, maxSteps int) map[string]any {
	return map[string]any{"model": model, "max_steps": maxSteps}
}

// profileMissingEvent is the payload of profile.missing: the run names a
// profile no file holds, and runs without its servers.
func profileMissingEvent(profile string) map[string]any {
	return map[string]any{"profile": profile, "message": "no profile file found; running without profile servers"}
}

// modelResponseEvent is the payload of model.response: step's answer,
// content already redacted and cut, the names of the tools it calls, its usage
// and why it stopped.
func modelResponseEvent(step int, content string, calls []string, usage modelUsage, stop string) map[string]any {
	return map[string]any{"step": step, "content": content, "tool_calls": calls, "usage": usage, "stop_reason": stop}
}

// toolCallStartedEvent is the payload of tool.call.started: the call
// callID of step to the tool name; its arguments are added with putCut.
func toolCallStartedEvent(step int, callID, name string) map[string]any {
	return map[string]any{"step": step, "call_id": callID, "name": name}
}

// toolCallCompletedEvent is the payload of tool.call.completed: the call
// took elapsed and failed or not; its result is added with putCut.
func toolCallCompletedEvent(step int, callID, name string, elapsed time.Duration, isError bool) map[string]any {
	return map[string]any{"step": step, "call_id": callID, "name": name, "duration_ms": float64(elapsed.Microseconds()) / 1000, "is_error": isError}
}

// inputAnsweredEvent is the payload of input.answered: the question id of
// server got action, given by by (a key's name, or how it ended).
func inputAnsweredEvent(id, server, action, by string) map[string]any {
	return map[string]any{"id": id, "server": server, "action": action, "by": by}
}

// inputDeclinedEvent is the payload of an input.requested that was
// declined at once (a run that is not interactive, a policy) for reason.
func inputDeclinedEvent(server, mode, message, reason string) map[string]any {
	return map[string]any{"server": server, "mode": mode, "message": message, "action": actionDecline, "reason": reason}
}

// inputCompletedEvent is the payload of input.completed: server says the
// URL elicitation elicitationID is done.
func inputCompletedEvent(server, elicitationID string) map[string]any {
	return map[string]any{"server": server, "elicitation_id": elicitationID}
}

// samplingRefusedEvent is the payload of sampling.refused: server's
// sampling request was refused, saying reason.
func samplingRefusedEvent(server, reason string) map[string]any {
	return map[string]any{"server": server, "reason": reason}
}

// samplingRequestedEvent is the payload of sampling.requested: server
// asks model for an answer to messages messages with tools tools, at most
// maxTokens long.
func samplingRequestedEvent(server, model string, messages, tools, maxTokens int) map[string]any {
	return map[string]any{"server": server, "model": model, "messages": messages, "tools": tools, "max_tokens": maxTokens}
}

// samplingCompletedEvent is the payload of sampling.completed: the model's
// answer to server's request (its usage, why it stopped, the tool calls it
// asks for) or the error the request failed with, after elapsed.
func samplingCompletedEvent(server string, resp *modelResponse, err error, elapsed time.Duration) map[string]any {
	if err != nil {
		return map[string]any{"server": server, "error": err.Error(), "duration_ms": elapsed.Milliseconds()}
	}
	return map[string]any{"server": server, "usage": resp.Usage, "stop_reason": resp.StopReason, "tool_calls": len(resp.ToolCalls), "duration_ms": elapsed.Milliseconds()}
}
