package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// This file tests how sampling requests' modelPreferences hints pick a
// model from the allow-list ([model] sampling_models).

func TestPickSamplingModel(t *testing.T) {
	t.Parallel()
	current := modelSpec{Provider: providerAnthropic, Model: "claude-sonnet-4-5"}
	allowed := []modelSpec{{Provider: providerOpenAI, Model: "gpt-4o-mini"}, {Provider: providerAnthropic, Model: "claude-haiku-4-5"}}
	tests := []struct {
		name        string
		hints       []string
		allowed     []modelSpec
		want        string
		wantIgnored []string
	}{
		{"no hints", nil, allowed, "", nil},
		{"an allowed model by substring", []string{"haiku"}, allowed, "anthropic/claude-haiku-4-5", nil},
		{"case does not matter", []string{"GPT-4O"}, allowed, "openai/gpt-4o-mini", nil},
		{"the run's own model is always allowed", []string{"sonnet"}, allowed, "anthropic/claude-sonnet-4-5", nil},
		{"the run's model first among matches", []string{"claude"}, allowed, "anthropic/claude-sonnet-4-5", nil},
		{"hints in order, unknown ones skipped", []string{"gemini-2.5-pro", "mini"}, allowed, "openai/gpt-4o-mini", []string{"gemini-2.5-pro"}},
		{"no hint allowed", []string{"gemini", "llama"}, allowed, "", []string{"gemini", "llama"}},
		{"nothing allowed but the run's model", []string{"haiku"}, nil, "", []string{"haiku"}},
		{"by provider", []string{"openai/"}, allowed, "openai/gpt-4o-mini", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			picked, ok, ignored := pickSamplingModel(tt.hints, current, tt.allowed)
			if got := picked.name(); got != tt.want || ok != (tt.want != "") || strings.Join(ignored, ",") != strings.Join(tt.wantIgnored, ",") {
				t.Errorf("pickSamplingModel(%q) = %q, %v, ignored %q; want %q, ignored %q", tt.hints, got, ok, ignored, tt.want, tt.wantIgnored)
			}
		})
	}
}

// TestSamplingHintPicksModel serves sampling requests with hints: the
// model asked of the provider, and the one the result names, is the
// allowed model a hint picks, else the run's.
func TestSamplingHintPicksModel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		prefs string
		want  string
	}{
		{"no preferences", ``, "fake-model"},
		{"an allowed model", `,"modelPreferences":{"hints":[{"name":"small"}],"intelligencePriority":0.2}`, "small-model"},
		{"a model not on the list", `,"modelPreferences":{"hints":[{"name":"claude-3-opus"}]}`, "fake-model"},
		{"the first allowed hint wins", `,"modelPreferences":{"hints":[{"name":"gemini"},{"name":"small"}]}`, "small-model"},
		{"empty hints", `,"modelPreferences":{"hints":[]}`, "fake-model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "sampled"})
			spec := f.spec()
			p := &inputPolicy{Sampler: &samplingModel{
				Provider: f.provider(t),
				Spec:     spec,
				Models:   []modelSpec{{Provider: providerOpenAI, Model: "small-model"}, {Provider: providerOpenAI, Model: "other-model"}},
				NewProvider: func(s modelSpec) (modelProvider, error) {
					return newModelProvider(s, f.getenv, discardLogger())
				},
			}}
			params := `{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10` + tt.prefs + `}`
			res, rerr := p.sample(t.Context(), serverConfig{Name: "s", Sampling: true}, json.RawMessage(params))
			if rerr != nil {
				t.Fatalf("sample(%s) = %v", params, rerr)
			}
			if got := res.(map[string]any)["model"]; !strings.HasSuffix(got.(string), tt.want) {
				t.Errorf("sample(%s) result model = %v, want %s", params, got, tt.want)
			}
			reqs := f.requests()
			if len(reqs) != 1 || !strings.Contains(string(reqs[0].Raw), `"model":"`+tt.want+`"`) {
				t.Errorf("sample(%s) asked the provider %d times, want once for %s", params, len(reqs), tt.want)
			}
		})
	}
}
