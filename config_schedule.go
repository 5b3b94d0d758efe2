package main

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	_ "time/tzdata" // the static binary carries its own zone data for [[schedules]] timezone
)

// This file holds the [[schedules]] tables of config.toml: their fields
// (the cron expression, the time zone, the overlap rule and the fields of
// the runs they start), checked as a whole with every problem named by
// file, schedule and field.

// Overlap rules: what a fire does while the schedule's previous run is
// still active.
const (
	overlapSkip  = "skip"
	overlapQueue = "queue"
)

// scheduleFields lists the keys of a [[schedules]] table, for hints.
const scheduleFields = "name, cron, timezone, prompt, profile, model, max_steps, webhook_url, max_tokens, max_cost_usd, max_duration, conversation_id, tenant, overlap, catch_up, paused"

// A rawSchedule is one [[schedules]] table as written, or the body of
// POST /v1/schedules. Comparable: a reload keeps the state of a schedule
// whose table is unchanged.
type rawSchedule struct {
	Name           string  `json:"name" toml:"name"`
	Cron           string  `json:"cron" toml:"cron"`
	Timezone       string  `json:"timezone" toml:"timezone"`
	Prompt         string  `json:"prompt" toml:"prompt"`
	Profile        string  `json:"profile" toml:"profile"`
	Model          string  `json:"model" toml:"model"`
	MaxSteps       int     `json:"max_steps" toml:"max_steps"`
	WebhookURL     string  `json:"webhook_url" toml:"webhook_url"`
	MaxTokens      int64   `json:"max_tokens" toml:"max_tokens"`
	MaxCostUSD     float64 `json:"max_cost_usd" toml:"max_cost_usd"`
	MaxDuration    string  `json:"max_duration" toml:"max_duration"`
	ConversationID string  `json:"conversation_id" toml:"conversation_id"`
	Tenant         string  `json:"tenant" toml:"tenant"`
	Overlap        string  `json:"overlap" toml:"overlap"`
	CatchUp        bool    `json:"catch_up" toml:"catch_up"`
	// Paused stops the schedule firing until it is resumed; it can still
	// be run on request.
	Paused bool `json:"paused" toml:"paused"`
}

// A scheduleConfig is one checked schedule: its table as written (with
// the defaults applied) and what was parsed from it. Read-only.
type scheduleConfig struct {
	rawSchedule
	Source   string // the file it comes from
	spec     *cronSpec
	location *time.Location
}

// parseSchedules checks the [[schedules]] tables of one file, in file
// order. It returns the valid ones and an error joining every problem,
// each naming the file, the table and the field.
func parseSchedules(file string, tables []rawSchedule) ([]scheduleConfig, error) {
	var out []scheduleConfig
	var errs []error
	seen := map[string]bool{}
	for i, raw := range tables {
		where := fmt.Sprintf("%s: [[schedules]] #%d", file, i+1)
		if raw.Name != "" {
			where += fmt.Sprintf(" (%q)", raw.Name)
		}
		s, problems := checkSchedule(raw)
		if seen[raw.Name] && raw.Name != "" {
			problems = append(problems, "name: defined twice in this file; rename one")
		}
		seen[raw.Name] = true
		for _, p := range problems {
			errs = append(errs, fmt.Errorf("%s: %s", where, p))
		}
		if len(problems) == 0 {
			s.Source = file
			out = append(out, s)
		}
	}
	return out, errors.Join(errs...)
}

// checkSchedule returns the schedule of raw with its defaults applied,
// and a problem ("field: what is wrong; what to do") for each bad field.
func checkSchedule(raw rawSchedule) (scheduleConfig, []string) {
	var problems []string
	bad := func(field, format string, args ...any) {
		problems = append(problems, field+": "+fmt.Sprintf(format, args...))
	}
	if err := checkName(raw.Name, "", "letters, digits, \"-\" and \"_\""); err != nil {
		bad("name", "%v", err)
	}
	s := scheduleConfig{rawSchedule: raw}
	if strings.TrimSpace(raw.Cron) == "" {
		bad("cron", "missing; give five fields like \"0 3 * * *\" or a shorthand like \"@daily\"")
	} else if spec, err := parseCron(raw.Cron); err != nil {
		bad("cron", "%v", err)
	} else {
		s.spec = spec
	}
	s.Timezone = strings.TrimSpace(raw.Timezone)
	if s.Timezone == "" {
		s.Timezone = "UTC"
	}
	if loc, err := time.LoadLocation(s.Timezone); err != nil || strings.EqualFold(s.Timezone, "Local") {
		bad("timezone", "%q is not an IANA time zone; write one like \"Europe/Paris\" or \"UTC\"", s.Timezone)
	} else {
		s.location = loc
	}
	if raw.Tenant != "" {
		if err := checkName(raw.Tenant, ".", "letters, digits, \"-\", \"_\" and \".\", like the tenant of an API key (or leave it out: only admin keys see the runs)"); err != nil {
			bad("tenant", "%v", err)
		}
	}
	if strings.TrimSpace(raw.Prompt) == "" {
		bad("prompt", "missing; say what the agent should do")
	}
	if raw.Profile != "" {
		if err := checkName(raw.Profile, "", "letters, digits, \"-\" and \"_\""); err != nil {
			bad("profile", "%v", err)
		}
	}
	if raw.Model != "" {
		if _, err := parseModelName(raw.Model); err != nil {
			bad("model", "%v", err)
		}
	}
	if raw.MaxSteps < 0 || raw.MaxSteps > maxMaxSteps {
		bad("max_steps", "%d is out of range; use 1 to %d, or leave it out for the default", raw.MaxSteps, maxMaxSteps)
	}
	if raw.WebhookURL != "" {
		if err := checkHTTPURL(raw.WebhookURL); err != nil {
			bad("webhook_url", "%v", err)
		}
	}
	if raw.MaxTokens < 0 {
		bad("max_tokens", "%d is negative; give a positive number of tokens, or leave it out", raw.MaxTokens)
	}
	if raw.MaxCostUSD < 0 || math.IsNaN(raw.MaxCostUSD) || math.IsInf(raw.MaxCostUSD, 0) {
		bad("max_cost_usd", "not a positive amount; give one like 0.50, or leave it out")
	}
	if raw.MaxDuration != "" {
		if d, err := time.ParseDuration(raw.MaxDuration); err != nil || d <= 0 {
			bad("max_duration", "%q is not a positive duration; write one like \"10m\"", raw.MaxDuration)
		}
	}
	s.Overlap = strings.TrimSpace(raw.Overlap)
	switch s.Overlap {
	case "":
		s.Overlap = overlapSkip
	case overlapSkip, overlapQueue:
	default:
		bad("overlap", "%q: use %q (the default: a fire while the previous run is active starts nothing) or %q (it starts once that run ends)", raw.Overlap, overlapSkip, overlapQueue)
	}
	return s, problems
}

// checkScheduleModels returns an error naming each schedule that names no
// model when no default model is configured either: its runs could not
// start.
func checkScheduleModels(cfg *config) error {
	if cfg.Model.Provider != "" {
		return nil
	}
	var errs []error
	for _, s := range cfg.Schedules {
		if s.Model == "" {
			errs = append(errs, fmt.Errorf("%s: [[schedules]] %q: model: none configured for its runs; set model in the schedule, [model] name or HARNESS_MODEL", s.Source, s.Name))
		}
	}
	return errors.Join(errs...)
}

// nextFires returns the next n fire times of s after after, in its time
// zone; fewer when it stops firing within the cron search bound.
func (s scheduleConfig) nextFires(after time.Time, n int) []time.Time {
	var out []time.Time
	for range n {
		t, ok := s.spec.next(after, s.location)
		if !ok {
			break
		}
		out = append(out, t)
		after = t
	}
	return out
}
