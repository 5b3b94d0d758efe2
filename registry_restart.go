package main

import (
	"errors"
	"fmt"
)

// This file holds the restart of one global server on request (the API's
// POST /v1/mcp/servers/{name}/restart): its configuration stays, its
// process or connection is replaced.

// errRestartedOnRequest is why calls reaching a server restarted on
// request fail.
var errRestartedOnRequest = errors.New("an operator restarted it; calls made since go to its new connection")

// errNoGlobalServer is wrapped by restart's error for a name that is no
// global server.
var errNoGlobalServer = errors.New("no such global server")

// restart replaces the global server name by a new one of the same
// configuration, as a reload does with a changed server: the new one
// starts at once (a new process for stdio), the old one refuses new calls
// and stops once its calls in flight end. It returns once the new server
// is in place, without waiting for it to connect; a disabled server is
// refused. Safe for concurrent use with reloads (reloadMu).
func (r *registry) restart(name string) error {
	r.reloadMu.Lock()
	defer r.reloadMu.Unlock()
	r.mu.Lock()
	closed, old := r.closed, r.set
	r.mu.Unlock()
	if closed {
		return errors.New("restart: harnessd is shutting down")
	}
	prev := old.byName[name]
	if prev == nil {
		return fmt.Errorf("server %q: %w", name, errNoGlobalServer)
	}
	cfg := prev.config()
	if !cfg.Enabled {
		return fmt.Errorf("server %q is disabled (enabled = false in %s): enable it to start it", name, cfg.Source)
	}
	next := newManagedServer(cfg, false, r.logger)
	list := make([]*managedServer, 0, len(old.servers))
	for _, s := range old.servers {
		if s == prev {
			s = next
		}
		list = append(list, s)
	}
	r.mu.Lock()
	r.set = newGlobalSet(list)
	r.mu.Unlock()
	r.startLocked(next, func() {})
	r.retireLocked(prev, errRestartedOnRequest)
	next.logger.Info("server restarted on request")
	return nil
}
