package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// This file holds what every model provider shares: the provider-neutral
// request and response, the provider selection, and the HTTP endpoint with
// its bounded retries.

// Roles of a chatMessage.
const (
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// Stop reasons of a modelResponse. Both wire formats map onto these (OpenAI's
// "stop", "tool_calls" and "length"); any other reason passes through as the
// provider gave it.
const (
	stopEndTurn   = "end_turn"
	stopToolUse   = "tool_use"
	stopMaxTokens = "max_tokens"
)

const (
	anthropicVersion          = "2023-06-01"
	defaultAnthropicMaxTokens = 4096
	// modelAttemptTimeout bounds one HTTP attempt: a model may think for
	// minutes, but an endpoint that never answers must not hold a run forever.
	modelAttemptTimeout   = 10 * time.Minute
	maxModelResponseBytes = 16 << 20
	maxErrorMessageLen    = 300
)

// A chatMessage is one message of a conversation in provider-neutral form.
// The system prompt is not a message: it is modelRequest.System.
type chatMessage struct {
	Role       string     // roleUser, roleAssistant or roleTool
	Content    string     // text; for a tool message, the result
	ToolCalls  []toolCall // assistant: the calls the model made
	ToolCallID string     // tool: the ID of the call this message answers
	IsError    bool       // tool: the result is an error
	// Thinking is what modelResponse.Thinking held for this assistant
	// message, sent back as it came; nil for most providers.
	Thinking []json.RawMessage
}

// A toolCall is one tool invocation the model asked for.
type toolCall struct {
	ID   string
	Name string
	// Arguments is a JSON object, "{}" when the model sent none.
	Arguments json.RawMessage
	// ArgumentsError is set when the model sent arguments that are not a
	// JSON object; Arguments is then "{}". The tool should not be called:
	// answer the call with this text as a tool error, so the model can
	// correct itself.
	ArgumentsError string
}

// A toolDef is one tool offered to the model.
type toolDef struct {
	Name        string
	Description string
	// InputSchema is a JSON Schema object; {"type":"object"} is sent when
	// it is empty.
	InputSchema json.RawMessage
}

// A modelRequest is one call to a model: the whole conversation so far.
type modelRequest struct {
	Model     string // overrides the provider's model when not empty
	System    string
	Messages  []chatMessage
	Tools     []toolDef
	MaxTokens int // overrides the provider's limit when positive
	// StopSequences end the answer early; none for the agent loop.
	StopSequences []string
	// OnText, when set, receives the answer's text as the model writes it
	// (a streamed call), in order, from the goroutine calling complete;
	// the pieces of one attempt add up to the answer's Content. Nil: no
	// one listens.
	OnText func(text string)
	// OnRetry, when set, is called before a failed call is tried again,
	// with the number of the attempt about to start and why the last one
	// failed: the text OnText received so far is void.
	OnRetry func(attempt int, err error)
}

// bytesPerTokenEstimate is how many bytes of a request one input token
// is taken to cover when a call's cost is held before it is made: the
// usual tokenizers make a token of 3 to 4 bytes of English or JSON, so 3
// errs towards holding too much.
const bytesPerTokenEstimate = 3

// estimateInputTokens returns an estimate, erring high, of the input
// tokens req will use: its system prompt, messages (text, tool calls,
// tool results) and tool definitions, at bytesPerTokenEstimate bytes a
// token, plus a few tokens of framing per message and tool.
func (req modelRequest) estimateInputTokens() int {
	const framing = 4 // tokens a provider adds around each message or tool
	n := len(req.System)
	for _, m := range req.Messages {
		n += len(m.Role) + len(m.Content) + len(m.ToolCallID)
		for _, c := range m.ToolCalls {
			n += len(c.ID) + len(c.Name) + len(c.Arguments)
		}
	}
	for _, t := range req.Tools {
		n += len(t.Name) + len(t.Description) + len(t.InputSchema)
	}
	return (n+bytesPerTokenEstimate-1)/bytesPerTokenEstimate + framing*(len(req.Messages)+len(req.Tools)+1)
}

// A modelUsage counts the tokens of one or more model calls. InputTokens
// includes tokens read from or written to a prompt cache.
type modelUsage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedInputTokens are the input tokens read from a prompt cache (a
	// part of InputTokens), which a price table may price apart.
	CachedInputTokens int `json:"cached_input_tokens,omitempty"`
	// CostUSD is what the calls cost, set by a run when its model has a
	// price (run_budget.go).
	CostUSD float64 `json:"cost_usd,omitempty"`
}

// add adds v to u, to total the usage of a run.
func (u *modelUsage) add(v modelUsage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CachedInputTokens += v.CachedInputTokens
	u.CostUSD = roundUSD(u.CostUSD + v.CostUSD)
}

// A modelResponse is the model's answer: text, tool calls, or both.
type modelResponse struct {
	Content    string
	ToolCalls  []toolCall
	Usage      modelUsage
	StopReason string // stopEndTurn, stopToolUse, stopMaxTokens or the provider's own
	// Thinking are the provider's reasoning blocks (Anthropic's thinking
	// and redacted_thinking, signed), which must go back with the answer
	// in the next call of a tool-use turn; nil when there are none.
	Thinking []json.RawMessage
	// Model is the model that answered, as the provider names it; "" when
	// it did not say.
	Model string
}

// A modelProvider calls one model. Implementations are safe for concurrent use.
type modelProvider interface {
	// complete sends the conversation and returns the model's answer. It
	// retries rate limits, server errors and connection failures a bounded
	// number of times, and blocks at most until ctx is done; then the error
	// wraps ctx.Err(). Errors name the provider and never hold the API key.
	complete(ctx context.Context, req modelRequest) (*modelResponse, error)
	// name returns "provider/model", e.g. "openai/gpt-4o".
	name() string
}

// outputLimit returns the output tokens an answer of the model may use:
// MaxTokens, else for Anthropic 4096 plus the thinking budget of its
// reasoning effort, else 0 for no limit of harnessd's.
func (s modelSpec) outputLimit() int {
	if s.MaxTokens <= 0 && s.Provider != "" {
		if entry, err := lookupModelProvider(s.Provider); err == nil && entry.wire == providerAnthropic {
			return defaultAnthropicMaxTokens + s.thinkingBudget()
		}
	}
	return max(s.MaxTokens, 0)
}

// newModelProvider returns the provider spec names. getenv looks up the API
// key and base URL variables (os.LookupEnv in the daemon); an empty value
// counts as unset. It fails on an unknown provider, a sampling setting
// the provider cannot take, a bad base URL, or a missing key for the
// provider's public API; other base URLs (vLLM, llama.cpp, Ollama,
// proxies) may need no key.
func newModelProvider(spec modelSpec, getenv func(string) (string, bool), logger *slog.Logger) (modelProvider, error) {
	entry, err := lookupModelProvider(spec.Provider)
	if err != nil {
		return nil, fmt.Errorf("model %q: %v", spec.name(), err)
	}
	if problems := spec.problems(); len(problems) > 0 {
		return nil, fmt.Errorf("model %q: %s: %s", spec.name(), problems[0].field, problems[0].msg)
	}
	ep, err := newModelEndpoint(spec, entry, getenv, logger)
	if err != nil {
		return nil, err
	}
	if entry.wire == providerAnthropic {
		if ep.key != "" {
			ep.header.Set("X-Api-Key", ep.key)
		}
		ep.header.Set("Anthropic-Version", anthropicVersion)
		return &anthropicProvider{modelEndpoint: ep, model: spec.Model, maxTokens: spec.outputLimit(), tuning: spec.Tuning}, nil
	}
	if ep.key != "" {
		ep.header.Set("Authorization", "Bearer "+ep.key)
	}
	return &openaiProvider{modelEndpoint: ep, model: spec.Model, maxTokens: spec.MaxTokens, tuning: spec.Tuning,
		maxCompletionTokens: ep.publicAPI && entry.maxCompletionTokens}, nil
}

// A retryPolicy bounds the retries of one model call.
type retryPolicy struct {
	attempts      int           // attempts in all, at least 1
	backoffBase   time.Duration // delay before the second attempt, doubled for each next one
	backoffCap    time.Duration // longest backoff delay
	retryAfterCap time.Duration // longest wait a Retry-After header may ask for
}

var defaultRetryPolicy = retryPolicy{attempts: 4, backoffBase: time.Second, backoffCap: 30 * time.Second, retryAfterCap: 60 * time.Second}

// A modelEndpoint posts JSON to one model API with bounded retries. Its
// fields are set at construction (tests shorten retry) and only read
// afterwards, so it is safe for concurrent use.
type modelEndpoint struct {
	provider  string
	wire      string // the format spoken: providerOpenAI or providerAnthropic
	modelName string // "provider/model"
	url       string // where requests are posted
	// baseURL and baseURLOrigin describe the base URL for error messages.
	baseURL, baseURLOrigin string
	keyEnv                 string
	key                    string    // never logged nor put into an error
	secrets                *redactor // hides key
	publicAPI              bool      // the base URL is the provider's own API
	header                 http.Header
	client                 *http.Client
	logger                 *slog.Logger
	retry                  retryPolicy
	attemptTimeout         time.Duration
	// stream: call with streaming unless the endpoint refused it (see
	// streams).
	stream bool
}

// newModelEndpoint resolves the key and base URL of spec, a model of the
// provider entry.
func newModelEndpoint(spec modelSpec, wire modelProviderEntry, getenv func(string) (string, bool), logger *slog.Logger) (*modelEndpoint, error) {
	name := spec.Provider + "/" + spec.Model
	if spec.Model == "" {
		return nil, fmt.Errorf("model %q: the model name is empty: want provider/model, e.g. openai/gpt-4o", name)
	}
	lookup := func(key string) string {
		v, _ := getenv(key)
		return strings.TrimSpace(v)
	}
	base, origin := spec.BaseURL, "the model's base_url"
	if base == "" {
		base, origin = lookup(wire.baseURLEnv), wire.baseURLEnv
	}
	if base == "" {
		base, origin = wire.defaultBaseURL, "the default; set "+wire.baseURLEnv+" to change it"
	}
	u, err := parseHTTPURL(strings.TrimRight(base, "/"))
	if err != nil {
		return nil, fmt.Errorf("model %s: base URL %q from %s: %v", spec.Provider, base, origin, err)
	}
	key := lookup(wire.keyEnv)
	defaultURL, _ := url.Parse(wire.defaultBaseURL)
	publicAPI := strings.EqualFold(u.Hostname(), defaultURL.Hostname())
	if key == "" && publicAPI && !wire.keyOptional {
		return nil, fmt.Errorf("model %s: %s is not set: set it to your API key, or set %s for a server that needs none", spec.Provider, wire.keyEnv, wire.baseURLEnv)
	}
	header := http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("Accept", "application/json")
	header.Set("User-Agent", "harnessd")
	return &modelEndpoint{
		provider:       spec.Provider,
		modelName:      name,
		url:            u.String() + wire.path(),
		wire:           wire.wire,
		baseURL:        u.Redacted(),
		baseURLOrigin:  origin,
		keyEnv:         wire.keyEnv,
		key:            key,
		secrets:        newRedactor(append(urlPasswords(base), key)...),
		publicAPI:      publicAPI,
		header:         header,
		client:         &http.Client{},
		logger:         logger.With("provider", spec.Provider, "model", spec.Model),
		retry:          defaultRetryPolicy,
		attemptTimeout: modelAttemptTimeout,
		stream:         !spec.NoStream,
	}, nil
}

// name returns "provider/model".
func (e *modelEndpoint) name() string { return e.modelName }

// errorf returns an error prefixed with "model <provider>: ", with the API
// key scrubbed from whatever a server or the network put into it.
func (e *modelEndpoint) errorf(format string, args ...any) error {
	return errors.New("model " + e.provider + ": " + e.secrets.redact(fmt.Sprintf(format, args...)))
}

// call posts the request of c and decodes the answer, retrying transient
// failures. The request is streamed when the endpoint streams (see
// streams); a refusal to stream switches the endpoint to whole answers
// and is not counted as an attempt. Before each retry, c.onRetry hears of
// it, so that text already passed to c.onText can be taken back.
func (e *modelEndpoint) call(ctx context.Context, c modelCall) (resp *modelResponse, err error) {
	ctx, sp := e.startModelSpan(ctx)
	defer func() { endModelSpan(sp, resp, err) }()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		streaming := c.stream != nil && e.streams()
		body, err := c.encode(streaming)
		if err != nil {
			return nil, err
		}
		resp, fail := e.attempt(ctx, body, c, streaming)
		if fail == nil {
			e.logger.Debug("model call done", "attempts", attempt, "duration", time.Since(start), "streamed", streaming,
				"input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens, "stop_reason", resp.StopReason)
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("model %s: %w", e.provider, ctx.Err())
		}
		if streaming && fail.refusesStream {
			e.refuseStream(fail.err)
			attempt--
			continue
		}
		if !fail.retry || attempt >= e.retry.attempts {
			if attempt > 1 {
				return nil, fmt.Errorf("%w (gave up after %d attempts)", fail.err, attempt)
			}
			return nil, fail.err
		}
		delay := e.retry.delay(attempt, fail.retryAfter, fail.hasRetryAfter)
		e.logger.Warn("model call failed, retrying", "attempt", attempt, "delay", delay, "err", fail.err)
		if c.onRetry != nil {
			c.onRetry(attempt+1, fail.err)
		}
		if !sleepContext(ctx, delay) {
			return nil, fmt.Errorf("model %s: %w", e.provider, ctx.Err())
		}
	}
}

// An attemptFailure is why one attempt failed and whether another may succeed.
type attemptFailure struct {
	err           error
	retry         bool
	retryAfter    time.Duration // the server's Retry-After, when hasRetryAfter
	hasRetryAfter bool
	// refusesStream: a streamed request was refused (400) for its
	// streaming; the same request without it may succeed.
	refusesStream bool
}

// attempt posts body once and returns the decoded answer, or why not. A
// streamed answer (text/event-stream) is read event by event, its text
// passed to c.onText as it comes; any other answer is read whole, so a
// server that ignores the request to stream is understood too.
func (e *modelEndpoint) attempt(ctx context.Context, body []byte, c modelCall, streaming bool) (*modelResponse, *attemptFailure) {
	actx, cancel := context.WithTimeout(ctx, e.attemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, &attemptFailure{err: e.errorf("build request for %s: %v", e.url, err)}
	}
	req.Header = e.header.Clone()
	injectTraceHeaders(ctx, req.Header)
	if streaming {
		req.Header.Set("Accept", "text/event-stream")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, e.networkFailure(ctx, actx, "cannot reach", err)
	}
	defer resp.Body.Close()
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if ok && streaming && isEventStream(resp.Header) {
		return e.readStream(ctx, actx, resp.Body, c)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxModelResponseBytes+1))
	if err != nil {
		return nil, e.networkFailure(ctx, actx, "read the answer from", err)
	}
	if len(data) > maxModelResponseBytes {
		return nil, &attemptFailure{err: e.errorf("the answer from %s is larger than %d bytes", e.url, maxModelResponseBytes)}
	}
	// An endpoint may echo the key (in an error, or in the text it
	// generates): hide it before anything quotes or cuts the answer.
	if e.secrets.occurs(data) {
		data = []byte(e.secrets.redact(string(data)))
	}
	if ok {
		decoded, err := c.decode(data)
		if err != nil {
			return nil, &attemptFailure{err: e.errorf("decode the answer from %s: %v (is it an %s-compatible API?)", e.url, err, e.wire)}
		}
		return decoded, nil
	}
	fail := &attemptFailure{err: e.statusError(resp.StatusCode, data)}
	fail.refusesStream = streaming && resp.StatusCode == http.StatusBadRequest && mentionsStream(data)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, 529:
		fail.retry = true
		fail.retryAfter, fail.hasRetryAfter = parseRetryAfter(resp.Header, time.Now())
	}
	return nil, fail
}

// networkFailure describes a failed exchange: retryable unless the attempt
// ran out of time (ctx being done is handled by the caller).
func (e *modelEndpoint) networkFailure(ctx, actx context.Context, op string, err error) *attemptFailure {
	if ctx.Err() == nil && actx.Err() != nil {
		return &attemptFailure{err: e.errorf("no answer from %s within %v", e.url, e.attemptTimeout)}
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err // its text repeats the URL
	}
	return &attemptFailure{retry: true, err: e.errorf("%s %s (base URL from %s): %v", op, e.baseURL, e.baseURLOrigin, err)}
}

// statusError describes a non-2xx answer, with the server's own message.
func (e *modelEndpoint) statusError(status int, body []byte) error {
	var what string
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		what = "check " + e.keyEnv
		if e.key == "" {
			what = e.keyEnv + " is not set"
		}
		what = fmt.Sprintf("authentication failed (%d): %s", status, what)
	case status == http.StatusNotFound:
		what = fmt.Sprintf("not found (404) at %s: check the model name and the base URL (from %s)", e.url, e.baseURLOrigin)
	case status == http.StatusTooManyRequests:
		what = "rate limited (429)"
	case status >= 500:
		what = fmt.Sprintf("server error (%d)", status)
	default:
		what = fmt.Sprintf("request rejected (%d)", status)
	}
	if msg := errorBodyMessage(body); msg != "" {
		return e.errorf("%s: %s", what, msg)
	}
	return e.errorf("%s", what)
}

// errorBodyMessage returns the message of an error answer: error.message
// (OpenAI, Anthropic), or a string error, message or detail (compatible
// servers), else a short prefix of the body on one line.
func errorBodyMessage(body []byte) string {
	var v struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
	}
	msg := ""
	if json.Unmarshal(body, &v) == nil {
		var nested struct {
			Message string `json:"message"`
		}
		var text, detail string
		switch {
		case json.Unmarshal(v.Error, &nested) == nil && nested.Message != "":
			msg = nested.Message
		case json.Unmarshal(v.Error, &text) == nil && text != "":
			msg = text
		case v.Message != "":
			msg = v.Message
		case json.Unmarshal(v.Detail, &detail) == nil && detail != "":
			msg = detail
		}
	}
	if msg == "" {
		msg = string(body)
	}
	return shortText(msg, maxErrorMessageLen)
}

// delay returns how long to wait after the failed attempt number attempt:
// the server's Retry-After (capped) when it gave one, else exponential
// backoff with jitter, between half and all of base*2^(attempt-1), capped.
func (p retryPolicy) delay(attempt int, retryAfter time.Duration, hasRetryAfter bool) time.Duration {
	if hasRetryAfter {
		return min(max(retryAfter, 0), p.retryAfterCap)
	}
	d := backoffDelay(p.backoffBase, p.backoffCap, attempt)
	if d <= 0 {
		return 0
	}
	return d/2 + rand.N(d/2+1)
}

// parseRetryAfter reads retry-after-ms (OpenAI) or Retry-After, in seconds
// or as an HTTP date relative to now. It reports false when neither header
// is present and valid.
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil && secs >= 0 {
		return time.Duration(secs * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// normalizeArguments turns a tool call's arguments into a JSON object. It
// accepts an object, nothing or null ("{}"), and a JSON string holding an
// object (OpenAI's encoding, which some servers encode twice). Anything
// else gives "{}" and a message for the model.
func normalizeArguments(raw json.RawMessage) (json.RawMessage, string) {
	const fix = ": send the arguments as one JSON object"
	for unquoted := 0; ; unquoted++ {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" {
			return json.RawMessage("{}"), ""
		}
		var s string
		if err := json.Unmarshal(raw, new(json.RawMessage)); err != nil {
			return json.RawMessage("{}"), "the arguments are not valid JSON (" + err.Error() + ")" + fix
		}
		if raw[0] != '"' || unquoted == 2 || json.Unmarshal(raw, &s) != nil {
			break
		}
		raw = json.RawMessage(s)
	}
	if raw[0] != '{' {
		return json.RawMessage("{}"), "the arguments are not a JSON object" + fix
	}
	return raw, ""
}

// argumentsOrEmpty returns args, or "{}" when it is empty.
func argumentsOrEmpty(args json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(args)) == 0 {
		return json.RawMessage("{}")
	}
	return args
}

// schemaOrObject returns schema, or {"type":"object"} when it is empty or null.
func schemaOrObject(schema json.RawMessage) json.RawMessage {
	if s := bytes.TrimSpace(schema); len(s) == 0 || string(s) == "null" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return schema
}
