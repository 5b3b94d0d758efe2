package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"time"
)

// This file holds the answers to what a server asks of its client in the
// middle of a call: elicitation (form and URL modes) and sampling. An
// inputPolicy says how one run (or the process, outside runs) answers; it
// is the client's inputAnswerer (client_input.go), which applies it to one
// request, whether the request came as a server request or, later, inside
// an input-required result. The roots are answered by the client itself
// (client_roots.go); a run's wiring to its policy is in run_input.go.

// Elicitation actions, as the specification and our API name them.
const (
	actionAccept  = "accept"
	actionDecline = "decline"
	actionCancel  = "cancel"
)

// Elicitation modes.
const (
	modeForm = "form"
	modeURL  = "url"
)

// Input limits.
const (
	defaultInputTimeout = 10 * time.Minute
	// maxOpenInputs bounds the open requests of one run: a server asking
	// more at once is declined.
	maxOpenInputs = 32
)

// An elicitRequest is the params of elicitation/create.
type elicitRequest struct {
	Mode            string          `json:"mode,omitempty"`
	Message         string          `json:"message"`
	RequestedSchema json.RawMessage `json:"requestedSchema,omitempty"`
	URL             string          `json:"url,omitempty"`
	ElicitationID   string          `json:"elicitationId,omitempty"`
}

// An elicitResult is the answer to elicitation/create.
type elicitResult struct {
	Action  string         `json:"action"`
	Content map[string]any `json:"content,omitempty"`
}

// An inputPolicy says how the server requests of one run, or of the
// process outside runs, are answered. Its fields are set before use and
// not changed after; it is safe for concurrent use.
type inputPolicy struct {
	// Queue, when set, holds the run's open approvals (always) and, when
	// Interactive, its servers' questions (elicitations) for the API's
	// caller.
	Queue *inputQueue
	// Interactive lets elicitations wait in Queue; without it (or
	// without Queue) and without Prompt they are declined.
	Interactive bool
	// Timeout bounds the wait for an answer to a question; zero means
	// defaultInputTimeout.
	Timeout time.Duration
	// ApprovalTimeout bounds the wait for an approval, and
	// ApprovalTimeoutSetting names where it came from (approval_timeout
	// or input_timeout); zero means defaultApprovalTimeout.
	ApprovalTimeout        time.Duration
	ApprovalTimeoutSetting string
	// Prompt asks a person at a terminal (mcp call); used when Queue is nil.
	Prompt func(ctx context.Context, server string, req elicitRequest, schema *elicitSchema) (elicitResult, error)
	// DeclineReason says why elicitations are declined when there is
	// neither Queue nor Prompt.
	DeclineReason string
	// Sampler serves sampling/createMessage; nil refuses it with
	// NoSampling.
	Sampler *samplingModel
	// NoSampling says why sampling is refused and what to set.
	NoSampling string
	// Progress shows the progress notifications of calls to a person at
	// a terminal (mcp call); nil for none.
	Progress func(server string, note progressParams)
	// Events records what the policy does (the run's history); nil for
	// none.
	Events inputEvents
	// QuestionOpened is told when a question starts waiting in Queue,
	// after its event (the run's webhook); nil for none.
	QuestionOpened func()
	// Logger receives what the policy decides; nil discards it.
	Logger *slog.Logger
	// Outside bounds sampling per server and hour: set on the policy of
	// requests outside any run's call (the daemon's); nil bounds nothing.
	Outside *outsideSamplingBudget

	// declines and refusals throttle the repeated log lines of declined
	// elicitations and refused sampling (input_limits.go).
	declines, refusals logThrottle
	questionsMu        sync.Mutex
	// guards questions: those of input-required results in the run so far
	questions int
}

// An inputEvents records what an inputPolicy does, as events of a run's
// history: the run implements it (runInputEvents, run_input.go). Its
// methods may be called concurrently.
type inputEvents interface {
	// inputRequested: question r of a server waits in the queue.
	inputRequested(r *inputRequest)
	// inputDeclined: a question was declined at once, for reason.
	inputDeclined(server, mode, message, reason string)
	// inputAnswered: question id of server got action, given by by (a
	// key's name, or how it ended).
	inputAnswered(id, server, action, by string)
	// inputCompleted: server says the URL elicitation elicitationID is done.
	inputCompleted(server, elicitationID string)
	// samplingRefused: server's sampling request was refused, saying reason.
	samplingRefused(server, reason string)
	// samplingRequested: server asks model for an answer to messages
	// messages with tools tools, at most maxTokens long.
	samplingRequested(server, model string, messages, tools, maxTokens int)
	// samplingCompleted: the model answered server's request with resp, or
	// it failed with err, after elapsed.
	samplingCompleted(server string, resp *modelResponse, err error, elapsed time.Duration)
}

// noInputEvents records nothing.
type noInputEvents struct{}

func (noInputEvents) inputRequested(*inputRequest)                                   {}
func (noInputEvents) inputDeclined(string, string, string, string)                   {}
func (noInputEvents) inputAnswered(string, string, string, string)                   {}
func (noInputEvents) inputCompleted(string, string)                                  {}
func (noInputEvents) samplingRefused(string, string)                                 {}
func (noInputEvents) samplingRequested(string, string, int, int, int)                {}
func (noInputEvents) samplingCompleted(string, *modelResponse, error, time.Duration) {}

// events returns what records the policy's events: Events, or
// noInputEvents when it is nil.
func (p *inputPolicy) events() inputEvents {
	if p.Events == nil {
		return noInputEvents{}
	}
	return p.Events
}

// logger returns the policy's logger (see orDiscard).
func (p *inputPolicy) logger() *slog.Logger {
	return orDiscard(p.Logger)
}

// answerTimeout returns how long a queued question waits for
// an answer: Timeout, or defaultInputTimeout when it is zero.
func (p *inputPolicy) answerTimeout() time.Duration {
	if p.Timeout <= 0 {
		return defaultInputTimeout
	}
	return p.Timeout
}

// approvalTimeout returns how long a queued approval waits for a
// decision, and the setting that says so.
func (p *inputPolicy) approvalTimeout() (time.Duration, string) {
	if p.ApprovalTimeout <= 0 {
		return defaultApprovalTimeout, "approval_timeout"
	}
	return p.ApprovalTimeout, p.ApprovalTimeoutSetting
}

// orNoRun returns p, or for a nil p the policy of no run: elicitations
// declined and sampling refused.
func (p *inputPolicy) orNoRun() *inputPolicy {
	if p == nil {
		return &inputPolicy{DeclineReason: "no run is asking", NoSampling: "no run is asking"}
	}
	return p
}

// answerInput answers one server request for input under policy p (nil
// declines elicitations and refuses sampling): elicitation/create and
// sampling/createMessage. handled is false for other methods. It may
// block until the request is answered; ctx bounds it (the run's context,
// or the session's).
func (p *inputPolicy) answerInput(ctx context.Context, server serverConfig, method string, params json.RawMessage) (result any, rpcErr *rpcError, handled bool) {
	p = p.orNoRun()
	switch method {
	case "elicitation/create":
		var req elicitRequest
		if err := json.Unmarshal(params, &req); err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "elicitation/create: " + err.Error()}, true
		}
		res, err := p.elicit(ctx, server.Name, req)
		if err != nil {
			return nil, &rpcError{Code: codeInvalidParams, Message: "elicitation/create: " + err.Error()}, true
		}
		return res, nil, true
	case "sampling/createMessage":
		res, rerr := p.sample(ctx, server, params)
		if rerr != nil {
			return nil, rerr, true
		}
		return res, nil, true
	}
	return nil, nil, false
}

// acceptURLElicitation asks one URL-mode elicitation that a call's
// URL-elicitation-required error of server names, and reports whether it
// was accepted; a malformed one is not.
func (p *inputPolicy) acceptURLElicitation(ctx context.Context, server string, params json.RawMessage) bool {
	var req elicitRequest
	if json.Unmarshal(params, &req) != nil {
		return false
	}
	req.Mode = modeURL
	res, err := p.orNoRun().elicit(ctx, server, req)
	return err == nil && res.Action == actionAccept
}

// elicitationCompleted records a server's notice that a URL-mode
// elicitation was completed, as an event.
func (p *inputPolicy) elicitationCompleted(server, id string) {
	p.orNoRun().events().inputCompleted(server, id)
}

// callProgress shows a progress notification of a call of server through
// Progress, when set.
func (p *inputPolicy) callProgress(server string, note progressParams) {
	if p != nil && p.Progress != nil {
		p.Progress(server, note)
	}
}

// elicit answers one elicitation: by the caller of an interactive run,
// by a person at a terminal, or declined. An error is a malformed request.
func (p *inputPolicy) elicit(ctx context.Context, server string, req elicitRequest) (elicitResult, error) {
	if req.Mode == "" {
		req.Mode = modeForm
	}
	ir := &inputRequest{Server: server, Mode: req.Mode, Message: req.Message}
	switch req.Mode {
	case modeForm:
		schema, err := parseElicitSchema(req.RequestedSchema)
		if err != nil {
			return elicitResult{}, err
		}
		ir.schema = schema
		ir.RequestedSchema = req.RequestedSchema
	case modeURL:
		u, err := url.Parse(req.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") {
			return elicitResult{}, fmt.Errorf("url %q: want an http or https URL", req.URL)
		}
		ir.URL = req.URL
		ir.ElicitationID = req.ElicitationID
	default:
		return elicitResult{}, fmt.Errorf("mode %q: want form or url", req.Mode)
	}
	log := p.logger().With("server", server, "mode", req.Mode)
	switch {
	case p.Queue != nil && p.Interactive:
		res, how := p.Queue.ask(ctx, ir, p.answerTimeout(), func(r *inputRequest) {
			p.events().inputRequested(r)
			log.Info("input requested", "id", r.ID)
			if p.QuestionOpened != nil {
				p.QuestionOpened()
			}
		})
		p.events().inputAnswered(ir.ID, server, res.Action, how)
		log.Info("input answered", "id", ir.ID, "action", res.Action, "by", how)
		return res, nil
	case p.Prompt != nil:
		res, err := p.Prompt(ctx, server, req, ir.schema)
		if err != nil {
			log.Warn("input prompt failed; cancelling", "err", err)
			return elicitResult{Action: actionCancel}, nil
		}
		return res, nil
	}
	reason := p.DeclineReason
	if reason == "" {
		reason = "declined by policy"
	}
	p.events().inputDeclined(server, req.Mode, req.Message, reason)
	if ok, held := p.declines.allow(); ok {
		log.Info("input declined", "reason", reason, "held_back", held)
	}
	return elicitResult{Action: actionDecline}, nil
}

// outsideRunInput is the policy of servers' requests outside any run (a
// global server at start-up, between runs, mcp call): elicitations are
// declined and logged; sampling is served by the configured default model
// when there is one (or one of its sampling_models a request's hints
// pick), else refused saying what to set.
func outsideRunInput(model modelSettings, getenv func(string) (string, bool), logger *slog.Logger) *inputPolicy {
	spec := model.spec()
	p := &inputPolicy{
		DeclineReason: "no run is asking: requests outside a run are declined",
		NoSampling:    "no run is asking and no default model is configured: set HARNESS_MODEL or [model] in config.toml",
		Logger:        logger,
	}
	if spec.Provider == "" {
		return p
	}
	provider, err := newModelProvider(spec, getenv, logger)
	if err != nil {
		p.NoSampling = fmt.Sprintf("the default model cannot serve it: %v", err)
		return p
	}
	p.Sampler = &samplingModel{Provider: provider, Spec: spec, MaxTokens: spec.MaxTokens, Models: model.SamplingModels,
		NewProvider: func(spec modelSpec) (modelProvider, error) { return newModelProvider(spec, getenv, logger) }}
	return p
}
