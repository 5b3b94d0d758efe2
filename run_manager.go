package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file holds the run manager: validating run requests, admission
// (a bounded number of runs at once, a bounded queue, then 429), starting
// runs, listing, and shutdown. Retention (prune) and the runs' history on
// disk are in run_history.go.

// Run statuses.
const (
	runQueued  = "queued"
	runRunning = "running"
	// runWaitingInput: running, with a server's question open for the caller.
	runWaitingInput = "waiting_input"
	runCompleted    = "completed"
	runFailed       = "failed"
	runCancelled    = "cancelled"
)

// runWaitingApproval is a run's status while it runs with a tool call
// waiting for the caller's approval (input_approval.go); it wins over
// runWaitingInput when both wait.
const runWaitingApproval = "waiting_approval"

// A runRequest is the body of POST /v1/runs.
type runRequest struct {
	Prompt       string          `json:"prompt"`
	Profile      string          `json:"profile,omitempty"`
	Model        string          `json:"model,omitempty"`
	SystemPrompt string          `json:"system_prompt,omitempty"`
	MaxSteps     int             `json:"max_steps,omitempty"`
	MCPServers   json.RawMessage `json:"mcp_servers,omitempty"`
	// Interactive lets the run wait for the caller to answer servers'
	// questions (POST /v1/runs/{id}/input/{request_id}); otherwise they
	// are declined at once. Approvals wait either way.
	Interactive bool `json:"interactive,omitempty"`
	// InputTimeout bounds each wait for an answer (default 10m) or a
	// decision (default approval_timeout).
	InputTimeout string `json:"input_timeout,omitempty"`
	// Roots are the roots of the run's own servers (see withRunRoots).
	Roots []string `json:"roots,omitempty"`
	// ConversationID continues that conversation; empty starts a new one
	// (run_conversation.go).
	ConversationID string `json:"conversation_id,omitempty"`
	// WebhookURL is told when the run starts waiting and when it ends
	// (run_webhook.go); empty means [webhooks] url, if set.
	WebhookURL string `json:"webhook_url,omitempty"`
	// Owner is who started the run: the key's name (authInfo.owner), or
	// schedule:<name> for a scheduled run. Never read from a request.
	Owner string `json:"-"`
	// Tenant is who the run belongs to: the key's tenant, or the
	// schedule's; keys of other tenants do not see it. Empty means the
	// owner. A run that joins a
	// conversation takes the conversation's tenant (joinConversation).
	// Never read from a request.
	Tenant string `json:"-"`
	// parent is the span of the API request that started the run, the
	// parent of the run's span; nil for none.
	parent *traceSpan
	// AnyTenant lets the run join a conversation of another tenant (an
	// admin key's request); without it, such a conversation is refused.
	AnyTenant bool `json:"-"`
	// Limits are the starting key's bounds on the tools and servers the
	// run reaches, Rate the runs per minute it may start (authInfo.stamp).
	// Never read from a request.
	Limits toolLimits `json:"-"`
	Rate   int        `json:"-"`
	// Approval tightens the approval of every server of the run
	// (approvalWrites or approvalAlways; input_approval.go).
	Approval string `json:"approval,omitempty"`
	// MaxTokens, MaxCostUSD and MaxDuration are the run's budgets
	// (run_budget.go); unset ones take the configured defaults.
	MaxTokens   int64   `json:"max_tokens,omitempty"`
	MaxCostUSD  float64 `json:"max_cost_usd,omitempty"`
	MaxDuration string  `json:"max_duration,omitempty"`
	// Temperature, TopP and ReasoningEffort override [model]'s for this
	// run's model calls (config_model.go).
	Temperature     *float64 `json:"temperature,omitempty"`
	TopP            *float64 `json:"top_p,omitempty"`
	ReasoningEffort string   `json:"reasoning_effort,omitempty"`
	// Title names the run in lists; empty takes the prompt's first line
	// (run_title.go). Set to the run's title once it is set up.
	Title string `json:"title,omitempty"`
}

// runManagerOptions configure a runManager.
type runManagerOptions struct {
	Registry *registry
	// Tracer traces the runs and their webhooks; nil traces nothing.
	Tracer *tracer
	// Logger receives the runs' logs; nil discards them.
	Logger *slog.Logger
	Home   string
	Getenv func(string) (string, bool)
	// Model is the default model, from HARNESS_MODEL or [model]; an empty
	// Provider means every run must name one. Its BaseURL and MaxTokens
	// apply to every run, also one that names its own model.
	Model modelSpec
	// SamplingModels are the other models sampling requests may pick
	// with hints ([model] sampling_models).
	SamplingModels []modelSpec
	MaxSteps       int
	AllowHosts     []string
	Metrics        *metrics
	// Audit records each tool call; nil records nothing.
	Audit *auditLog
	// Store keeps runs on disk and holds the history loaded at start;
	// nil keeps them in memory only.
	Store *runStore
	// Retention bounds the finished runs kept; nil means
	// defaultRetention().
	Retention *retention
	// Limits bound admission and what runs keep; unset ones take their
	// defaults.
	Limits runLimits
	// Webhooks are the [webhooks] settings; WebhookTiming the retry
	// schedule of deliveries (zero takes the defaults).
	Webhooks      webhookSettings
	WebhookTiming webhookTiming
	// Budgets are the budgets of runs that set none; Prices price the
	// models for cost budgets and usage.cost_usd (run_budget.go).
	Budgets budgetLimits
	Prices  map[string]modelPrice
	// newProvider builds providers; tests replace it. Nil means
	// newModelProvider.
	newProvider func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error)
}

// A runManager starts runs and keeps them for listing. Safe for
// concurrent use.
type runManager struct {
	opts   runManagerOptions
	logger *slog.Logger
	env    *runEnv
	ctx    context.Context // parent of every run; cancelled by shutdown
	stop   context.CancelFunc
	wg     sync.WaitGroup
	// pruneKick (1-buffered) asks the pruner to apply retention; pruned is
	// closed when the pruner has returned.
	pruneKick chan struct{}
	pruned    chan struct{}

	mu sync.Mutex
	// guards runs, order, running, queue and runTime
	runs    map[string]*run
	order   []string // oldest first, by compareAge (lists page by it)
	running int      // runs admitted and not queued that have not ended
	queue   []queuedRun
	// runTime is a moving average of how long runs take, for Retry-After.
	runTime time.Duration
	// conversations are the kept conversations by id.
	conversations map[string]*conversation
	// rates bound the runs keys with a rate start (run_rate.go).
	rates keyRates

	defaultsMu sync.Mutex
	// guards opts.Model, opts.MaxSteps, opts.AllowHosts, opts.Budgets and
	// opts.Prices, the settings a reload replaces
}

// budgets returns the default budgets and the price table of runs
// prepared now; the caller must not change the map.
func (m *runManager) budgets() (budgetLimits, map[string]modelPrice) {
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	return m.opts.Budgets, m.opts.Prices
}

// setBudgets replaces the default budgets and the price table, for runs
// prepared from then on; running runs keep theirs.
func (m *runManager) setBudgets(budgets budgetLimits, prices map[string]modelPrice) {
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	m.opts.Budgets, m.opts.Prices = budgets, prices
}

// defaults returns the model and max_steps of runs that name none.
func (m *runManager) defaults() (modelSpec, int) {
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	return m.opts.Model, m.opts.MaxSteps
}

// connectAllowHosts returns [connect_mcp] allow_hosts (nil when not set);
// the caller must not change the slice.
func (m *runManager) connectAllowHosts() []string {
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	return m.opts.AllowHosts
}

// setDefaults replaces the model and max_steps of runs that name none
// (maxSteps 0 means defaultMaxSteps), for runs prepared from then on, and
// [connect_mcp] allow_hosts, for every check from then on (connect_mcp
// calls of running runs included).
func (m *runManager) setDefaults(model modelSpec, maxSteps int, allowHosts []string) {
	if maxSteps <= 0 {
		maxSteps = defaultMaxSteps
	}
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	m.opts.Model, m.opts.MaxSteps, m.opts.AllowHosts = model, maxSteps, allowHosts
}

// A queuedRun is a run waiting for a slot. stop detaches the cancel hook
// that ends it while it waits; it reports false once that hook has begun,
// and then the hook owns the run.
type queuedRun struct {
	r    *run
	ctx  context.Context
	stop func() bool
}

// newRunManager returns a manager with no runs; zero options take their
// defaults (a discarding logger, newModelProvider, defaultMaxSteps).
func newRunManager(opts runManagerOptions) *runManager {
	opts.Logger = orDiscard(opts.Logger)
	if opts.newProvider == nil {
		opts.newProvider = newModelProvider
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = defaultMaxSteps
	}
	if opts.Retention == nil {
		k := defaultRetention()
		opts.Retention = &k
	}
	ctx, stop := context.WithCancel(context.Background())
	opts.Limits = opts.Limits.resolve()
	// The registry's live redactor is the daemon's: it holds the global
	// servers' secrets, and the model's key and the webhook secret join it
	// (the daemon's holds them already), as do the credentials its servers
	// obtain.
	opts.Registry.secrets().add(append(modelSecrets(opts.Getenv), opts.Webhooks.Secret)...)
	m := &runManager{opts: opts, logger: opts.Logger, ctx: ctx, stop: stop, runs: map[string]*run{}, conversations: map[string]*conversation{},
		pruneKick: make(chan struct{}, 1), pruned: make(chan struct{})}
	m.env = &runEnv{reg: opts.Registry, logger: opts.Logger, metrics: opts.Metrics, audit: opts.Audit, allowHosts: m.connectAllowHosts,
		secrets: opts.Registry.secrets(), store: opts.Store,
		limits: opts.Limits, starts: newStartGate(opts.Limits.MaxStartingServers), queuePosition: m.queuePosition,
		tracer: opts.Tracer}
	m.env.webhooks = &webhookSender{ctx: ctx, logger: opts.Logger, metrics: opts.Metrics, timing: opts.WebhookTiming.resolve(), tracer: opts.Tracer,
		secret: func() string { return m.webhookSettings().Secret }}
	if opts.Store != nil {
		m.loadHistory()
		m.loadConversations()
		m.prune()
	}
	go m.pruneLoop()
	return m
}

// errShuttingDown is start's error once shutdown has begun.
var errShuttingDown = errors.New("start run: harnessd is shutting down; retry against another instance or after it restarts")

// A busyError is start's error when max_concurrent_runs run and
// max_queued_runs wait; the API answers 429 with Retry-After.
type busyError struct {
	running, queued int
	retryAfter      time.Duration
}

func (e *busyError) Error() string {
	return fmt.Sprintf("start run: %d runs running and %d queued, the limits (max_concurrent_runs, max_queued_runs); retry after %s",
		e.running, e.queued, e.retryAfter)
}

// start validates req synchronously and starts the run in the
// background, or queues it when max_concurrent_runs are running; the run,
// and a new conversation it starts, belong to req.Tenant. allowCommand says
// whether the caller may start per-run stdio servers. Errors are
// *requestError for what the caller got wrong, *busyError when the queue is
// full, *conversationNotFoundError, *conversationBusyError,
// *conversationTenantError, *storeUnavailableError while the store cannot
// write, or errShuttingDown.
func (m *runManager) start(req runRequest, allowCommand bool) (*run, error) {
	return m.startFollowed(req, allowCommand, nil)
}

// startFollowed is start with a follower attached at cur (nil: none)
// before the run can emit anything, so that the follower gets all of its
// live events too: those of a fast model are over before start returns.
// The caller unfollows once the run started; a run that did not start
// leaves cur detached.
func (m *runManager) startFollowed(req runRequest, allowCommand bool, cur *followCursor) (*run, error) {
	r, err := m.prepare(req, allowCommand)
	if err != nil {
		return nil, err
	}
	release, err := m.rates.reserve(req.Owner, req.Rate, time.Now())
	if err != nil {
		return nil, err
	}
	started := false
	if cur != nil {
		r.follow(cur)
	}
	defer func() {
		if !started {
			release()
			if cur != nil {
				r.unfollow(cur)
				*cur = followCursor{}
			}
		}
	}()
	// Refuse a full queue before touching the disk; admit checks again.
	if err := m.checkRoom(); err != nil {
		return nil, err
	}
	if err := m.storeHealth().err; err != nil {
		return nil, err
	}
	if err := m.joinConversation(r); err != nil {
		return nil, err
	}
	if err := m.persistNew(r); err != nil {
		m.leaveConversation(r)
		return nil, err
	}
	ctx, cancel := context.WithCancel(m.ctx)
	r.cancel = cancel
	if err := m.admit(ctx, r); err != nil {
		cancel()
		if r.disk != nil {
			r.disk.discard(r.id)
		}
		m.leaveConversation(r)
		return nil, err
	}
	m.opts.Metrics.runStarted()
	started = true
	return r, nil
}

// prepare validates req and returns the run it asks for, not yet kept or
// started. Errors are *requestError.
func (m *runManager) prepare(req runRequest, allowCommand bool) (*run, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, badRequest("prompt", "is empty: say what the agent should do")
	}
	if n := len(req.Prompt) + len(req.SystemPrompt); n > m.opts.Limits.MaxPromptBytes {
		return nil, badRequest("prompt", "%d bytes with system_prompt, over max_prompt_bytes (%d): send a shorter prompt, or raise the limit", n, m.opts.Limits.MaxPromptBytes)
	}
	_, defaultSteps := m.defaults()
	if req.MaxSteps < 0 || req.MaxSteps > maxMaxSteps {
		return nil, badRequest("max_steps", "%d is out of range: use 1 to %d (default %d)", req.MaxSteps, maxMaxSteps, defaultSteps)
	}
	if err := checkRunApproval(req.Approval); err != nil {
		return nil, err
	}
	if err := checkTitle(req.Title); err != nil {
		return nil, err
	}
	spec, provider, err := m.model(req)
	if err != nil {
		return nil, err
	}
	budgets, prices := m.budgets()
	budget, err := newRunBudget(req, budgets, prices, provider.name())
	if err != nil {
		return nil, err
	}
	if req.Tenant == "" {
		req.Tenant = req.Owner // as for a key without a tenant (authKey.tenant)
	}
	r := newRun(m.env, req)
	if err := m.setUp(r, spec, provider, budget, defaultSteps, allowCommand); err != nil {
		return nil, err
	}
	return r, nil
}

// setUp fills in the new run r of prepare.
func (m *runManager) setUp(r *run, spec modelSpec, provider modelProvider, budget *runBudget, defaultSteps int, allowCommand bool) error {
	req := r.req
	r.model = spec
	r.provider = provider
	r.budget = budget
	r.maxSteps = req.MaxSteps
	if r.maxSteps == 0 {
		r.maxSteps = defaultSteps
	}
	if err := m.resolveServers(r, allowCommand); err != nil {
		return err
	}
	var err error
	if r.webhook, err = m.webhookFor(req, allowCommand); err != nil {
		return err
	}
	own := serverSecrets(r.profile, r.perRun)
	r.secrets = m.env.secrets.derive(own...)
	r.req.Title = runTitle(req.Title, req.Prompt, r.secrets.load())
	r.logger = redactLoggerLive(r.logger, r.secrets)
	newProvider := func(spec modelSpec) (modelProvider, error) { return m.opts.newProvider(spec, m.opts.Getenv, r.logger) }
	return r.setupInput(m.opts.Limits, m.opts.SamplingModels, newProvider)
}

// model resolves a run's model (req.Model, "" for the configured default)
// and its sampling settings (req's over [model]'s) to its spec and
// provider. Errors are *requestError naming the field.
func (m *runManager) model(req runRequest) (modelSpec, modelProvider, error) {
	spec, _ := m.defaults()
	if req.Model != "" {
		named, err := parseModelName(req.Model)
		if err != nil {
			return modelSpec{}, nil, invalidRequest(err)
		}
		spec = spec.withModel(named)
	}
	if spec.Provider == "" {
		return modelSpec{}, nil, badRequest("model", "no model configured: set HARNESS_MODEL (like openai/gpt-4o), [model] name in config.toml, or model in the request")
	}
	spec.Tuning = spec.Tuning.override(modelTuning{Temperature: req.Temperature, TopP: req.TopP, ReasoningEffort: req.ReasoningEffort})
	if problems := spec.problems(); len(problems) > 0 {
		return modelSpec{}, nil, badRequest(problems[0].field, "%s", problems[0].msg)
	}
	provider, err := m.opts.newProvider(spec, m.opts.Getenv, m.logger)
	if err != nil {
		return modelSpec{}, nil, invalidRequest(err)
	}
	return spec, provider, nil
}

// resolveServers loads the run's profile servers and parses its per-run
// servers; a per-run server with a command needs allowCommand. Errors
// are *requestError.
func (m *runManager) resolveServers(r *run, allowCommand bool) error {
	if r.req.Profile != "" {
		servers, found, err := loadProfile(m.opts.Home, r.req.Profile, m.opts.Getenv)
		if err != nil {
			return invalidRequest(err)
		}
		// A profile server may shadow a global of its own name, never take
		// the tool names of a global with another name.
		if err := checkProfileServers(r.scope.globals.configs(), servers); err != nil {
			return invalidRequest(err)
		}
		r.profile = servers
		r.profileFound = &found
	}
	if len(r.req.MCPServers) == 0 {
		return nil
	}
	servers, err := parseRunServers(r.req.MCPServers, r.scope.globals.configs(), r.profile)
	if err != nil {
		return invalidRequest(err)
	}
	for i, s := range servers {
		if err := checkRunServerValues(s); err != nil {
			return invalidRequest(err)
		}
		if !r.req.Limits.allowsServer(s.Name) {
			return &requestError{forbidden: true,
				msg: fmt.Sprintf("mcp_servers: server %q: this key may use only the servers %q; use one of those names", s.Name, r.req.Limits.Servers)}
		}
		if s.Transport == transportStdio && !allowCommand {
			return &requestError{forbidden: true,
				msg: fmt.Sprintf("mcp_servers: server %q has a command: starting programs on the host needs the admin scope", s.Name)}
		}
		if s.URL != "" && !allowCommand {
			// Only an admin may make harnessd reach any address with
			// headers of its choosing.
			servers[i].Untrusted = true
			if err := checkUntrustedURL(s.URL, m.connectAllowHosts()); err != nil {
				return &requestError{forbidden: true,
					msg: fmt.Sprintf("mcp_servers: server %q: %v: without the admin scope a url must pass the connect_mcp checks", s.Name, err)}
			}
		}
	}
	r.perRun = servers
	return nil
}

// checkRoom returns a *busyError when no run could be admitted now, or
// errShuttingDown once shutdown has begun.
func (m *runManager) checkRoom() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.roomLocked()
}

func (m *runManager) roomLocked() error {
	if m.ctx.Err() != nil {
		return errShuttingDown
	}
	if m.running >= m.opts.Limits.MaxConcurrentRuns && len(m.queue) >= m.opts.Limits.MaxQueuedRuns {
		return &busyError{running: m.running, queued: len(m.queue), retryAfter: m.retryAfterLocked()}
	}
	return nil
}

// admit keeps r and starts it, or queues it, or refuses it with a
// *busyError; errShuttingDown once shutdown has begun. Under mu, so that
// no run is added to wg once shutdown has stopped the manager and may be
// waiting on it.
func (m *runManager) admit(ctx context.Context, r *run) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.roomLocked(); err != nil {
		return err
	}
	m.runs[r.id] = r
	m.insertLocked(r)
	m.wg.Add(1)
	if m.running < m.opts.Limits.MaxConcurrentRuns {
		m.running++
		m.launchLocked(ctx, r)
		return nil
	}
	stop := context.AfterFunc(ctx, func() { m.dropQueued(r) })
	m.queue = append(m.queue, queuedRun{r: r, ctx: ctx, stop: stop})
	return nil
}

// launchLocked starts r's goroutine; r is counted in running and wg.
func (m *runManager) launchLocked(ctx context.Context, r *run) {
	// Owned by the run manager; exits when the run reaches a terminal
	// status (cancel and shutdown make it end promptly).
	go func() {
		defer m.wg.Done()
		r.execute(ctx)
		r.cancel()
		m.freeSlot(r.duration())
		m.pruneSoon()
	}()
}

// freeSlot frees the slot of a run that ran for took and starts the queued
// runs that now fit, oldest first.
func (m *runManager) freeSlot(took time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.running--
	if m.runTime == 0 {
		m.runTime = took
	} else {
		m.runTime = (7*m.runTime + took) / 8
	}
	for m.running < m.opts.Limits.MaxConcurrentRuns && len(m.queue) > 0 && m.ctx.Err() == nil {
		next := m.queue[0]
		m.queue = m.queue[1:]
		if !next.stop() {
			continue // cancelled while queued: dropQueued ends it
		}
		m.running++
		m.launchLocked(next.ctx, next.r)
	}
}

// dropQueued ends r, cancelled while it waited in the queue.
func (m *runManager) dropQueued(r *run) {
	m.mu.Lock()
	m.queue = slices.DeleteFunc(m.queue, func(q queuedRun) bool { return q.r == r })
	m.mu.Unlock()
	r.finish(runCancelled, "", "run cancelled while queued")
	m.wg.Done()
	m.pruneSoon()
}

// queuePosition returns r's place in the queue (1 for the next to start),
// or 0 when it is not queued.
func (m *runManager) queuePosition(r *run) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, q := range m.queue {
		if q.r == r {
			return i + 1
		}
	}
	return 0
}

// retryAfterLocked estimates when a slot frees up: the average run time
// times the queue's length over the slots, between 1 and 60 seconds.
func (m *runManager) retryAfterLocked() time.Duration {
	wait := m.runTime * time.Duration(len(m.queue)+1) / time.Duration(m.opts.Limits.MaxConcurrentRuns)
	return min(max(wait.Round(time.Second), time.Second), time.Minute)
}

// get returns the run with id, or nil.
func (m *runManager) get(id string) *run {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[id]
}

// compareAge orders runs (and conversations) oldest first: by creation
// time, then id. It is the order of runManager.order, which the API's
// lists page by, so it must be total and stable across restarts.
func compareAge(aAt time.Time, aID string, bAt time.Time, bID string) int {
	if c := aAt.Compare(bAt); c != 0 {
		return c
	}
	return strings.Compare(aID, bID)
}

// insertLocked adds r to order at its place by compareAge: the end, but
// when a run created earlier was admitted later. Called under mu.
func (m *runManager) insertLocked(r *run) {
	i := len(m.order)
	for ; i > 0; i-- {
		prev := m.runs[m.order[i-1]]
		if compareAge(prev.createdAt, prev.id, r.createdAt, r.id) < 0 {
			break
		}
	}
	m.order = slices.Insert(m.order, i, r.id)
}

// list returns every kept run, newest first (by compareAge).
func (m *runManager) list() []*run {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*run, 0, len(m.order))
	for i := len(m.order) - 1; i >= 0; i-- {
		out = append(out, m.runs[m.order[i]])
	}
	return out
}

// shutdown cancels every run, refuses new ones (start returns
// errShuttingDown) and waits for the runs to end or ctx to be done.
func (m *runManager) shutdown(ctx context.Context) error {
	m.mu.Lock()
	m.stop()
	m.mu.Unlock()
	done := make(chan struct{})
	// Owned by shutdown; exits when every run goroutine has.
	go func() {
		m.wg.Wait()
		m.env.webhooks.wait()
		<-m.pruned
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
