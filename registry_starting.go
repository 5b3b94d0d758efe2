package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// This file holds what a run learns of the servers it cannot use yet: the
// global servers still in their first connection attempt, which a new run
// waits for, and every server of a scope that is not ready, which
// find_tool names.

// startingGlobals returns the scope's global servers (the registry's
// current server of each name) that are still in their first connection
// attempt, in config order, less those that a server of own (the run's
// own, still opening: the scope has them only later) shadows; a server
// that failed once and is retried is not among them.
func (s *runScope) startingGlobals(own []serverConfig) []*managedServer {
	now := s.reg.current()
	var starting []*managedServer
	for _, g := range s.globals.servers {
		if slices.ContainsFunc(own, func(c serverConfig) bool { return c.Name == g.cfg.Name }) {
			continue // shadowed, by shadow's rule
		}
		ms := s.resolve(g, now)
		select {
		case <-ms.firstAttempt:
		default:
			starting = append(starting, ms)
		}
	}
	return starting
}

// awaitFirstAttempt blocks until the server's first connection attempt is
// over, its startup_timeout has passed or ctx is done, and returns its
// status then: still connecting after the timeout, with an error saying
// so. The caller checks ctx itself.
func (s *managedServer) awaitFirstAttempt(ctx context.Context) serverStatus {
	timeout := s.cfg.startupTimeout()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-s.firstAttempt:
	case <-timer.C:
	case <-ctx.Done():
	}
	st := s.snapshot()
	if st.Status == statusConnecting && ctx.Err() == nil {
		st.Error = fmt.Sprintf("server %q: still connecting after %v (its startup_timeout); the run goes on without it until it is ready", s.cfg.Name, timeout)
	}
	return st
}

// unready returns the status of every server the run reaches that is not
// ready now (connecting, restarting, failed, needs_auth, disabled, or
// closed): the globals that no local server shadows, then the local ones.
// A server's tools are those it listed last, none before its first list.
func (s *runScope) unready() []serverStatus {
	local := s.localServers()
	now := s.reg.current()
	var out []serverStatus
	for _, ms := range shadow(s.globals.servers, local, func(ms *managedServer) string { return ms.cfg.Name }) {
		if !slices.Contains(local, ms) {
			ms = s.resolve(ms, now)
		}
		if st := ms.snapshot(); st.Status != statusReady {
			out = append(out, st)
		}
	}
	return out
}
