package main

import "time"

// This file holds a run's wiring to the input layer: its input policy
// (its queue of approvals, questions asked or declined, its sampler), its
// open input requests and the
// waiting_input and waiting_approval statuses they bring.

// setupInput validates the run request's input fields (input_timeout,
// roots) and gives the run its policy: every run queues its approvals for
// the API's caller, waiting up to input_timeout when the request sets it,
// else approval_timeout (limits'); an interactive run queues elicitations
// too, any other declines them; sampling is
// served by the run's own model, or one of models a request's hints pick,
// within the run's caps (limits' sampling fields, zero for the defaults).
// newProvider builds a picked model's provider. The scope's servers
// answer by it too. Errors are *requestError.
func (r *run) setupInput(limits runLimits, models []modelSpec, newProvider func(modelSpec) (modelProvider, error)) error {
	timeout := defaultInputTimeout
	approvalTimeout, approvalSetting := limits.ApprovalTimeout, "approval_timeout"
	if r.req.InputTimeout != "" {
		d, err := time.ParseDuration(r.req.InputTimeout)
		if err != nil || d <= 0 || d > maxInputTimeout {
			return badRequest("input_timeout", "%q: want a duration from 1s to %s, like \"10m\"", r.req.InputTimeout, maxInputTimeout)
		}
		timeout = d
		approvalTimeout, approvalSetting = d, "input_timeout"
	}
	if err := validateRoots("roots", r.req.Roots); err != nil {
		return invalidRequest(err)
	}
	r.scope.roots = r.req.Roots
	p := &inputPolicy{
		Queue:                  &inputQueue{},
		Interactive:            r.req.Interactive,
		Timeout:                timeout,
		ApprovalTimeout:        approvalTimeout,
		ApprovalTimeoutSetting: approvalSetting,
		Sampler: &samplingModel{
			Provider:    r.provider,
			Spec:        r.model,
			Models:      models,
			NewProvider: newProvider,
			Budget:      newSamplingBudget(limits.MaxSamplingRequests, limits.MaxSamplingTokens),
			MaxTokens:   r.model.MaxTokens,
			RunBudget:   r.budget,
			OnUsage: func(u modelUsage) {
				r.mu.Lock()
				r.usage.add(u)
				r.mu.Unlock()
			},
		},
		Events:         runInputEvents(r.emit),
		QuestionOpened: func() { r.env.webhooks.waiting(r, webhookType(runWaitingInput)) },
		Logger:         r.logger,
	}
	if !r.req.Interactive {
		p.DeclineReason = "the run is not interactive (start it with \"interactive\": true to answer)"
	}
	r.input = p
	r.scope.opts.Input = p
	return nil
}

// closeInput cancels the run's open input requests as it ends.
func (r *run) closeInput() {
	if r.input != nil && r.input.Queue != nil {
		r.input.Queue.closeAll()
	}
}

// waitingView sets v's open questions and approvals from one snapshot of
// the run's queue and derives its status from the same snapshot (never
// stored, so it cannot disagree with what the view lists): a running run
// with an open approval is waiting_approval, else with an open question
// waiting_input. Called with mu held; the queue's lock nests inside it.
func (r *run) waitingView(v *runView) {
	v.InputRequests, v.Approvals = []inputRequest{}, []approvalRequest{}
	if r.input == nil || r.input.Queue == nil {
		return
	}
	questions, approvals := r.input.Queue.snapshot()
	v.InputRequests = questions
	for _, req := range approvals {
		v.Approvals = append(v.Approvals, req.approvalView())
	}
	if v.Status != runRunning {
		return
	}
	switch {
	case len(v.Approvals) > 0:
		v.Status = runWaitingApproval
	case len(v.InputRequests) > 0:
		v.Status = runWaitingInput
	}
}

// runInputEvents records the events of a run's input policy by emit, as
// the run's events (their payloads are run_event.go's).
type runInputEvents func(typ string, data any)

func (emit runInputEvents) inputRequested(r *inputRequest) { emit(evInputRequested, r) }

func (emit runInputEvents) inputDeclined(server, mode, message, reason string) {
	emit(evInputRequested, inputDeclinedEvent(server, mode, message, reason))
}

func (emit runInputEvents) inputAnswered(id, server, action, by string) {
	emit(evInputAnswered, inputAnsweredEvent(id, server, action, by))
}

func (emit runInputEvents) inputCompleted(server, elicitationID string) {
	emit(evInputCompleted, inputCompletedEvent(server, elicitationID))
}

func (emit runInputEvents) samplingRefused(server, reason string) {
	emit(evSamplingRefused, samplingRefusedEvent(server, reason))
}

func (emit runInputEvents) samplingRequested(server, model string, messages, tools, maxTokens int) {
	emit(evSamplingRequested, samplingRequestedEvent(server, model, messages, tools, maxTokens))
}

func (emit runInputEvents) samplingCompleted(server string, resp *modelResponse, err error, elapsed time.Duration) {
	emit(evSamplingCompleted, samplingCompletedEvent(server, resp, err, elapsed))
}
