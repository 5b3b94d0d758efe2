package main

import (
	"context"
	"time"
)

// This file holds the settle a one-shot command gives a server that asked
// for roots: servers apply the roots they asked for asynchronously (the
// reference filesystem server resolves and checks each directory after
// the answer), so a call sent at once can meet the roots of before.

// rootsSettle is how long after answering roots/list a one-shot call
// waits before its first request.
const rootsSettle = 250 * time.Millisecond

// settleRoots waits, when the server asked for roots, until rootsSettle
// has passed since the answer; it returns at once for a server that did
// not ask (or asked long enough ago), and early with ctx's error.
func (c *conn) settleRoots(ctx context.Context) error {
	answered := c.rootsAnswered.Load()
	if answered == 0 {
		return nil
	}
	wait := time.Until(time.Unix(0, answered).Add(rootsSettle))
	if wait <= 0 {
		return nil
	}
	c.logger.Debug("letting the server apply its roots", "wait", wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
