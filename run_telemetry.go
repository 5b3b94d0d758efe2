package main

import (
	"context"
	"errors"
	"strconv"
)

// This file holds the spans of a run: the run's own (invoke_agent), the
// parent of its model calls and tool calls, and one per tool call
// (execute_tool). Prompts, arguments, results and answers go into them
// only with [telemetry] include_content, redacted and cut.

// startRunSpan starts the run's span, the child of the API request that
// started it (whose parent is the caller's traceparent), and returns ctx
// carrying it.
func (r *run) startRunSpan(ctx context.Context) context.Context {
	ctx, sp := startSpan(withSpan(ctx, r.req.parent), r.env.tracer, "invoke_agent harnessd", spanInternal,
		stringAttr("gen_ai.operation.name", "invoke_agent"),
		stringAttr("gen_ai.agent.name", "harnessd"),
		stringAttr("harnessd.run.id", r.id),
		stringAttr("gen_ai.request.model", r.model.Model),
		stringAttr("harnessd.run.owner", r.req.Owner))
	if id := r.conversationID(); id != "" {
		sp.set(stringAttr("gen_ai.conversation.id", id))
	}
	if r.req.Profile != "" {
		sp.set(stringAttr("harnessd.run.profile", r.req.Profile))
	}
	if sp != nil && sp.tracer.content() {
		sp.setContent("harnessd.run.prompt", r.secrets.load().cut(r.req.Prompt, maxSpanContentBytes))
	}
	r.span.Store(sp)
	return ctx
}

// endRunSpan ends the run's span, if it has one, with the run's terminal
// status, steps, tool calls and usage; output is already redacted.
func (r *run) endRunSpan(status, output, errMsg string) {
	sp := r.span.Load()
	if sp == nil {
		return
	}
	r.mu.Lock()
	steps, calls, usage := r.steps, r.toolCalls, r.usage
	r.mu.Unlock()
	sp.set(stringAttr("harnessd.run.status", status),
		intAttr("harnessd.run.steps", int64(steps)),
		intAttr("harnessd.run.tool_calls", int64(calls)),
		intAttr("gen_ai.usage.input_tokens", int64(usage.InputTokens)),
		intAttr("gen_ai.usage.output_tokens", int64(usage.OutputTokens)))
	if sp.tracer.content() {
		sp.setContent("harnessd.run.output", r.secrets.load().cut(output, maxSpanContentBytes))
	}
	if status != runCompleted {
		sp.fail(status, errMsg)
	}
	sp.end()
}

// startToolSpan starts the span of the tool call tc, when ctx is traced.
func (r *run) startToolSpan(ctx context.Context, step int, tc toolCall) (context.Context, *traceSpan) {
	ctx, sp := startSpan(ctx, nil, "execute_tool "+tc.Name, spanInternal,
		stringAttr("gen_ai.operation.name", "execute_tool"),
		stringAttr("gen_ai.tool.name", tc.Name),
		stringAttr("gen_ai.tool.call.id", tc.ID),
		intAttr("harnessd.run.step", int64(step)))
	if sp != nil && sp.tracer.content() {
		sp.setContent("gen_ai.tool.call.arguments", r.secrets.load().cut(string(tc.Arguments), maxSpanContentBytes))
	}
	return ctx, sp
}

// endToolSpan ends the span of a tool call with its result.
func (r *run) endToolSpan(sp *traceSpan, res toolResult) {
	if sp == nil {
		return
	}
	if res.server != "" {
		sp.set(stringAttr("harnessd.mcp.server", res.server))
	}
	if res.isError {
		sp.fail("tool_error", "")
	}
	if sp.tracer.content() {
		sp.setContent("gen_ai.tool.call.result", r.secrets.load().cut(res.text, maxSpanContentBytes))
	}
	sp.end()
}

// startAttemptSpan starts the span of one webhook attempt for r (nil:
// none known), a child
// of the run's span (ended by then: the delivery follows the run).
func (s *webhookSender) startAttemptSpan(r *run, typ string, attempt int) *traceSpan {
	ctx, runID := s.ctx, ""
	if r != nil {
		ctx, runID = withSpan(s.ctx, r.span.Load()), r.id
	}
	_, sp := startSpan(ctx, s.tracer, "webhook "+typ, spanClient,
		stringAttr("http.request.method", "POST"),
		stringAttr("harnessd.run.id", runID),
		stringAttr("harnessd.webhook.type", typ),
		intAttr("http.request.resend_count", int64(attempt-1)))
	return sp
}

// endAttemptSpan ends the span of a webhook attempt that failed with err
// (nil: delivered).
func endAttemptSpan(sp *traceSpan, err error) {
	var status *httpStatusError
	if errors.As(err, &status) {
		sp.set(intAttr("http.response.status_code", int64(status.StatusCode)))
		sp.fail(strconv.Itoa(status.StatusCode), err.Error())
	} else {
		sp.failErr("", err)
	}
	sp.end()
}
