package main

import (
	"context"
	"sync"
	"time"
)

// This file holds a run's wait, before its first model call, for the
// global servers still in their first connection attempt: a run posted
// just after start-up would otherwise see none of their tools.

// awaitStartingServers waits for the global servers of the run's scope
// that are still in their first connection attempt (those a profile
// server of the same name shadows aside), each at most its
// startup_timeout, all at once. It emits mcp.servers.waiting with their
// names and then mcp.servers.waited with how each ended up; it emits
// nothing when no server is starting. It returns ctx's error when ctx
// ended first.
func (r *run) awaitStartingServers(ctx context.Context) error {
	starting := r.scope.startingGlobals(r.profile)
	if len(starting) == 0 {
		return nil
	}
	names := make([]string, len(starting))
	for i, ms := range starting {
		names[i] = ms.cfg.Name
	}
	r.emit(evServersWaiting, serversWaitingEvent(names))
	began := time.Now()
	outcomes := make([]serverStatus, len(starting))
	var wg sync.WaitGroup
	for i, ms := range starting {
		wg.Add(1)
		// Owned by awaitStartingServers; ends when the server's first
		// attempt is over, its startup_timeout passed or ctx is done.
		go func() {
			defer wg.Done()
			outcomes[i] = ms.awaitFirstAttempt(ctx)
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	r.emit(evServersWaited, serversWaitedEvent(time.Since(began), outcomes))
	return nil
}
