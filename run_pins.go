package main

import (
	"maps"
	"slices"
)

// This file holds what a run tells of its servers' tool definitions that
// changed under it (pinned definitions, tools_pins.go): before each model
// call, a change listed since the run started, and not told yet, becomes
// an mcp.tool.changed event, whether it was taken in (pin_tools = "warn")
// or held (pin_tools = "hold").

// A toldChanges is the set of definition changes a run has told, by
// server, tool and new digest. Owned by the run's loop goroutine.
type toldChanges map[[3]string]bool

// tellToolChanges emits mcp.tool.changed for each change, seen since the
// run started, of a tool the run can reach now that it has not told yet.
// It is called by the run's loop only.
func (r *run) tellToolChanges() {
	r.mu.Lock()
	started := r.startedAt
	r.mu.Unlock()
	for _, st := range r.catalog.reachable() {
		for _, change := range []struct {
			mode    string
			changes map[string]toolChange
		}{{pinWarn, st.warned}, {pinHold, st.held}} {
			for _, name := range slices.Sorted(maps.Keys(change.changes)) {
				ch := change.changes[name]
				key := [3]string{st.server, ch.Tool, ch.NewDigest}
				if ch.SeenAt.Before(started) || r.told[key] {
					continue
				}
				if r.told == nil {
					r.told = toldChanges{}
				}
				r.told[key] = true
				r.emit(evToolChanged, toolChangedEvent(st.server, name, change.mode, ch))
			}
		}
	}
}
