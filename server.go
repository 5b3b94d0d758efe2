package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// This file holds one managed server: its status, its connection, and the
// supervise loop that restarts it with backoff.

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
