package main

import (
	"fmt"
	"testing"
)

// TestEndedRunShowsNoStderrTails ends a run whose servers are slow to
// stop (one ignores SIGTERM): while they close, the run already shows as
// ended, and its view must already be without stderr tails.
func TestEndedRunShowsNoStderrTails(t *testing.T) {
	t.Parallel()
	failing := fakeServerConfig(t, "exit-in-initialize")
	stubborn := fakeServerConfig(t, "ignore-term")
	body := fmt.Sprintf(`[{"name":"db","command":%q,"env":{%q:"exit-in-initialize"},"required":false},{"name":"slow","command":%q,"env":{%q:"ignore-term"}}]`,
		failing.Command, fakeServerEnv, stubborn.Command, fakeServerEnv)
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "fine without it"})
	m := newTestRuns(t, f)
	r, err := m.start(runRequest{Prompt: "go", MCPServers: []byte(body)}, true)
	if err != nil {
		t.Fatal(err)
	}
	var v runView
	waitUntil(t, "the run shows as ended", func() bool { v = r.view(); return isTerminal(v.Status) })
	select {
	case <-r.done:
		t.Fatal("the servers closed before the view was taken: the test saw nothing")
	default:
	}
	for _, s := range v.Servers {
		if s.StderrTail != "" {
			t.Errorf("ended run, server %s: stderr_tail %q, want none", s.Name, s.StderrTail)
		}
	}
	waitRun(t, r)
}
