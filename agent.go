package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
)

// This file holds agent runs: the loop (model call, concurrent tool calls,
// results back), statuses, events and cancellation, and the run manager
// that starts, lists and cancels them.

// Run statuses.
const (
	runQueued    = "queued"
	runRunning   = "running"
	runCompleted = "completed"
	runFailed    = "failed"
	runCancelled = "cancelled"
)

// Run limits.
const (
	defaultMaxSteps = 25
	maxMaxSteps     = 1000
	// keptRuns is how many finished runs stay listed; older ones are dropped.
	keptRuns = 1000
)

// A runEvent is one entry of a run's event history, as the API streams it.
type runEvent struct {
	Seq  int       `json:"seq"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Data any       `json:"data,omitempty"`
}

// A runRequest is the body of POST /v1/runs.
type runRequest struct {
	Prompt       string          `json:"prompt"`
	Profile      string          `json:"profile,omitempty"`
	Model        string          `json:"model,omitempty"`
	SystemPrompt string          `json:"system_prompt,omitempty"`
	MaxSteps     int             `json:"max_steps,omitempty"`
	MCPServers   json.RawMessage `json:"mcp_servers,omitempty"`
}

// A runView is a run as GET /v1/runs/{id} shows it.
type runView struct {
	ID             string         `json:"id"`
	Status         string         `json:"status"`
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
	CreatedAt      time.Time      `json:"created_at"`
	StartedAt      *time.Time     `json:"started_at,omitempty"`
	EndedAt        *time.Time     `json:"ended_at,omitempty"`
}

// A run is one agent run. Its fields below mu change as it progresses;
// readers take views. Safe for concurrent use.
type run struct {
	id        string
	req       runRequest
	model     modelSpec
	provider  modelProvider
	maxSteps  int
	profile   []serverConfig
	perRun    []serverConfig
	createdAt time.Time
	cancel    context.CancelFunc
	done      chan struct{} // closed when the run reached a terminal status
	// connectMu serializes connect_mcp calls, so that two of one step
	// cannot both pass the name check before either is added.
	connectMu sync.Mutex

	mu sync.Mutex
	// guards everything below
	status       string
	profileFound *bool
	output       string
	errMsg       string
	steps        int
	toolCalls    int
	usage        modelUsage
	startedAt    time.Time
	endedAt      time.Time
	events       []runEvent
	changed      chan struct{} // closed and replaced on every new event
	scope        *runScope
	catalog      *catalog
}

// emit appends an event and wakes every follower.
func (r *run) emit(typ string, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, runEvent{Seq: len(r.events) + 1, Type: typ, Time: time.Now().UTC(), Data: data})
	close(r.changed)
	r.changed = make(chan struct{})
}

// eventsAfter returns the events with Seq > seq, whether the run has
// ended, and a channel closed at the next event.
func (r *run) eventsAfter(seq int) ([]runEvent, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq < 0 {
		seq = 0
	}
	var out []runEvent
	if seq < len(r.events) {
		out = append(out, r.events[seq:]...)
	}
	return out, isTerminal(r.status), r.changed
}

// isTerminal reports whether a run with status has ended.
func isTerminal(status string) bool {
	return status == runCompleted || status == runFailed || status == runCancelled
}

// view returns the run's current state.
func (r *run) view() runView {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := runView{
		ID:           r.id,
		Status:       r.status,
		Prompt:       r.req.Prompt,
		Profile:      r.req.Profile,
		ProfileFound: r.profileFound,
		Model:        r.provider.name(),
		Output:       r.output,
		Error:        r.errMsg,
		Steps:        r.steps,
		ToolCalls:    r.toolCalls,
		Usage:        r.usage,
		Servers:      []serverStatus{},
		CreatedAt:    r.createdAt,
	}
	if !r.startedAt.IsZero() {
		t := r.startedAt
		v.StartedAt = &t
	}
	if !r.endedAt.IsZero() {
		t := r.endedAt
		v.EndedAt = &t
	}
	if r.scope != nil {
		v.Servers = r.scope.localStatuses()
	}
	if r.catalog != nil {
		v.ActivatedTools = r.catalog.activatedNames()
	}
	if v.ActivatedTools == nil {
		v.ActivatedTools = []string{}
	}
	return v
}

// runManagerOptions configure a runManager.
type runManagerOptions struct {
	Registry *registry
	Logger   *slog.Logger
	Home     string
	Getenv   func(string) (string, bool)
	// Model is the default model ("provider/model"), from HARNESS_MODEL or
	// [model]; empty means every run must name one.
	Model      string
	ModelBase  string
	MaxTokens  int
	MaxSteps   int
	AllowHosts []string
	Globals    []serverConfig
	Metrics    *metrics
	// newProvider builds providers; tests replace it. Nil means
	// newModelProvider.
	newProvider func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error)
}

// A runManager starts runs and keeps them for listing. Safe for
// concurrent use.
type runManager struct {
	opts   runManagerOptions
	logger *slog.Logger
	ctx    context.Context // parent of every run; cancelled by shutdown
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// guards runs and order
	runs  map[string]*run
	order []string // creation order
}

// newRunManager returns a manager with no runs; zero options take their
// defaults (slog.Default, newModelProvider, defaultMaxSteps).
func newRunManager(opts runManagerOptions) *runManager {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.newProvider == nil {
		opts.newProvider = newModelProvider
	}
	if opts.MaxSteps <= 0 {
		opts.MaxSteps = defaultMaxSteps
	}
	ctx, stop := context.WithCancel(context.Background())
	return &runManager{opts: opts, logger: opts.Logger, ctx: ctx, stop: stop, runs: map[string]*run{}}
}

// A requestError is a run request the API answers with 400 (or 403 when
// forbidden is set); its message names the field and says what to do.
type requestError struct {
	msg       string
	forbidden bool
}

func (e *requestError) Error() string { return e.msg }

// badRequest returns a *requestError (a 400) about field.
func badRequest(field, format string, args ...any) error {
	return &requestError{msg: field + ": " + fmt.Sprintf(format, args...)}
}

// invalidRequest returns a *requestError (a 400) for err, which already
// names the field it is about (model "x": ..., profile "x": ...,
// mcp_servers[2]: ...).
func invalidRequest(err error) error {
	return &requestError{msg: err.Error()}
}

// errShuttingDown is start's error once shutdown has begun.
var errShuttingDown = errors.New("start run: harnessd is shutting down; retry against another instance or after it restarts")

// start validates req synchronously and starts the run in the background.
// allowCommand says whether the caller may start per-run stdio servers.
// Errors are *requestError for what the caller got wrong, or
// errShuttingDown.
func (m *runManager) start(req runRequest, allowCommand bool) (*run, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return nil, badRequest("prompt", "is empty: say what the agent should do")
	}
	if req.MaxSteps < 0 || req.MaxSteps > maxMaxSteps {
		return nil, badRequest("max_steps", "%d is out of range: use 1 to %d (default %d)", req.MaxSteps, maxMaxSteps, m.opts.MaxSteps)
	}
	modelName := req.Model
	if modelName == "" {
		modelName = m.opts.Model
	}
	if modelName == "" {
		return nil, badRequest("model", "no model configured: set HARNESS_MODEL (like openai/gpt-4o), [model] name in config.toml, or model in the request")
	}
	spec, err := parseModelName(modelName)
	if err != nil {
		return nil, invalidRequest(err)
	}
	if spec.BaseURL == "" {
		spec.BaseURL = m.opts.ModelBase
	}
	if spec.MaxTokens == 0 {
		spec.MaxTokens = m.opts.MaxTokens
	}
	provider, err := m.opts.newProvider(spec, m.opts.Getenv, m.logger)
	if err != nil {
		return nil, invalidRequest(err)
	}
	r := &run{
		req:       req,
		model:     spec,
		provider:  provider,
		maxSteps:  req.MaxSteps,
		createdAt: time.Now().UTC(),
		status:    runQueued,
		changed:   make(chan struct{}),
		done:      make(chan struct{}),
	}
	if r.maxSteps == 0 {
		r.maxSteps = m.opts.MaxSteps
	}
	if req.Profile != "" {
		servers, found, err := loadProfile(m.opts.Home, req.Profile, m.opts.Getenv)
		if err != nil {
			return nil, invalidRequest(err)
		}
		// A profile server may shadow a global of its own name, never take
		// the tool names of a global with another name.
		if _, err := profileScope(m.opts.Globals, servers); err != nil {
			return nil, invalidRequest(err)
		}
		r.profile = servers
		r.profileFound = &found
	}
	if len(req.MCPServers) > 0 {
		servers, err := parseRunServers(req.MCPServers, m.opts.Globals, r.profile)
		if err != nil {
			return nil, invalidRequest(err)
		}
		for _, s := range servers {
			if s.Transport == transportStdio && !allowCommand {
				return nil, &requestError{forbidden: true,
					msg: fmt.Sprintf("mcp_servers: server %q has a command: starting programs on the host needs the admin scope", s.Name)}
			}
		}
		r.perRun = servers
	}
	r.id = newRunID()
	ctx, cancel := context.WithCancel(m.ctx)
	r.cancel = cancel

	// Under mu, so that no run is added to wg once shutdown has stopped
	// the manager and may be waiting on it.
	m.mu.Lock()
	if m.ctx.Err() != nil {
		m.mu.Unlock()
		cancel()
		return nil, errShuttingDown
	}
	m.runs[r.id] = r
	m.order = append(m.order, r.id)
	m.pruneLocked()
	m.wg.Add(1)
	m.mu.Unlock()
	m.opts.Metrics.runStarted()

	// Owned by the run manager; exits when the run reaches a terminal
	// status (cancel and shutdown make it end promptly).
	go func() {
		defer m.wg.Done()
		defer cancel()
		m.execute(ctx, r)
	}()
	return r, nil
}

// pruneLocked drops the oldest finished runs beyond keptRuns.
func (m *runManager) pruneLocked() {
	for len(m.order) > keptRuns {
		dropped := false
		for i, id := range m.order {
			r := m.runs[id]
			select {
			case <-r.done:
				delete(m.runs, id)
				m.order = append(m.order[:i], m.order[i+1:]...)
				dropped = true
			default:
				continue
			}
			break
		}
		if !dropped {
			return
		}
	}
}

// newRunID returns a random, unguessable run id.
func newRunID() string {
	var b [12]byte
	rand.Read(b[:])
	return "run_" + hex.EncodeToString(b[:])
}

// get returns the run with id, or nil.
func (m *runManager) get(id string) *run {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runs[id]
}

// list returns every kept run, newest first.
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
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// finish closes the run's servers, then records the terminal status, so
// whoever sees the status also sees the servers closed.
func (m *runManager) finish(r *run, status, output, errMsg string) {
	r.mu.Lock()
	scope := r.scope
	r.mu.Unlock()
	if scope != nil {
		scope.close()
	}
	r.mu.Lock()
	r.status = status
	r.output = output
	r.errMsg = errMsg
	r.endedAt = time.Now().UTC()
	r.mu.Unlock()
	data := map[string]any{"status": status}
	if output != "" {
		data["output"] = output
	}
	if errMsg != "" {
		data["error"] = errMsg
	}
	r.emit("run."+status, data)
	m.opts.Metrics.runEnded(status)
	m.logger.Info("run ended", "run", r.id, "status", status, "steps", r.view().Steps)
	close(r.done)
}

// execute runs the agent loop until a terminal status.
func (m *runManager) execute(ctx context.Context, r *run) {
	logger := m.logger.With("run", r.id)
	scope := m.opts.Registry.newScope(logger)
	cat := newCatalog(scope.toolSets)
	r.mu.Lock()
	r.status = runRunning
	r.startedAt = time.Now().UTC()
	r.scope = scope
	r.catalog = cat
	r.mu.Unlock()
	r.emit("run.started", map[string]any{"model": r.provider.name(), "max_steps": r.maxSteps})
	if r.profileFound != nil && !*r.profileFound {
		r.emit("profile.missing", map[string]any{"profile": r.req.Profile, "message": "no profile file found; running without profile servers"})
	}

	onServer := func(ev scopeEvent) {
		if ev.Err != nil {
			r.emit("mcp.server.failed", map[string]any{"server": ev.Server, "source": ev.Source, "error": ev.Err.Error()})
			return
		}
		r.emit("mcp.server.connected", map[string]any{"server": ev.Server, "source": ev.Source, "tools": ev.Tools})
	}
	scope.open(ctx, r.profile, false, onServer)
	scope.open(ctx, r.perRun, true, onServer)

	messages := []chatMessage{{Role: "user", Content: r.req.Prompt}}
	for step := 1; step <= r.maxSteps; step++ {
		if ctx.Err() != nil {
			m.finish(r, runCancelled, "", "run cancelled")
			return
		}
		offered := cat.offered()
		defs := make([]toolDef, 0, len(offered))
		for _, e := range offered {
			defs = append(defs, toolDef{Name: e.Name, Description: e.Description, InputSchema: e.InputSchema})
		}
		resp, err := r.provider.complete(ctx, modelRequest{
			Model:     r.model.Model,
			System:    r.req.SystemPrompt,
			Messages:  messages,
			Tools:     defs,
			MaxTokens: r.model.MaxTokens,
		})
		if err != nil {
			if ctx.Err() != nil {
				m.finish(r, runCancelled, "", "run cancelled")
				return
			}
			m.finish(r, runFailed, "", fmt.Sprintf("step %d: %v", step, err))
			return
		}
		r.mu.Lock()
		r.steps = step
		r.usage.add(resp.Usage)
		r.mu.Unlock()
		calls := make([]string, 0, len(resp.ToolCalls))
		for _, tc := range resp.ToolCalls {
			calls = append(calls, tc.Name)
		}
		r.emit("model.response", map[string]any{"step": step, "content": resp.Content, "tool_calls": calls, "usage": resp.Usage, "stop_reason": resp.StopReason})
		messages = append(messages, chatMessage{Role: "assistant", Content: resp.Content, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			m.finish(r, runCompleted, resp.Content, "")
			return
		}
		results := m.runToolCalls(ctx, r, scope, cat, step, resp.ToolCalls)
		if ctx.Err() != nil {
			m.finish(r, runCancelled, "", "run cancelled")
			return
		}
		messages = append(messages, results...)
	}
	m.finish(r, runFailed, "", fmt.Sprintf("max_steps (%d) reached without a final answer: raise max_steps or narrow the prompt", r.maxSteps))
}

// runToolCalls runs one step's tool calls concurrently and returns their
// results in the order of the calls.
func (m *runManager) runToolCalls(ctx context.Context, r *run, scope *runScope, cat *catalog, step int, calls []toolCall) []chatMessage {
	results := make([]chatMessage, len(calls))
	var wg sync.WaitGroup
	for i, tc := range calls {
		wg.Add(1)
		// Owned by runToolCalls; ends when the call returns (each call is
		// bounded by its server's timeout and by ctx).
		go func() {
			defer wg.Done()
			r.emit("tool.call.started", map[string]any{"step": step, "call_id": tc.ID, "name": tc.Name})
			start := time.Now()
			text, isError, server := m.callTool(ctx, r, scope, cat, tc)
			elapsed := time.Since(start)
			outcome := "ok"
			if isError {
				outcome = "error"
			}
			m.opts.Metrics.toolCall(server, outcome, elapsed)
			data := map[string]any{"step": step, "call_id": tc.ID, "name": tc.Name, "duration_ms": float64(elapsed.Microseconds()) / 1000, "is_error": isError}
			if isError {
				data["error"] = truncate(text, 2000)
			}
			r.emit("tool.call.completed", data)
			r.mu.Lock()
			r.toolCalls++
			r.mu.Unlock()
			results[i] = chatMessage{Role: "tool", ToolCallID: tc.ID, Content: text, IsError: isError}
		}()
	}
	wg.Wait()
	return results
}

// callTool runs one tool call and returns the text for the model, whether
// it is an error, and the server it went to ("" for built-ins).
func (m *runManager) callTool(ctx context.Context, r *run, scope *runScope, cat *catalog, tc toolCall) (string, bool, string) {
	if tc.ArgumentsError != "" {
		return fmt.Sprintf("tool %s: the arguments are not valid JSON (%s): send a JSON object", tc.Name, tc.ArgumentsError), true, ""
	}
	args := tc.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	entry, ok := cat.lookup(tc.Name)
	if !ok {
		return fmt.Sprintf("unknown tool %q: use find_tool to search for tools, then call them by the names it returns", tc.Name), true, ""
	}
	var (
		text string
		err  error
	)
	switch entry.Name {
	case toolFindTool:
		text, err = cat.findTool(args)
	case toolConnectMCP:
		text, err = m.connectMCP(ctx, r, scope, cat, args)
	case toolListMCPResources:
		text, err = listResourcesTool(ctx, scope, args)
	case toolReadMCPResource:
		text, err = readResourceTool(ctx, scope, args)
	default:
		cat.activate(entry.Name)
		res, callErr := scope.callTool(ctx, entry.Server, entry.ServerTool, args)
		if callErr != nil {
			return callErr.Error(), true, entry.Server
		}
		text := resultToText(res)
		if text == "" {
			text = "(the tool returned no content)"
		}
		return text, res.IsError, entry.Server
	}
	if err != nil {
		return err.Error(), true, ""
	}
	return text, false, ""
}

// serverNamePattern is what connect_mcp accepts as a server name.
var serverNamePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// connectMCP implements connect_mcp: connect an HTTP MCP server for the
// rest of the run and make its tools callable at once.
func (m *runManager) connectMCP(ctx context.Context, r *run, scope *runScope, cat *catalog, args json.RawMessage) (string, error) {
	var a struct {
		URL        string `json:"url"`
		ServerName string `json:"server_name"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("connect_mcp: arguments: %v; send {\"url\": \"http://host:port/mcp\", \"server_name\": \"name\"}", err)
	}
	u, err := url.Parse(a.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("connect_mcp: url %q: must be an http or https URL with a host", a.URL)
	}
	r.connectMu.Lock()
	defer r.connectMu.Unlock()
	name := a.ServerName
	if name == "" {
		name = strings.NewReplacer(".", "-", ":", "-").Replace(u.Hostname())
	}
	if !serverNamePattern.MatchString(name) {
		return "", fmt.Errorf("connect_mcp: server_name %q: use only letters, digits, '-' and '_' (at most 64)", name)
	}
	for _, existing := range scope.serverNames() {
		if sanitizeName(existing) == sanitizeName(name) {
			return "", fmt.Errorf("connect_mcp: server_name %q: a server named %q is already in this run; choose another name", name, existing)
		}
	}
	if err := checkConnectHost(ctx, u.Hostname(), m.opts.AllowHosts); err != nil {
		return "", fmt.Errorf("connect_mcp: %v", err)
	}
	cfg, err := connectServer(name, u.String())
	if err != nil {
		return "", err
	}
	if err := scope.add(ctx, cfg, true, false); err != nil {
		r.emit("mcp.server.failed", map[string]any{"server": name, "source": toolConnectMCP, "error": err.Error()})
		return "", fmt.Errorf("connect_mcp: %v", err)
	}
	ms := scope.lookupLocal(name)
	var names []string
	if ms != nil {
		for _, e := range ms.toolSet().entries {
			names = append(names, e.Name)
		}
	}
	cat.activate(names...)
	r.emit("mcp.server.connected", map[string]any{"server": name, "source": toolConnectMCP, "tools": len(names)})
	if len(names) == 0 {
		return fmt.Sprintf("Connected to %q; it offers no tools.", name), nil
	}
	return fmt.Sprintf("Connected to %q. These tools are now callable: %s", name, strings.Join(names, ", ")), nil
}

// Addresses connect_mcp never reaches: link-local (cloud metadata lives
// there) and the AWS IPv6 metadata endpoint.
var blockedNets = func() []*net.IPNet {
	var nets []*net.IPNet
	for _, cidr := range []string{"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128"} {
		_, n, _ := net.ParseCIDR(cidr)
		nets = append(nets, n)
	}
	return nets
}()

// checkConnectHost refuses hosts outside allowHosts (globs; empty allows
// any) and hosts that resolve to a blocked address.
func checkConnectHost(ctx context.Context, host string, allowHosts []string) error {
	if len(allowHosts) > 0 {
		allowed := false
		for _, pattern := range allowHosts {
			if ok, _ := path.Match(strings.ToLower(pattern), strings.ToLower(host)); ok {
				allowed = true
				break
			}
		}
		if !allowed {
			return fmt.Errorf("host %q is not in [connect_mcp] allow_hosts", host)
		}
	}
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return fmt.Errorf("host %q: %v", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		for _, n := range blockedNets {
			if n.Contains(ip) {
				return fmt.Errorf("host %q resolves to %s, a link-local or metadata address harnessd never connects to", host, ip)
			}
		}
	}
	return nil
}

// listResourcesTool implements list_mcp_resources.
func listResourcesTool(ctx context.Context, scope *runScope, args json.RawMessage) (string, error) {
	var a struct {
		MCPName string `json:"mcp_name"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.MCPName == "" {
		return "", fmt.Errorf("list_mcp_resources: send {\"mcp_name\": \"server\"}; servers in this run: %s", strings.Join(scope.serverNames(), ", "))
	}
	c, err := scopeClient(scope, a.MCPName)
	if err != nil {
		return "", fmt.Errorf("list_mcp_resources: %v", err)
	}
	resources, err := c.listResources(ctx)
	if errors.Is(err, errNoResources) {
		return "", fmt.Errorf("list_mcp_resources: server %q does not offer resources", a.MCPName)
	}
	if err != nil {
		return "", fmt.Errorf("list_mcp_resources: server %q: %v", a.MCPName, err)
	}
	if len(resources) == 0 {
		return fmt.Sprintf("Server %q has no resources.", a.MCPName), nil
	}
	out, err := json.Marshal(resources)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// readResourceTool implements read_mcp_resource.
func readResourceTool(ctx context.Context, scope *runScope, args json.RawMessage) (string, error) {
	var a struct {
		MCPName string `json:"mcp_name"`
		URI     string `json:"uri"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.MCPName == "" || a.URI == "" {
		return "", errors.New(`read_mcp_resource: send {"mcp_name": "server", "uri": "resource uri"}`)
	}
	c, err := scopeClient(scope, a.MCPName)
	if err != nil {
		return "", fmt.Errorf("read_mcp_resource: %v", err)
	}
	res, err := c.readResource(ctx, a.URI)
	if errors.Is(err, errNoResources) {
		return "", fmt.Errorf("read_mcp_resource: server %q does not offer resources", a.MCPName)
	}
	if err != nil {
		return "", fmt.Errorf("read_mcp_resource: server %q: %v", a.MCPName, err)
	}
	return resourceContentsToText(res), nil
}

// scopeClient returns the session of the named server in scope.
func scopeClient(scope *runScope, name string) (*client, error) {
	ms := scope.server(name)
	if ms == nil {
		return nil, fmt.Errorf("no server %q in this run; servers: %s", name, strings.Join(scope.serverNames(), ", "))
	}
	return ms.current()
}
