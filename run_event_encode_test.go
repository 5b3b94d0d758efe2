package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// historyFrames returns the frames of an SSE body that carry an id (the
// history events), in order.
func historyFrames(body []byte) []string {
	var out []string
	for frame := range strings.SplitSeq(string(body), "\n\n") {
		if strings.HasPrefix(frame, "id: ") {
			out = append(out, frame)
		}
	}
	return out
}

// TestEventsEncodedOnce checks that a run's events are sent, written to
// disk and replayed as the same redacted bytes: two followers during the
// run, a follower of the ended run (read back from disk), one resuming
// with Last-Event-ID, and the event log agree byte for byte.
func TestEventsEncodedOnce(t *testing.T) {
	t.Parallel()
	const secret = "tok-9f8e7d6c5b4a"
	gate := make(chan struct{})
	f := newFakeModel(t, providerOpenAI, fakeTurn{Chunks: []string{"the key is ", secret[:6], secret[6:], " — keep it"},
		OnChunk: func(i int) {
			if i == 0 {
				<-gate // both followers attached
			}
		}})
	dir := filepath.Join(t.TempDir(), "runs")
	m := newStoredRuns(t, f, dir, nil)
	m.env.secrets.add(secret)
	srv := httptest.NewServer(newAPI(m, m.opts.Registry, nil, m.opts.Metrics, nil, nil))
	t.Cleanup(srv.Close)

	r, err := m.start(runRequest{Prompt: "say " + secret}, false)
	if err != nil {
		t.Fatal(err)
	}
	get := func(lastID string) []byte {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/runs/"+r.id+"/events", nil)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET events = %d, %v", resp.StatusCode, err)
		}
		return b
	}
	live := make(chan []byte, 2)
	for range 2 {
		go func() { live <- get("") }()
	}
	waitUntil(t, "two followers attached", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.live.followers == 2
	})
	close(gate)
	first, second := <-live, <-live
	<-r.done
	replay := get("")
	resumed := get("2")

	want := historyFrames(first)
	if len(want) < 3 || !strings.HasPrefix(want[len(want)-1], "id: ") || !strings.Contains(want[len(want)-1], "event: run.completed") {
		t.Fatalf("live stream frames = %q, want the history up to run.completed", want)
	}
	for name, body := range map[string][]byte{"second follower": second, "replay from disk": replay} {
		if got := historyFrames(body); strings.Join(got, "\n\n") != strings.Join(want, "\n\n") {
			t.Errorf("%s frames =\n%q\nwant\n%q", name, got, want)
		}
	}
	if got := historyFrames(resumed); strings.Join(got, "\n\n") != strings.Join(want[2:], "\n\n") {
		t.Errorf("resumed after id 2 =\n%q\nwant\n%q", got, want[2:])
	}
	file := runLinesOnDisk(t, dir, r.id)
	var log []byte // the file's event lines
	for line := range bytes.Lines(file) {
		if !bytes.HasPrefix(line, recordLinePrefix) && !bytes.HasPrefix(line, messageLinePrefix) {
			log = append(log, line...)
		}
	}
	var fromFrames bytes.Buffer
	for _, frame := range want {
		_, data, _ := strings.Cut(frame, "\ndata: ")
		fromFrames.WriteString(data + "\n")
	}
	if string(log) != fromFrames.String() {
		t.Errorf("event log =\n%s\nwant the streamed data lines\n%s", log, fromFrames.String())
	}
	all := string(first) + string(second) + string(replay) + string(log)
	if strings.Contains(all, secret) || strings.Contains(all, secret[6:]) {
		t.Errorf("the secret was sent or written:\n%s", all)
	}
	if !strings.Contains(string(first), "event: "+evModelDelta) || !strings.Contains(all, "[redacted]") {
		t.Errorf("want model.delta frames and [redacted] in the stream:\n%s", first)
	}
}
