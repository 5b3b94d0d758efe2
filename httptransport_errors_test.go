package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
)

// This file tests how a failed exchange with an address a caller chose
// is reported: a fixed reason, its detail kept underneath.

// TestHidePeer classifies failed exchanges into their fixed reasons, and
// checks that the detail stays reachable for the log and for admins.
func TestHidePeer(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name       string
		err        error
		wantReason string
	}{
		{name: "not an HTTP server", err: errors.New(`net/http: HTTP/1.x transport connection broken: malformed HTTP status code "internal-banner-secret"`), wantReason: peerUnreachable},
		{name: "closed port", err: refused, wantReason: peerUnreachable},
		{name: "no answer in time", err: fmt.Errorf("no answer within 10s: %w", context.DeadlineExceeded), wantReason: peerTimedOut},
		{name: "a network timeout", err: &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, wantReason: peerTimedOut},
		{name: "blocked address", err: fmt.Errorf("dial 169.254.169.254:80: %w", errBlockedAddress), wantReason: peerRefusedByUs + errBlockedAddress.Error()},
		{name: "status with a body", err: &httpStatusError{StatusCode: 500, Body: "internal-page-content"}, wantReason: "HTTP status 500"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hidden := hidePeer(tt.err)
			if hidden.Error() != tt.wantReason {
				t.Errorf("hidePeer(%q) = %q, want %q", tt.err, hidden, tt.wantReason)
			}
			if !errors.Is(hidden, tt.err) {
				t.Errorf("hidePeer(%q) does not wrap the detail", tt.err)
			}
			wrapped := fmt.Errorf("server %q: initialize: %w", "s", hidden)
			if got, want := peerDetail(wrapped), fmt.Sprintf("server %q: initialize: %v", "s", tt.err); got != want {
				t.Errorf("peerDetail(%q) = %q, want %q", wrapped, got, want)
			}
		})
	}
	if hidePeer(nil) != nil {
		t.Error("hidePeer(nil) != nil")
	}
	if plain := errors.New("plain"); peerDetail(plain) != "plain" {
		t.Errorf("peerDetail(plain) = %q, want it unchanged", peerDetail(plain))
	}
}
