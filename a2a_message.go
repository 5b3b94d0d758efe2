package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// This file holds SendMessage: a message without a taskId starts a run
// (continuing the conversation its contextId names), one with the taskId
// of a run waiting on an approval or a server's question answers it; and
// the wait for a task to end or to need input.

// An a2aSendParams is the params of SendMessage and SendStreamingMessage.
type a2aSendParams struct {
	Tenant        string                     `json:"tenant,omitempty"`
	Message       *a2aMessage                `json:"message"`
	Configuration *a2aSendConfig             `json:"configuration,omitempty"`
	Metadata      map[string]json.RawMessage `json:"metadata,omitempty"`
}

// An a2aSendConfig is SendMessage's configuration.
type a2aSendConfig struct {
	AcceptedOutputModes        []string       `json:"acceptedOutputModes,omitempty"`
	TaskPushNotificationConfig *a2aPushConfig `json:"taskPushNotificationConfig,omitempty"`
	HistoryLength              *int           `json:"historyLength,omitempty"`
	ReturnImmediately          bool           `json:"returnImmediately,omitempty"`
}

// An a2aRunOptions is what a message's request may set of the run it
// starts, under the "harnessd" key of the request's metadata (or of the
// message's): the fields of POST /v1/runs that are not the prompt.
type a2aRunOptions struct {
	Profile      string  `json:"profile,omitempty"`
	Model        string  `json:"model,omitempty"`
	SystemPrompt string  `json:"system_prompt,omitempty"`
	MaxSteps     int     `json:"max_steps,omitempty"`
	Approval     string  `json:"approval,omitempty"`
	Interactive  *bool   `json:"interactive,omitempty"`
	InputTimeout string  `json:"input_timeout,omitempty"`
	MaxTokens    int64   `json:"max_tokens,omitempty"`
	MaxCostUSD   float64 `json:"max_cost_usd,omitempty"`
	MaxDuration  string  `json:"max_duration,omitempty"`
}

// a2aMetadataKey is the metadata key of a2aRunOptions.
const a2aMetadataKey = "harnessd"

// sendMessage serves SendMessage: it starts or answers a task (send), then
// answers the task at once with returnImmediately, else once it has ended
// or needs input.
func (g *a2aAgent) sendMessage(_ http.ResponseWriter, r *http.Request, info authInfo, _, params json.RawMessage) (any, error) {
	run, p, err := g.send("SendMessage", params, info, nil)
	if err != nil {
		return nil, err
	}
	if p.Configuration == nil || !p.Configuration.ReturnImmediately {
		g.waitSettled(r.Context(), run)
	}
	var hl *int
	if p.Configuration != nil {
		hl = p.Configuration.HistoryLength
	}
	t, err := taskResult(run, hl)
	if err != nil {
		return nil, err
	}
	return map[string]json.RawMessage{"task": t}, nil
}

// send decodes the params of a send method and starts the run the message
// asks for, or delivers its answer to the task it names. It returns the
// task's run and the params. A run it starts is followed at cur (nil:
// not followed) from before it begins.
func (g *a2aAgent) send(method string, params json.RawMessage, info authInfo, cur *followCursor) (*run, a2aSendParams, error) {
	var p a2aSendParams
	if err := decodeParams(method, params, &p); err != nil {
		return nil, p, err
	}
	if p.Message == nil {
		return nil, p, rpcErrorf(codeInvalidParams, "message: missing: send {\"message\": {\"messageId\", \"role\": \"ROLE_USER\", \"parts\": [{\"text\": \"...\"}]}}")
	}
	m := p.Message
	if m.Role != roleA2AUser && m.Role != "" {
		return nil, p, rpcErrorf(codeInvalidParams, "message.role %q: want %s", m.Role, roleA2AUser)
	}
	if len(m.Parts) == 0 {
		return nil, p, rpcErrorf(codeInvalidParams, "message.parts: empty: send at least one text part")
	}
	for i, part := range m.Parts {
		if part.URL != "" || part.Raw != "" {
			return nil, p, rpcErrorf(a2aContentTypeNotSupported, "message.parts[%d]: file parts (url, raw) are not supported: send text or data parts", i)
		}
	}
	var run *run
	var err error
	if m.TaskID != "" {
		run, err = g.answer(m, info)
	} else {
		run, err = g.start(p, info, cur)
	}
	if err != nil {
		return nil, p, err
	}
	if p.Configuration != nil && p.Configuration.TaskPushNotificationConfig != nil {
		cfg := *p.Configuration.TaskPushNotificationConfig
		cfg.TaskID = run.id
		if _, err := g.push.create(g, run, cfg, info); err != nil {
			return run, p, err
		}
	}
	return run, p, nil
}

// start starts the run a message without a taskId asks for: its text
// parts joined are the prompt (a data part goes as its JSON), its
// contextId the conversation it continues, its request's metadata
// "harnessd" object the run's options. The run is interactive unless the
// options say otherwise, so that servers' questions reach the A2A client.
func (g *a2aAgent) start(p a2aSendParams, info authInfo, cur *followCursor) (*run, error) {
	m := p.Message
	var prompt []string
	for _, part := range m.Parts {
		switch {
		case part.Text != nil:
			prompt = append(prompt, *part.Text)
		case len(part.Data) > 0:
			prompt = append(prompt, string(part.Data))
		}
	}
	text := strings.TrimSpace(strings.Join(prompt, "\n"))
	if text == "" {
		return nil, rpcErrorf(codeInvalidParams, "message.parts: no text: the text parts are the run's prompt")
	}
	opts, err := runOptionsOf(p)
	if err != nil {
		return nil, err
	}
	interactive := opts.Interactive == nil || *opts.Interactive
	req := runRequest{Prompt: text, Profile: opts.Profile, Model: opts.Model, SystemPrompt: opts.SystemPrompt, MaxSteps: opts.MaxSteps,
		Approval: opts.Approval, Interactive: interactive, InputTimeout: opts.InputTimeout, MaxTokens: opts.MaxTokens,
		MaxCostUSD: opts.MaxCostUSD, MaxDuration: opts.MaxDuration, ConversationID: m.ContextID}
	if req.Profile == a2aDefaultSkill {
		req.Profile = ""
	}
	if m.ContextID != "" && g.api.visibleConversation(m.ContextID, info) == nil {
		return nil, rpcErrorf(codeInvalidParams, "message.contextId %q: no such context (contexts are conversations: GET /v1/conversations lists this key's); omit it to start a new one", m.ContextID)
	}
	run, err := g.api.startRun(req, info, cur)
	if err != nil {
		return nil, startRPCError(err)
	}
	return run, nil
}

// runOptionsOf returns the run options of a send's metadata (the
// request's, else the message's), decoded strictly.
func runOptionsOf(p a2aSendParams) (a2aRunOptions, error) {
	var opts a2aRunOptions
	raw, where := p.Metadata[a2aMetadataKey], "metadata"
	if raw == nil && len(p.Message.Metadata) > 0 {
		var md map[string]json.RawMessage
		if json.Unmarshal(p.Message.Metadata, &md) == nil {
			raw, where = md[a2aMetadataKey], "message.metadata"
		}
	}
	if raw == nil {
		return opts, nil
	}
	if err := decodeStrict(bytes.NewReader(raw), &opts); err != nil {
		return opts, rpcErrorf(codeInvalidParams, "%s.%s: %v (it takes profile, model, system_prompt, max_steps, approval, interactive, input_timeout, max_tokens, max_cost_usd, max_duration)",
			where, a2aMetadataKey, strings.TrimPrefix(err.Error(), "json: "))
	}
	return opts, nil
}

// startRPCError returns the JSON-RPC error of runManager.start's err:
// what the caller got wrong is -32602, the rest -32603 with the reason
// (a full queue, shutdown, a store that cannot write).
func startRPCError(err error) error {
	var reqErr *requestError
	var notFound *conversationNotFoundError
	var otherTenant *conversationTenantError
	var busy *conversationBusyError
	switch {
	case errors.As(err, &otherTenant):
		return rpcErrorf(codeInvalidParams, "message.contextId: %v", (&conversationNotFoundError{id: otherTenant.conversation}).Error())
	case errors.As(err, &notFound):
		return rpcErrorf(codeInvalidParams, "message.contextId: %v", err)
	case errors.As(err, &busy):
		return rpcErrorf(codeInvalidParams, "message.contextId: %v; send the message with that task's taskId to answer it, or wait for it to end", err)
	case errors.As(err, &reqErr):
		return rpcErrorf(codeInvalidParams, "start run: %v", err)
	}
	return rpcErrorf(codeInternalError, "start run: %v", err)
}

// answer delivers a message naming a task to its open approval or
// question. An approval takes text "approve" or "deny" ("deny: reason"),
// or a data part {"approve": bool, "reason"?, "approval_id"?}; a question
// takes a data part {"action"?, "content"?, "request_id"?} or a data part
// that is the content itself, or text "decline" or "cancel". The oldest
// open one is answered unless the data part names another.
func (g *a2aAgent) answer(m *a2aMessage, info authInfo) (*run, error) {
	run, err := g.findTask("message.taskId", m.TaskID, info)
	if err != nil {
		return nil, err
	}
	v := run.view()
	if m.ContextID != "" && m.ContextID != v.ConversationID {
		return nil, rpcErrorf(codeInvalidParams, "message.contextId %q: task %q belongs to context %q: send its own or none", m.ContextID, run.id, v.ConversationID)
	}
	if isTerminal(v.Status) {
		return nil, rpcErrorf(a2aUnsupportedOperation, "task %q: already %s and takes no more messages; send the message with contextId %q and no taskId to continue the conversation in a new task", run.id, v.Status, v.ConversationID)
	}
	text, data := messageAnswer(m)
	by := info.key
	if by == "" {
		by = resolvedByCaller
	}
	switch {
	case len(v.Approvals) > 0:
		ans, id, err := approvalAnswerOf(text, data, v.Approvals[0].ID)
		if err != nil {
			return nil, err
		}
		if err := run.input.Queue.answerApproval(id, ans, by); err != nil {
			return nil, answerRPCError(run, "approval", id, err)
		}
		g.api.logger.Info("run approval answered", "run", run.id, "approval", id, "decision", ans.Decision, "key", info.key, "via", "a2a")
	case len(v.InputRequests) > 0:
		ans, id, err := inputAnswerOf(text, data, v.InputRequests[0].ID)
		if err != nil {
			return nil, err
		}
		if _, err := run.input.Queue.answer(id, ans); err != nil {
			return nil, answerRPCError(run, "input request", id, err)
		}
		g.api.logger.Info("run input answered", "run", run.id, "request", id, "action", ans.Action, "key", info.key, "via", "a2a")
	default:
		return nil, rpcErrorf(a2aUnsupportedOperation, "task %q: %s and waiting for no input: follow it (GetTask, SubscribeToTask) or cancel it (CancelTask); to add to the conversation, send a message with contextId %q and no taskId once it has ended",
			run.id, a2aState(v.Status), v.ConversationID)
	}
	return run, nil
}

// answerRPCError returns the error of an answer the queue refused.
func answerRPCError(run *run, what, id string, err error) error {
	if errors.Is(err, errInputNotFound) {
		return rpcErrorf(a2aUnsupportedOperation, "task %q: %s %q: no longer open (answered, timed out or the run ended): GetTask shows what it waits for now", run.id, what, id)
	}
	return rpcErrorf(codeInvalidParams, "task %q: %s %q: %v", run.id, what, id, err)
}

// messageAnswer returns a message's text parts joined and trimmed, and its
// first data part (nil for none).
func messageAnswer(m *a2aMessage) (string, json.RawMessage) {
	var text []string
	var data json.RawMessage
	for _, part := range m.Parts {
		switch {
		case part.Text != nil:
			text = append(text, *part.Text)
		case len(part.Data) > 0 && data == nil:
			data = part.Data
		}
	}
	return strings.TrimSpace(strings.Join(text, " ")), data
}

// approvalAnswerOf returns the decision a message gives an approval and
// the approval's id (open, the oldest open one, unless the data part
// names another).
func approvalAnswerOf(text string, data json.RawMessage, open string) (approvalAnswer, string, error) {
	if data != nil {
		var d struct {
			Approve    *bool  `json:"approve"`
			Reason     string `json:"reason"`
			ApprovalID string `json:"approval_id"`
		}
		if err := json.Unmarshal(data, &d); err != nil || d.Approve == nil {
			return approvalAnswer{}, "", rpcErrorf(codeInvalidParams, "message.parts: the data part answering an approval must be {\"approve\": true|false, \"reason\"?: \"...\", \"approval_id\"?: \"...\"}")
		}
		ans := approvalAnswer{Decision: decisionDeny, Reason: d.Reason}
		if *d.Approve {
			ans.Decision = decisionApprove
		}
		if d.ApprovalID != "" {
			open = d.ApprovalID
		}
		return ans, open, nil
	}
	word, reason, _ := strings.Cut(text, ":")
	switch strings.ToLower(strings.TrimSpace(word)) {
	case "approve", "approved", "yes":
		return approvalAnswer{Decision: decisionApprove, Reason: strings.TrimSpace(reason)}, open, nil
	case "deny", "denied", "no":
		return approvalAnswer{Decision: decisionDeny, Reason: strings.TrimSpace(reason)}, open, nil
	}
	return approvalAnswer{}, "", rpcErrorf(codeInvalidParams, "message.parts: text %q does not answer the approval: send \"approve\" or \"deny\" (\"deny: reason\"), or a data part {\"approve\": true|false}", shortText(text, 80))
}

// inputAnswerOf returns the answer a message gives a server's question and
// the question's id (open unless the data part names another).
func inputAnswerOf(text string, data json.RawMessage, open string) (inputAnswer, string, error) {
	if data != nil {
		var d struct {
			Action    string                     `json:"action"`
			Content   map[string]json.RawMessage `json:"content"`
			RequestID string                     `json:"request_id"`
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil {
			return inputAnswer{}, "", rpcErrorf(codeInvalidParams, "message.parts: the data part answering a question must be an object: the content, or {\"action\", \"content\"}")
		}
		_, hasAction := fields["action"]
		_, hasContent := fields["content"]
		if !hasAction && !hasContent {
			return inputAnswer{Action: actionAccept, Content: fields}, open, nil
		}
		if err := json.Unmarshal(data, &d); err != nil {
			return inputAnswer{}, "", rpcErrorf(codeInvalidParams, "message.parts: data part: %v", err)
		}
		if d.Action == "" {
			d.Action = actionAccept
		}
		if d.RequestID != "" {
			open = d.RequestID
		}
		return inputAnswer{Action: d.Action, Content: d.Content}, open, nil
	}
	switch w := strings.ToLower(text); w {
	case actionDecline, actionCancel:
		return inputAnswer{Action: w}, open, nil
	}
	return inputAnswer{}, "", rpcErrorf(codeInvalidParams, "message.parts: text %q does not answer the question: send a data part with the content it asks for, or the text \"decline\" or \"cancel\"", shortText(text, 80))
}

// waitSettled waits until run has ended or needs input, ctx is done, or
// harnessd shuts down. It follows the run's events, as GET
// /v1/runs/{id}/events does: each wakes it to look at the run again.
func (g *a2aAgent) waitSettled(ctx context.Context, run *run) {
	var cur followCursor
	defer run.unfollow(&cur)
	for {
		_, _, changed := run.follow(&cur)
		if st := a2aState(run.view().Status); a2aTerminal(st) || st == taskInputRequired {
			return
		}
		if !g.api.waitRun(ctx, run, changed, nil, nil) {
			return
		}
	}
}
