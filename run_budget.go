package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"
)

// This file holds a run's budgets at work: max_tokens, max_cost_usd and
// max_duration (their settings and the price table are in
// config_budget.go), what model calls under way hold against a run's
// budget (their worst case, until they settle) and the stop of a run past
// a budget.

// cost returns what usage u costs at p, in USD.
func (p modelPrice) cost(u modelUsage) float64 {
	cached := min(max(u.CachedInputTokens, 0), u.InputTokens)
	return (float64(u.InputTokens-cached)*p.Input + float64(cached)*p.CachedInput + float64(u.OutputTokens)*p.Output) / perMillion
}

// A budgetExceededError says which budget a run went past: the limit and
// the use, as text (tokens, USD, a duration). When model calls under way
// hold part of the budget, held is that part, and asked is the input of
// the call refused for want of room (both in the budget's unit).
type budgetExceededError struct {
	budget      string
	limit, used any // int64 tokens, float64 USD, or a time.Duration
	held, asked any // nil, or int64 tokens or float64 USD
}

func (e *budgetExceededError) Error() string {
	amount := func(v any) string { return fmt.Sprintf("%d tokens", v) }
	verb := "used"
	switch e.budget {
	case budgetCostUSD:
		amount = func(v any) string { return formatUSD(v.(float64)) + " USD" }
		verb = "cost"
	case budgetDuration:
		return fmt.Sprintf("budget max_duration exceeded: the run ran for %s, its limit is %s; raise max_duration to allow more", e.used, e.limit)
	}
	msg := fmt.Sprintf("budget %s exceeded: the run %s %s", e.budget, verb, amount(e.used))
	if e.held != nil {
		msg += fmt.Sprintf(" and model calls under way hold %s more", amount(e.held))
	}
	if e.asked != nil {
		msg += fmt.Sprintf(", which leaves no room for a call of about %s of input and its answer", amount(e.asked))
	}
	return fmt.Sprintf("%s, its limit is %s; raise %s to allow more", msg, amount(e.limit), e.budget)
}

// event returns the payload of budget.exceeded: durations as text, the
// rest as numbers.
func (e *budgetExceededError) event() map[string]any {
	data := map[string]any{"budget": e.budget, "limit": e.limit, "used": e.used, "error": e.Error()}
	if d, ok := e.limit.(time.Duration); ok {
		data["limit"], data["used"] = d.String(), e.used.(time.Duration).String()
	}
	if e.held != nil {
		data["held"] = e.held
	}
	return data
}

// A runBudget is one run's budgets, what it has spent against them and
// what the model calls under way hold (their worst case, until they
// settle). Safe for concurrent use; a nil *runBudget bounds nothing.
type runBudget struct {
	limits budgetLimits
	prices map[string]modelPrice // read-only

	mu sync.Mutex
	// guards tokens, cost, heldTokens and heldCost
	tokens     int64
	cost       float64
	heldTokens int64
	heldCost   float64
}

// newRunBudget returns the budget of a run of model ("provider/model")
// that asks req, each budget it leaves unset taken from defaults. A
// cost budget needs a price for the model. Errors are *requestError
// naming the field.
func newRunBudget(req runRequest, defaults budgetLimits, prices map[string]modelPrice, model string) (*runBudget, error) {
	l := defaults
	if req.MaxTokens < 0 {
		return nil, badRequest("max_tokens", "%d is negative: give the tokens (input and output) the run may use", req.MaxTokens)
	}
	if req.MaxTokens > 0 {
		l.Tokens = req.MaxTokens
	}
	if c := req.MaxCostUSD; c < 0 || math.IsNaN(c) || math.IsInf(c, 0) {
		return nil, badRequest("max_cost_usd", "%v is not an amount: give the USD the run may spend, like 0.50", c)
	}
	if req.MaxCostUSD > 0 {
		l.CostUSD = req.MaxCostUSD
	}
	if req.MaxDuration != "" {
		d, err := time.ParseDuration(req.MaxDuration)
		if err != nil || d <= 0 {
			return nil, badRequest("max_duration", "%q is not a positive duration: give one like \"10m\" or \"90s\"", req.MaxDuration)
		}
		l.Duration = d
	}
	if _, priced := prices[model]; l.CostUSD > 0 && !priced {
		field := "max_cost_usd"
		if req.MaxCostUSD == 0 {
			field = "max_cost_usd (from max_run_cost_usd)"
		}
		return nil, badRequest(field, "model %q has no price, so its cost is unknown: add [model.prices.%q] with input and output (USD per million tokens) to config.toml", model, model)
	}
	return &runBudget{limits: l, prices: prices}, nil
}

// priced returns u with its cost set when model has a price.
func (b *runBudget) priced(model string, u modelUsage) modelUsage {
	if p, ok := b.prices[model]; ok {
		u.CostUSD = roundUSD(p.cost(u))
	}
	return u
}

// reachedLocked returns a *budgetExceededError when the tokens or the
// cost spent, with what the calls under way hold, have reached their
// budget, or nil. Called under mu.
func (b *runBudget) reachedLocked() error {
	if b.limits.Tokens > 0 && b.tokens+b.heldTokens >= b.limits.Tokens {
		return b.exceededLocked(budgetTokens, nil)
	}
	if b.limits.CostUSD > 0 && roundUSD(b.cost+b.heldCost) >= b.limits.CostUSD {
		return b.exceededLocked(budgetCostUSD, nil)
	}
	return nil
}

// exceededLocked returns the error of budget as it stands, asked being
// the input of the call refused (nil for none). Called under mu.
func (b *runBudget) exceededLocked(budget string, asked any) *budgetExceededError {
	e := &budgetExceededError{budget: budget, limit: b.limits.Tokens, used: b.tokens, asked: asked}
	if b.heldTokens > 0 {
		e.held = b.heldTokens
	}
	if budget == budgetCostUSD {
		e.limit, e.used, e.held = b.limits.CostUSD, roundUSD(b.cost), nil
		if b.heldCost > 0 {
			e.held = roundUSD(b.heldCost)
		}
	}
	return e
}

// holdLocked holds tokens and cost until the hold it returns ends; a
// settle counts the call's usage of model, priced, in the same step.
// Called under mu.
func (b *runBudget) holdLocked(model string, tokens int64, cost float64) *budgetHold {
	// Held costs are kept rounded, as spent ones are, so that holds
	// released in any order leave exactly nothing held.
	cost = roundUSD(cost)
	b.heldTokens += tokens
	b.heldCost = roundUSD(b.heldCost + cost)
	return newBudgetHold(func(used *modelUsage) {
		var u modelUsage
		if used != nil {
			*used = b.priced(model, *used)
			u = *used
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		b.heldTokens -= tokens
		b.heldCost = roundUSD(b.heldCost - cost)
		b.tokens += int64(u.InputTokens + u.OutputTokens)
		b.cost += u.CostUSD
	})
}

// reserve holds against the run's budgets the worst case of one model
// call of model whose answer the caller may bound (a server's sampling
// request): input tokens (an estimate, see estimateInputTokens) and up to
// maxOutput output tokens, priced. It returns the output tokens the call
// may make, maxOutput cut to what the budgets leave after what is spent
// and what other calls hold, and the hold, which the caller settles with
// the call's usage or releases. It returns a *budgetExceededError when not
// one output token fits, or an error when the run has a cost budget and
// model has no price. A nil budget holds nothing and returns maxOutput.
func (b *runBudget) reserve(model string, input, maxOutput int) (int, *budgetHold, error) {
	if b == nil {
		return maxOutput, nil, nil
	}
	p, priced := b.prices[model]
	if b.limits.CostUSD > 0 && !priced {
		return 0, nil, fmt.Errorf("model %q has no price and the run has a cost budget (max_cost_usd): add [model.prices.%q] to config.toml", model, model)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	out := int64(maxOutput)
	if b.limits.Tokens > 0 {
		if left := b.limits.Tokens - b.tokens - b.heldTokens - int64(input); left < out {
			out = left
			if out < 1 {
				return 0, nil, b.exceededLocked(budgetTokens, int64(input))
			}
		}
	}
	inputCost := p.cost(modelUsage{InputTokens: input})
	if b.limits.CostUSD > 0 {
		left := roundUSD(b.limits.CostUSD - b.cost - b.heldCost - inputCost)
		if p.Output > 0 && left >= 0 {
			// The slack of a millionth of a token keeps a sum of
			// floating-point prices from costing a whole token.
			out = min(out, int64(math.Floor(left*perMillion/p.Output+1e-6)))
		}
		if out < 1 || left < 0 {
			var asked any // an input that costs nothing is not worth naming
			if inputCost > 0 {
				asked = roundUSD(inputCost)
			}
			return 0, nil, b.exceededLocked(budgetCostUSD, asked)
		}
	}
	cost := p.cost(modelUsage{InputTokens: input, OutputTokens: int(out)})
	return int(out), b.holdLocked(model, int64(input)+out, cost), nil
}

// holdStep holds against the run's budgets one of the run's own model
// calls of model: input tokens (an estimate) and maxOutput output tokens
// (0 when the model has no limit of its own), priced. A step is not cut
// short, which would cut the run's answer, so it is refused only as before
// calls were held: with a *budgetExceededError once what is spent, with
// what other calls hold, has reached a budget. A nil budget holds nothing.
func (b *runBudget) holdStep(model string, input, maxOutput int) (*budgetHold, error) {
	if b == nil {
		return nil, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.reachedLocked(); err != nil {
		return nil, err
	}
	u := modelUsage{InputTokens: input, OutputTokens: max(maxOutput, 0)}
	return b.holdLocked(model, int64(u.InputTokens+u.OutputTokens), b.prices[model].cost(u)), nil
}

// errDurationPassed is the cause of a run's context when max_duration
// passed; the run tells it from a cancel by it.
var errDurationPassed = errors.New("max_duration passed")

// bound returns ctx cancelled, with cause errDurationPassed, once the
// run's max_duration has passed (ctx itself without one), and the
// function that releases its timer.
func (b *runBudget) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if b == nil || b.limits.Duration <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeoutCause(ctx, b.limits.Duration, errDurationPassed)
}

// stopped returns why a run whose context ctx is done must stop: a
// *budgetExceededError when max_duration passed (used is how long the
// run ran since started), else nil for a cancel.
func (b *runBudget) stopped(ctx context.Context, started time.Time) error {
	if b == nil || !errors.Is(context.Cause(ctx), errDurationPassed) {
		return nil
	}
	return &budgetExceededError{budget: budgetDuration, limit: b.limits.Duration, used: time.Since(started).Round(time.Millisecond)}
}

// endEarly ends a run whose context ctx is done, or which err says went
// past a budget: failed after a budget.exceeded event, counted in the
// metrics, or cancelled.
func (r *run) endEarly(ctx context.Context, err error) {
	if err == nil {
		r.mu.Lock()
		started := r.startedAt
		r.mu.Unlock()
		err = r.budget.stopped(ctx, started)
	}
	var exceeded *budgetExceededError
	if !errors.As(err, &exceeded) {
		r.finish(runCancelled, "", "run cancelled")
		return
	}
	r.emit(evBudgetExceeded, exceeded.event())
	r.env.metrics.budgetStop(exceeded.budget)
	r.logger.Info("run past a budget", "budget", exceeded.budget)
	r.finish(runFailed, "", exceeded.Error())
}
