package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
)

// This file holds the set of live servers: the global ones (connected
// eagerly and in parallel, restarted with backoff), and the run scopes that
// add a run's profile, per-run and connect_mcp servers on top of them.

// Server statuses as the API reports them.
const (
	statusConnecting = "connecting"
	statusReady      = "ready"
	statusFailed     = "failed"
	statusRestarting = "restarting"
	statusClosed     = "closed"
	statusDisabled   = "disabled"
)

// Restart backoff for global servers: 1s doubling to 60s. A server that
// stayed up for backoffReset starts again from the minimum.
const (
	backoffMin   = time.Second
	backoffMax   = 60 * time.Second
	backoffReset = 60 * time.Second
	// listDebounce gathers a burst of tools/list_changed into one re-list.
	listDebounce = 100 * time.Millisecond
)

// errServerUnavailable: the server is not connected (failed, restarting,
// closed or disabled). The error wrapping it carries the last failure.
var errServerUnavailable = errors.New("server is not available")

// statusStderrTail is how much of a failed stdio server's stderr its
// status shows.
const statusStderrTail = 2 << 10

// A serverStatus is a point-in-time view of one server for the API and
// the mcp commands. It never holds env or header values.
type serverStatus struct {
	Name            string          `json:"name"`
	Transport       string          `json:"transport"`
	Source          string          `json:"source"`
	Status          string          `json:"status"`
	ProtocolVersion string          `json:"protocol_version,omitempty"`
	ServerInfo      *implementation `json:"server_info,omitempty"`
	Error           string          `json:"error,omitempty"`
	StderrTail      string          `json:"stderr_tail,omitempty"` // stdio, not ready: the end of its stderr
	Restarts        int             `json:"restarts"`
	NextRetry       *time.Time      `json:"next_retry,omitempty"`
	Tools           []statusTool    `json:"tools"`
}

// A statusTool is one tool in a serverStatus.
type statusTool struct {
	Name        string `json:"name"`
	ServerTool  string `json:"server_tool"`
	Description string `json:"description,omitempty"`
}

// A managedServer is one connected (or connecting) server and its tools.
// It is safe for concurrent use.
type managedServer struct {
	cfg     serverConfig
	dynamic bool
	logger  *slog.Logger

	mu sync.Mutex
	// guards everything below
	status    string
	client    *client
	tools     *serverTools
	lastErr   error
	restarts  int
	nextRetry time.Time
}

// snapshot returns the server's status for display.
func (s *managedServer) snapshot() serverStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := serverStatus{
		Name:      s.cfg.Name,
		Transport: s.cfg.Transport,
		Source:    s.cfg.Source,
		Status:    s.status,
		Restarts:  s.restarts,
		Tools:     []statusTool{},
	}
	if s.client != nil {
		st.ProtocolVersion = s.client.protocolVersion()
		info := s.client.serverInfo()
		st.ServerInfo = &info
		st.Transport = s.client.transportKind()
	}
	if s.lastErr != nil {
		st.Error = s.lastErr.Error()
	}
	// A session that ended with no supervisor to notice (a run's own
	// server), or just before its supervisor did, is not ready.
	if s.status == statusReady && s.client != nil {
		if failure := s.client.failure(); failure != nil {
			st.Status, st.Error = statusFailed, failure.Error()
		}
	}
	if st.Status != statusReady && s.client != nil {
		if t, ok := s.client.t.(*stdioTransport); ok {
			st.StderrTail = t.stderrTail(statusStderrTail)
		}
	}
	if !s.nextRetry.IsZero() && s.status != statusReady {
		next := s.nextRetry
		st.NextRetry = &next
	}
	if s.tools != nil {
		for _, e := range s.tools.entries {
			st.Tools = append(st.Tools, statusTool{Name: e.Name, ServerTool: e.ServerTool, Description: e.Description})
		}
	}
	return st
}

// current returns the server's session, or an error saying why there is
// none (wrapping errServerUnavailable).
func (s *managedServer) current() (*client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status, lastErr := s.status, s.lastErr
	if s.client != nil {
		failure := s.client.failure()
		if failure == nil {
			return s.client, nil
		}
		// The session just ended and supervise has not recorded it yet.
		if lastErr == nil {
			status, lastErr = "down", failure
		}
	}
	if lastErr != nil {
		return nil, fmt.Errorf("server %q is %s: %w: %v", s.cfg.Name, status, errServerUnavailable, lastErr)
	}
	return nil, fmt.Errorf("server %q is %s: %w", s.cfg.Name, status, errServerUnavailable)
}

// toolSet returns the server's current tools (nil before the first list).
func (s *managedServer) toolSet() *serverTools {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// open connects the server once and lists its tools. On success the
// server is ready; on failure it records the error and returns it.
func (s *managedServer) open(ctx context.Context, opts clientOptions, onChange func()) error {
	opts.OnToolsChanged = onChange // opts.Logger is the owner's: connect adds the server's name
	c, err := connect(ctx, s.cfg, opts)
	if err == nil {
		err = s.relist(ctx, c)
		if err != nil {
			c.close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.status = statusFailed
		s.lastErr = err
		return err
	}
	s.client = c
	s.status = statusReady
	s.lastErr = nil
	s.nextRetry = time.Time{}
	return nil
}

// relist lists the tools of c and publishes them.
func (s *managedServer) relist(ctx context.Context, c *client) error {
	listCtx, cancel := context.WithTimeout(ctx, c.cfg.startupTimeout())
	defer cancel()
	infos, err := c.listTools(listCtx)
	if err != nil {
		return fmt.Errorf("server %q: %w", s.cfg.Name, err)
	}
	tools, err := newServerTools(s.cfg.Name, infos, s.cfg.IncludeTools, s.cfg.ExcludeTools, s.dynamic)
	if err != nil {
		return fmt.Errorf("server %q: %w", s.cfg.Name, err)
	}
	s.mu.Lock()
	s.tools = tools
	s.mu.Unlock()
	return nil
}

// stop closes the server's session; the status becomes closed, except for
// a server that never connected, which stays failed.
func (s *managedServer) stop() {
	s.mu.Lock()
	c := s.client
	if c != nil || s.status != statusFailed {
		s.status = statusClosed // one that never connected stays failed
	}
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// registryOptions configure a registry.
type registryOptions struct {
	Logger *slog.Logger
	// Client is the base of every session's options (roots, environment).
	Client clientOptions
	// Restart turns on background reconnection of failed global servers.
	Restart bool
	// BackoffMin and BackoffMax bound the restart backoff; zero means
	// backoffMin and backoffMax (tests shorten them).
	BackoffMin, BackoffMax time.Duration
}

// A registry owns every global server's lifetime. It is safe for
// concurrent use. Close stops everything it started.
type registry struct {
	opts   registryOptions
	logger *slog.Logger
	ctx    context.Context // the servers' lifetime; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervisors

	servers []*managedServer // fixed after newRegistry; in config order
	byName  map[string]*managedServer
	ready   chan struct{} // closed once every server finished a first attempt

	closeOnce sync.Once
}

// newRegistry starts connecting every enabled server in parallel and
// returns at once; ready is closed when each has made its first attempt.
func newRegistry(servers []serverConfig, opts registryOptions) *registry {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = backoffMin
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = backoffMax
	}
	if opts.Client.Logger == nil {
		opts.Client.Logger = opts.Logger
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &registry{
		opts:   opts,
		logger: opts.Logger,
		ctx:    ctx,
		cancel: cancel,
		byName: make(map[string]*managedServer, len(servers)),
		ready:  make(chan struct{}),
	}
	var first sync.WaitGroup
	for _, cfg := range servers {
		s := &managedServer{cfg: cfg, logger: r.logger.With("server", cfg.Name), status: statusConnecting}
		r.servers = append(r.servers, s)
		r.byName[cfg.Name] = s
		if !cfg.Enabled {
			s.status = statusDisabled
			continue
		}
		first.Add(1)
		r.wg.Add(1)
		// Owned by the registry; exits when the registry is closed (or,
		// without Restart, after the first attempt fails).
		go r.supervise(s, first.Done)
	}
	// Owned by the registry; exits once every first attempt is over.
	go func() {
		first.Wait()
		close(r.ready)
	}()
	return r
}

// supervise keeps one global server connected: connect, wait for the
// session to end, back off, connect again, until the registry closes.
func (r *registry) supervise(s *managedServer, firstDone func()) {
	defer r.wg.Done()
	backoff := r.opts.BackoffMin
	once := sync.OnceFunc(firstDone)
	defer once()
	// dead is the session that ended last. Its transport may still run (a
	// server that closed its stdout and lives on): it is closed before the
	// next attempt, after the backoff, so calls that were in flight still
	// report why it ended; registry.close stops it otherwise.
	var dead *client
	for {
		started := time.Now()
		relist := newDebouncer(listDebounce, func() { r.refreshTools(s) })
		err := s.open(r.ctx, r.opts.Client, relist.trigger)
		once()
		if err == nil {
			s.logger.Info("server ready", "tools", len(s.toolSet().entries))
			warnToolClashes(s.logger, s.toolSet(), r.toolSets())
			s.mu.Lock()
			c := s.client // set by open; current() would refuse one that already died
			s.mu.Unlock()
			select {
			case <-r.ctx.Done():
				relist.stop()
				return
			case <-c.closed():
			}
			relist.stop()
			err = c.failure()
			dead = c
			s.mu.Lock()
			s.status = statusRestarting
			s.lastErr = err
			s.restarts++
			s.mu.Unlock()
			s.logger.Warn("server connection lost", "err", err)
			if time.Since(started) > backoffReset {
				backoff = r.opts.BackoffMin
			}
		} else {
			relist.stop()
			if r.ctx.Err() != nil {
				return
			}
			level := slog.LevelError
			if !r.opts.Restart {
				level = slog.LevelWarn // the mcp commands report it themselves
			}
			s.logger.Log(r.ctx, level, "server failed to start", "err", err)
		}
		if !r.opts.Restart {
			s.mu.Lock()
			s.status = statusFailed
			s.mu.Unlock()
			return
		}
		s.mu.Lock()
		s.nextRetry = time.Now().Add(backoff)
		s.mu.Unlock()
		timer := time.NewTimer(backoff)
		select {
		case <-r.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if dead != nil {
			dead.close()
			dead = nil
		}
		backoff = min(2*backoff, r.opts.BackoffMax)
		s.mu.Lock()
		if s.status == statusFailed {
			s.status = statusRestarting
		}
		s.mu.Unlock()
	}
}

// refreshTools re-lists a server's tools after tools/list_changed.
func (r *registry) refreshTools(s *managedServer) {
	c, err := s.current()
	if err != nil {
		return
	}
	if err := s.relist(r.ctx, c); err != nil {
		s.logger.Warn("re-listing tools failed", "err", err)
		return
	}
	s.logger.Info("tools changed", "tools", len(s.toolSet().entries))
	warnToolClashes(s.logger, s.toolSet(), r.toolSets())
}

// waitReady blocks until every global server made its first attempt or
// ctx is done.
func (r *registry) waitReady(ctx context.Context) error {
	select {
	case <-r.ready:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// isReady reports whether every global server made its first attempt.
func (r *registry) isReady() bool {
	select {
	case <-r.ready:
		return true
	default:
		return false
	}
}

// statuses returns every global server's status, in config order.
func (r *registry) statuses() []serverStatus {
	out := make([]serverStatus, 0, len(r.servers))
	for _, s := range r.servers {
		out = append(out, s.snapshot())
	}
	return out
}

// server returns the global server named name, or nil.
func (r *registry) server(name string) *managedServer { return r.byName[name] }

// names returns the global servers' names.
func (r *registry) names() []string {
	names := make([]string, 0, len(r.servers))
	for _, s := range r.servers {
		names = append(names, s.cfg.Name)
	}
	return names
}

// close stops every supervisor and closes every server in parallel. It is
// idempotent and returns when all are closed.
func (r *registry) close() {
	r.closeOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
		closeParallel(r.servers)
	})
}

// closeParallel stops servers concurrently and waits for all.
func closeParallel(servers []*managedServer) {
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		// Owned by closeParallel; ends when the server is closed (bounded).
		go func() {
			defer wg.Done()
			s.stop()
		}()
	}
	wg.Wait()
}

// A debouncer runs fn once after a burst of triggers has been quiet for
// delay. It is safe for concurrent use.
type debouncer struct {
	delay time.Duration
	fn    func()
	mu    sync.Mutex
	// guards timer and stopped
	timer   *time.Timer
	stopped bool
}

// newDebouncer returns a debouncer that runs fn, on a timer goroutine of
// its own, delay after the last trigger.
func newDebouncer(delay time.Duration, fn func()) *debouncer {
	return &debouncer{delay: delay, fn: fn}
}

// trigger (re)starts the quiet period; after stop it does nothing. It
// never blocks and never runs fn itself.
func (d *debouncer) trigger() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	if d.timer == nil {
		d.timer = time.AfterFunc(d.delay, d.fn)
		return
	}
	d.timer.Reset(d.delay)
}

// stop cancels a pending run of fn and ignores later triggers. A run
// already started is not waited for.
func (d *debouncer) stop() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
}

// A runScope is what one run can reach: the global servers, its profile's
// servers (which may shadow globals), its own per-run servers and those
// the agent connects with connect_mcp. The scope owns the servers it
// opened and closes them, in parallel, with close. Safe for concurrent use.
type runScope struct {
	reg    *registry
	logger *slog.Logger
	opts   clientOptions

	mu sync.Mutex
	// guards local and closed
	local  map[string]*managedServer // profile, per-run and connect_mcp servers
	order  []string
	closed bool
}

// newScope returns an empty scope over the registry's global servers.
func (r *registry) newScope(logger *slog.Logger) *runScope {
	opts := r.opts.Client
	opts.Logger = logger
	return &runScope{reg: r, logger: logger, opts: opts, local: map[string]*managedServer{}}
}

// A scopeEvent reports a run-local server connecting or failing.
type scopeEvent struct {
	Server string
	Source string
	Err    error
	Tools  int
}

// open connects run-local servers in parallel. Each outcome is reported to
// onEvent (from the connecting goroutine); a server that fails is left
// out of the scope. dynamic marks per-run and connect_mcp servers.
func (s *runScope) open(ctx context.Context, servers []serverConfig, dynamic bool, onEvent func(scopeEvent)) {
	var wg sync.WaitGroup
	for _, cfg := range servers {
		if !cfg.Enabled {
			continue
		}
		wg.Add(1)
		// Owned by open; ends when the server connected or failed.
		go func() {
			defer wg.Done()
			err := s.add(ctx, cfg, dynamic, true)
			ev := scopeEvent{Server: cfg.Name, Source: cfg.Source, Err: err}
			if err == nil {
				if ms := s.lookupLocal(cfg.Name); ms != nil {
					ev.Tools = len(ms.toolSet().entries)
				}
			}
			onEvent(ev)
		}()
	}
	wg.Wait()
}

// add connects one run-local server and adds it to the scope. It fails if
// the scope is closed or already has a local server of that name. A server
// that fails to connect stays in the scope, failed, when keepFailed is set
// (profile and per-run servers); otherwise it is dropped (connect_mcp, so
// the agent may try the name again).
func (s *runScope) add(ctx context.Context, cfg serverConfig, dynamic, keepFailed bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("server %q: run has ended", cfg.Name)
	}
	if _, dup := s.local[cfg.Name]; dup {
		s.mu.Unlock()
		return fmt.Errorf("server %q: a server of that name is already connected in this run", cfg.Name)
	}
	ms := &managedServer{cfg: cfg, dynamic: dynamic, logger: s.logger.With("server", cfg.Name), status: statusConnecting}
	s.local[cfg.Name] = ms
	s.order = append(s.order, cfg.Name)
	s.mu.Unlock()

	relist := newDebouncer(listDebounce, func() {
		if c, err := ms.current(); err == nil {
			if err := ms.relist(context.Background(), c); err != nil {
				ms.logger.Warn("re-listing tools failed", "err", err)
			}
		}
	})
	err := ms.open(ctx, s.opts, relist.trigger)
	s.mu.Lock()
	if err != nil && keepFailed && !s.closed {
		// The failed server keeps its name in the run: calls to it fail
		// with its error instead of reaching a global server it shadows.
		s.mu.Unlock()
		relist.stop()
		return err
	}
	if err != nil || s.closed {
		delete(s.local, cfg.Name)
		s.order = slices.DeleteFunc(s.order, func(n string) bool { return n == cfg.Name })
		s.mu.Unlock()
		relist.stop()
		if err == nil {
			ms.stop()
			err = fmt.Errorf("server %q: run has ended", cfg.Name)
		}
		return err
	}
	s.mu.Unlock()
	warnToolClashes(ms.logger, ms.toolSet(), s.toolSets())
	return nil
}

// warnToolClashes logs every tool of ts whose mcp_ name a tool of another
// server in sets already has (server "a_b" tool "c" and server "a" tool
// "b_c" are both mcp_a_b_c): the call goes to the server listed first, so
// the other's tool is unreachable and the operator should know.
func warnToolClashes(logger *slog.Logger, ts *serverTools, sets []*serverTools) {
	if ts == nil {
		return
	}
	for _, other := range sets {
		if other == ts || other.server == ts.server {
			continue
		}
		for _, e := range ts.entries {
			if _, taken := other.byName[e.Name]; taken {
				logger.Warn("tool name also used by another server; calls go to the one listed first: rename a server or exclude the tool",
					"tool", e.Name, "other_server", other.server)
			}
		}
	}
}

// toolSets returns the current tools of every global server (nil entries
// left out).
func (r *registry) toolSets() []*serverTools {
	sets := make([]*serverTools, 0, len(r.servers))
	for _, s := range r.servers {
		if ts := s.toolSet(); ts != nil {
			sets = append(sets, ts)
		}
	}
	return sets
}

// lookupLocal returns the scope's own server named name (profile, per-run
// or connect_mcp), or nil.
func (s *runScope) lookupLocal(name string) *managedServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.local[name]
}

// server returns the server a name means in this run: a local server
// shadows a global one. It returns nil when there is none.
func (s *runScope) server(name string) *managedServer {
	if ms := s.lookupLocal(name); ms != nil {
		return ms
	}
	return s.reg.server(name)
}

// toolSets returns the current tools of every server in the scope: the
// globals not shadowed by a local server, then the local ones in the order
// they were added. Servers without tools yet are left out.
func (s *runScope) toolSets() []*serverTools {
	s.mu.Lock()
	local := make([]*managedServer, 0, len(s.order))
	shadowed := make(map[string]bool, len(s.order))
	for _, name := range s.order {
		local = append(local, s.local[name])
		shadowed[sanitizeName(name)] = true
	}
	s.mu.Unlock()
	sets := make([]*serverTools, 0, len(s.reg.servers)+len(local))
	for _, g := range s.reg.servers {
		if shadowed[sanitizeName(g.cfg.Name)] {
			continue
		}
		if ts := g.toolSet(); ts != nil {
			sets = append(sets, ts)
		}
	}
	for _, l := range local {
		if ts := l.toolSet(); ts != nil {
			sets = append(sets, ts)
		}
	}
	return sets
}

// serverNames returns every server name the run can reach, sorted.
func (s *runScope) serverNames() []string {
	seen := map[string]bool{}
	for _, n := range s.reg.names() {
		seen[n] = true
	}
	s.mu.Lock()
	for n := range s.local {
		seen[n] = true
	}
	s.mu.Unlock()
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// callTool calls a tool on the named server of this scope.
func (s *runScope) callTool(ctx context.Context, server, tool string, args json.RawMessage) (*callResult, error) {
	ms := s.server(server)
	if ms == nil {
		return nil, fmt.Errorf("server %q: no such server in this run", server)
	}
	c, err := ms.current()
	if err != nil {
		return nil, err
	}
	res, err := c.callTool(ctx, tool, args)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	return res, nil
}

// localStatuses returns the status of every run-local server.
func (s *runScope) localStatuses() []serverStatus {
	s.mu.Lock()
	servers := make([]*managedServer, 0, len(s.order))
	for _, name := range s.order {
		servers = append(servers, s.local[name])
	}
	s.mu.Unlock()
	out := make([]serverStatus, 0, len(servers))
	for _, ms := range servers {
		out = append(out, ms.snapshot())
	}
	return out
}

// close closes every server the scope opened, in parallel, and refuses
// new ones. It is idempotent.
func (s *runScope) close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	servers := make([]*managedServer, 0, len(s.local))
	for _, ms := range s.local {
		servers = append(servers, ms)
	}
	s.mu.Unlock()
	closeParallel(servers)
}
