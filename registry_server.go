package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds one managed server: its state machine (status, session,
// tools), the supervise loop that keeps a global server connected,
// restarting it with backoff, and the warning when its tools' names clash
// with another server's.

// A stderrTailer is a transport that keeps the end of its server's
// stderr (stdio), for the status of a server that is not ready.
type stderrTailer interface {
	stderrTail(n int) string
}

// Server statuses as the API reports them.
const (
	statusConnecting = "connecting"
	statusReady      = "ready"
	statusFailed     = "failed"
	statusRestarting = "restarting"
	statusClosed     = "closed"
	statusDisabled   = "disabled"
	// statusNeedsAuth: the server needs a person to log in (mcp login).
	statusNeedsAuth = "needs_auth"
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
	// Approval is which of the server's calls wait for an operator
	// (never, writes, always), ApprovalTools the tools whose calls
	// always do.
	Approval      string       `json:"approval"`
	ApprovalTools []string     `json:"approval_tools,omitempty"`
	NextRetry     *time.Time   `json:"next_retry,omitempty"`
	Tools         []statusTool `json:"tools"`
	// Skills are those the server lists (skills extension); none when it
	// does not declare the extension.
	Skills []statusSkill `json:"skills,omitempty"`
	// Held are the tools left out of every catalog because their
	// definition differs from the pinned one (pin_tools = "hold"), until
	// an admin accepts them.
	Held []toolChange `json:"held,omitempty"`
}

// A statusTool is one tool in a serverStatus.
type statusTool struct {
	Name        string `json:"name"`
	ServerTool  string `json:"server_tool"`
	Description string `json:"description,omitempty"`
}

// A managedServer is one server of the registry or of a run scope: its
// session, its tools and its status. It owns its state machine: status
// changes only through move, along serverTransitions, and stateLocked is
// the one reading of it that callers see. It is safe for concurrent use.
type managedServer struct {
	cfg     serverConfig
	dynamic bool
	logger  *slog.Logger

	// listMu serialises relist; it is taken before mu, never while mu
	// is held.
	listMu sync.Mutex

	mu sync.Mutex
	// guards everything below; status and lastErr are written by move only
	status    string
	lastErr   error // why the server is not ready; nil when it is
	client    *mcpClient
	tools     *serverTools
	skills    []skillEntry // listed with the tools (registry_skills.go)
	restarts  int
	nextRetry time.Time
	// calls counts the tool calls in flight through acquire.
	calls int
	// retired, once set by retire, is why new calls are refused: the
	// server left the configuration. drained is closed once it is set and
	// no call is in flight.
	retired error
	drained chan struct{}
	// roots, once set by setRoots, replace cfg.Roots (nil inside: none);
	// rootsGen counts the changes.
	roots    *[]string
	rootsGen int
	// firstAttempt is closed once the server leaves connecting, its first
	// attempt over (see awaitFirstAttempt); closed from the start for a
	// disabled server.
	firstAttempt chan struct{}
	// pins checks each listing against the pinned definitions; set for
	// global servers only (registry.startLocked), nil for the others.
	pins toolPinner
	// held are the tools of the last listing held out of the snapshot
	// because their definition changed (registry_pins.go).
	held []toolChange
}

// newManagedServer returns a server in its first status: connecting, or
// disabled when cfg is not enabled. Nothing is started.
func newManagedServer(cfg serverConfig, dynamic bool, logger *slog.Logger) *managedServer {
	status := statusConnecting
	firstAttempt := make(chan struct{})
	if !cfg.Enabled {
		status = statusDisabled
		close(firstAttempt)
	}
	return &managedServer{cfg: cfg, dynamic: dynamic, logger: serverLogger(logger, cfg), status: status, firstAttempt: firstAttempt}
}

// serverTransitions are the status changes move allows, from each status
// to the statuses listed:
//
//	connecting ─► ready ─► restarting ─► ready …     (supervised: global servers)
//	     │          │           │
//	     └─► failed ◄┘ ◄────────┘ (no restart, or a session that ended unsupervised)
//	any ─► closed (stop; a server that never connected stays failed)
//	disabled (never connected; stop makes it closed)
//
// needs_auth is reached like failed and left by the next attempt. A run's
// server stopped while it connects still records how the attempt ended
// (its scope then stops it again), so closed is left that way.
var serverTransitions = map[string][]string{
	statusConnecting: {statusReady, statusFailed, statusNeedsAuth, statusClosed},
	statusReady:      {statusRestarting, statusClosed},
	statusRestarting: {statusReady, statusFailed, statusNeedsAuth, statusClosed},
	statusFailed:     {statusRestarting, statusFailed, statusClosed},
	statusNeedsAuth:  {statusReady, statusFailed, statusNeedsAuth, statusClosed},
	statusClosed:     {statusReady, statusFailed, statusNeedsAuth, statusClosed},
	statusDisabled:   {statusClosed},
}

// canMove reports whether serverTransitions allows from → to.
func canMove(from, to string) bool {
	return slices.Contains(serverTransitions[from], to)
}

// illegalMove, when set (by the tests), is told of every status change
// that serverTransitions does not allow.
var illegalMove atomic.Pointer[func(from, to string)]

// move is the one place a status changes: the server is now in status to,
// for cause (nil when ready). A change serverTransitions does not allow is
// a bug: it is logged (and reported to illegalMove) but made, so the
// status stays what the server is. The caller holds s.mu.
func (s *managedServer) move(to string, cause error) {
	if !canMove(s.status, to) {
		s.logger.Error("server status change not in the transition table", "from", s.status, "to", to)
		if report := illegalMove.Load(); report != nil {
			(*report)(s.status, to)
		}
	}
	if s.status == statusConnecting && to != statusConnecting {
		close(s.firstAttempt) // no status leads back to connecting
	}
	s.status, s.lastErr = to, cause
	if to == statusReady {
		s.nextRetry = time.Time{}
	}
}

// stateLocked returns the server's status and why it is not ready. A
// ready server whose session has ended is failed, with the session's end
// as the cause: a run's own server has no supervisor to record the end,
// and a global one's supervisor may not have yet. The caller holds s.mu.
func (s *managedServer) stateLocked() (string, error) {
	if s.status == statusReady {
		if cause := s.client.endErr(); cause != nil {
			return statusFailed, cause
		}
	}
	return s.status, s.lastErr
}

// snapshot returns the server's status for display.
func (s *managedServer) snapshot() serverStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	status, cause := s.stateLocked()
	st := serverStatus{
		Name:      s.cfg.Name,
		Transport: s.cfg.Transport,
		Source:    s.cfg.Source,
		Status:    status,
		Restarts:  s.restarts,
		Tools:     []statusTool{},
		Approval:  stricterApproval(s.cfg.Approval, ""), ApprovalTools: s.cfg.ApprovalTools,
	}
	if s.client != nil {
		st.ProtocolVersion = s.client.protocolVersion()
		info := s.client.serverInfo()
		st.ServerInfo = &info
		st.Transport = s.client.transportKind()
	}
	if cause != nil {
		st.Error = fmt.Sprintf("server %q: %v", s.cfg.Name, cause)
	}
	if status != statusReady && s.client != nil {
		if t, ok := s.client.t.(stderrTailer); ok {
			st.StderrTail = t.stderrTail(statusStderrTail)
		}
	}
	if !s.nextRetry.IsZero() && status != statusReady {
		next := s.nextRetry
		st.NextRetry = &next
	}
	if s.tools != nil {
		for _, e := range s.tools.entries {
			st.Tools = append(st.Tools, statusTool{Name: e.Name, ServerTool: e.ServerTool, Description: e.Description})
		}
	}
	st.Skills = statusSkills(s.skills)
	st.Held = slices.Clone(s.held)
	return st
}

// current returns the server's session, or an error naming the server and
// its status that wraps both errServerUnavailable and the cause.
func (s *managedServer) current() (*mcpClient, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.currentLocked()
}

// currentLocked is current; the caller holds s.mu.
func (s *managedServer) currentLocked() (*mcpClient, error) {
	if s.retired != nil {
		return nil, fmt.Errorf("server %q: %w: %w", s.cfg.Name, errServerUnavailable, s.retired)
	}
	status, cause := s.stateLocked()
	switch {
	case status == statusReady:
		return s.client, nil
	case cause != nil:
		return nil, fmt.Errorf("server %q is %s: %w: %w", s.cfg.Name, status, errServerUnavailable, cause)
	default:
		return nil, fmt.Errorf("server %q is %s: %w", s.cfg.Name, status, errServerUnavailable)
	}
}

// acquire returns the server's session for one call, as current does, and
// a release the caller must call once the call is over. A retired server
// finishes the calls acquired before retire and refuses later ones.
func (s *managedServer) acquire() (*mcpClient, func(), error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.currentLocked()
	if err != nil {
		return nil, nil, err
	}
	s.calls++
	return c, sync.OnceFunc(s.release), nil
}

// release ends one call that acquire began.
func (s *managedServer) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls--
	if s.calls == 0 && s.drained != nil {
		close(s.drained)
		s.drained = nil
	}
}

// retire makes the server refuse new calls with an error wrapping
// errServerUnavailable and why, and returns a channel closed once the
// calls in flight have ended. It does not stop the server: the caller
// does, after the channel is closed or its own deadline. Retiring twice
// keeps the first reason.
func (s *managedServer) retire(why error) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.retired == nil {
		s.retired = why
	}
	if s.calls == 0 {
		done := make(chan struct{})
		close(done)
		return done
	}
	if s.drained == nil {
		s.drained = make(chan struct{})
	}
	return s.drained
}

// toolSet returns the server's current tools (nil before the first list).
func (s *managedServer) toolSet() *serverTools {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools
}

// open connects the server once and lists its tools: the server is then
// ready with the session it returns, or failed with the error open
// returns. Errors recorded here do not name the server: snapshot and
// current name it once.
func (s *managedServer) open(ctx context.Context, opts clientOptions, onChange func()) (*mcpClient, error) {
	opts.OnToolsChanged = onChange // opts.Logger is the owner's: dial adds the server's name
	cfg, gen := s.configGen()
	c, err := dial(ctx, cfg, opts)
	if err == nil {
		err = s.relist(ctx, c)
		if err != nil {
			c.close()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		status := statusFailed
		if errors.Is(err, errNeedsAuth) {
			status = statusNeedsAuth
		}
		s.move(status, err)
		return nil, err
	}
	s.client = c
	s.move(statusReady, nil)
	if gen != s.rootsGen {
		// The roots changed while the session started: tell it, off the
		// lock (bounded by the request timeout).
		dirs := *s.roots
		// Owned by the session; exits once the notification is sent, the
		// session ends or the request timeout passes.
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), c.cfg.requestTimeout())
			defer cancel()
			if err := c.setRoots(ctx, dirs); err != nil {
				s.logger.Warn("could not announce the new roots", "err", err)
			}
		}()
	}
	return c, nil
}

// config returns the server's configuration with the roots a reload gave
// it (setRoots).
func (s *managedServer) config() serverConfig {
	cfg, _ := s.configGen()
	return cfg
}

// configGen is config with the count of roots changes it reflects.
func (s *managedServer) configGen() (serverConfig, int) {
	cfg := s.cfg
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.roots != nil {
		cfg.Roots = *s.roots
	}
	return cfg, s.rootsGen
}

// setRoots gives the server new roots without restarting it: the session
// in place answers them from now on and is told so (client.setRoots);
// later sessions start with them.
func (s *managedServer) setRoots(ctx context.Context, dirs []string) error {
	s.mu.Lock()
	s.roots = &dirs
	s.rootsGen++
	c := s.client
	s.mu.Unlock()
	if c == nil {
		return nil
	}
	return c.setRoots(ctx, dirs)
}

// relist lists the tools of c and publishes them. Listings are serialised
// (listMu), so one checked against the pins before an accept is never
// published after the listing that follows the accept.
func (s *managedServer) relist(ctx context.Context, c *mcpClient) error {
	s.listMu.Lock()
	defer s.listMu.Unlock()
	listCtx, cancel := context.WithTimeout(ctx, c.cfg.startupTimeout())
	defer cancel()
	infos, err := c.listTools(listCtx)
	if err != nil {
		return err
	}
	held, warned, err := s.checkPins(infos)
	if err != nil {
		return err
	}
	tools, err := newServerTools(s.cfg.Name, withoutHeld(infos, held), s.cfg.IncludeTools, s.cfg.ExcludeTools, s.dynamic)
	if err != nil {
		return err
	}
	tools.setHeld(held)
	tools.setWarned(warned)
	skills := s.listSkills(listCtx, c)
	s.mu.Lock()
	s.tools = tools
	s.held = held
	s.skills = skills
	s.mu.Unlock()
	return nil
}

// refresh re-lists the tools after tools/list_changed, on ctx, and warns
// of names that clash with peers' tools (peers may be nil).
func (s *managedServer) refresh(ctx context.Context, peers func() []*serverTools) {
	c, err := s.current()
	if err != nil {
		return
	}
	if err := s.relist(ctx, c); err != nil {
		s.logger.Warn("re-listing tools failed", "err", err)
		return
	}
	s.logger.Info("tools changed", "tools", len(s.toolSet().entries))
	if peers != nil {
		warnToolClashes(s.logger, s.toolSet(), peers())
	}
}

// stop closes the server's session; the status becomes closed, except for
// a server that never connected, which stays failed.
func (s *managedServer) stop() {
	s.mu.Lock()
	c := s.client
	if c != nil || s.status != statusFailed {
		s.move(statusClosed, s.lastErr)
	}
	s.mu.Unlock()
	if c != nil {
		c.close()
	}
}

// A supervision is how a global server is kept connected.
type supervision struct {
	client clientOptions
	// restart turns on reconnection after a failed start or a lost session;
	// without it the server ends failed.
	restart bool
	// backoffMin and backoffMax bound the delay between attempts.
	backoffMin, backoffMax time.Duration
	// peers returns the other servers' tools, for name clash warnings.
	peers func() []*serverTools
	// firstDone is called once the first attempt is over.
	firstDone func()
}

// supervise keeps the server connected: connect, wait for the session to
// end, back off, connect again, until ctx is done (or, without restart,
// once the first attempt is over). It blocks until then. Each round has
// three steps: a session (session), its outcome recorded (settle), and,
// after the backoff, the next attempt announced (retry).
func (s *managedServer) supervise(ctx context.Context, sv supervision) {
	once := sync.OnceFunc(sv.firstDone)
	defer once()
	failures := 0
	for {
		started := time.Now()
		// ended is the session that ended, if one did. Its transport may
		// still run (a server that closed its stdout and lives on): it is
		// closed after the backoff, so calls that were in flight still
		// report why it ended; stop closes it otherwise.
		ended, cancelled, err := s.session(ctx, sv, once)
		if cancelled {
			return
		}
		if ended != nil && time.Since(started) > backoffReset {
			failures = 0
		}
		failures++
		delay := backoffDelay(sv.backoffMin, sv.backoffMax, failures)
		// A server whose variables are unset fails the same way until
		// the environment or the configuration changes: no retries.
		restart := sv.restart && !isUnsetVars(err)
		if !s.settle(ended != nil, err, restart, delay) || !sleepContext(ctx, delay) {
			return
		}
		if ended != nil {
			ended.close()
		}
		s.retry()
	}
}

// session makes one attempt: it opens the server and, once it is ready,
// waits for its session to end. It returns the session that ended (nil
// when open failed) and why, or cancelled when ctx ended first. opened is
// called once open is over.
func (s *managedServer) session(ctx context.Context, sv supervision, opened func()) (ended *mcpClient, cancelled bool, err error) {
	relist := newDebouncer(listDebounce, func() { s.refresh(ctx, sv.peers) })
	defer relist.stop()
	c, err := s.open(ctx, sv.client, relist.trigger)
	opened()
	if err != nil {
		if ctx.Err() != nil {
			return nil, true, err
		}
		level := slog.LevelError
		if !sv.restart {
			level = slog.LevelInfo // the mcp commands report it themselves, once
		}
		s.logger.Log(ctx, level, "server failed to start", "err", err)
		return nil, false, err
	}
	s.logger.Info("server ready", "tools", len(s.toolSet().entries))
	warnToolClashes(s.logger, s.toolSet(), sv.peers())
	select {
	case <-ctx.Done():
		return nil, true, nil
	case <-c.ended:
	}
	return c, false, c.endErr()
}

// settle records how an attempt ended, under one lock: a lost session
// makes the server restarting, one restart more. Without restart the
// server then ends failed (or stays needs_auth) and settle returns false;
// otherwise the next attempt is due delay from now.
func (s *managedServer) settle(lost bool, cause error, restart bool, delay time.Duration) (retry bool) {
	s.mu.Lock()
	if lost {
		s.move(statusRestarting, cause)
		s.restarts++
	}
	switch {
	case !restart && s.status != statusNeedsAuth:
		s.move(statusFailed, s.lastErr)
	case restart:
		s.nextRetry = time.Now().Add(delay)
	}
	s.mu.Unlock()
	if lost {
		s.logger.Warn("server connection lost", "err", cause)
	}
	return restart
}

// retry marks a failed server restarting as its next attempt begins (a
// server that needs a login stays needs_auth).
func (s *managedServer) retry() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == statusFailed {
		s.move(statusRestarting, s.lastErr)
	}
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
