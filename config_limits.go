package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// This file holds the limits on runs (admission, queue, server starts,
// the size of what a run keeps, the sampling it allows, the streams of
// its events and how long an approval waits): their names, defaults and
// the one way each is read from TOML, the environment and a flag.
// Retention of ended runs (max_kept_runs, ...) is run_store.go's.

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
	// ApprovalTimeout bounds the wait of a tool call for an operator's
	// approval in a run whose request sets no input_timeout
	// (input_approval.go). TOML takes a duration like "15m".
	ApprovalTimeout time.Duration `toml:"approval_timeout"`
}

// A limitSetting describes one field of runLimits: its TOML key (the env
// variable is HARNESS_ plus the key in upper case, the flag the key with
// dashes), what it limits, and its default. A count is an int field; a
// duration (dur set) a time.Duration field, written like "15m" and
// bounded by minDurationLimit and maxDurationLimit.
type limitSetting struct {
	key   string
	usage string
	def   func() int
	field func(*runLimits) *int
	dur   func(*runLimits) *time.Duration
	// defDur is the default of a duration.
	defDur time.Duration
}

// The range of a duration limit: from a second to a day.
const (
	minDurationLimit = time.Second
	maxDurationLimit = maxInputTimeout
)

// defaultApprovalTimeout is approval_timeout's default: longer than an
// interactive caller's input_timeout (10m), since an approval may first
// have to reach a person (a webhook, a page), yet short enough that a
// forgotten approval does not hold its run's slot for long.
const defaultApprovalTimeout = 15 * time.Minute

// limitSettings are the run limits, in the order --help lists them.
var limitSettings = []limitSetting{
	{key: "max_concurrent_runs", usage: "runs executing at once; more wait in the queue", def: func() int { return max(4, 4*runtime.NumCPU()) },
		field: func(l *runLimits) *int { return &l.MaxConcurrentRuns }},
	{key: "max_queued_runs", usage: "runs waiting for a slot; beyond it POST /v1/runs answers 429", def: func() int { return 256 },
		field: func(l *runLimits) *int { return &l.MaxQueuedRuns }},
	{key: "max_starting_servers", usage: "profile, per-run and connect_mcp servers starting at once, across all runs", def: func() int { return max(4, 2*runtime.NumCPU()) },
		field: func(l *runLimits) *int { return &l.MaxStartingServers }},
	{key: "max_prompt_bytes", usage: "bytes of a run's prompt plus system_prompt", def: func() int { return 256 << 10 },
		field: func(l *runLimits) *int { return &l.MaxPromptBytes }},
	{key: "max_output_bytes", usage: "bytes of a run's output and of each model answer kept in its events; longer ones are cut", def: func() int { return 256 << 10 },
		field: func(l *runLimits) *int { return &l.MaxOutputBytes }},
	{key: "max_sampling_requests", usage: "sampling requests the servers of one run may make of its model", def: func() int { return defaultSamplingRequests },
		field: func(l *runLimits) *int { return &l.MaxSamplingRequests }},
	{key: "max_sampling_tokens", usage: "model tokens (input and output) the sampling of one run may spend", def: func() int { return defaultSamplingTokens },
		field: func(l *runLimits) *int { return &l.MaxSamplingTokens }},
	{key: "max_tool_event_bytes", usage: "bytes of a tool call's arguments and of its result kept in its events; longer ones are cut", def: func() int { return 4 << 10 },
		field: func(l *runLimits) *int { return &l.MaxToolEventBytes }},
	{key: "max_transcript_bytes", usage: "bytes of the transcript a run keeps (GET /v1/runs/{id}/messages); later messages are dropped", def: func() int { return 8 << 20 },
		field: func(l *runLimits) *int { return &l.MaxTranscriptBytes }},
	{key: "max_conversation_bytes", usage: "bytes of a conversation the model is sent; past it older tool results, then older turns, are dropped", def: func() int { return 4 << 20 },
		field: func(l *runLimits) *int { return &l.MaxConversationBytes }},
	{key: "max_concurrent_replays", usage: "event streams of ended runs replaying their history from disk at once; beyond it GET /v1/runs/{id}/events answers 429", def: func() int { return 64 },
		field: func(l *runLimits) *int { return &l.MaxConcurrentReplays }},
	{key: "max_stream_write_seconds", usage: "seconds an event stream waits for its client to take what it is sent; a client that stops reading is dropped", def: func() int { return 30 },
		field: func(l *runLimits) *int { return &l.MaxStreamWriteSeconds }},
	{key: "approval_timeout", usage: "how long a tool call waits for an operator's approval, unless its run's request sets input_timeout; then it is denied", defDur: defaultApprovalTimeout,
		dur: func(l *runLimits) *time.Duration { return &l.ApprovalTimeout }},
}

// envName returns the environment variable of a limit.
func (s limitSetting) envName() string { return "HARNESS_" + strings.ToUpper(s.key) }

// flagName returns the flag of a limit.
func (s limitSetting) flagName() string { return strings.ReplaceAll(s.key, "_", "-") }

// value returns the limit in l as a number: a count, or a duration's
// nanoseconds. Zero is not set.
func (s limitSetting) value(l *runLimits) int64 {
	if s.dur != nil {
		return int64(*s.dur(l))
	}
	return int64(*s.field(l))
}

// set sets the limit in l to v, a number as value returns it.
func (s limitSetting) set(l *runLimits, v int64) {
	if s.dur != nil {
		*s.dur(l) = time.Duration(v)
		return
	}
	*s.field(l) = int(v)
}

// defaultValue returns the limit's default, as value returns it.
func (s limitSetting) defaultValue() int64 {
	if s.dur != nil {
		return int64(s.defDur)
	}
	return int64(s.def())
}

// text writes v, a number as value returns it, as a user writes it.
func (s limitSetting) text(v int64) string {
	if s.dur != nil {
		return time.Duration(v).String()
	}
	return strconv.FormatInt(v, 10)
}

// want says what a user may write for the limit.
func (s limitSetting) want() string {
	if s.dur != nil {
		return fmt.Sprintf("set a duration from %s to %s like \"15m\", or 0 for the default (%s)", minDurationLimit, maxDurationLimit, s.text(s.defaultValue()))
	}
	return fmt.Sprintf("set a positive number, or 0 for the default (%d)", s.def())
}

// bad returns why v, a number as value returns it, is not a value of the
// limit ("" when it is one; 0 is one: the default).
func (s limitSetting) bad(v int64) string {
	switch {
	case v < 0:
		return "is negative"
	case s.dur != nil && v != 0 && (time.Duration(v) < minDurationLimit || time.Duration(v) > maxDurationLimit):
		return "is out of range"
	}
	return ""
}

// parse reads the limit as written in an environment variable: a whole
// number, or a duration (a bare 0 included).
func (s limitSetting) parse(text string) (int64, error) {
	text = strings.TrimSpace(text)
	if s.dur == nil {
		n, err := strconv.Atoi(text)
		return int64(n), err
	}
	if text == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(text)
	return int64(d), err
}

// overlay sets every limit that o sets.
func (l *runLimits) overlay(o runLimits) {
	for _, s := range limitSettings {
		if v := s.value(&o); v != 0 {
			s.set(l, v)
		}
	}
}

// resolve returns l with every unset limit at its default.
func (l runLimits) resolve() runLimits {
	for _, s := range limitSettings {
		if s.value(&l) == 0 {
			s.set(&l, s.defaultValue())
		}
	}
	return l
}

// check returns an error for each limit that is negative, or a duration
// out of its range; where names the source ("config.toml", "--flag").
func (l runLimits) check(where func(limitSetting) string) []error {
	var errs []error
	for _, s := range limitSettings {
		v := s.value(&l)
		if why := s.bad(v); why != "" {
			errs = append(errs, fmt.Errorf("%s: %s %s; %s", where(s), s.text(v), why, s.want()))
		}
	}
	return errs
}

// checkTOML returns an error for each bad limit set in file.
func (l runLimits) checkTOML(file string) []error {
	return l.check(func(s limitSetting) string { return file + ": " + s.key })
}

// limitsFromEnv reads every HARNESS_ variable of a limit that is set and
// not empty, with an error naming each one that is not a value of it.
func limitsFromEnv(getenv func(string) (string, bool)) (runLimits, []error) {
	var l runLimits
	var errs []error
	for _, s := range limitSettings {
		v, ok := getenv(s.envName())
		if !ok || v == "" {
			continue
		}
		n, err := s.parse(v)
		if err != nil || s.bad(n) != "" {
			kind := "a number of at least 0"
			if s.dur != nil {
				kind = "a duration"
			}
			errs = append(errs, fmt.Errorf("%s: %q is not %s; %s, or unset it", s.envName(), v, kind, s.want()))
			continue
		}
		s.set(&l, n)
	}
	return l, errs
}

// registerLimitFlags adds a flag per limit to fs, writing into l; 0 (the
// flags' default) leaves the config's value.
func registerLimitFlags(fs *flag.FlagSet, l *runLimits) {
	for _, s := range limitSettings {
		usage := fmt.Sprintf("cap on %s (env %s, %s; default %s)", s.usage, s.envName(), s.key, s.text(s.defaultValue()))
		if s.dur != nil {
			fs.DurationVar(s.dur(l), s.flagName(), 0, usage)
			continue
		}
		fs.IntVar(s.field(l), s.flagName(), 0, usage)
	}
}

// checkFlags returns an error for each bad limit flag.
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

// Run limits.
const (
	defaultMaxSteps = 25
	maxMaxSteps     = 1000
)

// Sampling defaults.
const (
	defaultSamplingRequests = 20      // per run
	defaultSamplingTokens   = 100_000 // per run, input and output
	// defaultSamplingMaxTokens caps one request's maxTokens when the model
	// has no limit of its own configured.
	defaultSamplingMaxTokens = 4096
)

// maxInputTimeout bounds a server's input_timeout and a run's wait for
// an answer.
const maxInputTimeout = 24 * time.Hour
