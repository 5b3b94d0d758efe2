package main

import (
	"context"
	"encoding/json"
	"sync"
)

// This file holds what the client asks of whoever answers its servers'
// requests for input (elicitation, sampling) in the middle of a call: the
// inputAnswerer it calls, which run's answerer a request is for (the runs
// with calls in flight on a session), and the session's side of answering:
// holding the calls' deadlines while a question waits, a completed URL
// elicitation, and a call's URL-elicitation-required error. The answers
// themselves are server input's (input.go: an inputPolicy is an
// inputAnswerer); roots/list is answered by the session itself
// (client_roots.go).

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

// An inputAnswerer answers what a server asks of the client during a call,
// for one run or for the process outside runs. Its methods may be called
// concurrently.
type inputAnswerer interface {
	// answerInput answers one server request of method for server (its
	// configuration with the roots the session answers); handled is false
	// for a method it does not answer. It may block until the request is
	// answered; ctx bounds it.
	answerInput(ctx context.Context, server serverConfig, method string, params json.RawMessage) (result any, rpcErr *rpcError, handled bool)
	// acceptURLElicitation asks one URL-mode elicitation that a call's
	// URL-elicitation-required error names (params as elicitation/create
	// takes them) and reports whether it was accepted.
	acceptURLElicitation(ctx context.Context, server string, params json.RawMessage) bool
	// elicitationCompleted records a server's notice that the URL-mode
	// elicitation id was completed.
	elicitationCompleted(server, id string)
	// callProgress is told a progress notification of one of server's calls.
	callProgress(server string, note progressParams)
	// takeQuestions counts n more questions of input-required results of
	// server, and returns an error once they pass its bound.
	takeQuestions(server string, n int) error
}

// noAnswerer answers for a session given no answerer, when no run's call
// is in flight: harnessd declares elicitation and sampling
// (clientInputCapabilities), so it declines the one and refuses the other
// rather than calling them unknown.
type noAnswerer struct{}

func (noAnswerer) answerInput(_ context.Context, _ serverConfig, method string, _ json.RawMessage) (any, *rpcError, bool) {
	switch method {
	case "elicitation/create":
		return map[string]string{"action": "decline"}, nil, true
	case "sampling/createMessage":
		return nil, &rpcError{Code: codeSamplingRefused, Message: "sampling refused by harnessd: no run is asking"}, true
	}
	return nil, nil, false
}

func (noAnswerer) acceptURLElicitation(context.Context, string, json.RawMessage) bool { return false }
func (noAnswerer) elicitationCompleted(string, string)                                {}
func (noAnswerer) callProgress(string, progressParams)                                {}
func (noAnswerer) takeQuestions(string, int) error                                    { return nil }

// An inputCallers tracks which answerers have calls in flight on one
// session, so that a server request is answered for the run whose call
// caused it. The zero value is ready; safe for concurrent use.
type inputCallers struct {
	mu sync.Mutex
	// guards calls
	calls map[*inputCall]struct{}
}

// An inputCall is one call in flight, with its run's answerer and context.
type inputCall struct {
	answerer inputAnswerer
	ctx      context.Context
}

type inputAnswererKey struct{}

// withInputAnswerer returns ctx carrying a: calls made under it answer
// server requests by a.
func withInputAnswerer(ctx context.Context, a inputAnswerer) context.Context {
	return context.WithValue(ctx, inputAnswererKey{}, a)
}

// inputAnswererOf returns the answerer ctx carries, nil when none.
func inputAnswererOf(ctx context.Context) inputAnswerer {
	a, _ := ctx.Value(inputAnswererKey{}).(inputAnswerer)
	return a
}

// enter records a call made under ctx and returns the function that ends
// the record. Calls under a context without an answerer are not recorded.
func (t *inputCallers) enter(ctx context.Context) func() {
	a := inputAnswererOf(ctx)
	if a == nil {
		return func() {}
	}
	call := &inputCall{answerer: a, ctx: ctx}
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

// current returns the answerer and context of the one run with calls in
// flight. A server request carries no link to the call that caused it, so
// with calls of several runs in flight it cannot be told whose it is:
// ambiguous is then true and the answerer nil.
func (t *inputCallers) current() (a inputAnswerer, ctx context.Context, ambiguous bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for call := range t.calls {
		switch {
		case a == nil:
			a, ctx = call.answerer, call.ctx
		case a != call.answerer:
			return nil, nil, true
		}
	}
	return a, ctx, false
}

// answerServerInput answers one server request for input: roots/list with
// the roots the session answers, other methods by a (nil: noAnswerer).
// handled is false for a method neither answers.
func (c *conn) answerServerInput(ctx context.Context, a inputAnswerer, method string, params json.RawMessage) (result any, rpcErr *rpcError, handled bool) {
	if method == "roots/list" {
		return map[string]any{"roots": rootsFor(c.rootsConfig())}, nil, true
	}
	if a == nil {
		a = noAnswerer{}
	}
	return a.answerInput(ctx, c.rootsConfig(), method, params)
}

// serveInput answers a server request for input: for the one run whose
// calls are in flight on this session, else by the session's own answerer.
// While it waits, the session's calls do not time out.
func (c *conn) serveInput(method string, params json.RawMessage) (any, *rpcError, bool) {
	a, ctx, ambiguous := c.callers.current()
	if ambiguous {
		c.logger.Warn("server request while calls of several runs are in flight: it cannot be told which run asks, so it is answered as outside a run", "method", method)
	}
	if a == nil {
		a, ctx = c.opts.Input, context.Background()
	}
	ctx, cancel := c.untilEnded(ctx)
	defer cancel()
	defer c.holdCalls()()
	return c.answerServerInput(ctx, a, method, params)
}

// holdCalls keeps the deadlines of the session's calls from running out
// until the returned function is called.
func (c *conn) holdCalls() (release func()) {
	c.mu.Lock()
	held := make([]*pendingCall, 0, len(c.pending))
	for _, pc := range c.pending {
		if pc.extends() {
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
// elicitation was completed, with the answerer of the run whose call is in
// flight (else the session's).
func (c *conn) elicitationComplete(params json.RawMessage) {
	var p struct {
		ElicitationID string `json:"elicitationId"`
	}
	if json.Unmarshal(params, &p) != nil {
		return
	}
	c.logger.Info("elicitation completed", "elicitation_id", p.ElicitationID)
	a, _, _ := c.callers.current()
	if a == nil {
		a = c.opts.Input
	}
	if a != nil {
		a.elicitationCompleted(c.cfg.Name, p.ElicitationID)
	}
}

// urlElicitationAnswered handles a call's -32042 error (URL elicitation
// required): each URL it names is asked like a URL-mode elicitation, and
// true is returned when every one was accepted, so the call is retried
// once. Any other error, or a decline, returns false.
func (c *mcpClient) urlElicitationAnswered(ctx context.Context, err error) bool {
	rpcErr := asRPCError(err)
	if rpcErr == nil || rpcErr.Code != codeURLElicitationRequired {
		return false
	}
	var data struct {
		Elicitations []json.RawMessage `json:"elicitations"`
	}
	if json.Unmarshal(rpcErr.Data, &data) != nil || len(data.Elicitations) == 0 {
		return false
	}
	a := inputAnswererOf(ctx)
	if a == nil {
		a = c.opts.Input
	}
	if a == nil {
		return false
	}
	for _, params := range data.Elicitations {
		if !a.acceptURLElicitation(ctx, c.cfg.Name, params) {
			return false
		}
	}
	return true
}
