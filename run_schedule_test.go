package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests the scheduler under a fake clock: fires at the cron's
// times, missed fires not replayed, overlap skip and queue, catch_up,
// reloads, the API, and harnessd check's fire times.

// A fakeSchedClock is a schedClock the test moves by hand. Safe for
// concurrent use.
type fakeSchedClock struct {
	mu sync.Mutex
	// guards t and waiters
	t       time.Time
	waiters []fakeWaiter
}

// A fakeWaiter is one pending at: its time and its channel.
type fakeWaiter struct {
	at time.Time
	ch chan time.Time
}

func (c *fakeSchedClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeSchedClock) at(t time.Time) (<-chan time.Time, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if !t.After(c.t) {
		ch <- c.t
		return ch, func() {}
	}
	c.waiters = append(c.waiters, fakeWaiter{at: t, ch: ch})
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.waiters = slices.DeleteFunc(c.waiters, func(w fakeWaiter) bool { return w.ch == ch })
	}
}

// set moves the clock to t and wakes the waiters whose time has come.
func (c *fakeSchedClock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
	c.waiters = slices.DeleteFunc(c.waiters, func(w fakeWaiter) bool {
		if w.at.After(t) {
			return false
		}
		w.ch <- t
		return true
	})
}

// utcAt returns 2026-12-01 at hh:mm:ss UTC.
func utcAt(h, m, s int) time.Time { return time.Date(2026, 12, 1, h, m, s, 0, time.UTC) }

// testSchedule returns a checked schedule of raw, failing the test on a
// problem.
func testSchedule(t *testing.T, raw rawSchedule) scheduleConfig {
	t.Helper()
	s, problems := checkSchedule(raw)
	if len(problems) > 0 {
		t.Fatalf("schedule %+v: %v", raw, problems)
	}
	s.Source = "test"
	return s
}

// newTestScheduler starts a scheduler of schedules over runs at clock,
// closed at cleanup.
func newTestScheduler(t *testing.T, runs *runManager, clock schedClock, schedules ...scheduleConfig) *scheduler {
	t.Helper()
	s := newScheduler(runs, schedules, clock, discardLogger())
	s.start()
	t.Cleanup(s.close)
	return s
}

// scheduleNamed returns the listing of schedule name.
func scheduleNamed(t *testing.T, s *scheduler, name string) scheduleView {
	t.Helper()
	for _, v := range s.list() {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("schedule %q is not listed", name)
	return scheduleView{}
}

func TestScheduleFiresUnderFakeClock(t *testing.T) {
	t.Parallel()
	g := newGateModel()
	g.release("tick tock")
	m := newGateRuns(t, g, runLimits{})
	clock := &fakeSchedClock{t: utcAt(12, 1, 0)}
	s := newTestScheduler(t, m, clock, testSchedule(t, rawSchedule{Name: "tick", Cron: "*/5 * * * *", Prompt: "tick tock"}))

	// 12:00 passed before the start: not replayed.
	if v := scheduleNamed(t, s, "tick"); !v.NextRunAt.Equal(utcAt(12, 5, 0)) || len(m.list()) != 0 {
		t.Fatalf("at start: next %v and %d runs, want 12:05 and none", v.NextRunAt, len(m.list()))
	}
	clock.set(utcAt(12, 4, 59))
	if n := len(m.list()); n != 0 {
		t.Fatalf("%d runs before the fire time, want none", n)
	}
	clock.set(utcAt(12, 5, 0))
	waitUntil(t, "the 12:05 fire", func() bool { return scheduleNamed(t, s, "tick").NextRunAt.Equal(utcAt(12, 10, 0)) })
	runs := m.list()
	if len(runs) != 1 || runs[0].req.Owner != "schedule:tick" || runs[0].req.Prompt != "tick tock" {
		t.Fatalf("after the fire: %d runs (owner %q), want one owned by schedule:tick", len(runs), runs[0].req.Owner)
	}
	waitRun(t, runs[0])
	if v := scheduleNamed(t, s, "tick"); v.LastRunID != runs[0].id || v.LastStatus != runCompleted {
		t.Errorf("listing = %+v, want last run %s completed", v, runs[0].id)
	}

	// An hour later at once (the machine slept): the missed fires are one.
	clock.set(utcAt(13, 2, 0))
	waitUntil(t, "the fire after the jump", func() bool { return scheduleNamed(t, s, "tick").NextRunAt.Equal(utcAt(13, 5, 0)) })
	if n := len(m.list()); n != 2 {
		t.Errorf("%d runs after the jump, want 2 (one for every missed fire)", n)
	}
}

func TestScheduleOverlap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		overlap     string
		wantSkipped int
		wantQueued  bool
	}{
		{overlapSkip, 2, false},
		{overlapQueue, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.overlap, func(t *testing.T) {
			g := newGateModel()
			m := newGateRuns(t, g, runLimits{})
			clock := &fakeSchedClock{t: utcAt(12, 0, 30)}
			s := newTestScheduler(t, m, clock, testSchedule(t, rawSchedule{Name: "slow", Cron: "* * * * *", Prompt: "slow work", Overlap: tt.overlap}))
			clock.set(utcAt(12, 1, 0))
			g.waitEntered(t)
			first := m.list()[0]
			// Two fires while the first run is active.
			for minute := 2; minute <= 3; minute++ {
				clock.set(utcAt(12, minute, 0))
				waitUntil(t, "the fire", func() bool { return scheduleNamed(t, s, "slow").NextRunAt.Equal(utcAt(12, minute+1, 0)) })
			}
			v := scheduleNamed(t, s, "slow")
			if len(m.list()) != 1 || v.Skipped != tt.wantSkipped || v.Queued != tt.wantQueued {
				t.Fatalf("while the first run is active: %d runs, %+v; want 1 run, skipped %d, queued %v", len(m.list()), v, tt.wantSkipped, tt.wantQueued)
			}
			g.release("slow work")
			waitRun(t, first)
			if tt.overlap == overlapQueue {
				// The queued fire starts once the first run ends, once.
				waitUntil(t, "the queued run", func() bool { return len(m.list()) == 2 })
				second := m.list()[0]
				waitRun(t, second)
				waitUntil(t, "the listing follows", func() bool { return scheduleNamed(t, s, "slow").LastRunID == second.id })
				if v := scheduleNamed(t, s, "slow"); v.Queued || v.LastStatus != runCompleted {
					t.Errorf("after the queued run: %+v, want not queued, last completed", v)
				}
				return
			}
			// Skipped fires are gone; the next fire starts a run.
			clock.set(utcAt(12, 4, 0))
			waitUntil(t, "the next fire", func() bool { return len(m.list()) == 2 })
		})
	}
}

func TestScheduleCatchUp(t *testing.T) {
	t.Parallel()
	for _, catchUp := range []bool{true, false} {
		g := newGateModel()
		g.release("catch up")
		m := newGateRuns(t, g, runLimits{})
		clock := &fakeSchedClock{t: utcAt(12, 0, 30)}
		s := newTestScheduler(t, m, clock, testSchedule(t, rawSchedule{Name: "daily", Cron: "@daily", Prompt: "catch up", CatchUp: catchUp}))
		want := 0
		if catchUp {
			want = 1
		}
		if n := len(m.list()); n != want {
			t.Errorf("catch_up %v: %d runs at start, want %d", catchUp, n, want)
		}
		if v := scheduleNamed(t, s, "daily"); !v.NextRunAt.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)) || (v.LastRunID != "") != catchUp {
			t.Errorf("catch_up %v: listing %+v, want next midnight", catchUp, v)
		}
	}
}

func TestScheduleReload(t *testing.T) {
	t.Parallel()
	g := newGateModel()
	m := newGateRuns(t, g, runLimits{})
	clock := &fakeSchedClock{t: utcAt(12, 0, 30)}
	keep := testSchedule(t, rawSchedule{Name: "keep", Cron: "0 13 * * *", Prompt: "p"})
	change := testSchedule(t, rawSchedule{Name: "change", Cron: "0 14 * * *", Prompt: "p"})
	drop := testSchedule(t, rawSchedule{Name: "drop", Cron: "0 15 * * *", Prompt: "p"})
	s := newTestScheduler(t, m, clock, keep, change, drop)
	changed := testSchedule(t, rawSchedule{Name: "change", Cron: "30 12 * * *", Timezone: "Europe/Berlin", Prompt: "p"})
	added := testSchedule(t, rawSchedule{Name: "added", Cron: "@hourly", Prompt: "p"})
	s.reload([]scheduleConfig{added, keep, changed})
	var got []string
	for _, v := range s.list() {
		got = append(got, v.Name+" "+v.NextRunAt.UTC().Format("15:04"))
	}
	// 12:30 in Berlin is 11:30 UTC: tomorrow's.
	if want := []string{"added 13:00", "keep 13:00", "change 11:30"}; !slices.Equal(got, want) {
		t.Errorf("after the reload: %q, want %q", got, want)
	}
}

func TestScheduleAPI(t *testing.T) {
	t.Parallel()
	g := newGateModel()
	g.release("report")
	m := newGateRuns(t, g, runLimits{})
	clock := &fakeSchedClock{t: utcAt(12, 0, 30)}
	s := newTestScheduler(t, m, clock, testSchedule(t, rawSchedule{Name: "report", Cron: "0 9 * * mon-fri", Timezone: "Europe/Paris", Prompt: "report"}))
	keys := []authKey{testKey("ops", "admin-token-0123", scopeAdmin), testKey("app", "writer-token-0123", scopeRunsWrite)}
	a := newAPI(m, m.opts.Registry, keys, m.opts.Metrics, nil, nil)
	a.schedules = s
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client()}
	const admin, writer = "Bearer admin-token-0123", "Bearer writer-token-0123"

	tests := []struct {
		name, method, path, auth string
		wantStatus               int
		want                     string
	}{
		{"list needs admin", http.MethodGet, "/v1/schedules", writer, http.StatusForbidden, "admin"},
		{"run needs admin", http.MethodPost, "/v1/schedules/report/run", writer, http.StatusForbidden, "admin"},
		{"unknown schedule", http.MethodPost, "/v1/schedules/nope/run", admin, http.StatusNotFound, `schedule \"nope\": not found`},
		{"list", http.MethodGet, "/v1/schedules", admin, http.StatusOK, `"next_run_at": "2026-12-02T09:00:00+01:00"`},
		{"run now", http.MethodPost, "/v1/schedules/report/run", admin, http.StatusAccepted, `"schedule": "report"`},
	}
	for _, tt := range tests {
		resp, body := at.do(t, tt.method, tt.path, tt.auth, "")
		if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s: %s %s = %d %s, want %d with %q", tt.name, tt.method, tt.path, resp.StatusCode, body, tt.wantStatus, tt.want)
		}
	}
	runs := m.list()
	if len(runs) != 1 || runs[0].req.Owner != "schedule:report" {
		t.Fatalf("after POST run: %d runs, want one owned by schedule:report", len(runs))
	}
	waitRun(t, runs[0])
	var list struct {
		Schedules []scheduleView `json:"schedules"`
	}
	_, body := at.do(t, http.MethodGet, "/v1/schedules", admin, "")
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Schedules) != 1 || list.Schedules[0].LastRunID != runs[0].id || list.Schedules[0].LastStatus != runCompleted {
		t.Errorf("GET /v1/schedules = %s, want report's last run %s completed", body, runs[0].id)
	}
	if resp, _ := at.do(t, http.MethodGet, "/v1/schedules", "", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/schedules without a token = %d, want 401", resp.StatusCode)
	}
}

func TestPrintSchedules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw  rawSchedule
		want string
	}{
		{rawSchedule{Name: "nightly", Cron: "0 3 * * *", Timezone: "Europe/Paris", Prompt: "p"},
			`schedule "nightly": 0 3 * * * (Europe/Paris, overlap skip): next 2026-12-02T03:00:00+01:00, 2026-12-03T03:00:00+01:00, 2026-12-04T03:00:00+01:00`},
		{rawSchedule{Name: "leap", Cron: "0 0 29 2 *", Prompt: "p", Overlap: overlapQueue},
			`schedule "leap": 0 0 29 2 * (UTC, overlap queue): next 2028-02-29T00:00:00Z, 2032-02-29T00:00:00Z, 2036-02-29T00:00:00Z`},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		printSchedules(&b, []scheduleConfig{testSchedule(t, tt.raw)}, utcAt(12, 0, 0))
		if got := strings.TrimSpace(b.String()); got != tt.want {
			t.Errorf("printSchedules(%s) = %s, want %s", tt.raw.Name, got, tt.want)
		}
	}

	// Through harnessd check.
	home := t.TempDir()
	config := "[[schedules]]\nname = \"nightly\"\ncron = \"@daily\"\nprompt = \"p\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HARNESS_HOME": home, "HARNESS_MODEL": "openai/gpt-4o"}
	code, stdout, stderr := runHarnessd(t, env, "check")
	if code != 0 || !strings.Contains(stdout, `schedule "nightly": @daily (UTC, overlap skip): next `) || strings.Count(stdout, "T00:00:00Z") != 3 {
		t.Errorf("harnessd check = %d\n%s%s, want the schedule's next three midnights", code, stdout, stderr)
	}
	bad := "[[schedules]]\nname = \"nightly\"\ncron = \"0 3 * * 8\"\nprompt = \"p\"\n"
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runHarnessd(t, env, "check"); code != 2 || !strings.Contains(stderr, "field 5 (day of week)") {
		t.Errorf("harnessd check of a bad cron = %d %s, want 2 naming the field", code, stderr)
	}
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := runHarnessd(t, map[string]string{"HARNESS_HOME": home}, "check"); code != 2 || !strings.Contains(stderr, `[[schedules]] "nightly": model: none configured`) {
		t.Errorf("harnessd check of a schedule without a model = %d %s, want 2 saying so", code, stderr)
	}
}

func TestReloadAppliesSchedulesAndWebhooks(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	write := func(config string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[[schedules]]\nname = \"a\"\ncron = \"0 13 * * *\"\nprompt = \"p\"\n")
	load := loadOptions{Home: home, Getenv: fakeEnv(map[string]string{"HARNESS_MODEL": "openai/gpt-4o"})}
	cfg, _, err := checkConfig(load)
	if err != nil {
		t.Fatal(err)
	}
	m := newGateRuns(t, newGateModel(), runLimits{})
	clock := &fakeSchedClock{t: utcAt(12, 0, 0)}
	s := newTestScheduler(t, m, clock, cfg.Schedules...)
	rl := &daemon{opts: serveOptions{addr: "127.0.0.1:8080"}, load: load, started: cfg, reg: m.opts.Registry, api: newAPI(m, m.opts.Registry, nil, m.opts.Metrics, nil, nil),
		runs: m, schedules: s, metrics: m.opts.Metrics, secrets: newLiveRedactor(nil), logger: discardLogger()}
	names := func() []string {
		var out []string
		for _, v := range s.list() {
			out = append(out, v.Name+" "+v.NextRunAt.UTC().Format("15:04"))
		}
		return out
	}

	const secret = "reloaded-secret-0123456789"
	write("[webhooks]\nurl = \"https://hooks.example/new\"\nsecret = \"" + secret + "\"\n\n" +
		"[[schedules]]\nname = \"a\"\ncron = \"30 12 * * *\"\nprompt = \"p\"\n\n[[schedules]]\nname = \"b\"\ncron = \"@hourly\"\nprompt = \"q\"\n")
	if err := rl.reload(); err != nil {
		t.Fatalf("reload() = %v", err)
	}
	if got, want := names(), []string{"a 12:30", "b 13:00"}; !slices.Equal(got, want) {
		t.Errorf("schedules after the reload = %q, want %q", got, want)
	}
	if got := m.webhookSettings(); got.URL != "https://hooks.example/new" || got.Secret != secret {
		t.Errorf("[webhooks] after the reload = %q, want the new url and secret", got.URL)
	}
	for name, rd := range map[string]*redactor{"runs": m.env.secrets.load(), "logs": rl.secrets.load()} {
		if got := rd.redact("sig " + secret); got != "sig [redacted]" {
			t.Errorf("the %s' redactor after the reload shows the webhook secret: %q", name, got)
		}
	}

	write("[[schedules]]\nname = \"a\"\ncron = \"61 * * * *\"\nprompt = \"p\"\n")
	if err := rl.reload(); err == nil || !strings.Contains(err.Error(), "field 1 (minute)") {
		t.Errorf("reload of a bad cron = %v, want a refusal naming the field", err)
	}
	if got, want := names(), []string{"a 12:30", "b 13:00"}; !slices.Equal(got, want) {
		t.Errorf("schedules after a refused reload = %q, want %q kept", got, want)
	}
}

func TestScheduleAcrossSpringForward(t *testing.T) {
	t.Parallel()
	g := newGateModel()
	g.release("p")
	m := newGateRuns(t, g, runLimits{})
	berlin := mustZone(t, "Europe/Berlin")
	clock := &fakeSchedClock{t: time.Date(2026, 3, 28, 12, 0, 0, 0, berlin)}
	s := newTestScheduler(t, m, clock, testSchedule(t, rawSchedule{Name: "night", Cron: "*/30 2 * * *", Timezone: "Europe/Berlin", Prompt: "p"}))
	// 02:00 and 02:30 do not exist on 2026-03-29: one run at 03:00 CEST.
	jump := time.Date(2026, 3, 29, 3, 0, 0, 0, berlin)
	if v := scheduleNamed(t, s, "night"); !v.NextRunAt.Equal(jump) {
		t.Fatalf("next fire = %v, want %v", v.NextRunAt, jump)
	}
	clock.set(jump)
	next := time.Date(2026, 3, 30, 2, 0, 0, 0, berlin)
	waitUntil(t, "the fire at the jump", func() bool { return scheduleNamed(t, s, "night").NextRunAt.Equal(next) })
	if n := len(m.list()); n != 1 {
		t.Errorf("%d runs for the skipped hour, want 1", n)
	}
}
