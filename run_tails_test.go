package main

import (
	"fmt"
	"testing"
)

// TestEndedRunShowsNoStderrTails ends a run whose server crashed during
// it (its status then shows its stderr tail) and whose other server is
// slow to stop (it ignores SIGTERM): while that one closes, the run
// already shows as ended, and its view must already be without tails.
func TestEndedRunShowsNoStderrTails(t *testing.T) {
	t.Parallel()
	exe := fakeServerConfig(t, "normal").Command
	body := fmt.Sprintf(`[{"name":"db","command":%q,"env":{%q:"normal"},"required":false},{"name":"slow","command":%q,"env":{%q:"ignore-term"}}]`,
		exe, fakeServerEnv, exe, fakeServerEnv)
	f := newFakeModel(t, providerOpenAI, fakeTurn{ToolCalls: []toolCall{call("mcp_db_crash", "{}")}}, fakeTurn{Text: "fine without it"})
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
