package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// This file holds a model's sampling settings (temperature, top_p and the
// reasoning effort), set in [model] or per run, their checks, and how the
// effort maps onto Anthropic's extended thinking. The wire formats put
// them into their own fields (model_openai.go, model_anthropic.go).

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
