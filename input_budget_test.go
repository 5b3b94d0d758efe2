package main

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestOutsideSamplingBudget has a global server send sampling requests
// while no call is in flight, as a server whose tool returned at once
// does: past max_outside_sampling_requests per hour they are refused,
// naming the setting; what was served is counted in /metrics.
func TestOutsideSamplingBudget(t *testing.T) {
	t.Parallel()
	const budget, sent = 3, 6
	f := newFakeModel(t, providerOpenAI, slices.Repeat([]fakeTurn{{Text: "sampled", Usage: modelUsage{InputTokens: 10, OutputTokens: 5}}}, budget)...)
	outside := newOutsideSamplingBudget(budget, 100_000)
	policy := &inputPolicy{Sampler: &samplingModel{Provider: f.provider(t), Spec: f.spec()}, Outside: outside, Logger: slog.New(slog.DiscardHandler)}
	p := newPipeTransport()
	c := newConn(serverConfig{Name: "chatty", Transport: transportStdio, Sampling: true}, clientOptions{Input: policy}, discardLogger(), p)
	t.Cleanup(func() { p.close(); <-c.ended })
	for i := range sent {
		p.msgs <- []byte(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":50}}`, i+1))
	}
	served, refused := 0, 0
	for range sent {
		select {
		case answer := <-p.sent:
			switch {
			case strings.Contains(string(answer), `"sampled"`):
				served++
			case strings.Contains(string(answer), "max_outside_sampling_requests (3 per hour)"):
				refused++
			default:
				t.Errorf("answer %s, want a sample or a refusal naming max_outside_sampling_requests", answer)
			}
		case <-t.Context().Done():
			t.Fatal("the server's requests were not all answered")
		}
	}
	if served != budget || refused != sent-budget {
		t.Errorf("served %d, refused %d, want %d and %d", served, refused, budget, sent-budget)
	}
	m := newMetrics()
	m.outsideSampling = outside
	var out strings.Builder
	m.write(&out, nil, storeHealth{})
	for _, want := range []string{
		`harnessd_outside_sampling_requests_total{server="chatty",outcome="served"} 3`,
		`harnessd_outside_sampling_requests_total{server="chatty",outcome="refused"} 3`,
		`harnessd_outside_sampling_tokens_total{server="chatty"} 45`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, out.String())
		}
	}
}

// TestOutsideSamplingWindow checks the budget's hour, its tokens and its
// zero, which refuses.
func TestOutsideSamplingWindow(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	b := newOutsideSamplingBudget(2, 100)
	b.now = func() time.Time { return now }
	take := func(server string) (int, error) {
		left, hold, err := b.take(server, 0, 1000)
		hold.release()
		return left, err
	}
	for range 2 {
		if _, err := take("a"); err != nil {
			t.Fatalf("take within budget = %v", err)
		}
	}
	if _, err := take("a"); err == nil || !strings.Contains(err.Error(), "max_outside_sampling_requests") {
		t.Errorf("third take = %v, want a refusal naming max_outside_sampling_requests", err)
	}
	if _, err := take("b"); err != nil {
		t.Errorf("another server's take = %v, want its own budget", err)
	}
	now = now.Add(time.Hour)
	left, hold, err := b.take("a", 0, 1000)
	if err != nil || left != 100 {
		t.Fatalf("take an hour later = %d, %v, want 100 tokens", left, err)
	}
	hold.settle(modelUsage{InputTokens: 80, OutputTokens: 20})
	if _, err := take("a"); err == nil || !strings.Contains(err.Error(), "max_outside_sampling_tokens") {
		t.Errorf("take past the tokens = %v, want a refusal naming max_outside_sampling_tokens", err)
	}
	if _, _, err := newOutsideSamplingBudget(0, 100).take("a", 0, 10); err == nil || !strings.Contains(err.Error(), "is 0") {
		t.Errorf("take with a zero budget = %v, want a refusal", err)
	}
}

// TestOutsideSamplingSettings reads the budget from each source, later
// ones winning, and names a bad value's source.
func TestOutsideSamplingSettings(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, home, "config.toml", "max_outside_sampling_requests = 0\nmax_outside_sampling_tokens = 500\n")
	cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(map[string]string{"HARNESS_MAX_OUTSIDE_SAMPLING_TOKENS": "700"})})
	if err != nil {
		t.Fatal(err)
	}
	b, err := cfg.OutsideSampling.budget()
	if err != nil || b.maxRequests != 0 || b.maxTokens != 700 {
		t.Errorf("budget = %+v, %v, want 0 requests (from the file) and 700 tokens (from the environment)", b, err)
	}
	_, err = loadConfig(loadOptions{Home: t.TempDir(), Getenv: fakeEnv(map[string]string{"HARNESS_MAX_OUTSIDE_SAMPLING_REQUESTS": "lots"})})
	if err == nil || !strings.Contains(err.Error(), "HARNESS_MAX_OUTSIDE_SAMPLING_REQUESTS") {
		t.Errorf("a bad value = %v, want an error naming its variable", err)
	}
	if b, _ := (outsideSamplingSettings{}).budget(); b.maxRequests != defaultOutsideSamplingRequests || b.maxTokens != defaultOutsideSamplingTokens {
		t.Errorf("default budget = %+v", b)
	}
}
