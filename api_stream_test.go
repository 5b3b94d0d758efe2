package main

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file holds the tests of what bounds the event streams: the
// replays of ended runs at max_concurrent_replays, and the write deadline
// that drops a client who stops reading.

// replayTest is an API over a store holding one ended run with a large
// history (its id in id, its event count in events).
type replayTest struct {
	api    *api
	url    string
	id     string
	events int
}

// newReplayTest serves the API over a store holding one ended run whose
// history takes size bytes, with max_concurrent_replays set to replays.
func newReplayTest(t *testing.T, size, replays int) *replayTest {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "runs")
	id, events := storeLargeRun(t, dir, size)
	reg := newRegistry(nil, registryOptions{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(reg.close)
	store, err := openRunStoreOnceFree(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.close)
	opts := runOptionsOver(t, reg, newFakeModel(t, providerOpenAI), "", nil)
	opts.Store = store
	opts.Limits.MaxConcurrentReplays = replays
	m := newRunsWith(t, opts)
	a := newAPI(m, reg, nil, nil, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &replayTest{api: a, url: srv.URL, id: id, events: events}
}

// stalledReplay asks for a replay of rt's run on a connection with a small
// receive window and never reads it. The connection is closed at the end
// of the test.
func (rt *replayTest) stalledReplay(t *testing.T) net.Conn {
	t.Helper()
	dialer := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10) })
	}}
	host := strings.TrimPrefix(rt.url, "http://")
	conn, err := dialer.DialContext(t.Context(), "tcp", host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET /v1/runs/%s/events HTTP/1.1\r\nHost: %s\r\n\r\n", rt.id, host); err != nil {
		t.Fatal(err)
	}
	return conn
}

// metric returns one of the API's counters under its mu.
func (rt *replayTest) metric(read func(*metrics) int64) int64 {
	m := rt.api.metrics
	m.mu.Lock()
	defer m.mu.Unlock()
	return read(m)
}

// TestReplayLimit holds one replay (its client does not read) with
// max_concurrent_replays at 1: a second replay is answered 429 with
// Retry-After, naming the limit, until the first client goes away; then
// it streams the whole history.
func TestReplayLimit(t *testing.T) {
	t.Parallel()
	rt := newReplayTest(t, 8<<20, 1)
	stalled := rt.stalledReplay(t)
	waitUntil(t, "the first replay is under way", func() bool {
		return rt.metric(func(m *metrics) int64 { return m.replaysActive }) == 1
	})
	resp, err := http.Get(rt.url + "/v1/runs/" + rt.id + "/events")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "2" ||
		!strings.Contains(string(body), "too_many_replays") || !strings.Contains(string(body), "max_concurrent_replays") {
		t.Fatalf("second replay = %d (Retry-After %q) %s; want 429 with Retry-After 2 naming max_concurrent_replays",
			resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if n := rt.metric(func(m *metrics) int64 { return int64(m.replaysRefused) }); n != 1 {
		t.Errorf("replays refused = %d, want 1", n)
	}
	stalled.Close()
	waitUntil(t, "the first replay has ended", func() bool {
		return rt.metric(func(m *metrics) int64 { return m.replaysActive }) == 0
	})
	if err := replayOnce(t, rt.url+"/v1/runs/"+rt.id+"/events", rt.events); err != nil {
		t.Fatal(err)
	}
}

// TestReplayDropsStalledClient: a client that asks for a replay and never
// reads is dropped once a write has waited the stream's write timeout,
// and its slot is freed.
func TestReplayDropsStalledClient(t *testing.T) {
	t.Parallel()
	rt := newReplayTest(t, 8<<20, 4)
	rt.api.streamWriteTimeout = 200 * time.Millisecond
	stalled := rt.stalledReplay(t)
	waitUntil(t, "the stalled client was dropped", func() bool {
		return rt.metric(func(m *metrics) int64 { return int64(m.streamsDropped) }) == 1 &&
			rt.metric(func(m *metrics) int64 { return m.replaysActive }) == 0
	})
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := io.Copy(io.Discard, stalled)
	if err != nil && !strings.Contains(err.Error(), "reset") || n >= 8<<20 {
		t.Errorf("the dropped client read %d bytes then %v; want its connection closed before the whole history", n, err)
	}
}
