package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// secretPrefix is long enough to be recognised in a cut text and short
// enough that every cut below leaves at least this much of a secret.
const cutPrefixLen = 8

// TestRunCutsAfterRedacting gives a run a model answer whose secret (a
// global server's header value) straddles max_output_bytes: neither the
// run's output nor the model.response event may keep a prefix of it.
func TestRunCutsAfterRedacting(t *testing.T) {
	t.Parallel()
	const limit = 64
	const secret = "QZXWheader-value-0123456789"
	text := strings.Repeat("x", limit-11) + " " + secret + " tail"
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: text})
	reg := newRegistry(nil, registryOptions{Client: clientOptions{Secrets: newLiveRedactor(newRedactor(secret))}})
	t.Cleanup(reg.close)
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.Limits = runLimits{MaxOutputBytes: limit}
	m := newRunsWith(t, opts)
	r, err := m.start(runRequest{Prompt: "say it"}, false)
	if err != nil {
		t.Fatal(err)
	}
	v := waitRun(t, r)
	if v.Status != runCompleted {
		t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
	}
	all := runTranscript(r)
	if strings.Contains(all, secret[:cutPrefixLen]) {
		t.Errorf("the run keeps a prefix of the secret %q:\n%s", secret[:cutPrefixLen], all)
	}
	if !strings.Contains(v.Output, "xxx") || len(v.Output) > limit+len("…") {
		t.Errorf("output = %q, want the text cut to %d bytes", v.Output, limit)
	}
}

// TestConnLogsCutAfterRedacting sends a session messages it logs cut
// (malformed, neither request nor answer) with a server's env value
// straddling the cut: the log keeps no prefix of it.
func TestConnLogsCutAfterRedacting(t *testing.T) {
	t.Parallel()
	const secret = "QZXWenv-secret-value-0123"
	cases := []struct {
		name string
		raw  string
	}{
		{"malformed", "not json " + strings.Repeat("p", 200-len("not json ")-11) + " " + secret + " end"},
		{"neither", `{"jsonrpc":"2.0","pad":"` + strings.Repeat("p", 200-len(`{"jsonrpc":"2.0","pad":"`)-11) + " " + secret + `"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs lockedBuffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			cfg := serverConfig{Name: "s", Transport: transportStdio, Env: map[string]string{"TOKEN": secret}}
			p := newPipeTransport()
			c := newConn(cfg, clientOptions{}, logger, p)
			p.msgs <- []byte(tc.raw)
			p.close()
			<-c.ended
			out := logs.String()
			if !strings.Contains(out, "ppp") {
				t.Fatalf("the message was not logged:\n%s", out)
			}
			if strings.Contains(out, secret[:cutPrefixLen]) {
				t.Errorf("the log keeps a prefix of the secret:\n%s", out)
			}
		})
	}
}

// TestCutRedactsFirst checks the one cutting function at every position
// a secret may straddle the limit.
func TestCutRedactsFirst(t *testing.T) {
	t.Parallel()
	const secret = "cut-secret-0123456789"
	rd := newRedactor(secret)
	for n := 1; n < 40; n++ {
		for pad := 0; pad < 30; pad++ {
			s := strings.Repeat("a", pad) + " " + secret + " z"
			got := rd.cut(s, n)
			if bytes.Contains([]byte(got), []byte(secret[:cutPrefixLen])) {
				t.Fatalf("cut(%q, %d) = %q keeps a prefix of the secret", s, n, got)
			}
		}
	}
}
