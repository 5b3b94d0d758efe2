package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"
)

// This file holds the set of live servers: the global ones, connected
// eagerly and in parallel, and the run scopes that add profile, per-run and
// connect_mcp servers on top of them.

// registryOptions configure a registry.
type registryOptions struct {
	// Logger receives the registry's logs; nil discards them.
	Logger *slog.Logger
	// Client is the base of every session's options (environment, input).
	Client clientOptions
	// Restart turns on background reconnection of failed global servers.
	Restart bool
	// BackoffMin and BackoffMax bound the restart backoff; zero means
	// backoffMin and backoffMax (tests shorten them).
	BackoffMin, BackoffMax time.Duration
	// Pins keeps the global servers' pinned tool definitions; nil pins
	// nothing.
	Pins toolPinner
}

// A registry owns every global server's lifetime. It is safe for
// concurrent use. Close stops everything it started.
//
// The global servers form a globalSet that a reload replaces whole
// (config_reload.go): readers take the current set under mu and use it without
// the lock; a run scope keeps the set it started with.
type registry struct {
	opts   registryOptions
	logger *slog.Logger
	ctx    context.Context // the servers' lifetime; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup // supervise loops and retiring servers
	ready  chan struct{}  // closed once every first server finished a first attempt

	// reloadMu serialises reloads and close; it is held while they start
	// and retire servers, never by readers.
	reloadMu sync.Mutex

	mu sync.Mutex
	// guards set, supervisors and closed; held only to read or swap them,
	// never while a server connects or stops
	set         *globalSet
	supervisors map[*managedServer]supervisor
	closed      bool

	closeOnce sync.Once
}

// A globalSet is one generation of the global servers, in config order,
// disabled ones included (their names stay reserved). It is never changed
// once built: a reload builds a new one.
type globalSet struct {
	servers []*managedServer
	byName  map[string]*managedServer
}

// newGlobalSet returns the set of servers, in the given order.
func newGlobalSet(servers []*managedServer) *globalSet {
	g := &globalSet{servers: servers, byName: make(map[string]*managedServer, len(servers))}
	for _, s := range servers {
		g.byName[s.cfg.Name] = s
	}
	return g
}

// A supervisor is the running supervise loop of one global server: cancel
// ends it, done is closed once it has returned.
type supervisor struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// newRegistry starts connecting every enabled server in parallel and
// returns at once; ready is closed when each has made its first attempt.
func newRegistry(servers []serverConfig, opts registryOptions) *registry {
	opts.Logger = orDiscard(opts.Logger)
	if opts.BackoffMin <= 0 {
		opts.BackoffMin = backoffMin
	}
	if opts.BackoffMax <= 0 {
		opts.BackoffMax = backoffMax
	}
	if opts.Client.Logger == nil {
		opts.Client.Logger = opts.Logger
	}
	if opts.Client.Secrets == nil {
		opts.Client.Secrets = newLiveRedactor(newRedactor(serverSecrets(servers)...))
	}
	opts.Client.OAuth.learnInto(opts.Client.Secrets)
	ctx, cancel := context.WithCancel(context.Background())
	r := &registry{
		opts:        opts,
		logger:      opts.Logger,
		ctx:         ctx,
		cancel:      cancel,
		ready:       make(chan struct{}),
		supervisors: map[*managedServer]supervisor{},
	}
	list := make([]*managedServer, 0, len(servers))
	for _, cfg := range servers {
		list = append(list, newManagedServer(cfg, false, r.logger))
	}
	r.set = newGlobalSet(list)
	var first sync.WaitGroup
	for _, s := range list {
		if s.cfg.Enabled {
			first.Add(1)
			r.startLocked(s, first.Done)
		}
	}
	// Owned by the registry; exits once every first attempt is over.
	go func() {
		first.Wait()
		close(r.ready)
	}()
	return r
}

// startLocked starts the supervise loop of the global server s; firstDone
// is called once its first attempt is over. The caller holds reloadMu (or
// owns r alone, in newRegistry) and r is not closed.
func (r *registry) startLocked(s *managedServer, firstDone func()) {
	ctx, cancel := context.WithCancel(r.ctx)
	sup := supervisor{cancel: cancel, done: make(chan struct{})}
	r.mu.Lock()
	r.supervisors[s] = sup
	r.mu.Unlock()
	s.pins = r.opts.Pins
	sv := supervision{
		client:     r.opts.Client,
		restart:    r.opts.Restart,
		backoffMin: r.opts.BackoffMin,
		backoffMax: r.opts.BackoffMax,
		peers:      r.toolSets,
		firstDone:  firstDone,
	}
	r.wg.Add(1)
	// Owned by the registry; exits when the registry is closed, the server
	// is retired by a reload or, without Restart, after the first attempt
	// fails.
	go func() {
		defer r.wg.Done()
		defer close(sup.done)
		s.supervise(ctx, sv)
	}()
}

// current returns the current set of global servers; the caller must not
// change it.
func (r *registry) current() *globalSet {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.set
}

// waitReady blocks until every global server made its first attempt or
// ctx is done. Servers a reload adds are not waited for.
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
	servers := r.current().servers
	out := make([]serverStatus, 0, len(servers))
	for _, s := range servers {
		out = append(out, s.snapshot())
	}
	return out
}

// requiredDown returns the names of the required global servers that are
// not ready, in config order.
func (r *registry) requiredDown() []string {
	var down []string
	for _, s := range r.current().servers {
		if s.cfg.Required && s.snapshot().Status != statusReady {
			down = append(down, s.cfg.Name)
		}
	}
	return down
}

// server returns the global server named name, or nil.
func (r *registry) server(name string) *managedServer { return r.current().byName[name] }

// globals returns the global servers' configurations, in config order,
// disabled ones included (their names stay reserved). The caller owns the
// slice; the configurations are values.
func (r *registry) globals() []serverConfig { return r.current().configs() }

// secrets returns the daemon's live redactor, which every session's
// redactor derives from (clientOptions.Secrets). Never nil.
func (r *registry) secrets() *liveRedactor { return r.opts.Client.Secrets }

// configs returns the set's configurations, in config order.
func (g *globalSet) configs() []serverConfig {
	out := make([]serverConfig, 0, len(g.servers))
	for _, s := range g.servers {
		out = append(out, s.config())
	}
	return out
}

// close stops every supervisor and closes every server in parallel,
// retiring ones included, and refuses later reloads. It is idempotent and
// returns when all are closed.
func (r *registry) close() {
	r.closeOnce.Do(func() {
		r.reloadMu.Lock()
		defer r.reloadMu.Unlock()
		r.mu.Lock()
		r.closed = true
		servers := r.set.servers
		r.mu.Unlock()
		r.cancel()
		r.wg.Wait()
		closeParallel(servers)
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

// A runScope is what one run can reach: the global servers, its profile's
// servers (which may shadow globals), its own per-run servers and those
// the agent connects with connect_mcp. The scope owns the servers it
// opened and closes them, in parallel, with close. Safe for concurrent use.
type runScope struct {
	reg *registry
	// globals is the set of global servers when the scope began: a reload
	// adds none to a run, and each name resolves to the server of that
	// name now (a restarted one's replacement) or, removed, to the old one,
	// which refuses calls saying so.
	globals *globalSet
	logger  *slog.Logger
	opts    clientOptions
	// starts bounds the run-local servers starting at once, across scopes;
	// set before the scope is used (nil: no bound).
	starts startGate
	// roots are the run's own roots (the run request's), nil for none;
	// set before the scope is used. See withRunRoots.
	roots []string

	mu sync.Mutex
	// guards local and closed
	local  map[string]*managedServer // profile, per-run and connect_mcp servers
	order  []string
	closed bool
}

// withRunRoots returns cfg with the roots it gets as a server of the
// scope's run: the run's roots, when the run request names any, replace
// what its profile or connect_mcp server configures; a per-run server
// that names its own roots in the same request keeps them.
func (s *runScope) withRunRoots(cfg serverConfig) serverConfig {
	if s.roots == nil || (cfg.Origin == originPerRun && cfg.Roots != nil) {
		return cfg
	}
	cfg.Roots = s.roots
	return cfg
}

// newScope returns an empty scope over the registry's global servers.
func (r *registry) newScope(logger *slog.Logger) *runScope {
	opts := r.opts.Client
	opts.Logger = logger
	return &runScope{reg: r, globals: r.current(), logger: logger, opts: opts, local: map[string]*managedServer{}}
}

// A scopeEvent reports a run-local server connecting or failing.
type scopeEvent struct {
	Server string
	Source string
	Err    error
	Tools  int
}

// open connects run-local servers in parallel. Each outcome is reported
// to onEvent (from the connecting goroutine); a server that fails is left
// out of the scope unless its origin keeps failed servers.
func (s *runScope) open(ctx context.Context, servers []serverConfig, onEvent func(scopeEvent)) {
	var wg sync.WaitGroup
	for _, cfg := range servers {
		if !cfg.Enabled {
			continue
		}
		wg.Add(1)
		// Owned by open; ends when the server connected or failed.
		go func() {
			defer wg.Done()
			err := s.add(ctx, cfg)
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

// add connects one run-local server and adds it to the scope. The name
// is reserved under the lock before connecting, so two concurrent adds of
// colliding names cannot both succeed: this is the one reservation of a
// run-local name. It fails if the scope is closed, or with a
// *nameTakenError if the name is taken (see takenBy). A server that fails to connect stays in the scope,
// failed, when its origin keeps failed servers; otherwise it is dropped.
func (s *runScope) add(ctx context.Context, cfg serverConfig) error {
	if cfg.Untrusted {
		// The dial-time guard does not see the server's address behind
		// an HTTP proxy: check it here too.
		if err := checkResolvedURL(ctx, cfg.URL); err != nil {
			return fmt.Errorf("server %q: %v", cfg.Name, err)
		}
	}
	cfg = s.withRunRoots(cfg)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("server %q: run has ended", cfg.Name)
	}
	if existing, taken := s.takenBy(cfg); taken {
		s.mu.Unlock()
		return &nameTakenError{name: cfg.Name, existing: existing}
	}
	ms := newManagedServer(cfg, cfg.Origin.dynamic(), s.logger)
	s.local[cfg.Name] = ms
	s.order = append(s.order, cfg.Name)
	s.mu.Unlock()

	relist := newDebouncer(listDebounce, func() { ms.refresh(context.Background(), nil) })
	err := s.starts.run(ctx, func() error {
		_, err := ms.open(ctx, s.opts, relist.trigger)
		return err
	})
	s.mu.Lock()
	if err != nil && cfg.Origin.keepFailed() && !s.closed {
		// The failed server keeps its name in the run: calls to it fail
		// with its error instead of reaching a global server it shadows.
		s.mu.Unlock()
		relist.stop()
		return fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	if err != nil || s.closed {
		delete(s.local, cfg.Name)
		s.order = slices.DeleteFunc(s.order, func(n string) bool { return n == cfg.Name })
		s.mu.Unlock()
		relist.stop()
		if err == nil {
			ms.stop()
			return fmt.Errorf("server %q: run has ended", cfg.Name)
		}
		return fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	s.mu.Unlock()
	warnToolClashes(ms.logger, ms.toolSet(), s.toolSets())
	return nil
}

// A nameTakenError refuses a run-local server whose name makes the same
// tool prefix (sameToolPrefix) as that of a server already in the run.
type nameTakenError struct {
	name, existing string
}

func (e *nameTakenError) Error() string {
	return fmt.Sprintf("server %q: a server named %q is already in this run; choose another name", e.name, e.existing)
}

// takenBy returns the name of a server of the scope whose name makes the
// same tool prefix as cfg's: a local server (connected, failed or still
// connecting) or, unless cfg's origin may shadow a global, a global one.
// s.mu must be held.
func (s *runScope) takenBy(cfg serverConfig) (existing string, taken bool) {
	for name := range s.local {
		if sameToolPrefix(name, cfg.Name) {
			return name, true
		}
	}
	if cfg.Origin.mayShadow() {
		return "", false
	}
	for name := range s.globals.byName {
		if sameToolPrefix(name, cfg.Name) {
			return name, true
		}
	}
	return "", false
}

// toolSets returns the current tools of every global server (nil entries
// left out).
func (r *registry) toolSets() []*serverTools {
	servers := r.current().servers
	sets := make([]*serverTools, 0, len(servers))
	for _, s := range servers {
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

// Shadowing has one rule, by exact name: a local server hides the global
// server of its name, both from server and from toolSets (see shadow).
// Names that only collide once sanitized never meet in a run:
// checkProfileServers and parseRunServers refuse them, and add refuses
// them for a server that may not shadow (connect_mcp).

// shadow returns what a run sees of its servers, by name: the globals
// that no local server of the same name hides, in their order, then the
// locals.
func shadow[T any](globals, locals []T, name func(T) string) []T {
	seen := make([]T, 0, len(globals)+len(locals))
	for _, g := range globals {
		if !slices.ContainsFunc(locals, func(l T) bool { return name(l) == name(g) }) {
			seen = append(seen, g)
		}
	}
	return append(seen, locals...)
}

// server returns the server a name means in this run: a local server
// shadows the global one of its name. It returns nil when there is none.
func (s *runScope) server(name string) *managedServer {
	if ms := s.lookupLocal(name); ms != nil {
		return ms
	}
	g := s.globals.byName[name]
	if g == nil {
		return nil
	}
	return s.resolve(g, s.reg.current())
}

// resolve returns the server the scope's global g means now, given the
// registry's current set: the server of its name there (g itself, or its
// replacement after a restart), or g, retired, when a reload removed it.
func (s *runScope) resolve(g *managedServer, now *globalSet) *managedServer {
	if live := now.byName[g.cfg.Name]; live != nil {
		return live
	}
	return g
}

// toolSets returns the current tools of every server in the scope: the
// globals not shadowed by a local server, then the local ones in the order
// they were added. Servers without tools yet are left out.
func (s *runScope) toolSets() []*serverTools {
	s.mu.Lock()
	local := make([]*managedServer, 0, len(s.order))
	for _, name := range s.order {
		local = append(local, s.local[name])
	}
	s.mu.Unlock()
	now := s.reg.current()
	sets := make([]*serverTools, 0, len(s.globals.servers)+len(local))
	for _, ms := range shadow(s.globals.servers, local, func(ms *managedServer) string { return ms.cfg.Name }) {
		ts := ms.toolSet()
		if !slices.Contains(local, ms) {
			// A global: the registry's current server of its name. A
			// replacement that has not listed its tools yet leaves the
			// run seeing the old ones, and calls say it is connecting.
			if current := s.resolve(ms, now).toolSet(); current != nil {
				ts = current
			}
		}
		if ts != nil {
			sets = append(sets, ts)
		}
	}
	return sets
}

// serverNames returns every server name the run can reach, sorted.
func (s *runScope) serverNames() []string {
	seen := map[string]bool{}
	for n := range s.globals.byName {
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
	c, release, err := ms.acquire()
	if err != nil {
		return nil, err
	}
	defer release()
	res, err := c.callTool(ctx, tool, args)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	return res, nil
}

// localServers returns the run-local servers in the order they were added.
func (s *runScope) localServers() []*managedServer {
	s.mu.Lock()
	defer s.mu.Unlock()
	servers := make([]*managedServer, 0, len(s.order))
	for _, name := range s.order {
		servers = append(servers, s.local[name])
	}
	return servers
}

// localStatuses returns the status of every run-local server.
func (s *runScope) localStatuses() []serverStatus {
	servers := s.localServers()
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
