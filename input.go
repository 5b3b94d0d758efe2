package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// This file holds the answers to what a server asks of its client in the
// middle of a call: elicitation (form and URL modes), sampling and roots.
// An inputPolicy says how one run (or the process, outside runs) answers;
// answerInput applies it to one request, whether the request came as a
// server request or, later, inside an input-required result.

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
	maxInputTimeout     = 24 * time.Hour
	// maxOpenInputs bounds the open requests of one run: a server asking
	// more at once is declined.
	maxOpenInputs = 32
)

// codeURLElicitationRequired is the error a server answers a call with when
// the user must first visit a URL (specification 2025-11-25).
const codeURLElicitationRequired = -32042

// clientInputCapabilities are the capabilities harnessd declares for server
// input: elicitation in both modes and sampling with tools. Roots are
// declared by the handshake itself.
func clientInputCapabilities() map[string]any {
	return map[string]any{
		"elicitation": map[string]any{"form": map[string]any{}, "url": map[string]any{}},
		"sampling":    map[string]any{"tools": map[string]any{}},
	}
}

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
	// Queue, when set, holds elicitations for the API's caller (an
	// interactive run). Nil with Prompt nil declines every elicitation.
	Queue *inputQueue
	// Timeout bounds the wait for an answer; zero means
	// defaultInputTimeout.
	Timeout time.Duration
	// Prompt asks a person at a terminal (mcp call); used when Queue is nil.
	Prompt func(ctx context.Context, server string, req elicitRequest, schema *elicitSchema) (elicitResult, error)
	// DeclineReason says why elicitations are declined when there is
	// neither Queue nor Prompt.
	DeclineReason string
	// Sampler serves sampling/createMessage; nil refuses it with
	// NoSampling.
	Sampler *sampler
	// NoSampling says why sampling is refused and what to set.
	NoSampling string
	// Progress shows the progress notifications of calls to a person at
	// a terminal (mcp call); nil for none.
	Progress func(server string, note progressParams)
	// Emit records an event (the run's history); nil for none.
	Emit   func(typ string, data any)
	Logger *slog.Logger
}

func (p *inputPolicy) emit(typ string, data any) {
	if p.Emit != nil {
		p.Emit(typ, data)
	}
}

func (p *inputPolicy) logger() *slog.Logger {
	if p.Logger != nil {
		return p.Logger
	}
	return slog.Default()
}

// answerInput answers one server request for input under policy p (nil
// declines elicitations and refuses sampling): elicitation/create,
// sampling/createMessage and roots/list. defaultRoots are the roots of a
// server whose config and policy name none. handled is false for other
// methods. It may block until the request is answered; ctx bounds it
// (the run's context, or the session's).
func answerInput(ctx context.Context, p *inputPolicy, server serverConfig, defaultRoots []string, method string, params json.RawMessage) (result any, rpcErr *rpcError, handled bool) {
	if p == nil {
		p = &inputPolicy{DeclineReason: "no run is asking", NoSampling: "no run is asking"}
	}
	switch method {
	case "roots/list":
		return map[string]any{"roots": rootsFor(server, defaultRoots)}, nil, true
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
	case p.Queue != nil:
		timeout := p.Timeout
		if timeout <= 0 {
			timeout = defaultInputTimeout
		}
		res, how := p.Queue.ask(ctx, ir, timeout, func(r *inputRequest) {
			p.emit(evInputRequested, r)
			log.Info("input requested", "id", r.ID)
		})
		p.emit(evInputAnswered, map[string]any{"id": ir.ID, "server": server, "action": res.Action, "by": how})
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
	p.emit(evInputRequested, map[string]any{"server": server, "mode": req.Mode, "message": req.Message, "action": actionDecline, "reason": reason})
	log.Info("input declined", "reason", reason)
	return elicitResult{Action: actionDecline}, nil
}

// A root is one entry of roots/list.
type root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// rootsFor returns the roots answered to server: its own (possibly none;
// a run-local server's carry its run's, see runScope.withRunRoots), else
// defaultRoots. They depend on the session only, never on the run whose
// call is in flight: a server that keeps its roots (server-filesystem
// reads them once, and again on notifications/roots/list_changed) would
// otherwise keep one run's directories for the next run's calls.
func rootsFor(server serverConfig, defaultRoots []string) []root {
	dirs := defaultRoots
	if server.Roots != nil {
		dirs = server.Roots
	}
	roots := make([]root, 0, len(dirs))
	for _, dir := range dirs {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		roots = append(roots, root{URI: u.String(), Name: filepath.Base(abs)})
	}
	return roots
}

// rootsConfig returns the session's configuration with the roots it
// answers now: those setRoots gave, else the configured ones.
func (c *conn) rootsConfig() serverConfig {
	cfg := c.cfg
	if dirs := c.roots.Load(); dirs != nil {
		cfg.Roots = *dirs
	}
	return cfg
}

// setRoots changes the roots answered to the server (nil: the default
// roots) and, on the older revisions, tells it with
// notifications/roots/list_changed, so a server that keeps its roots
// (server-filesystem) asks for them again. The current revision has no
// notification for it: a server asks for roots with each request that
// needs them.
func (c *client) setRoots(ctx context.Context, dirs []string) error {
	c.roots.Store(&dirs)
	if isModernVersion(c.protocolVersion()) {
		return nil
	}
	return c.notify(ctx, "notifications/roots/list_changed", nil)
}

// withRunRoots returns cfg with the roots it gets as a server of the
// scope's run: the run's roots, when the run request names any, replace
// what its profile or connect_mcp server configures; a per-run server
// that names its own roots in the same request keeps them.
func (s *runScope) withRunRoots(cfg serverConfig, kind localKind) serverConfig {
	if s.roots == nil || (kind == perRunServer && cfg.Roots != nil) {
		return cfg
	}
	cfg.Roots = s.roots
	return cfg
}

// validateRoots checks the roots of a run request: each the absolute path
// of an existing directory. field names the list in errors; every bad
// entry is reported.
func validateRoots(field string, dirs []string) error {
	var errs []error
	for i, dir := range dirs {
		if dir == "" || !filepath.IsAbs(dir) {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is not an absolute directory path; write the full path", field, i, dir))
			continue
		}
		switch info, err := os.Stat(dir); {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s[%d]: %q does not exist on the daemon's host; roots must be existing directories", field, i, dir))
		case !info.IsDir():
			errs = append(errs, fmt.Errorf("%s[%d]: %q is a file; roots must be directories", field, i, dir))
		}
	}
	return errors.Join(errs...)
}

// An inputCallers tracks which policies have calls in flight on one
// session, so that a server request is answered for the run whose call
// caused it. The zero value is ready; safe for concurrent use.
type inputCallers struct {
	mu sync.Mutex
	// guards calls
	calls map[*inputCall]struct{}
}

// An inputCall is one call in flight, with its run's policy and context.
type inputCall struct {
	policy *inputPolicy
	ctx    context.Context
}

type inputPolicyKey struct{}

// withInputPolicy returns ctx carrying p: calls made under it answer
// server requests by p.
func withInputPolicy(ctx context.Context, p *inputPolicy) context.Context {
	return context.WithValue(ctx, inputPolicyKey{}, p)
}

// enter records a call made under ctx and returns the function that ends
// the record. Calls under a context without a policy are not recorded.
func (t *inputCallers) enter(ctx context.Context) func() {
	p, _ := ctx.Value(inputPolicyKey{}).(*inputPolicy)
	if p == nil {
		return func() {}
	}
	call := &inputCall{policy: p, ctx: ctx}
	t.mu.Lock()
	if t.calls == nil {
		t.calls = map[*inputCall]struct{}{}
	}
	t.calls[call] = struct{}{}
	t.mu.Unlock()
	return func() {
		t.mu.Lock()
		delete(t.calls, call)
		t.mu.Unlock()
	}
}

// current returns the policy and context of the one run with calls in
// flight. A server request carries no link to the call that caused it, so
// with calls of several runs in flight it cannot be told whose it is:
// ambiguous is then true and the policy nil.
func (t *inputCallers) current() (p *inputPolicy, ctx context.Context, ambiguous bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for call := range t.calls {
		switch {
		case p == nil:
			p, ctx = call.policy, call.ctx
		case p != call.policy:
			return nil, nil, true
		}
	}
	return p, ctx, false
}

// mcpLogLevels are the levels of logging/setLevel, most verbose first.
var mcpLogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

// applyLogLevel sends logging/setLevel with the configured log_level, when
// there is one and the server offers logging. A refusal is logged, not
// fatal: the server keeps its own level.
func (c *client) applyLogLevel(ctx context.Context) {
	if c.cfg.LogLevel == "" {
		return
	}
	if c.capabilities().Logging == nil {
		c.logger.Warn("log_level is set but the server does not offer logging; ignoring it", "log_level", c.cfg.LogLevel)
		return
	}
	if _, err := c.roundTrip(ctx, request{method: "logging/setLevel", params: map[string]string{"level": c.cfg.LogLevel}}); err != nil {
		c.logger.Warn("logging/setLevel failed; the server keeps its own level", "log_level", c.cfg.LogLevel, "err", err)
	}
}

// serveInput answers a server request for input: for the one run whose
// calls are in flight on this session, else by the session's own policy.
// While it waits, the session's calls do not time out.
func (c *conn) serveInput(method string, params json.RawMessage) (any, *rpcError, bool) {
	p, ctx, ambiguous := c.callers.current()
	if ambiguous {
		c.logger.Warn("server request while calls of several runs are in flight: it cannot be told which run asks, so it is answered as outside a run", "method", method)
	}
	if p == nil {
		p, ctx = c.opts.Input, context.Background()
	}
	ctx, cancel := c.untilEnded(ctx)
	defer cancel()
	defer c.holdCalls()()
	return answerInput(ctx, p, c.rootsConfig(), c.opts.Roots, method, params)
}

// holdCalls keeps the deadlines of the session's calls from running out
// until the returned function is called.
func (c *conn) holdCalls() (release func()) {
	c.mu.Lock()
	held := make([]*pendingCall, 0, len(c.pending))
	for _, pc := range c.pending {
		if pc.extend != nil {
			pc.held.Add(1)
			held = append(held, pc)
		}
	}
	c.mu.Unlock()
	return func() {
		for _, pc := range held {
			pc.held.Add(-1)
		}
	}
}

// elicitationComplete records a server's notice that a URL-mode
// elicitation was completed, as an event of the run whose call is in
// flight.
func (c *conn) elicitationComplete(params json.RawMessage) {
	var p struct {
		ElicitationID string `json:"elicitationId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	c.logger.Info("elicitation completed", "elicitation_id", p.ElicitationID)
	policy, _, _ := c.callers.current()
	if policy == nil {
		policy = c.opts.Input
	}
	if policy != nil {
		policy.emit(evInputCompleted, map[string]any{"server": c.cfg.Name, "elicitation_id": p.ElicitationID})
	}
}

// urlElicitationAnswered handles a call's -32042 error (URL elicitation
// required): each URL it names is asked like a URL-mode elicitation, and
// true is returned when every one was accepted, so the call is retried
// once. Any other error, or a decline, returns false.
func (c *client) urlElicitationAnswered(ctx context.Context, err error) bool {
	var rpcErr *rpcError
	if !errors.As(err, &rpcErr) || rpcErr.Code != codeURLElicitationRequired {
		return false
	}
	var data struct {
		Elicitations []elicitRequest `json:"elicitations"`
	}
	if json.Unmarshal(rpcErr.Data, &data) != nil || len(data.Elicitations) == 0 {
		return false
	}
	p, _ := ctx.Value(inputPolicyKey{}).(*inputPolicy)
	if p == nil {
		p = c.opts.Input
	}
	if p == nil {
		return false
	}
	for _, req := range data.Elicitations {
		req.Mode = modeURL
		res, err := p.elicit(ctx, c.cfg.Name, req)
		if err != nil || res.Action != actionAccept {
			return false
		}
	}
	return true
}

// setupInput validates the run request's input fields (input_timeout,
// roots) and gives the run its policy: an interactive run queues
// elicitations for the API's caller, any other declines them; sampling is
// served by the run's own model, or one of models a request's hints pick,
// within the run's caps (limits' sampling fields, zero for the defaults).
// newProvider builds a picked model's provider. The scope's servers
// answer by it too. Errors are *requestError.
func (r *run) setupInput(limits runLimits, models []modelSpec, newProvider func(modelSpec) (modelProvider, error)) error {
	timeout := defaultInputTimeout
	if r.req.InputTimeout != "" {
		d, err := time.ParseDuration(r.req.InputTimeout)
		if err != nil || d <= 0 || d > maxInputTimeout {
			return badRequest("input_timeout", "%q: want a duration from 1s to %s, like \"10m\"", r.req.InputTimeout, maxInputTimeout)
		}
		timeout = d
	}
	if err := validateRoots("roots", r.req.Roots); err != nil {
		return invalidRequest(err)
	}
	r.scope.roots = r.req.Roots
	p := &inputPolicy{
		Timeout: timeout,
		Sampler: &sampler{
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
		Emit:   r.emit,
		Logger: r.logger,
	}
	if r.req.Interactive {
		p.Queue = &inputQueue{onChange: r.setWaiting}
	} else {
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

// setWaiting moves a running run to waiting_approval while it has open
// approvals, else to waiting_input while it has open elicitations, and
// back to running when it has neither. The queue's counts are read under
// mu, so the last call sees the last change, whatever the order of calls.
func (r *run) setWaiting(int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.status != runRunning && r.status != runWaitingInput && r.status != runWaitingApproval {
		return
	}
	questions, approvals := r.input.Queue.counts()
	switch {
	case approvals > 0:
		r.status = runWaitingApproval
	case questions > 0:
		r.status = runWaitingInput
	default:
		r.status = runRunning
	}
}

// openInputs returns the run's open input requests, oldest first (none
// for a run that is not interactive).
func (r *run) openInputs() []inputRequest {
	if r.input == nil || r.input.Queue == nil {
		return []inputRequest{}
	}
	return r.input.Queue.list()
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
	p.Sampler = &sampler{Provider: provider, Spec: spec, MaxTokens: spec.MaxTokens, Models: model.SamplingModels,
		NewProvider: func(spec modelSpec) (modelProvider, error) { return newModelProvider(spec, getenv, logger) }}
	return p
}
