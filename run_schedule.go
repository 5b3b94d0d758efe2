package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// This file holds the scheduler of [[schedules]]: one goroutine waits
// for the next fire time of every schedule and starts its run, owned by
// schedule:<name>. Fire times missed while harnessd was down (or while
// the machine slept) are not replayed: a schedule fires at most once for
// all the times that passed, and catch_up = true runs one at start. A
// fire while the schedule's previous run is active starts nothing
// (overlap = "skip") or starts once that run ends (overlap = "queue"; the
// fires that come meanwhile are one). A reload (SIGHUP) replaces the
// schedules, keeping the state of those whose table is unchanged.

// scheduleMaxWait bounds one wait of the real clock, so that a change of
// the system's clock delays a fire by at most this much.
const scheduleMaxWait = time.Minute

// scheduleOwnerPrefix starts the owner of a scheduled run.
const scheduleOwnerPrefix = "schedule:"

// A schedClock is the scheduler's time: now, and a channel that receives
// once a wall-clock time has come (at once when it has), with the
// function that releases it. Tests replace the real one.
type schedClock interface {
	now() time.Time
	at(t time.Time) (<-chan time.Time, func())
}

// realClock is the system's clock.
type realClock struct{}

func (realClock) now() time.Time { return time.Now() }

func (realClock) at(t time.Time) (<-chan time.Time, func()) {
	timer := time.NewTimer(min(time.Until(t), scheduleMaxWait))
	return timer.C, func() { timer.Stop() }
}

// A scheduleState is one schedule and what it did; guarded by the
// scheduler's mu.
type scheduleState struct {
	cfg      scheduleConfig
	next     time.Time // zero when it never fires again
	last     *run      // the run it started last; nil before the first
	lastFire time.Time
	lastErr  string // why the last fire started no run
	queued   bool   // a fire waits for last to end (overlap queue)
	skipped  int    // fires that started nothing because last was active
}

// A scheduler starts the runs of the schedules. Safe for concurrent use.
type scheduler struct {
	runs   *runManager
	logger *slog.Logger
	clock  schedClock
	wake   chan struct{} // 1-buffered: a reload or a run's end
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// guards states and order
	states map[string]*scheduleState
	order  []string // config order
}

// newScheduler returns a scheduler of schedules over runs, not started.
// A nil clock is the system's.
func newScheduler(runs *runManager, schedules []scheduleConfig, clock schedClock, logger *slog.Logger) *scheduler {
	if clock == nil {
		clock = realClock{}
	}
	ctx, stop := context.WithCancel(context.Background())
	s := &scheduler{runs: runs, logger: logger, clock: clock, wake: make(chan struct{}, 1), ctx: ctx, stop: stop,
		states: map[string]*scheduleState{}}
	s.replace(schedules)
	return s
}

// start runs one fire of every catch_up schedule, then waits for fire
// times in the background until close.
func (s *scheduler) start() {
	s.mu.Lock()
	for _, name := range s.order {
		if st := s.states[name]; st.cfg.CatchUp && !st.cfg.Paused {
			s.fireLocked(st, "catch_up")
		}
	}
	s.mu.Unlock()
	s.wg.Add(1)
	// Owned by the scheduler; exits at close.
	go func() {
		defer s.wg.Done()
		s.loop()
	}()
}

// close stops the scheduler and waits for its goroutines; runs it started
// go on (the run manager's shutdown ends them).
func (s *scheduler) close() {
	s.mu.Lock()
	s.stop() // under mu: no run is watched once close waits
	s.mu.Unlock()
	s.wg.Wait()
}

// loop fires what is due, then waits for the next fire time, a reload or
// a run's end, until close.
func (s *scheduler) loop() {
	for {
		next := s.fireDue()
		var timer <-chan time.Time
		release := func() {}
		if !next.IsZero() {
			timer, release = s.clock.at(next)
		}
		select {
		case <-timer:
		case <-s.wake:
		case <-s.ctx.Done():
			release()
			return
		}
		release()
	}
}

// poke wakes the loop without blocking.
func (s *scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// fireDue fires every schedule whose time has come and the queued fires
// whose previous run has ended, and returns the earliest next fire time
// (zero for none).
func (s *scheduler) fireDue() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.now()
	var earliest time.Time
	for _, name := range s.order {
		st := s.states[name]
		if st.queued && st.last != nil && isTerminal(st.last.summary().Status) {
			st.queued = false
			s.startLocked(st, "queued") // logged and kept as lastErr
		}
		if !st.next.IsZero() && !now.Before(st.next) {
			s.fireLocked(st, "cron")
			// The times missed meanwhile are one fire.
			st.next = st.cfg.nextFire(now)
		}
		if !st.next.IsZero() && (earliest.IsZero() || st.next.Before(earliest)) {
			earliest = st.next
		}
	}
	return earliest
}

// nextFire returns the first fire time of s after after, zero when it
// never fires again or is paused.
func (s scheduleConfig) nextFire(after time.Time) time.Time {
	if s.Paused {
		return time.Time{}
	}
	t, _ := s.spec.next(after, s.location)
	return t
}

// fireLocked is one fire of st (why says what made it: cron, catch_up):
// it starts the schedule's run unless its previous run is active, then
// skips or queues it as the schedule's overlap says.
func (s *scheduler) fireLocked(st *scheduleState, why string) {
	st.lastFire = s.clock.now()
	if st.last != nil && !isTerminal(st.last.summary().Status) {
		if st.cfg.Overlap == overlapQueue {
			st.queued = true
			s.logger.Info("schedule fired while its previous run is active; queued", "schedule", st.cfg.Name, "run", st.last.id, "fire", why)
			return
		}
		st.skipped++
		s.logger.Info("schedule fired while its previous run is active; skipped", "schedule", st.cfg.Name, "run", st.last.id, "fire", why)
		return
	}
	s.startLocked(st, why) // logged and kept as lastErr
}

// startLocked starts st's run and watches for its end (which may start a
// queued fire). A run that cannot start is logged and kept as lastErr;
// the error is start's.
func (s *scheduler) startLocked(st *scheduleState, why string) (*run, error) {
	if s.ctx.Err() != nil {
		return nil, errShuttingDown
	}
	// Scheduled runs come from the configuration: they may start any
	// server, like an admin's.
	r, err := s.runs.start(scheduleRunRequest(st.cfg), true)
	if err != nil {
		st.lastErr = err.Error()
		s.logger.Error("scheduled run did not start", "schedule", st.cfg.Name, "fire", why, "err", err)
		return nil, err
	}
	st.last, st.lastErr = r, ""
	s.logger.Info("scheduled run started", "schedule", st.cfg.Name, "run", r.id, "fire", why)
	s.wg.Add(1)
	// Owned by the scheduler; exits when the run ends or at close.
	go func() {
		defer s.wg.Done()
		select {
		case <-r.done:
			s.poke()
		case <-s.ctx.Done():
		}
	}()
	return r, nil
}

// scheduleOwner returns the owner of the runs of schedule name.
func scheduleOwner(name string) string { return scheduleOwnerPrefix + name }

// tenant returns the tenant of s's runs: its tenant field, else its
// owner (schedule:<name>), which no key's tenant can be (a key's tenant
// has no ":"), so that only admin keys see them.
func (s scheduleConfig) tenant() string {
	if s.Tenant != "" {
		return s.Tenant
	}
	return scheduleOwner(s.Name)
}

// scheduleRunRequest returns the run request of one fire of s, started by
// schedule:<name>, of s's tenant; it may join only a conversation of that
// tenant. Every run field of [[schedules]] is copied here and nowhere
// else.
func scheduleRunRequest(s scheduleConfig) runRequest {
	return runRequest{
		Prompt:         s.Prompt,
		Profile:        s.Profile,
		Model:          s.Model,
		MaxSteps:       s.MaxSteps,
		WebhookURL:     s.WebhookURL,
		MaxTokens:      s.MaxTokens,
		MaxCostUSD:     s.MaxCostUSD,
		MaxDuration:    s.MaxDuration,
		ConversationID: s.ConversationID,
		Owner:          scheduleOwner(s.Name),
		Tenant:         s.tenant(),
	}
}

// checkScheduleConversations returns an error naming each schedule whose
// conversation_id names a kept conversation of another tenant, whose runs
// joinConversation would refuse, or nil. Only the run store knows a
// conversation's tenant, so harnessd check cannot tell, and a
// conversation kept later is checked when the schedule's run starts.
func (m *runManager) checkScheduleConversations(schedules []scheduleConfig) error {
	var errs []error
	for _, s := range schedules {
		if s.ConversationID == "" {
			continue
		}
		c := m.conversation(s.ConversationID)
		if c == nil {
			continue
		}
		if tenant := m.tenantOf(c); tenant != s.tenant() {
			err := &conversationTenantError{conversation: s.ConversationID, tenant: tenant, runTenant: s.tenant()}
			errs = append(errs, fmt.Errorf("%s: [[schedules]] %q: conversation_id: %v", s.Source, s.Name, err))
		}
	}
	return errors.Join(errs...)
}

// runNow starts a run of schedule name at once, whatever its overlap (an
// operator asked for it). It returns false when there is no such
// schedule, and start's error when the run could not start.
func (s *scheduler) runNow(name string) (*run, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[name]
	if !ok {
		return nil, false, nil
	}
	st.lastFire = s.clock.now()
	r, err := s.startLocked(st, "api")
	return r, true, err
}

// replace makes schedules the scheduler's: a schedule whose table is
// unchanged keeps its state; a changed one keeps its last run and counts
// and gets its next fire time anew, from now; a removed one is dropped
// (its active run goes on). Fire times that passed are not replayed.
func (s *scheduler) replace(schedules []scheduleConfig) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock.now()
	states := make(map[string]*scheduleState, len(schedules))
	order := make([]string, 0, len(schedules))
	for _, cfg := range schedules {
		st, ok := s.states[cfg.Name]
		switch {
		case !ok:
			st = &scheduleState{cfg: cfg, next: cfg.nextFire(now)}
		case st.cfg.rawSchedule != cfg.rawSchedule:
			st.cfg, st.next = cfg, cfg.nextFire(now)
		default:
			st.cfg = cfg
		}
		states[cfg.Name] = st
		order = append(order, cfg.Name)
	}
	s.states, s.order = states, order
}

// reload replaces the schedules (see replace) and lets the loop see the
// new fire times.
func (s *scheduler) reload(schedules []scheduleConfig) {
	s.replace(schedules)
	s.poke()
}

// A scheduleView is one schedule as GET /v1/schedules shows it. Fire
// times are in the schedule's time zone.
type scheduleView struct {
	Name       string     `json:"name"`
	Cron       string     `json:"cron"`
	Timezone   string     `json:"timezone"`
	Overlap    string     `json:"overlap"`
	CatchUp    bool       `json:"catch_up"`
	Paused     bool       `json:"paused"`
	Source     string     `json:"source"`
	NextRunAt  *time.Time `json:"next_run_at"`
	LastFireAt *time.Time `json:"last_fire_at,omitempty"`
	LastRunID  string     `json:"last_run_id,omitempty"`
	LastStatus string     `json:"last_status,omitempty"`
	LastError  string     `json:"last_error,omitempty"`
	Queued     bool       `json:"queued"`
	Skipped    int        `json:"skipped"`
}

// list returns every schedule in configuration order; its last run is
// what it started since harnessd started.
func (s *scheduler) list() []scheduleView {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]scheduleView, 0, len(s.order))
	for _, name := range s.order {
		st := s.states[name]
		v := scheduleView{Name: name, Cron: st.cfg.Cron, Timezone: st.cfg.Timezone, Overlap: st.cfg.Overlap, CatchUp: st.cfg.CatchUp, Paused: st.cfg.Paused,
			Source: st.cfg.Source, LastError: st.lastErr, Queued: st.queued, Skipped: st.skipped}
		if !st.next.IsZero() {
			t := st.next.In(st.cfg.location)
			v.NextRunAt = &t
		}
		if !st.lastFire.IsZero() {
			t := st.lastFire.In(st.cfg.location)
			v.LastFireAt = &t
		}
		if st.last != nil {
			v.LastRunID, v.LastStatus = st.last.id, st.last.summary().Status
		}
		out = append(out, v)
	}
	return out
}

// checkFireCount is how many fire times harnessd check prints per
// schedule.
const checkFireCount = 3

// printSchedules writes each schedule's next fire times after now, for
// harnessd check.
func printSchedules(w io.Writer, schedules []scheduleConfig, now time.Time) {
	for _, s := range schedules {
		var times []string
		for _, t := range s.nextFires(now, checkFireCount) {
			times = append(times, t.In(s.location).Format(time.RFC3339))
		}
		next := strings.Join(times, ", ")
		switch {
		case s.Paused:
			next = "none: paused"
		case next == "":
			next = "never"
		}
		fmt.Fprintf(w, "schedule %q: %s (%s, overlap %s): next %s\n", s.Name, s.Cron, s.Timezone, s.Overlap, next)
	}
}
