package main

import (
	"fmt"
	"slices"
	"testing"
)

// This file checks the server state machine's transition table.

func init() {
	// Any status change outside the table, anywhere in the tests, fails
	// the test binary loudly.
	report := func(from, to string) {
		panic(fmt.Sprintf("server status change %s → %s is not in serverTransitions", from, to))
	}
	illegalMove.Store(&report)
}

// TestServerTransitions checks the table: every status has its row, every
// target is a status, and the paths the registry relies on are allowed
// while the ones it must never take are not.
func TestServerTransitions(t *testing.T) {
	t.Parallel()
	statuses := []string{statusConnecting, statusReady, statusFailed, statusRestarting, statusClosed, statusDisabled, statusNeedsAuth}
	for from, tos := range serverTransitions {
		if !slices.Contains(statuses, from) {
			t.Errorf("serverTransitions has a row for %q, not a status", from)
		}
		for _, to := range tos {
			if !slices.Contains(statuses, to) {
				t.Errorf("serverTransitions[%q] lists %q, not a status", from, to)
			}
		}
	}
	for _, s := range statuses {
		if _, ok := serverTransitions[s]; !ok {
			t.Errorf("serverTransitions has no row for %q", s)
		}
	}
	tests := []struct {
		from, to string
		want     bool
	}{
		{statusConnecting, statusReady, true},
		{statusConnecting, statusFailed, true},
		{statusReady, statusRestarting, true},
		{statusRestarting, statusReady, true},
		{statusRestarting, statusFailed, true},
		{statusFailed, statusRestarting, true},
		{statusNeedsAuth, statusReady, true},
		{statusDisabled, statusClosed, true},
		{statusReady, statusClosed, true},
		{statusDisabled, statusReady, false},
		{statusDisabled, statusConnecting, false},
		{statusReady, statusReady, false},
		{statusReady, statusFailed, false},
		{statusFailed, statusReady, false},
		{statusReady, statusConnecting, false},
		{statusClosed, statusConnecting, false},
		{statusClosed, statusRestarting, false},
	}
	for _, tt := range tests {
		if got := canMove(tt.from, tt.to); got != tt.want {
			t.Errorf("canMove(%s, %s) = %v, want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

// TestMoveReportsIllegal checks that move reports a change outside the
// table and still makes it.
func TestMoveReportsIllegal(t *testing.T) {
	// Not parallel: it swaps the package's illegalMove for its duration.
	var got []string
	report := func(from, to string) { got = append(got, from+"→"+to) }
	saved := illegalMove.Swap(&report)
	t.Cleanup(func() { illegalMove.Store(saved) })
	ms := newManagedServer(serverConfig{Name: "x", Enabled: false}, false, discardLogger())
	ms.mu.Lock()
	ms.move(statusReady, nil)
	ms.mu.Unlock()
	if !slices.Equal(got, []string{"disabled→ready"}) || ms.status != statusReady {
		t.Errorf("move(disabled → ready) reported %v, status %q; want [disabled→ready] reported and the status ready", got, ms.status)
	}
}
