package main

import (
	"strings"
	"testing"
)

// This file tests that both HTTP transports hide what the daemon's
// redactor learns after they were made (an OAuth token, say), besides the
// server's own secrets.

func TestHTTPTransportsFollowTheDaemonsRedactor(t *testing.T) {
	t.Parallel()
	srv := legacyServer(t, func(string) string { return "/messages" }, false)
	cfg := testConfig(srv.URL + "/sse")
	cfg.Headers = map[string]string{"X-Key": "own-secret-0123456789"}
	daemon := newLiveRedactor(nil)
	sse, err := newSSETransport(t.Context(), cfg, daemon, discardLogger())
	if err != nil {
		t.Fatalf("newSSETransport = %v", err)
	}
	t.Cleanup(func() { sse.close() })
	transports := map[string]httpEndpoint{
		"streamable": newStreamableTransport(testConfig(srv.URL), daemon, discardLogger()).httpEndpoint,
		"sse":        sse.httpEndpoint,
	}
	daemon.add("learned-token-0123456789")
	for name, e := range transports {
		got := e.secrets.load().redact("token learned-token-0123456789")
		if strings.Contains(got, "learned-token") {
			t.Errorf("%s transport: redact = %q, want the token the daemon learned hidden", name, got)
		}
	}
	if got := sse.secrets.load().redact("key own-secret-0123456789"); strings.Contains(got, "own-secret") {
		t.Errorf("sse transport: redact = %q, want its own header value hidden", got)
	}
}
