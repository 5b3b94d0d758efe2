package main

import "sync"

// This file holds a budget hold: what one model call holds against a
// budget (a run's, its sampling caps, the daemon's outside calls) from
// before the call is made until it ends, so that calls made at once see
// each other's worst case rather than only what was spent before them.

// A budgetHold is one model call's hold on a budget. settle counts what
// the call used and frees the hold; release frees it with nothing used
// (the call failed, was cancelled or was never made). Only the first of
// the two acts, so a deferred release after settle does nothing. A nil
// *budgetHold holds nothing. Safe for concurrent use.
type budgetHold struct {
	once sync.Once
	// end frees the hold and counts used, which it may complete (a cost);
	// used is nil on release.
	end func(used *modelUsage)
}

// newBudgetHold returns a hold that end frees.
func newBudgetHold(end func(used *modelUsage)) *budgetHold {
	return &budgetHold{end: end}
}

// settle frees the hold and counts u as spent; it returns u as the budget
// completed it (with its cost, for a priced run budget). After a settle
// or release it does nothing and returns u.
func (h *budgetHold) settle(u modelUsage) modelUsage {
	if h == nil {
		return u
	}
	h.once.Do(func() { h.end(&u) })
	return u
}

// release frees the hold with nothing spent; after a settle or release it
// does nothing.
func (h *budgetHold) release() {
	if h == nil {
		return
	}
	h.once.Do(func() { h.end(nil) })
}
