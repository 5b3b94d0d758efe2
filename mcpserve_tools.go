package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// This file holds the MCP server's tools: their names, schemas and
// annotations, and what each does over the run manager, through the same
// methods as the REST routes (startRun, visibleRun, runBody,
// deliverApproval, deliverInput, cancelAndWait, runSummaries). A held run
// (run, wait_run) sends the run's events as progress and its approvals and
// questions as elicitation when the client takes them.

// wait_run's bounds on its timeout.
const (
	defaultWaitSeconds = 60
	maxWaitSeconds     = 600
)

// An mcpTool is one tool of the MCP server: what tools/list shows, the
// scope its caller needs, and what it does.
type mcpTool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
	Annotations map[string]any  `json:"annotations"`

	scope string
	call  func(s *mcpServer, ctx context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult
}

// An mcpToolResult is a tools/call result: text, and the ids and status
// as structured content.
type mcpToolResult struct {
	Content           []contentBlock `json:"content"`
	StructuredContent any            `json:"structuredContent,omitempty"`
	IsError           bool           `json:"isError,omitempty"`
}

// The schemas' shared parts.
const (
	schemaRunID     = `"run_id": {"type": "string", "description": "The run's id (run_...), as run, start_run or list_runs gave it."}`
	schemaRunFields = `"prompt": {"type": "string", "description": "The task for harnessd's agent, in plain language."},
	"profile": {"type": "string", "description": "A profile of harnessd's operator: its MCP servers join the run. Leave out for the default."},
	"model": {"type": "string", "description": "provider/model to use instead of the default (for example openai/gpt-4.1). Usually left out."},
	"conversation_id": {"type": "string", "description": "Continue this conversation (from an earlier run's conversation_id): the agent sees its earlier messages."},
	"system_prompt": {"type": "string", "description": "Instructions that replace harnessd's default system prompt."},
	"max_steps": {"type": "integer", "minimum": 1, "description": "At most this many model turns."},
	"max_tokens": {"type": "integer", "minimum": 1, "description": "Budget: stop the run past this many model tokens."},
	"max_cost_usd": {"type": "number", "exclusiveMinimum": 0, "description": "Budget: stop the run past this cost in US dollars."},
	"max_duration": {"type": "string", "description": "Budget: stop the run after this long (a Go duration such as 10m)."},
	"approval": {"type": "string", "enum": ["writes", "always"], "description": "Ask for approval before tool calls that may write (writes) or before every tool call (always)."}`
)

// mcpTools are the server's tools, in the order tools/list gives them.
var mcpTools = []mcpTool{
	{Name: "run", Title: "Run an agent task",
		Description: "Hand a task to harnessd's agent and wait for its answer. The answer is the text result; structuredContent has run_id, conversation_id and status. " +
			"While it runs, progress notifications carry the model's text and tool calls; approvals and questions come as elicitation when the client supports it, else they wait for decide_approval/answer_input. " +
			"For long tasks prefer start_run then wait_run, or declare the io.modelcontextprotocol/tasks extension: run then answers at once with a task (tasks/get, tasks/update, tasks/cancel).",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + schemaRunFields + `}, "required": ["prompt"]}`),
		Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": false, "openWorldHint": true},
		scope:       scopeRunsWrite, call: (*mcpServer).toolRun},
	{Name: "start_run", Title: "Start an agent task",
		Description: "Start a task on harnessd's agent and return at once with run_id and conversation_id; follow it with wait_run or get_run.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + schemaRunFields + `}, "required": ["prompt"]}`),
		Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": false, "openWorldHint": true},
		scope:       scopeRunsWrite, call: (*mcpServer).toolStartRun},
	{Name: "get_run", Title: "Get a run",
		Description: "The run's current state: status, output when it has ended, error, steps, open approvals and input requests, usage.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + schemaRunID + `}, "required": ["run_id"]}`),
		Annotations: map[string]any{"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
		scope:       scopeRunsRead, call: (*mcpServer).toolGetRun},
	{Name: "wait_run", Title: "Wait for a run",
		Description: "Wait for a run to end and return its output, or its current state once timeout_seconds pass (call again to keep waiting).",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + schemaRunID + `,
	"timeout_seconds": {"type": "integer", "minimum": 1, "maximum": ` + strconv.Itoa(maxWaitSeconds) + `, "description": "How long to wait at most (default ` + strconv.Itoa(defaultWaitSeconds) + `)."}}, "required": ["run_id"]}`),
		Annotations: map[string]any{"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
		scope:       scopeRunsRead, call: (*mcpServer).toolWaitRun},
	{Name: "list_runs", Title: "List runs",
		Description: "Your recent runs, newest first: id, status, model, steps, times. Filter by text in the prompt (q) or status; page with cursor.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {
	"q": {"type": "string", "description": "Only runs whose prompt contains this text."},
	"status": {"type": "string", "description": "Only runs with this status: queued, running, waiting_approval, waiting_input, completed, failed or cancelled."},
	"limit": {"type": "integer", "minimum": 1, "maximum": 1000, "description": "At most this many runs (default 100)."},
	"cursor": {"type": "string", "description": "The next_cursor of the previous page."}}}`),
		Annotations: map[string]any{"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false},
		scope:       scopeRunsRead, call: (*mcpServer).toolListRuns},
	{Name: "cancel_run", Title: "Cancel a run",
		Description: "Cancel a queued or running run; its work so far is kept. Returns the status it has after up to 5 seconds.",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + schemaRunID + `}, "required": ["run_id"]}`),
		Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": true, "idempotentHint": true, "openWorldHint": false},
		scope:       scopeRunsWrite, call: (*mcpServer).toolCancelRun},
	{Name: "decide_approval", Title: "Approve or deny a tool call",
		Description: "Decide a tool call a run waits to have approved (get_run lists them under approvals, with the tool and its arguments).",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + schemaRunID + `,
	"approval_id": {"type": "string", "description": "The approval's id (approval_id in get_run's approvals)."},
	"decision": {"type": "string", "enum": ["approve", "deny"], "description": "approve runs the tool call; deny tells the agent it was refused."},
	"reason": {"type": "string", "description": "Why, for the agent and the record (optional)."}}, "required": ["run_id", "approval_id", "decision"]}`),
		Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false},
		scope:       scopeRunsWrite, call: (*mcpServer).toolDecideApproval},
	{Name: "answer_input", Title: "Answer a run's question",
		Description: "Answer a question one of the run's MCP servers asked (get_run lists them under input_requests, with the schema the content must follow).",
		InputSchema: json.RawMessage(`{"type": "object", "properties": {` + schemaRunID + `,
	"request_id": {"type": "string", "description": "The question's id (id in get_run's input_requests)."},
	"action": {"type": "string", "enum": ["accept", "decline", "cancel"], "description": "accept answers with content; decline refuses; cancel dismisses the question."},
	"content": {"type": "object", "description": "With accept: the answer, following the question's requested_schema."}}, "required": ["run_id", "request_id", "action"]}`),
		Annotations: map[string]any{"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false},
		scope:       scopeRunsWrite, call: (*mcpServer).toolAnswerInput},
}

// mcpToolError returns an isError result saying msg.
func mcpToolError(format string, args ...any) *mcpToolResult {
	return &mcpToolResult{Content: []contentBlock{{Type: "text", Text: fmt.Sprintf(format, args...)}}, IsError: true}
}

// callTool serves tools/call: an unknown tool or malformed params are
// JSON-RPC errors; what goes wrong in a tool is an isError result.
func (s *mcpServer) callTool(ctx context.Context, call *mcpCall, params json.RawMessage) (any, *rpcError) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := json.Unmarshal(params, &p); err != nil || p.Name == "" {
		return nil, rpcFail(codeInvalidParams, "tools/call: want params {name, arguments}")
	}
	for i := range mcpTools {
		tool := &mcpTools[i]
		if tool.Name != p.Name {
			continue
		}
		if !call.info.has(tool.scope) {
			return mcpToolError("tool %s: key %q lacks the %s scope it needs; use a key with %s or admin", tool.Name, call.info.key, tool.scope, tool.scope), nil
		}
		args := p.Arguments
		if len(bytes.TrimSpace(args)) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		if tool.Name == "run" && call.tasks {
			return s.createTask(call, args), nil
		}
		if tool.Name == "run" && call.rounds {
			return s.runInRounds(ctx, call, args, params), nil
		}
		return tool.call(s, ctx, call, args), nil
	}
	return nil, rpcFail(codeInvalidParams, "tools/call: unknown tool %q: tools/list names harnessd's tools", p.Name)
}

// decodeArgs decodes a tool's arguments strictly into v; the error result
// names the tool and the field.
func decodeArgs(tool string, args json.RawMessage, v any) *mcpToolResult {
	if err := decodeStrict(bytes.NewReader(args), v); err != nil {
		return mcpToolError("tool %s: arguments: %v (see the tool's inputSchema)", tool, err)
	}
	return nil
}

// startRun starts the run the arguments of run or start_run ask for; an
// error is a result saying why.
func (s *mcpServer) startRun(tool string, call *mcpCall, args json.RawMessage) (*run, *mcpToolResult) {
	var req runRequest
	if bad := decodeArgs(tool, args, &req); bad != nil {
		return nil, bad
	}
	if (call.elicitation || call.tasks || call.rounds) && tool == "run" {
		// The client answers the run's questions while the call holds,
		// or through tasks/update.
		req.Interactive = true
	}
	run, err := s.api.startRun(req, call.info, nil)
	var busy *busyError
	switch {
	case errors.As(err, &busy):
		return nil, mcpToolError("tool %s: %v (try again in %s)", tool, err, busy.retryAfter)
	case err != nil:
		return nil, mcpToolError("tool %s: %v", tool, err)
	}
	return run, nil
}

// toolRun starts a run and holds the call until it ends; the client's
// notifications/cancelled cancels the run.
func (s *mcpServer) toolRun(ctx context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	run, bad := s.startRun("run", call, args)
	if bad != nil {
		return bad
	}
	call.hold(ctx, run, nil)
	if errors.Is(context.Cause(ctx), errMCPCancelled) && !isClosed(run.done) {
		s.api.cancelAndWait(context.WithoutCancel(ctx), run, call.info)
	}
	return runOutcome(run)
}

// toolStartRun starts a run and returns its ids at once.
func (s *mcpServer) toolStartRun(_ context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	run, bad := s.startRun("start_run", call, args)
	if bad != nil {
		return bad
	}
	return runOutcome(run)
}

// runIDArgs are the arguments of the tools about one run.
type runIDArgs struct {
	RunID string `json:"run_id"`
}

// findRun returns the run the arguments name when the caller sees it, or
// an error result, the same for another tenant's run as for none.
func (s *mcpServer) findRun(tool string, call *mcpCall, id string) (*run, *mcpToolResult) {
	if id == "" {
		return nil, mcpToolError("tool %s: run_id: missing: pass the id run, start_run or list_runs gave", tool)
	}
	run := s.api.visibleRun(id, call.info)
	if run == nil {
		return nil, mcpToolError("tool %s: run %q: not found (list_runs lists yours)", tool, id)
	}
	return run, nil
}

// toolGetRun returns a run's view.
func (s *mcpServer) toolGetRun(_ context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	var a runIDArgs
	if bad := decodeArgs("get_run", args, &a); bad != nil {
		return bad
	}
	run, bad := s.findRun("get_run", call, a.RunID)
	if bad != nil {
		return bad
	}
	body := s.api.runBody(run, call.info)
	return &mcpToolResult{Content: []contentBlock{{Type: "text", Text: string(body)}}, StructuredContent: json.RawMessage(body)}
}

// toolWaitRun holds the call until the run ends or the timeout passes.
func (s *mcpServer) toolWaitRun(ctx context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	var a struct {
		RunID          string `json:"run_id"`
		TimeoutSeconds int    `json:"timeout_seconds"`
	}
	if bad := decodeArgs("wait_run", args, &a); bad != nil {
		return bad
	}
	if a.TimeoutSeconds < 0 || a.TimeoutSeconds > maxWaitSeconds {
		return mcpToolError("tool wait_run: timeout_seconds %d: want 1 to %d (default %d)", a.TimeoutSeconds, maxWaitSeconds, defaultWaitSeconds)
	}
	if a.TimeoutSeconds == 0 {
		a.TimeoutSeconds = defaultWaitSeconds
	}
	run, bad := s.findRun("wait_run", call, a.RunID)
	if bad != nil {
		return bad
	}
	timer := time.NewTimer(time.Duration(a.TimeoutSeconds) * time.Second)
	defer timer.Stop()
	call.hold(ctx, run, timer.C)
	return runOutcome(run)
}

// toolListRuns lists the caller's runs, through GET /v1/runs's parsing of
// its parameters.
func (s *mcpServer) toolListRuns(_ context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	var a struct {
		Q      string `json:"q"`
		Status string `json:"status"`
		Limit  int    `json:"limit"`
		Cursor string `json:"cursor"`
	}
	if bad := decodeArgs("list_runs", args, &a); bad != nil {
		return bad
	}
	v := url.Values{}
	for k, val := range map[string]string{"q": a.Q, "status": a.Status, "cursor": a.Cursor} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if a.Limit != 0 {
		v.Set("limit", strconv.Itoa(a.Limit))
	}
	lq, err := parseListQuery(v)
	var filter runFilter
	if err == nil {
		filter, err = parseRunFilter(v)
	}
	if err != nil {
		return mcpToolError("tool list_runs: %v", err)
	}
	runs, next := s.api.runSummaries(call.info, lq, filter)
	body := s.api.globalSecrets.load().marshal(pageBody("runs", runs, next), true)
	return &mcpToolResult{Content: []contentBlock{{Type: "text", Text: string(body)}}, StructuredContent: json.RawMessage(body)}
}

// toolCancelRun cancels a run.
func (s *mcpServer) toolCancelRun(ctx context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	var a runIDArgs
	if bad := decodeArgs("cancel_run", args, &a); bad != nil {
		return bad
	}
	run, bad := s.findRun("cancel_run", call, a.RunID)
	if bad != nil {
		return bad
	}
	status, err := s.api.cancelAndWait(ctx, run, call.info)
	if err != nil {
		return mcpToolError("tool cancel_run: %v", err)
	}
	return &mcpToolResult{Content: []contentBlock{{Type: "text", Text: fmt.Sprintf("run %s: %s", run.id, status)}},
		StructuredContent: map[string]string{"run_id": run.id, "status": status}}
}

// toolDecideApproval decides an open approval.
func (s *mcpServer) toolDecideApproval(_ context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	var a struct {
		RunID      string `json:"run_id"`
		ApprovalID string `json:"approval_id"`
		approvalAnswer
	}
	if bad := decodeArgs("decide_approval", args, &a); bad != nil {
		return bad
	}
	run, bad := s.findRun("decide_approval", call, a.RunID)
	if bad != nil {
		return bad
	}
	if err := s.api.deliverApproval(run, a.ApprovalID, a.approvalAnswer, call.info); err != nil {
		return mcpToolError("tool decide_approval: %v", err)
	}
	return &mcpToolResult{Content: []contentBlock{{Type: "text", Text: fmt.Sprintf("run %s: approval %s: %s", run.id, a.ApprovalID, a.Decision)}},
		StructuredContent: map[string]string{"run_id": run.id, "approval_id": a.ApprovalID, "decision": a.Decision}}
}

// toolAnswerInput answers an open question.
func (s *mcpServer) toolAnswerInput(_ context.Context, call *mcpCall, args json.RawMessage) *mcpToolResult {
	var a struct {
		RunID     string `json:"run_id"`
		RequestID string `json:"request_id"`
		inputAnswer
	}
	if bad := decodeArgs("answer_input", args, &a); bad != nil {
		return bad
	}
	run, bad := s.findRun("answer_input", call, a.RunID)
	if bad != nil {
		return bad
	}
	res, err := s.api.deliverInput(run, a.RequestID, a.inputAnswer, call.info)
	if err != nil {
		return mcpToolError("tool answer_input: %v", err)
	}
	return &mcpToolResult{Content: []contentBlock{{Type: "text", Text: fmt.Sprintf("run %s: input request %s: %s", run.id, a.RequestID, res.Action)}},
		StructuredContent: map[string]any{"run_id": run.id, "request_id": a.RequestID, "action": res.Action, "content": res.Content}}
}

// runOutcome returns a run as run, start_run and wait_run answer it: the
// output once it completed, the error (isError) once it failed or was
// cancelled, else its status and what it waits for; run_id,
// conversation_id and status in structuredContent. Everything is
// redacted.
func runOutcome(run *run) *mcpToolResult {
	v := run.view()
	rd := run.redactor()
	structured := map[string]any{"run_id": run.id, "conversation_id": run.conversationID(), "status": v.Status}
	res := &mcpToolResult{StructuredContent: structured}
	var text string
	switch {
	case v.Status == runCompleted:
		text = rd.redact(v.Output)
	case isTerminal(v.Status):
		res.IsError = true
		text = fmt.Sprintf("run %s %s: %s", run.id, v.Status, rd.redact(v.Error))
		structured["error"] = rd.redact(v.Error)
	default:
		text = fmt.Sprintf("run %s is %s", run.id, v.Status)
		for _, a := range v.Approvals {
			text += fmt.Sprintf("; approval %s waits for a decision on tool %s (decide_approval)", a.ID, a.Tool)
		}
		for _, q := range v.InputRequests {
			text += fmt.Sprintf("; input request %s waits for an answer: %s (answer_input)", q.ID, rd.redact(q.Message))
		}
	}
	res.Content = []contentBlock{{Type: "text", Text: text}}
	return res
}

// hold waits until run ends, ctx is done, deadline fires (nil: never) or
// harnessd shuts down. Meanwhile, on the call's stream, the run's events
// go out as notifications/progress when the client gave a progress token,
// and its approvals and questions as elicitation/create when the client
// takes elicitation.
func (call *mcpCall) hold(ctx context.Context, run *run, deadline <-chan time.Time) {
	var cursor followCursor
	defer run.unfollow(&cursor)
	askCtx, stopAsking := context.WithCancel(ctx)
	var asking sync.WaitGroup
	defer func() {
		stopAsking()
		asking.Wait()
	}()
	asked := map[string]bool{}
	progress := 0
	for {
		// Read before following: the frames then hold every event of a
		// run that has ended, and the last ones go out before the answer.
		ended := isClosed(run.done)
		frames, _, changed := run.follow(&cursor)
		if call.progressToken != nil && call.stream != nil {
			for _, f := range frames {
				if note := runProgressNote(f.ev); note != "" {
					progress++
					call.send("notifications/progress", map[string]any{"progressToken": call.progressToken, "progress": progress, "message": note})
				}
			}
		}
		if ended {
			return
		}
		if call.elicitation && call.stream != nil && run.input != nil && run.input.Queue != nil {
			questions, approvals := run.input.Queue.snapshot()
			for _, req := range append(questions, approvals...) {
				if asked[req.ID] {
					continue
				}
				asked[req.ID] = true
				asking.Add(1)
				// Owned by hold; ends when the client answers or hold
				// returns (askCtx).
				go func() {
					defer asking.Done()
					call.elicit(askCtx, run, req)
				}()
			}
		}
		if call.rounds && len(openRequests(run)) > 0 {
			return // the client is asked in an input-required round
		}
		select {
		case <-run.done: // once more, for what the run said last
		case <-changed:
		case <-ctx.Done():
			return
		case <-deadline:
			return
		case <-call.srv.api.stopping:
			return
		}
	}
}

// runProgressNote returns what a run event says as a progress message, or ""
// for events that say nothing to a host. It reads the event as encoded
// (redacted).
func runProgressNote(ev runEvent) string {
	var e struct {
		Data struct {
			Text       string `json:"text"`
			Name       string `json:"name"`
			IsError    bool   `json:"is_error"`
			Tool       string `json:"tool"`
			ApprovalID string `json:"approval_id"`
			Message    string `json:"message"`
		} `json:"data"`
	}
	if json.Unmarshal(ev.encoded, &e) != nil {
		return ""
	}
	d := e.Data
	switch ev.Type {
	case evModelDelta:
		return d.Text
	case evToolCallStarted:
		return "calling tool " + d.Name
	case evToolCallCompleted:
		if d.IsError {
			return "tool " + d.Name + " failed"
		}
		return "tool " + d.Name + " done"
	case evToolCallProgress:
		return d.Message
	case evApprovalRequested:
		return fmt.Sprintf("waiting for approval %s of tool %s", d.ApprovalID, d.Tool)
	case evInputRequested:
		return "a server asks: " + d.Message
	}
	return ""
}

// The schema of the elicitation that asks for an approval.
var approvalElicitSchema = json.RawMessage(`{"type": "object", "properties": {
	"decision": {"type": "string", "enum": ["approve", "deny"], "title": "Decision", "description": "approve runs the tool call; deny refuses it"},
	"reason": {"type": "string", "title": "Reason", "description": "Why (optional)"}}, "required": ["decision"]}`)

// elicit asks the client about one open approval or question of run and
// delivers its answer as the API would (by the call's key). A refusal or
// cancellation by the client, or an answer the request does not take,
// leaves the approval or question open for the API and the console.
func (call *mcpCall) elicit(ctx context.Context, run *run, req inputRequest) {
	if req.approval == nil && req.Mode != "" && req.Mode != "form" {
		return // a URL elicitation: left for the API and the console
	}
	raw, err := call.ask(ctx, "elicitation/create", elicitParams(run, req))
	if err != nil || raw == nil {
		return
	}
	var answer inputAnswer
	if json.Unmarshal(raw, &answer) != nil {
		return
	}
	if err := call.srv.answerRequest(run, req, answer, call.info); err != nil {
		call.srv.api.logger.Info("mcp elicitation answer not delivered", "run", run.id, "request", req.ID, "err", err)
	}
}

// elicitParams returns the params of the elicitation/create that asks a
// client about req, an open approval or question of run: an approval as a
// form with the tool and its arguments, a question as its server asked it.
// Everything is redacted.
func elicitParams(run *run, req inputRequest) map[string]any {
	rd := run.redactor()
	if req.approval != nil {
		v := req.approvalView()
		return map[string]any{"mode": "form", "requestedSchema": approvalElicitSchema,
			"message": rd.redact(fmt.Sprintf("harnessd run %s asks to call tool %s with arguments %s. Approve?", run.id, v.Tool, v.Arguments))}
	}
	if req.Mode != "" && req.Mode != "form" {
		return map[string]any{"mode": req.Mode, "message": rd.redact(req.Message), "url": req.URL, "elicitationId": req.ElicitationID}
	}
	return map[string]any{"mode": "form", "message": rd.redact(req.Message), "requestedSchema": req.RequestedSchema}
}

// answerRequest delivers a client's answer to an elicitation elicitParams
// made for req, as the API would (by info's key): for an approval, accept
// carries the decision, decline denies, and cancel leaves it open; for a
// question, the answer as it is. The error says why it was not taken.
func (s *mcpServer) answerRequest(run *run, req inputRequest, answer inputAnswer, info authInfo) error {
	if req.approval == nil {
		_, err := s.api.deliverInput(run, req.ID, answer, info)
		return err
	}
	decision := approvalAnswer{Decision: decisionDeny, Reason: "declined by the MCP client"}
	switch answer.Action {
	case actionAccept:
		decision = approvalAnswer{}
		json.Unmarshal(answer.Content["decision"], &decision.Decision)
		json.Unmarshal(answer.Content["reason"], &decision.Reason)
	case actionCancel:
		return nil
	}
	return s.api.deliverApproval(run, req.ID, decision, info)
}
