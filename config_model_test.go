package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// This file holds the tests of the sampling settings: temperature, top_p
// and reasoning_effort from [model] and per run, in each wire format's
// own fields, and bad values refused naming the field.

// TestModelTuningReachesTheRequest: the settings of [model], and a run's
// over them, reach each provider's request body in its own shape: Chat
// Completions' temperature, top_p and reasoning_effort; Messages'
// temperature, top_p, and thinking with a budget under max_tokens.
func TestModelTuningReachesTheRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config modelTuning
		run    string // the run request's settings, after the prompt
		// want are the fields of the body by wire, as JSON; a field
		// wanted as "" must be absent.
		want map[string]map[string]string
	}{
		{name: "none set: none sent",
			want: map[string]map[string]string{
				providerOpenAI:    {"temperature": "", "top_p": "", "reasoning_effort": ""},
				providerAnthropic: {"temperature": "", "top_p": "", "thinking": "", "max_tokens": "4096"},
			}},
		{name: "from [model]", config: modelTuning{Temperature: floatPtr(0.3), TopP: floatPtr(0.8)},
			want: map[string]map[string]string{
				providerOpenAI:    {"temperature": "0.3", "top_p": "0.8", "reasoning_effort": ""},
				providerAnthropic: {"temperature": "0.3", "top_p": "0.8", "thinking": ""},
			}},
		{name: "a run's over [model]'s", config: modelTuning{Temperature: floatPtr(0.3), TopP: floatPtr(0.8)}, run: `"temperature":0,"top_p":0.5`,
			want: map[string]map[string]string{
				providerOpenAI:    {"temperature": "0", "top_p": "0.5"},
				providerAnthropic: {"temperature": "0", "top_p": "0.5"},
			}},
		{name: "reasoning effort from [model]", config: modelTuning{ReasoningEffort: effortHigh},
			want: map[string]map[string]string{
				providerOpenAI:    {"reasoning_effort": `"high"`, "temperature": ""},
				providerAnthropic: {"thinking": `{"type":"enabled","budget_tokens":16384}`, "max_tokens": "20480", "temperature": ""},
			}},
		{name: "a run's reasoning effort over [model]'s", config: modelTuning{ReasoningEffort: effortLow, TopP: floatPtr(0.97)}, run: `"reasoning_effort":"medium"`,
			want: map[string]map[string]string{
				providerOpenAI:    {"reasoning_effort": `"medium"`, "top_p": "0.97"},
				providerAnthropic: {"thinking": `{"type":"enabled","budget_tokens":4096}`, "max_tokens": "8192", "top_p": "0.97"},
			}},
	}
	for _, wire := range wires {
		for _, tt := range tests {
			t.Run(wire+"/"+tt.name, func(t *testing.T) {
				f := newFakeModel(t, wire, fakeTurn{Text: "done"})
				at := newTuningAPITest(t, f, tt.config)
				body := `{"prompt":"hi"}`
				if tt.run != "" {
					body = `{"prompt":"hi",` + tt.run + `}`
				}
				if v := waitRunID(t, at, at.postRun(t, "", body)); v.Status != runCompleted {
					t.Fatalf("run %s: %s %s", body, v.Status, v.Error)
				}
				fields := requestFields(t, f.requests()[0])
				for name, want := range tt.want[wire] {
					got, sent := fields[name]
					switch {
					case want == "" && sent:
						t.Errorf("body field %s = %s, want it absent (body %s)", name, got, f.requests()[0].Raw)
					case want != "" && !jsonEqual(string(got), want):
						t.Errorf("body field %s = %s, want %s (body %s)", name, got, want, f.requests()[0].Raw)
					}
				}
			})
		}
	}
}

// TestAnthropicThinkingRoundTrip: with a reasoning effort, the thinking
// blocks of an answer that calls tools go back first in the assistant
// message of the next call, signature and all, streamed or not.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(map[bool]string{false: "whole", true: "streamed"}[stream], func(t *testing.T) {
			signed := `{"type":"thinking","thinking":"the tool will tell","signature":"sig:the tool will tell"}`
			first := fakeTurn{Thinking: "the tool will tell", ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}}
			second := fakeTurn{Text: "done", Check: func(req fakeRequest) error {
				var body struct {
					Messages []struct {
						Role    string            `json:"role"`
						Content []json.RawMessage `json:"content"`
					} `json:"messages"`
				}
				if err := json.Unmarshal(req.Raw, &body); err != nil {
					return err
				}
				for _, m := range body.Messages {
					if m.Role == roleAssistant && (len(m.Content) < 2 || !jsonEqual(string(m.Content[0]), signed)) {
						return fmt.Errorf("the assistant message %s does not begin with the thinking block %s", m.Content, signed)
					}
				}
				return nil
			}}
			f := newFakeModel(t, providerAnthropic, first, second)
			if stream {
				f.streamChunks(5)
			}
			at := newTuningAPITest(t, f, modelTuning{ReasoningEffort: effortLow})
			if v := waitRunID(t, at, at.postRun(t, "", `{"prompt":"find echo"}`)); v.Status != runCompleted || v.Output != "done" {
				t.Fatalf("run: %s %q %s", v.Status, v.Output, v.Error)
			}
		})
	}
}

// TestModelTuningRefused: bad settings in a run request are refused with
// a 400 naming the field, before the run starts.
func TestModelTuningRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, wire string
		config     modelTuning
		body, want string
	}{
		{name: "temperature out of range", wire: providerOpenAI, body: `{"prompt":"x","temperature":2.5}`,
			want: "temperature: 2.5 is out of range: use 0 to 2, or leave it out for the model's default"},
		{name: "negative top_p", wire: providerOpenAI, body: `{"prompt":"x","top_p":-1}`,
			want: "top_p: -1 is out of range: use 0 to 1, or leave it out for the model's default"},
		{name: "unknown effort", wire: providerOpenAI, body: `{"prompt":"x","reasoning_effort":"max"}`,
			want: `reasoning_effort: "max" is not an effort: use low, medium, high, or leave it out for the model's default`},
		{name: "temperature over Anthropic's", wire: providerAnthropic, body: `{"prompt":"x","temperature":1.5}`,
			want: "temperature: 1.5 is over 1, the most Anthropic takes: use 0 to 1"},
		{name: "a run's effort against [model]'s temperature on Anthropic", wire: providerAnthropic, config: modelTuning{Temperature: floatPtr(0.2)},
			body: `{"prompt":"x","reasoning_effort":"low"}`,
			want: `temperature: cannot be set with reasoning_effort "low": Anthropic's extended thinking takes no temperature; remove one of them`},
		{name: "a type error names the field", wire: providerOpenAI, body: `{"prompt":"x","temperature":"hot"}`,
			want: `temperature`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := newTuningAPITest(t, newFakeModel(t, tt.wire), tt.config)
			resp, data := at.do(t, http.MethodPost, "/v1/runs", "", tt.body)
			e, err := decodeAPIError(data)
			if resp.StatusCode != http.StatusBadRequest || err != nil || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("POST /v1/runs %s = %d %s, want 400 with %q", tt.body, resp.StatusCode, data, tt.want)
			}
		})
	}
}

// newTuningAPITest serves the API over runs of f's model, built by
// newModelProvider with tuning as [model]'s settings.
func newTuningAPITest(t *testing.T, f *fakeModel, tuning modelTuning) *apiTest {
	t.Helper()
	reg := newRegistry(nil, registryOptions{})
	t.Cleanup(reg.close)
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.newProvider = nil // the real one, which reads the settings
	opts.Model = f.spec()
	opts.Model.Tuning = tuning
	return serveRunsAPI(t, newRunsWith(t, opts))
}
