package main

import (
	"errors"
	"reflect"
	"slices"
	"sync"
	"time"
)

// This file holds the reload of the global servers: what a new
// configuration changes (diffServers), and how the registry swaps its set
// of servers without touching the unchanged ones or the runs.
//
// What a run sees when a reload removes or restarts a global server it
// uses: a call already in flight finishes on the old connection (bounded
// by the server's timeout); a later call of a restarted server goes to its
// replacement, and a later call of a removed one fails with
// errRemovedByReload. A run keeps the set of global names it started with:
// servers a reload adds reach only runs started after it.

// Why a reload retired a server; calls that reach it get these.
var (
	errRemovedByReload   = errors.New("it was removed from the configuration by a reload (SIGHUP); runs started since do not have it")
	errRestartedByReload = errors.New("its configuration changed and a reload (SIGHUP) restarted it")
)

// A serverDiff is what a new configuration changes in the global servers,
// by name: Added, Restarted and Unchanged in the new configuration's
// order, Removed in the old one's. A server whose configuration differs in
// anything (command, env, headers, timeouts, tool filters, enabled, the
// file it comes from) is restarted.
type serverDiff struct {
	Added, Removed, Restarted, Unchanged []string
}

// diffServers compares the global servers of two configurations.
func diffServers(old, next []serverConfig) serverDiff {
	var d serverDiff
	before := make(map[string]serverConfig, len(old))
	for _, s := range old {
		before[s.Name] = s
	}
	seen := make(map[string]bool, len(next))
	for _, s := range next {
		seen[s.Name] = true
		prev, ok := before[s.Name]
		switch {
		case !ok:
			d.Added = append(d.Added, s.Name)
		case reflect.DeepEqual(prev, s):
			d.Unchanged = append(d.Unchanged, s.Name)
		default:
			d.Restarted = append(d.Restarted, s.Name)
		}
	}
	for _, s := range old {
		if !seen[s.Name] {
			d.Removed = append(d.Removed, s.Name)
		}
	}
	return d
}

// changes reports whether the diff starts or stops anything.
func (d serverDiff) changes() bool {
	return len(d.Added)+len(d.Removed)+len(d.Restarted) > 0
}

// reload makes next the global servers: added ones start, removed ones
// are retired, changed ones are retired and their replacement starts at
// once (so a stdio server holding a resource exclusively may fail its
// first attempt and retry), unchanged ones are kept as they are. It
// returns once the new set is in place, without waiting for servers to
// connect or stop: started is closed once every server it started has
// made its first attempt. It fails only when the registry is closed. next
// must be valid (loadConfig's checks).
func (r *registry) reload(next []serverConfig) (d serverDiff, started <-chan struct{}, err error) {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.Lock()
	closed, old := r.closed, r.set
	r.mu.Unlock()
	if closed {
		return serverDiff{}, nil, errors.New("reload: harnessd is shutting down")
	}
	d = diffServers(old.configs(), next)
	firstDone := make(chan struct{})
	if !d.changes() {
		close(firstDone)
		return d, firstDone, nil
	}
	list := make([]*managedServer, 0, len(next))
	var start []*managedServer
	for _, cfg := range next {
		if slices.Contains(d.Unchanged, cfg.Name) {
			list = append(list, old.byName[cfg.Name])
			continue
		}
		s := newManagedServer(cfg, false, r.logger)
		list = append(list, s)
		if cfg.Enabled {
			start = append(start, s)
		}
	}
	r.mu.Lock()
	r.set = newGlobalSet(list)
	r.mu.Unlock()
	var first sync.WaitGroup
	for _, s := range start {
		first.Add(1)
		r.startLocked(s, first.Done)
	}
	// Owned by reload; exits once every started server made its first
	// attempt (bounded by their startup timeouts, or the registry's close).
	go func() {
		first.Wait()
		close(firstDone)
	}()
	for _, name := range d.Removed {
		r.retireLocked(old.byName[name], errRemovedByReload)
	}
	for _, name := range d.Restarted {
		r.retireLocked(old.byName[name], errRestartedByReload)
	}
	return d, firstDone, nil
}

// retireLocked takes the global server s out of service: it refuses new
// calls with why at once, and is stopped in the background once its calls
// in flight have ended, their timeout has passed, or the registry closes.
// The caller holds reloadMu and has already taken s out of the set.
func (r *registry) retireLocked(s *managedServer, why error) {
	r.mu.Lock()
	sup, supervised := r.supervisors[s]
	delete(r.supervisors, s)
	r.mu.Unlock()
	drained := s.retire(why)
	r.wg.Add(1)
	// Owned by the registry; exits once s is stopped, which is bounded by
	// the server's request timeout and stop ladder.
	go func() {
		defer r.wg.Done()
		if supervised {
			sup.cancel()
			<-sup.done // supervise returns promptly once cancelled
		}
		bound := time.NewTimer(s.cfg.requestTimeout())
		defer bound.Stop()
		select {
		case <-drained:
		case <-r.ctx.Done():
		case <-bound.C:
			s.logger.Warn("calls still in flight when the retired server stops; they fail", "timeout", s.cfg.requestTimeout())
		}
		s.stop()
		s.logger.Info("server stopped by reload", "reason", why.Error())
	}()
}
