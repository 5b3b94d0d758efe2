package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// This file holds one run: its record and events, the agent loop (model
// call, concurrent tool calls, results back) and how it ends.

// A runEvent is one entry of a run's event history, as the API streams it.
type runEvent struct {
	Seq  int       `json:"seq"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Data any       `json:"data,omitempty"`

	// encoded is the event as redacted JSON and frame its SSE frame, made
	// once: every event is made by newHistoryEvent or newLiveEvent, or
	// read from disk by parseEventLine (run_store.go).
	encoded, frame []byte
}

// A runView is a run as GET /v1/runs/{id} shows it.
type runView struct {
	ID             string         `json:"id"`
	ConversationID string         `json:"conversation_id,omitempty"`
	Owner          string         `json:"owner"`  // the name of the API key that started it; "" with auth off
	Tenant         string         `json:"tenant"` // who it belongs to (authKey.Tenant, the schedule's); a record without one: its owner (historyRun)
	Status         string         `json:"status"`
	QueuePosition  int            `json:"queue_position,omitempty"` // 1 for the next queued run to start
	Title          string         `json:"title"`                    // the request's title, else the prompt's first line (run_title.go)
	Prompt         string         `json:"prompt"`
	Profile        string         `json:"profile,omitempty"`
	ProfileFound   *bool          `json:"profile_found,omitempty"`
	Model          string         `json:"model"`
	Output         string         `json:"output"`
	Error          string         `json:"error,omitempty"`
	Steps          int            `json:"steps"`
	ToolCalls      int            `json:"tool_calls"`
	Usage          modelUsage     `json:"usage"`
	Servers        []serverStatus `json:"servers"`
	ActivatedTools []string       `json:"activated_tools"`
	// InputRequests are the servers' questions waiting for an answer.
	InputRequests []inputRequest `json:"input_requests"`
	CreatedAt     time.Time      `json:"created_at"`
	StartedAt     *time.Time     `json:"started_at,omitempty"`
	EndedAt       *time.Time     `json:"ended_at,omitempty"`
	// Damaged says what the run lost to damage of the runs log on disk,
	// found at start-up (run_store_damage.go); nil for a whole run.
	Damaged *runDamage `json:"damaged,omitempty"`

	// Webhook is the run's latest webhook delivery (waiting or end), when
	// it has a webhook; set by the API, never kept in the run's record.
	Webhook *webhookStatus `json:"webhook,omitempty"`
	// Approvals are the tool calls waiting for the caller's approval.
	Approvals []approvalRequest `json:"approvals"`
}

// A runEnv is what every run of one manager shares. Read-only.
type runEnv struct {
	reg        *registry
	logger     *slog.Logger
	metrics    *metrics
	audit      *auditLog       // nil records nothing
	allowHosts func() []string // [connect_mcp] allow_hosts now (a reload may change it)
	// secrets hides what every run may quote (see baseSecrets); a reload
	// adds the new global servers' values.
	secrets *liveRedactor
	limits  runLimits
	starts  startGate // shared by every run's scope
	// queuePosition returns a run's place in the manager's queue, 0 when
	// it is not queued.
	queuePosition func(*run) int
	// webhooks delivers the runs' waits and ends (run_webhook.go).
	webhooks *webhookSender
	store    *runStore // nil when runs are kept in memory only
	// tracer starts the runs' spans (run_telemetry.go); nil when tracing
	// is off.
	tracer *tracer
}

// A run is one agent run. The fields above mu are fixed when the run is
// created; those below it change as it progresses, and readers take
// views. Safe for concurrent use.
type run struct {
	id       string
	env      *runEnv
	logger   *slog.Logger // env's, with the run's id
	req      runRequest
	model    modelSpec
	provider modelProvider
	maxSteps int
	profile  []serverConfig
	perRun   []serverConfig
	// secrets hides env's secrets, as they grow, and those of the run's
	// own servers; set once the servers are resolved.
	secrets   *liveRedactor
	createdAt time.Time
	scope     *runScope
	catalog   *catalog
	cancel    context.CancelFunc
	done      chan struct{} // closed when the run reached a terminal status
	// disk is the run's files; nil without a store (run_history.go).
	disk *runDisk
	// conv is the run's conversation (run_conversation.go); set before
	// the run is kept.
	conv *runConversation
	// webhook is the run's webhook deliveries; nil without one.
	webhook *runWebhook
	// input answers the servers' questions during the run.
	input *inputPolicy
	// budget bounds the run's tokens, cost and duration (run_budget.go);
	// nil bounds nothing.
	budget *runBudget
	// told are the tool definition changes the run has told of
	// (run_pins.go); owned by the run's loop.
	told toldChanges
	// transcript is what the run kept of its conversation (run_transcript.go);
	// guarded by mu.
	transcript transcript
	// span is the run's span from execute's start to finish; nil when
	// the run is not traced or has not started.
	span atomic.Pointer[traceSpan]

	mu sync.Mutex
	// guards everything below
	// skillsSection lists the servers' skills in the system prompt
	// (tools_skills.go); set once the servers are open.
	skillsSection string
	status        string
	profileFound  *bool
	output        string
	errMsg        string
	// errDetail is errMsg with the detail of a failed exchange with an
	// address a caller chose, for admins; "" when errMsg has none.
	errDetail string
	steps     int
	toolCalls int
	usage     modelUsage
	startedAt time.Time
	endedAt   time.Time
	events    []runEvent
	changed   chan struct{} // closed and replaced on every new event
	live      liveLog       // recent live-only events (run_live.go)
	// final is the ended run when it is kept on disk: its events and large
	// bodies are read from there, and events is nil.
	final *runView
	// promptHead is what lists search (searchText) of a prompt left on
	// disk with final.
	promptHead string
	// servers and activated replace scope and catalog in views once the
	// run has ended, so that its servers' memory (stderr tails, sessions)
	// is freed; scope and catalog are nil then.
	servers   []serverStatus
	activated []string
}

// newRun returns a queued run of req over a fresh scope of env's
// registry; the caller fills in the rest before starting it.
func newRun(env *runEnv, req runRequest) *run {
	id := newID("run_")
	logger := env.logger.With("run", id)
	scope := env.reg.newScope(logger)
	scope.starts = env.starts
	cat := newCatalog(scope.toolSets)
	cat.unready = scope.unready
	cat.limits = req.Limits
	return &run{
		id:        id,
		env:       env,
		logger:    logger,
		req:       req,
		createdAt: time.Now().UTC(),
		scope:     scope,
		catalog:   cat,
		status:    runQueued,
		changed:   make(chan struct{}),
		done:      make(chan struct{}),
	}
}

// emit appends an event and wakes every follower; the run's writer puts
// it on disk later, without mu. Every event of a run passes here.
func (r *run) emit(typ string, data any) {
	raw := encodeEventData(r.redactor(), data)
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := newHistoryEvent(len(r.events)+1, typ, time.Now().UTC(), data, raw)
	r.disk.appendLocked(ev)
	r.publishLocked(ev)
}

// publishLocked adds ev to the history followers read and wakes them.
func (r *run) publishLocked(ev runEvent) {
	r.events = append(r.events, ev)
	close(r.changed)
	r.changed = make(chan struct{})
}

// isTerminal reports whether a run with status has ended.
func isTerminal(status string) bool {
	return status == runCompleted || status == runFailed || status == runCancelled
}

// view returns the run's current state. For an ended run kept on disk, it
// may read its prompt and output from there.
func (r *run) view() runView {
	position := r.env.queuePosition(r)
	r.mu.Lock()
	final := r.final
	if final == nil {
		defer r.mu.Unlock()
		v := r.viewLocked()
		if v.Status == runQueued {
			v.QueuePosition = position
		}
		return v
	}
	r.mu.Unlock()
	return r.finalView(final)
}

// viewLocked returns the state of a run not yet archived. Called under mu.
func (r *run) viewLocked() runView {
	v := runView{
		ID:             r.id,
		ConversationID: r.conversationID(),
		Owner:          r.req.Owner,
		Tenant:         r.req.Tenant,
		Status:         r.status,
		Title:          r.req.Title,
		Prompt:         r.req.Prompt,
		Profile:        r.req.Profile,
		ProfileFound:   r.profileFound,
		Model:          r.provider.name(),
		Output:         r.output,
		Error:          r.errMsg,
		Steps:          r.steps,
		ToolCalls:      r.toolCalls,
		Usage:          r.usage,
		Servers:        r.servers,
		ActivatedTools: r.activated,
		CreatedAt:      r.createdAt,
	}
	if r.scope != nil {
		v.Servers = r.scope.localStatuses()
		v.ActivatedTools = r.catalog.activatedNames()
		if isTerminal(r.status) {
			// Ended, its servers still closing: the tails are gone already.
			v.Servers = withoutStderrTails(v.Servers)
		}
	}
	if v.Servers == nil {
		v.Servers = []serverStatus{}
	}
	r.waitingView(&v)
	if !r.startedAt.IsZero() {
		t := r.startedAt
		v.StartedAt = &t
	}
	if !r.endedAt.IsZero() {
		t := r.endedAt
		v.EndedAt = &t
	}
	if v.ActivatedTools == nil {
		v.ActivatedTools = []string{}
	}
	return v
}

// finish ends the run, in two steps. First the end is recorded: the
// terminal event (fsynced) and the final record on disk, then the status
// and the event shown to views and followers, so that they see the run
// end at once even when its servers are slow to stop. Then the servers
// are closed, the record is rewritten if their final statuses changed it,
// and done is closed, so whoever sees done also sees the servers closed. The
// terminal record is written here and nowhere else. The output is cut at
// max_output_bytes; the servers' statuses are kept without their stderr
// tails, and the scope is let go.
func (r *run) finish(status, output, errMsg string) {
	r.closeOpenToolCalls(status, errMsg)
	r.closeInput()
	output, fullOutput := r.secrets.load().cutSized(output, r.env.limits.MaxOutputBytes)
	r.mu.Lock()
	ev := r.terminalEvent(len(r.events)+1, time.Now().UTC(), status, output, fullOutput, errMsg)
	v := r.viewLocked()
	v.Status, v.Output, v.Error, v.EndedAt = status, output, errMsg, &ev.Time
	v.Servers = withoutStderrTails(v.Servers)
	ending := r.disk.stopLocked()
	steps := r.steps
	r.mu.Unlock()
	if ending {
		// Fsynced, with what was still queued, outside mu.
		if err := r.disk.writeEnd(r, ev, v); err != nil {
			// Not on disk: a restart would not find it ended so.
			r.logger.Error("writing the run's end to disk failed; the run is reported failed", "status", status, "err", err)
			status, errMsg = runFailed, storeEndError(status, errMsg, err)
			ev = r.terminalEvent(ev.Seq, ev.Time, status, output, fullOutput, errMsg)
			v.Status, v.Error = status, errMsg
		}
	}
	r.mu.Lock()
	r.status = status
	r.output = output
	r.errMsg = errMsg
	r.endedAt = ev.Time
	r.publishLocked(ev)
	r.dropLiveLocked()
	r.mu.Unlock()

	r.scope.close()
	v.Servers = withoutStderrTails(r.scope.localStatuses())
	v.ActivatedTools = r.catalog.activatedNames()
	if v.ActivatedTools == nil {
		v.ActivatedTools = []string{}
	}
	var final *runView
	if r.disk != nil {
		final = r.disk.archive(r, v)
	}
	r.mu.Lock()
	r.servers, r.activated = v.Servers, v.ActivatedTools
	r.scope, r.catalog = nil, nil
	if final != nil {
		r.keepOnDiskLocked(final)
		if final.Prompt == "" {
			r.promptHead = promptHead(r.req.Prompt)
		}
		r.req.Prompt, r.output = "", ""
	}
	r.mu.Unlock()
	r.env.metrics.runEnded(status)
	r.endRunSpan(status, output, errMsg)
	r.logger.Info("run ended", "status", status, "steps", steps)
	r.env.webhooks.start(r)
	close(r.done)
}

// terminalEvent returns the run's terminal event, numbered seq, for an
// end with status at t.
func (r *run) terminalEvent(seq int, t time.Time, status, output string, fullOutput int, errMsg string) runEvent {
	data := map[string]any{"status": status}
	if output != "" {
		data["output"] = output
	}
	if fullOutput > 0 {
		data["output_bytes"] = fullOutput
	}
	if errMsg != "" {
		data["error"] = errMsg
	}
	return newHistoryEvent(seq, terminalEventType(status), t, data, encodeEventData(r.redactor(), data))
}

// storeEndError returns the error of a run whose end, with status and
// errMsg, could not be written to the store: the run is failed, saying
// why (the system's reason, such as "no space left on device", without
// the store's paths) and how it had ended.
func storeEndError(status, errMsg string, err error) string {
	reason := "the runs store cannot write"
	if errno := syscall.Errno(0); errors.As(err, &errno) {
		reason = errno.Error()
	}
	ended := status
	if errMsg != "" {
		ended += ": " + errMsg
	}
	return fmt.Sprintf("store: writing the run's end: %s (it had ended %s)", reason, ended)
}

// withoutStderrTails returns servers without their stderr tails, which an
// ended run does not keep.
func withoutStderrTails(servers []serverStatus) []serverStatus {
	for i := range servers {
		servers[i].StderrTail = ""
	}
	return servers
}

// duration returns how long the run ran; 0 before it ended or when it
// never started.
func (r *run) duration() time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.startedAt.IsZero() || r.endedAt.IsZero() {
		return 0
	}
	return r.endedAt.Sub(r.startedAt)
}

// execute runs the agent loop until a terminal status: completed with
// the model's answer; failed past a budget (endEarly); cancelled when ctx
// ended before the answer; else failed saying why.
func (r *run) execute(ctx context.Context) {
	ctx = r.startRunSpan(ctx)
	ctx, release := r.budget.bound(ctx)
	defer release()
	if r.input != nil {
		ctx = withInputAnswerer(ctx, r.input)
	}
	answer, err := r.loop(ctx)
	var exceeded *budgetExceededError
	switch {
	case err == nil:
		r.finish(runCompleted, answer, "")
	case errors.As(err, &exceeded):
		r.endEarly(ctx, err)
	case ctx.Err() != nil:
		r.endEarly(ctx, nil)
	default:
		if detail := peerDetail(err); detail != err.Error() {
			// An address a caller chose failed: the error names a fixed
			// reason, the detail is for admins (errorDetail).
			r.mu.Lock()
			r.errDetail = detail
			r.mu.Unlock()
		}
		r.finish(runFailed, "", err.Error())
	}
}

// errorDetail returns the run's error with the detail of each failed
// exchange with an address a caller chose in place of its fixed reason,
// for an admin's view; "" when the error has no such part (or the run
// was loaded from disk, which keeps only the error).
func (r *run) errorDetail() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.errDetail
}

// loop begins the run and runs its steps: each asks the model and runs
// the tool calls it makes, until it answers without one. It returns the
// answer, or why there is none (ctx's error when it ended between steps).
func (r *run) loop(ctx context.Context) (string, error) {
	if err := r.begin(ctx); err != nil {
		return "", err
	}
	r.prepareSkills()
	history, err := r.continueConversation()
	if err != nil {
		return "", err
	}
	messages := append(history, chatMessage{Role: roleUser, Content: r.req.Prompt})
	// The transcript keeps the run's own system prompt: the skills section
	// the model also gets is the scope's, made anew by each run.
	if r.req.SystemPrompt != "" {
		r.record(0, []chatMessage{{Role: roleSystem, Content: r.req.SystemPrompt}}, nil)
	}
	r.record(0, messages[len(history):], nil)
	for step := 1; step <= r.maxSteps; step++ {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		resp, err := r.callModel(ctx, step, messages)
		var exceeded *budgetExceededError
		if errors.As(err, &exceeded) {
			return "", err
		}
		if err != nil {
			return "", errors.New(r.modelFailure(step, err))
		}
		answer := chatMessage{Role: roleAssistant, Content: resp.Content, ToolCalls: resp.ToolCalls, Thinking: resp.Thinking}
		messages = append(messages, answer)
		r.record(step, []chatMessage{answer}, nil)
		if len(resp.ToolCalls) == 0 {
			return resp.Content, nil
		}
		results := r.runToolCalls(ctx, step, resp.ToolCalls)
		if ctx.Err() != nil {
			results = cancelledResults(results)
		}
		r.record(step, results, resp.ToolCalls)
		if err := ctx.Err(); err != nil {
			return "", err
		}
		messages = append(messages, results...)
	}
	return "", fmt.Errorf("max_steps (%d) reached without a final answer: raise max_steps or narrow the prompt", r.maxSteps)
}

// begin marks the run running, connects its profile and per-run servers,
// reporting each as an event, and meanwhile waits for the global servers
// still starting (awaitStartingServers). It returns ctx's error when ctx
// ended during the wait, else an error naming each required server that
// could not start.
func (r *run) begin(ctx context.Context) error {
	r.mu.Lock()
	r.status = runRunning
	r.startedAt = time.Now().UTC()
	r.mu.Unlock()
	r.emit(evRunStarted, runStartedEvent(r.provider.name(), r.maxSteps))
	if r.profileFound != nil && !*r.profileFound {
		r.emit(evProfileMissing, profileMissingEvent(r.req.Profile))
	}
	var (
		mu     sync.Mutex
		failed []error
	)
	required := map[string]bool{}
	for _, s := range slices.Concat(r.profile, r.perRun) {
		required[s.Name] = s.Required
	}
	onServer := func(ev scopeEvent) {
		if ev.Err != nil {
			r.emit(evServerFailed, serverFailedEvent(ev.Server, ev.Source, ev.Err))
			if required[ev.Server] {
				mu.Lock()
				failed = append(failed, fmt.Errorf("required server failed to start: %w; fix it, or mark it \"required\": false to run without it", ev.Err))
				mu.Unlock()
			}
			return
		}
		r.emit(evServerConnected, serverConnectedEvent(ev.Server, ev.Source, ev.Tools))
	}
	waited := make(chan error, 1)
	// Owned by begin, which takes its result; ends when every starting
	// global server is waited for (each bounded by its startup_timeout)
	// or ctx is done.
	go func() { waited <- r.awaitStartingServers(ctx) }()
	r.scope.open(ctx, r.profile, onServer)
	r.scope.open(ctx, r.perRun, onServer)
	if err := <-waited; err != nil {
		return err
	}
	return errors.Join(failed...)
}

// callModel sends the conversation with the tools offered now, records
// the step's usage and emits model.response. It returns a
// *budgetExceededError, without calling, when the run's budgets are spent.
func (r *run) callModel(ctx context.Context, step int, messages []chatMessage) (*modelResponse, error) {
	r.tellToolChanges()
	offered := r.catalog.offered()
	defs := make([]toolDef, 0, len(offered))
	for _, e := range offered {
		defs = append(defs, toolDef{Name: e.Name, Description: e.Description, InputSchema: e.InputSchema})
	}
	deltas := &deltaWriter{r: r, step: step}
	req := modelRequest{
		Model:     r.model.Model,
		System:    r.systemPrompt(),
		Messages:  messages,
		Tools:     defs,
		MaxTokens: r.model.MaxTokens,
		OnText:    deltas.write,
		OnRetry:   deltas.retry,
	}
	// The call holds its worst case against the run's budgets while it is
	// made, so that sampling served meanwhile sees it.
	hold, err := r.budget.holdStep(r.provider.name(), req.estimateInputTokens(), r.model.outputLimit())
	if err != nil {
		return nil, err
	}
	defer hold.release()
	resp, err := r.provider.complete(ctx, req)
	if err != nil {
		return nil, err
	}
	deltas.flush()
	resp.Usage = hold.settle(resp.Usage)
	r.mu.Lock()
	r.steps = step
	r.usage.add(resp.Usage)
	r.mu.Unlock()
	calls := make([]string, 0, len(resp.ToolCalls))
	for _, tc := range resp.ToolCalls {
		calls = append(calls, tc.Name)
	}
	r.emit(evModelResponse, modelResponseEvent(step, r.secrets.load().cut(resp.Content, r.env.limits.MaxOutputBytes), calls, resp.Usage, resp.StopReason))
	return resp, nil
}

// runToolCalls runs one step's tool calls concurrently and returns their
// results in the order of the calls.
func (r *run) runToolCalls(ctx context.Context, step int, calls []toolCall) []chatMessage {
	results := make([]chatMessage, len(calls))
	var wg sync.WaitGroup
	for i, tc := range calls {
		wg.Add(1)
		// Owned by runToolCalls; ends when the call returns (each call is
		// bounded by its server's timeout and by ctx).
		go func() {
			defer wg.Done()
			started := toolCallStartedEvent(step, tc.ID, tc.Name)
			r.putCut(started, "arguments", string(tc.Arguments))
			r.emit(evToolCallStarted, started)
			res, elapsed := r.callRecorded(ctx, step, tc)
			data := toolCallCompletedEvent(step, tc.ID, tc.Name, elapsed, res.isError)
			r.putCut(data, "result", res.text)
			r.emit(evToolCallCompleted, data)
			r.mu.Lock()
			r.toolCalls++
			r.mu.Unlock()
			results[i] = chatMessage{Role: roleTool, ToolCallID: tc.ID, Content: res.text, IsError: res.isError}
		}()
	}
	wg.Wait()
	return results
}

// callRecorded makes the tool call tc of step as the run's record has it:
// in its execute_tool span (the parent of the MCP request's), its progress
// passed on, counted in the metrics and recorded in the audit trail. It
// returns the result and how long the call took. The events around it are
// runToolCalls'.
func (r *run) callRecorded(ctx context.Context, step int, tc toolCall) (toolResult, time.Duration) {
	start := time.Now()
	progress := r.newProgressLimiter(tc.ID)
	callCtx, sp := r.startToolSpan(ctx, step, tc)
	res := r.callTool(withCallProgress(callCtx, progress.note), tc)
	r.endToolSpan(sp, res)
	progress.stop()
	elapsed := time.Since(start)
	outcome := "ok"
	if res.isError {
		outcome = "error"
	}
	r.env.metrics.toolCall(res.server, outcome, elapsed)
	r.auditCall(tc, res, start, elapsed)
	return res, elapsed
}

// putCut sets data[key] to text with the run's secrets redacted, cut at
// max_tool_event_bytes, and data[key+"_bytes"] to the redacted text's
// full length when it was cut.
func (r *run) putCut(data map[string]any, key, text string) {
	cut, full := r.secrets.load().cutSized(text, r.env.limits.MaxToolEventBytes)
	data[key] = cut
	if full > 0 {
		data[key+"_bytes"] = full
	}
}

// finalView returns the view of an ended run kept on disk: final, with
// the prompt and output read back when they were left on disk.
func (r *run) finalView(final *runView) runView {
	v := *final
	v.Servers = slices.Clone(v.Servers)
	v.ActivatedTools = slices.Clone(v.ActivatedTools)
	if v.Prompt != "" || v.Output != "" || r.disk == nil {
		return v
	}
	onDisk, err := r.disk.store.readRecord(r.id)
	if err != nil {
		r.logger.Warn("reading the run's record failed", "err", err)
		return v
	}
	v.Prompt, v.Output = onDisk.Prompt, onDisk.Output
	return v
}

// summary returns the run's state like view, but never reads the disk:
// the prompt and output of an ended run may be missing. For listings.
func (r *run) summary() runView {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.final != nil {
		return *r.final
	}
	return r.viewLocked()
}

// promptHead returns the start of prompt that a run whose bodies are left
// on disk keeps for searches: at most bodyInMemory bytes, cut at a
// character's start.
func promptHead(prompt string) string {
	if len(prompt) <= bodyInMemory {
		return prompt
	}
	return strings.ToValidUTF8(prompt[:bodyInMemory], "")
}

// searchText returns the title and the prompt that lists' q= matches,
// without reading the disk: the whole prompt while in memory, else its
// first bodyInMemory bytes (promptHead).
func (r *run) searchText() (title, prompt string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.final == nil:
		return r.req.Title, r.req.Prompt
	case r.final.Prompt != "":
		return r.final.Title, r.final.Prompt
	}
	return r.final.Title, r.promptHead
}
