package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
)

// This file holds the limits on runs (admission, queue, server starts,
// the size of what a run keeps, the sampling it allows and the streams of
// its events): their names,
// defaults and the one way each is read from TOML, the environment and a
// flag. Retention of ended runs (max_kept_runs, ...) is run_store.go's.

// A runLimits holds every limit on runs. Zero means "not set": resolve
// fills in the defaults. Its toml tags are top-level keys of config.toml.
type runLimits struct {
	MaxConcurrentRuns  int `toml:"max_concurrent_runs"`
	MaxQueuedRuns      int `toml:"max_queued_runs"`
	MaxStartingServers int `toml:"max_starting_servers"`
	MaxPromptBytes     int `toml:"max_prompt_bytes"`
	MaxOutputBytes     int `toml:"max_output_bytes"`
	// MaxSamplingRequests and MaxSamplingTokens cap what the servers of
	// one run may ask of its model (sampling/createMessage).
	MaxSamplingRequests int `toml:"max_sampling_requests"`
	MaxSamplingTokens   int `toml:"max_sampling_tokens"`
	// MaxToolEventBytes cuts the arguments and the result a tool call's
	// events carry; the model and the transcript get them whole.
	MaxToolEventBytes int `toml:"max_tool_event_bytes"`
	// MaxTranscriptBytes bounds the transcript a run keeps
	// (run_transcript.go).
	MaxTranscriptBytes int `toml:"max_transcript_bytes"`
	// MaxConversationBytes bounds what the model is sent of a
	// conversation's earlier runs (run_conversation.go).
	MaxConversationBytes int `toml:"max_conversation_bytes"`
	// MaxConcurrentReplays bounds the event streams of ended runs that
	// read their history from disk at once (api_stream.go).
	MaxConcurrentReplays int `toml:"max_concurrent_replays"`
	// MaxStreamWriteSeconds bounds how long one write of an event stream
	// waits for its client: one that stops reading is dropped.
	MaxStreamWriteSeconds int `toml:"max_stream_write_seconds"`
}

// A limitSetting describes one field of runLimits: its TOML key (the env
// variable is HARNESS_ plus the key in upper case, the flag the key with
// dashes), what it limits, and its default.
type limitSetting struct {
	key   string
	usage string
	def   func() int
	field func(*runLimits) *int
}

// limitSettings are the run limits, in the order --help lists them.
var limitSettings = []limitSetting{
	{"max_concurrent_runs", "runs executing at once; more wait in the queue", func() int { return max(4, 4*runtime.NumCPU()) },
		func(l *runLimits) *int { return &l.MaxConcurrentRuns }},
	{"max_queued_runs", "runs waiting for a slot; beyond it POST /v1/runs answers 429", func() int { return 256 },
		func(l *runLimits) *int { return &l.MaxQueuedRuns }},
	{"max_starting_servers", "profile, per-run and connect_mcp servers starting at once, across all runs", func() int { return max(4, 2*runtime.NumCPU()) },
		func(l *runLimits) *int { return &l.MaxStartingServers }},
	{"max_prompt_bytes", "bytes of a run's prompt plus system_prompt", func() int { return 256 << 10 },
		func(l *runLimits) *int { return &l.MaxPromptBytes }},
	{"max_output_bytes", "bytes of a run's output and of each model answer kept in its events; longer ones are cut", func() int { return 256 << 10 },
		func(l *runLimits) *int { return &l.MaxOutputBytes }},
	{"max_sampling_requests", "sampling requests the servers of one run may make of its model", func() int { return defaultSamplingRequests },
		func(l *runLimits) *int { return &l.MaxSamplingRequests }},
	{"max_sampling_tokens", "model tokens (input and output) the sampling of one run may spend", func() int { return defaultSamplingTokens },
		func(l *runLimits) *int { return &l.MaxSamplingTokens }},
	{"max_tool_event_bytes", "bytes of a tool call's arguments and of its result kept in its events; longer ones are cut", func() int { return 4 << 10 },
		func(l *runLimits) *int { return &l.MaxToolEventBytes }},
	{"max_transcript_bytes", "bytes of the transcript a run keeps (GET /v1/runs/{id}/messages); later messages are dropped", func() int { return 8 << 20 },
		func(l *runLimits) *int { return &l.MaxTranscriptBytes }},
	{"max_conversation_bytes", "bytes of a conversation the model is sent; past it older tool results, then older turns, are dropped", func() int { return 4 << 20 },
		func(l *runLimits) *int { return &l.MaxConversationBytes }},
	{"max_concurrent_replays", "event streams of ended runs replaying their history from disk at once; beyond it GET /v1/runs/{id}/events answers 429", func() int { return 64 },
		func(l *runLimits) *int { return &l.MaxConcurrentReplays }},
	{"max_stream_write_seconds", "seconds an event stream waits for its client to take what it is sent; a client that stops reading is dropped", func() int { return 30 },
		func(l *runLimits) *int { return &l.MaxStreamWriteSeconds }},
}

// envName returns the environment variable of a limit.
func (s limitSetting) envName() string { return "HARNESS_" + strings.ToUpper(s.key) }

// flagName returns the flag of a limit.
func (s limitSetting) flagName() string { return strings.ReplaceAll(s.key, "_", "-") }

// overlay sets every limit that o sets.
func (l *runLimits) overlay(o runLimits) {
	for _, s := range limitSettings {
		if v := *s.field(&o); v != 0 {
			*s.field(l) = v
		}
	}
}

// resolve returns l with every unset limit at its default.
func (l runLimits) resolve() runLimits {
	for _, s := range limitSettings {
		if p := s.field(&l); *p == 0 {
			*p = s.def()
		}
	}
	return l
}

// check returns an error for each negative limit; where names the source
// ("config.toml", "--flag").
func (l runLimits) check(where func(limitSetting) string) []error {
	var errs []error
	for _, s := range limitSettings {
		if v := *s.field(&l); v < 0 {
			errs = append(errs, fmt.Errorf("%s: %d is negative; set a positive number, or 0 for the default (%d)", where(s), v, s.def()))
		}
	}
	return errs
}

// checkTOML returns an error for each negative limit set in file.
func (l runLimits) checkTOML(file string) []error {
	return l.check(func(s limitSetting) string { return file + ": " + s.key })
}

// limitsFromEnv reads every HARNESS_MAX_... variable that is set and not
// empty, with an error naming each one that is not a number of at least 0.
func limitsFromEnv(getenv func(string) (string, bool)) (runLimits, []error) {
	var l runLimits
	var errs []error
	for _, s := range limitSettings {
		v, ok := getenv(s.envName())
		if !ok || v == "" {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a number of at least 0; set a positive number (0 for the default, %d) or unset it", s.envName(), v, s.def()))
			continue
		}
		*s.field(&l) = n
	}
	return l, errs
}

// registerLimitFlags adds a flag per limit to fs, writing into l; 0 (the
// flags' default) leaves the config's value.
func registerLimitFlags(fs *flag.FlagSet, l *runLimits) {
	for _, s := range limitSettings {
		fs.IntVar(s.field(l), s.flagName(), 0, fmt.Sprintf("cap on %s (env %s, %s; default %d)", s.usage, s.envName(), s.key, s.def()))
	}
}

// checkFlags returns an error for each negative limit flag.
func (l runLimits) checkFlags() []error {
	return l.check(func(s limitSetting) string { return "--" + s.flagName() })
}

// A startGate bounds how many servers start at once (max_starting_servers):
// a server waits for a slot before its process or connection is started, so
// its startup_timeout runs only once it has one. A nil gate does not bound.
// Safe for concurrent use.
type startGate chan struct{}

// newStartGate returns a gate of n slots.
func newStartGate(n int) startGate { return make(startGate, n) }

// run calls start once a slot is free and frees it when start returns. It
// blocks until then or until ctx is done; then it returns an error wrapping
// ctx.Err() without calling start.
func (g startGate) run(ctx context.Context, start func() error) error {
	if g == nil {
		return start()
	}
	select {
	case g <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("waiting for a free start slot (max_starting_servers): %w", ctx.Err())
	}
	defer func() { <-g }()
	return start()
}
