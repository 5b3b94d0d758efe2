package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
)

// This file holds the tests of a run store that cannot write (a full
// disk): a run whose end cannot be written is not reported completed,
// new runs are refused with 503, /readyz answers 503, /metrics counts the
// failures, and all of it ends by itself once space comes back.

// A diskFull is a test's switch of the store's fault seam: while on,
// every write, space allocation and segment creation fails with ENOSPC.
type diskFull struct {
	on     atomic.Bool
	writes atomic.Int64 // writes refused
}

// fault is the store's seam.
func (d *diskFull) fault(op string) error {
	if !d.on.Load() {
		return nil
	}
	if op == "write" {
		d.writes.Add(1)
	}
	return syscall.ENOSPC
}

// gatedTurn returns a model turn that says it was reached, then waits
// for gate (or the test's end) before answering with turn.
func gatedTurn(t *testing.T, reached chan<- string, name string, gate <-chan struct{}, turn fakeTurn) fakeTurn {
	return fakeTurn{Reply: func(fakeRequest) fakeTurn {
		reached <- name
		select {
		case <-gate:
		case <-t.Context().Done():
		}
		return turn
	}}
}

// newGate returns a channel closed by the function returned.
func newGate() (<-chan struct{}, func()) {
	ch := make(chan struct{})
	return ch, sync.OnceFunc(func() { close(ch) })
}

// storeAPI serves the API over a run manager on store.
func storeAPI(t *testing.T, f *fakeModel, store *runStore) *apiTest {
	t.Helper()
	m := newRunsOnStore(t, nil, f, store, nil)
	a := newAPI(m, m.opts.Registry, nil, m.opts.Metrics, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &apiTest{url: srv.URL, client: srv.Client(), api: a, runs: m}
}

// metricValue returns the value of the metric line name in /metrics.
func metricValue(t *testing.T, at *apiTest, name string) int {
	t.Helper()
	_, body := at.do(t, http.MethodGet, "/metrics", "", "")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\d+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("/metrics has no %s:\n%s", name, body)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// checkRefused checks that while the store cannot write, POST /v1/runs
// and /readyz answer 503 naming the store and its free space, and
// /metrics shows it.
func checkRefused(t *testing.T, at *apiTest, dir string) {
	t.Helper()
	for _, req := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/runs", `{"prompt":"refused"}`},
		{http.MethodGet, "/readyz", ""},
	} {
		resp, body := at.do(t, req.method, req.path, "", req.body)
		var e apiError
		json.Unmarshal(body, &e)
		if resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != "store_unavailable" ||
			!strings.Contains(e.Error.Message, dir) || !strings.Contains(e.Error.Message, "free") ||
			!strings.Contains(e.Error.Message, "no space left on device") {
			t.Errorf("%s %s while the disk is full = %d %s, want 503 store_unavailable naming %s, the cause and the free space",
				req.method, req.path, resp.StatusCode, body, dir)
		}
	}
	if n := metricValue(t, at, "harnessd_store_errors_total"); n == 0 {
		t.Error("harnessd_store_errors_total = 0 while the disk is full, want the failures counted")
	}
	if n := metricValue(t, at, "harnessd_store_writable"); n != 0 {
		t.Errorf("harnessd_store_writable = %d while the disk is full, want 0", n)
	}
}

// checkAccepting checks that the store writes again: /readyz answers 200
// and a new run completes.
func checkAccepting(t *testing.T, at *apiTest, prompt string) string {
	t.Helper()
	if resp, body := at.do(t, http.MethodGet, "/readyz", "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("/readyz once space is back = %d %s, want 200", resp.StatusCode, body)
	}
	id := at.postRun(t, "", fmt.Sprintf(`{"prompt":%q}`, prompt))
	if v := waitRunID(t, at, id); v.Status != runCompleted {
		t.Fatalf("run posted once space is back = %s (%s), want completed", v.Status, v.Error)
	}
	if n := metricValue(t, at, "harnessd_store_writable"); n != 1 {
		t.Errorf("harnessd_store_writable = %d once space is back, want 1", n)
	}
	return id
}

// TestStoreFullDiskInjected: the store's writes fail with ENOSPC (the
// fault seam) while run A is about to end and run B is between two
// steps. A is reported failed, saying the store could not write its end;
// new runs get 503, /readyz 503, /metrics counts. Once space is back,
// B's kept lines are written before its end (no gap on disk), it
// completes, new runs are accepted; after a restart A is failed (not
// completed, as it was reported before this fix) and B is whole.
func TestStoreFullDiskInjected(t *testing.T) {
	t.Parallel()
	reached := make(chan string)
	gateA, releaseA := newGate()
	gateB1, releaseB1 := newGate()
	gateB2, releaseB2 := newGate()
	f := newFakeModel(t, providerOpenAI,
		gatedTurn(t, reached, "A", gateA, fakeTurn{Text: "answer A"}),
		gatedTurn(t, reached, "B1", gateB1, fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"anything"}`)}}),
		gatedTurn(t, reached, "B2", gateB2, fakeTurn{Text: "answer B"}),
		fakeTurn{Text: "answer C"},
	)
	dir := filepath.Join(t.TempDir(), "runs")
	store, err := openRunStoreOnceFree(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.close)
	full := &diskFull{}
	store.log.fault, store.log.probeEvery = full.fault, 0
	at := storeAPI(t, f, store)

	a := at.postRun(t, "", `{"prompt":"A"}`)
	if got := <-reached; got != "A" {
		t.Fatalf("model reached %s, want A", got)
	}
	b := at.postRun(t, "", `{"prompt":"B"}`)
	if got := <-reached; got != "B1" {
		t.Fatalf("model reached %s, want B1", got)
	}

	full.on.Store(true)
	releaseB1()
	if got := <-reached; got != "B2" {
		t.Fatalf("model reached %s, want B2", got)
	}
	waitUntil(t, "run B's writes meet the full disk", func() bool { return full.writes.Load() > 0 })
	releaseA()
	va := waitRunID(t, at, a)
	wantErr := "store: writing the run's end: no space left on device (it had ended completed)"
	if va.Status != runFailed || va.Error != wantErr {
		t.Errorf("run A ending while the disk is full = %s %q, want failed %q", va.Status, va.Error, wantErr)
	}
	if events, _, _ := at.runs.get(a).eventsAfter(0); len(events) == 0 || events[len(events)-1].Type != "run.failed" {
		t.Errorf("run A's events end with %+v, want run.failed", events[len(events)-1:])
	}
	checkRefused(t, at, dir)

	full.on.Store(false)
	releaseB2()
	if vb := waitRunID(t, at, b); vb.Status != runCompleted || vb.Output != "answer B" {
		t.Errorf("run B, whose lines the full disk held back = %s %q, want completed", vb.Status, vb.Error)
	}
	c := checkAccepting(t, at, "C")

	// After a restart: what was reported ended is what the disk says.
	stopRuns(t, at.runs)
	m2 := newStoredRuns(t, f, dir, nil)
	for _, want := range []struct {
		id, status, errPrefix string
		types                 []string
	}{
		{a, runFailed, interruptedError, nil},
		{b, runCompleted, "", []string{"run.started", "model.response", "tool.call.started", "tool.call.completed", "model.response", "run.completed"}},
		{c, runCompleted, "", []string{"run.started", "model.response", "run.completed"}},
	} {
		r := m2.get(want.id)
		if r == nil {
			t.Fatalf("run %s is gone after a restart", want.id)
		}
		v := r.view()
		if v.Status != want.status || !strings.HasPrefix(v.Error, want.errPrefix) {
			t.Errorf("run %s after a restart = %s %q, want %s %q", want.id, v.Status, v.Error, want.status, want.errPrefix)
		}
		if want.types == nil {
			continue
		}
		events, _, _ := r.eventsAfter(0)
		var types []string
		for i, ev := range events {
			if ev.Seq != i+1 {
				t.Errorf("run %s event %d has seq %d: a gap on disk", want.id, i+1, ev.Seq)
			}
			types = append(types, ev.Type)
		}
		if strings.Join(types, " ") != strings.Join(want.types, " ") {
			t.Errorf("run %s's events after a restart = %v, want %v", want.id, types, want.types)
		}
	}
}

// TestRunsLogNoRoom: each way the disk can be full fails the store
// (health says so, naming the cause, and counts it), even where the
// segment's space given ahead would let writes go on, and a probe or
// write ends the failure once there is room again.
func TestRunsLogNoRoom(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// fail is the operation that fails; full makes the segment full
		// first, so that a new one must be begun.
		fail string
		full bool
	}{
		{"a write finds no room", "write", false},
		{"a new segment cannot be created", "create", true},
		{"a new segment cannot be given its space", "allocate", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := newTestRunStore(t)
			g := store.log
			g.segBytes = 4096
			g.probeEvery = 0
			var on atomic.Bool
			g.fault = func(op string) error {
				if on.Load() && op == tc.fail {
					return syscall.ENOSPC
				}
				return nil
			}
			if tc.full {
				g.mu.Lock()
				g.current().size = g.segBytes - 10 // the next write fills it
				g.mu.Unlock()
			}
			on.Store(true)
			_, werr := g.appendLines("run_a", []byte(`{"a":1}`))
			h := store.health()
			var unavailable *storeUnavailableError
			if !errors.As(h.err, &unavailable) || !errors.Is(h.err, syscall.ENOSPC) || h.errors == 0 {
				t.Fatalf("health after %s fails (write: %v) = %v, %d errors; want the store unavailable for ENOSPC, counted", tc.fail, werr, h.err, h.errors)
			}
			if tc.full && werr != nil {
				t.Errorf("the write that filled the segment = %v, want it in (the space was given ahead)", werr)
			}
			on.Store(false)
			if h := store.health(); h.err != nil {
				t.Fatalf("health once there is room = %v, want nil", h.err)
			}
			if _, err := g.appendLines("run_a", []byte(`{"a":2}`)); err != nil {
				t.Fatalf("write once there is room: %v", err)
			}
		})
	}
}
