package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file holds what names a model and how it is tuned: its
// provider/model name and base URL (modelSpec), its sampling settings
// (temperature, top_p and the reasoning effort), set in [model] or per
// run, their checks, and how the effort maps onto Anthropic's extended
// thinking. The wire formats put them into their own fields
// (model_openai.go, model_anthropic.go).

// Reasoning efforts, the values of reasoning_effort.
const (
	effortLow    = "low"
	effortMedium = "medium"
	effortHigh   = "high"
)

var reasoningEfforts = []string{effortLow, effortMedium, effortHigh}

// anthropicThinkingBudgets maps a reasoning effort to the budget_tokens of
// Anthropic's extended thinking; 1024 is the least the API takes.
var anthropicThinkingBudgets = map[string]int{effortLow: 1024, effortMedium: 4096, effortHigh: 16384}

// Ranges of the sampling settings. Anthropic's temperature stops at 1;
// with extended thinking it takes no temperature and a top_p of at least
// anthropicThinkingMinTopP.
const (
	maxTemperature           = 2.0
	maxAnthropicTemperature  = 1.0
	anthropicThinkingMinTopP = 0.95
)

// A modelTuning is how a model samples: nil or empty fields are not sent,
// so the provider's defaults apply.
type modelTuning struct {
	Temperature *float64
	TopP        *float64
	// ReasoningEffort is "", or one of reasoningEfforts.
	ReasoningEffort string
}

// override returns t with every field o sets replaced by o's: a run's
// settings over [model]'s.
func (t modelTuning) override(o modelTuning) modelTuning {
	if o.Temperature != nil {
		t.Temperature = o.Temperature
	}
	if o.TopP != nil {
		t.TopP = o.TopP
	}
	if o.ReasoningEffort != "" {
		t.ReasoningEffort = o.ReasoningEffort
	}
	return t
}

// A fieldProblem is a bad setting: the field it is about and what is
// wrong with it, with what to do. [model] and a run request word it each
// their own way.
type fieldProblem struct{ field, msg string }

// rangeProblems returns what is wrong with t whatever the provider: a
// temperature outside 0 to 2, a top_p outside 0 to 1, an unknown effort.
func (t modelTuning) rangeProblems() []fieldProblem {
	var problems []fieldProblem
	if v := t.Temperature; v != nil && !(*v >= 0 && *v <= maxTemperature) {
		problems = append(problems, fieldProblem{"temperature", fmt.Sprintf("%s is out of range: use 0 to %g, or leave it out for the model's default", formatFloat(*v), maxTemperature)})
	}
	if v := t.TopP; v != nil && !(*v >= 0 && *v <= 1) {
		problems = append(problems, fieldProblem{"top_p", fmt.Sprintf("%s is out of range: use 0 to 1, or leave it out for the model's default", formatFloat(*v))})
	}
	if e := t.ReasoningEffort; e != "" && !slices.Contains(reasoningEfforts, e) {
		problems = append(problems, fieldProblem{"reasoning_effort", fmt.Sprintf("%q is not an effort: use %s, or leave it out for the model's default", e, strings.Join(reasoningEfforts, ", "))})
	}
	return problems
}

// providerProblems returns what is wrong with spec's settings for its
// provider: Anthropic takes a temperature up to 1 and, with extended
// thinking (a reasoning effort), no temperature, a top_p of at least 0.95
// and an output cap above the thinking budget. Other providers check
// their own limits and answer with their own error.
func (spec modelSpec) providerProblems() []fieldProblem {
	entry, err := lookupModelProvider(spec.Provider)
	if err != nil || entry.wire != providerAnthropic {
		return nil
	}
	t := spec.Tuning
	var problems []fieldProblem
	budget := spec.thinkingBudget()
	switch {
	case t.Temperature != nil && budget > 0:
		problems = append(problems, fieldProblem{"temperature", fmt.Sprintf("cannot be set with reasoning_effort %q: Anthropic's extended thinking takes no temperature; remove one of them", t.ReasoningEffort)})
	case t.Temperature != nil && *t.Temperature > maxAnthropicTemperature:
		problems = append(problems, fieldProblem{"temperature", fmt.Sprintf("%s is over %g, the most Anthropic takes: use 0 to %g", formatFloat(*t.Temperature), maxAnthropicTemperature, maxAnthropicTemperature)})
	}
	if t.TopP != nil && budget > 0 && *t.TopP < anthropicThinkingMinTopP {
		problems = append(problems, fieldProblem{"top_p", fmt.Sprintf("%s is under %g, the least Anthropic's extended thinking (reasoning_effort %q) takes: raise it or remove one of them", formatFloat(*t.TopP), anthropicThinkingMinTopP, t.ReasoningEffort)})
	}
	if budget > 0 && spec.MaxTokens > 0 && spec.MaxTokens <= budget {
		problems = append(problems, fieldProblem{"reasoning_effort", fmt.Sprintf("%q thinks with up to %d tokens on Anthropic, which max_output_tokens (%d) must exceed: raise max_output_tokens above %d or lower the effort", t.ReasoningEffort, budget, spec.MaxTokens, budget)})
	}
	return problems
}

// problems returns every problem of spec's settings: rangeProblems, then
// providerProblems.
func (spec modelSpec) problems() []fieldProblem {
	return append(spec.Tuning.rangeProblems(), spec.providerProblems()...)
}

// thinkingBudget returns the budget_tokens of Anthropic's extended
// thinking for spec's reasoning effort, or 0 when there is none (no
// effort, or another wire format).
func (spec modelSpec) thinkingBudget() int {
	entry, err := lookupModelProvider(spec.Provider)
	if err != nil || entry.wire != providerAnthropic {
		return 0
	}
	return anthropicThinkingBudgets[spec.Tuning.ReasoningEffort]
}

// formatFloat writes v as the shortest decimal that reads back as v.
func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// A modelSpec says which model to call and where.
type modelSpec struct {
	Provider string // a name of modelProviders
	Model    string
	// BaseURL, when empty, comes from the provider's base URL variable
	// (OPENAI_BASE_URL, GEMINI_BASE_URL, ...), else its default.
	BaseURL string
	// MaxTokens limits each answer ([model] max_output_tokens). Zero:
	// 4096 for Anthropic, where it is required, plus the thinking budget
	// of a reasoning effort; not sent to the others.
	MaxTokens int
	// NoStream asks for whole answers ([model] stream = false); by
	// default the model is called with streaming.
	NoStream bool
	// Tuning is how the model samples: temperature, top_p, reasoning
	// effort (config_model.go).
	Tuning modelTuning
}

// parseModelName splits "provider/model" at the first '/': the model part
// may itself contain '/' ("openai/meta-llama/Llama-3"). It fails on an
// unknown provider, naming the known ones, or an empty part.
func parseModelName(s string) (modelSpec, error) {
	provider, model, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok || provider == "" || model == "" {
		return modelSpec{}, fmt.Errorf("model %q: want provider/model, e.g. openai/gpt-4o, anthropic/claude-sonnet-4-5 or google/gemini-2.5-flash", s)
	}
	if _, err := lookupModelProvider(provider); err != nil {
		return modelSpec{}, fmt.Errorf("model %q: %v", s, err)
	}
	return modelSpec{Provider: provider, Model: model}, nil
}

// name returns the model as "provider/model", or "" when no provider is
// set.
func (s modelSpec) name() string {
	if s.Provider == "" {
		return ""
	}
	return s.Provider + "/" + s.Model
}

// withModel returns s calling named's provider and model instead. The
// base URL is kept only for the same provider: [model] base_url points at
// the configured provider's server, not at another provider's.
func (s modelSpec) withModel(named modelSpec) modelSpec {
	if named.Provider != s.Provider {
		s.BaseURL = ""
	}
	s.Provider, s.Model = named.Provider, named.Model
	return s
}
