package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file tests live output through the API: model.delta events that
// add up to each step's model.response, a follower attached mid-stream,
// replays without deltas, model.retry, and the bounded live log.

// A followedEvent is one event of a stream as a follower reads it: its
// SSE id ("" for a live event), type and decoded data.
type followedEvent struct {
	id   string
	typ  string
	data map[string]any
}

// A liveStream reads one GET /v1/runs/{id}/events stream.
type liveStream struct {
	s    *streamReader
	body io.ReadCloser
}

// openEvents opens the event stream of run id with header (name, value
// pairs); it is closed when the test ends.
func openEvents(t *testing.T, at *apiTest, id string, header ...string) *liveStream {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, at.url+"/v1/runs/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := at.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET events = %d, want 200", resp.StatusCode)
	}
	return &liveStream{s: &streamReader{r: bufio.NewReader(resp.Body)}, body: resp.Body}
}

// next returns the next event or comment (comment set), io.EOF at the end.
func (ls *liveStream) next(t *testing.T) (ev followedEvent, comment string, err error) {
	t.Helper()
	raw, comment, err := ls.s.next()
	if err != nil || comment != "" {
		return ev, comment, err
	}
	var frame struct {
		Seq  *int           `json:"seq"`
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
	if err := json.Unmarshal([]byte(raw.Data), &frame); err != nil {
		t.Fatalf("event %+v: %v", raw, err)
	}
	if frame.Type != raw.Event {
		t.Errorf("event %q carries type %q", raw.Event, frame.Type)
	}
	live := raw.Event == evModelDelta || raw.Event == evToolCallProgress
	if live != (raw.ID == "") || live != (frame.Seq == nil) || (!live && strconv.Itoa(*frame.Seq) != raw.ID) {
		t.Errorf("event %+v: want an id and seq on history events only, equal", raw)
	}
	return followedEvent{id: raw.ID, typ: raw.Event, data: frame.Data}, "", nil
}

// rest reads the stream to its end and returns its events.
func (ls *liveStream) rest(t *testing.T) []followedEvent {
	t.Helper()
	var out []followedEvent
	for {
		ev, comment, err := ls.next(t)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("read events after %d: %v", len(out), err)
		}
		if comment == "" {
			out = append(out, ev)
		}
	}
}

// until reads events until one of type typ and returns them all.
func (ls *liveStream) until(t *testing.T, typ string) []followedEvent {
	t.Helper()
	var out []followedEvent
	for {
		ev, comment, err := ls.next(t)
		if err != nil {
			t.Fatalf("read events until %s after %v: %v", typ, followedTypes(out), err)
		}
		if comment != "" {
			continue
		}
		out = append(out, ev)
		if ev.typ == typ {
			return out
		}
	}
}

// followedTypes returns the types of events.
func followedTypes(events []followedEvent) []string {
	var out []string
	for _, ev := range events {
		out = append(out, ev.typ)
	}
	return out
}

// stepTexts returns, per step, the text of the model.delta events since
// the step's last model.retry, and the content of its model.response. It
// fails the test on a delta after its step's model.response.
func stepTexts(t *testing.T, events []followedEvent) (deltas, responses map[int]string, pieces map[int]int) {
	t.Helper()
	deltas, responses, pieces = map[int]string{}, map[int]string{}, map[int]int{}
	for _, ev := range events {
		step := int(ev.data["step"].(float64))
		switch ev.typ {
		case evModelDelta:
			if _, done := responses[step]; done {
				t.Errorf("model.delta %v after the model.response of step %d", ev.data, step)
			}
			deltas[step] += ev.data["text"].(string)
			pieces[step]++
		case evModelRetry:
			deltas[step], pieces[step] = "", 0
		case evModelResponse:
			responses[step] = ev.data["content"].(string)
		}
	}
	return deltas, responses, pieces
}

// withSteps returns the events that carry a step.
func withSteps(events []followedEvent) []followedEvent {
	var out []followedEvent
	for _, ev := range events {
		if _, ok := ev.data["step"].(float64); ok {
			out = append(out, ev)
		}
	}
	return out
}

// liveAPITest serves the API over a fake model of wire with script,
// streaming in pieces of 3 bytes.
func liveAPITest(t *testing.T, wire string, script ...fakeTurn) *apiTest {
	t.Helper()
	f := newFakeModel(t, wire, script...).streamChunks(3)
	return newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
}

func TestLiveDeltasAddUpToTheResponse(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			attached := make(chan struct{})
			at := liveAPITest(t, wire,
				fakeTurn{Text: "I will look for an echo tool.", ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)},
					OnChunk: func(i int) {
						if i == 0 {
							<-attached
						}
					}},
				fakeTurn{Text: "Found it: the echo tool repeats what it is given."},
			)
			r := at.startRun(t, `{"prompt":"find echo"}`)
			ls := openEvents(t, at, r.id)
			first := ls.until(t, evRunStarted)
			close(attached)
			events := append(first, ls.rest(t)...)
			deltas, responses, pieces := stepTexts(t, withSteps(events))
			if len(responses) != 2 {
				t.Fatalf("events %v: want two model.response", followedTypes(events))
			}
			for step, content := range responses {
				if deltas[step] != content || pieces[step] < 2 {
					t.Errorf("step %d: deltas add up to %q in %d pieces, model.response %q; want equal, in several pieces", step, deltas[step], pieces[step], content)
				}
			}
			var ids []string
			for _, ev := range events {
				if ev.id != "" {
					ids = append(ids, ev.id)
				}
			}
			for i, id := range ids {
				if id != strconv.Itoa(i+1) {
					t.Fatalf("history ids %v: want 1, 2, ... without gaps", ids)
				}
			}

			// The history, the disk and replays hold no deltas.
			for _, header := range [][]string{nil, {"Last-Event-ID", "1"}} {
				replay := openEvents(t, at, r.id, header...).rest(t)
				if slices.Contains(followedTypes(replay), evModelDelta) || len(replay) != len(ids)-len(header)/2 {
					t.Errorf("replay with %v = %v, want the %d history events without deltas", header, followedTypes(replay), len(ids))
				}
			}
			if got := eventTypes(r); slices.Contains(got, evModelDelta) {
				t.Errorf("history %v holds model.delta", got)
			}
			at.waitAllRuns(t)
		})
	}
}

// TestLiveFollowerAttachedMidStream attaches two followers while the model
// is halfway through its text: a new one gets the history, the deltas of
// the step so far, then the rest live; one resuming with Last-Event-ID gets
// only what comes after it connected.
func TestLiveFollowerAttachedMidStream(t *testing.T) {
	t.Parallel()
	const text = "abcdefghijklmnopqrstuvwxyz0123456789"
	release := make(chan struct{})
	at := liveAPITest(t, providerOpenAI, fakeTurn{Text: text, OnChunk: func(i int) {
		if i == 5 {
			<-release
		}
	}})
	at.api.heartbeat = 5 * time.Millisecond
	r := at.startRun(t, `{"prompt":"the alphabet"}`)
	waitUntil(t, "five deltas", func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.live.last >= 5
	})
	fresh := openEvents(t, at, r.id)
	var seen []followedEvent
	for len(seen) < 6 {
		ev, comment, err := fresh.next(t)
		if err != nil {
			t.Fatalf("fresh follower after %v: %v", followedTypes(seen), err)
		}
		if comment == "" {
			seen = append(seen, ev)
		}
	}
	if want := []string{evRunStarted, evModelDelta, evModelDelta, evModelDelta, evModelDelta, evModelDelta}; !slices.Equal(followedTypes(seen), want) {
		t.Fatalf("fresh follower mid-stream got %v, want the history then the step's five deltas so far", followedTypes(seen))
	}
	resumed := openEvents(t, at, r.id, "Last-Event-ID", "1")
	// A heartbeat shows its stream has read the run once: it is attached.
	if _, comment, err := resumed.next(t); err != nil || comment == "" {
		t.Fatalf("resumed follower = %q, %v; want a heartbeat before any event", comment, err)
	}
	close(release)

	all := append(seen, fresh.rest(t)...)
	if want := []string{evModelResponse, terminalEventType(runCompleted)}; !slices.Equal(followedTypes(all)[len(all)-2:], want) {
		t.Errorf("fresh follower = %v, want deltas then %v", followedTypes(all), want)
	}
	deltas, responses, _ := stepTexts(t, withSteps(all))
	if deltas[1] != text || responses[1] != text {
		t.Errorf("fresh follower: deltas %q, model.response %q; want both %q, nothing twice", deltas[1], responses[1], text)
	}
	rest := resumed.rest(t)
	deltas, responses, _ = stepTexts(t, withSteps(rest))
	if deltas[1] != text[15:] || responses[1] != text {
		t.Errorf("resumed follower: deltas %q, model.response %q; want the deltas after it attached (%q), then the response", deltas[1], responses[1], text[15:])
	}
	at.waitAllRuns(t)
}

func TestLiveModelRetryVoidsTheText(t *testing.T) {
	t.Parallel()
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			attached := make(chan struct{})
			at := liveAPITest(t, wire,
				fakeTurn{Text: "A first try that breaks", BreakAfter: 3, OnChunk: func(i int) {
					if i == 0 {
						<-attached
					}
				}},
				fakeTurn{Text: "A second try that ends"},
			)
			r := at.startRun(t, `{"prompt":"try"}`)
			ls := openEvents(t, at, r.id)
			first := ls.until(t, evRunStarted)
			close(attached)
			events := withSteps(append(first, ls.rest(t)...))
			want := []string{evModelDelta, evModelDelta, evModelDelta, evModelRetry}
			if len(events) < 5 || !slices.Equal(followedTypes(events)[:4], want) {
				t.Fatalf("events = %v, want %v first", followedTypes(events), want)
			}
			retry := events[3]
			if retry.id == "" || retry.data["attempt"] != float64(2) || retry.data["step"] != float64(1) || !strings.Contains(retry.data["error"].(string), "ended before it was complete") && !strings.Contains(retry.data["error"].(string), "Overloaded") {
				t.Errorf("model.retry = %+v, want step 1, attempt 2, the error, and an id (it is history)", retry)
			}
			deltas, responses, _ := stepTexts(t, events)
			if deltas[1] != "A second try that ends" || responses[1] != deltas[1] {
				t.Errorf("deltas after the retry %q, model.response %q; want the second try once", deltas[1], responses[1])
			}
			at.waitAllRuns(t)
		})
	}
}

// TestLiveFollowOrder reads a run's events as followers in three places
// do: one attached from the start, a new one, one resuming.
func TestLiveFollowOrder(t *testing.T) {
	t.Parallel()
	r := &run{status: runRunning, changed: make(chan struct{})}
	early := followCursor{}
	r.follow(&early)
	r.emit("h1", nil)
	r.emitLive("l1", nil, 1)
	r.emitLive("l2", nil, 1)
	r.emit("h2", nil)
	r.emitLive("l3", nil, 1)
	r.emitLive("l4", nil, 1)
	tests := []struct {
		name string
		cur  followCursor
		want []string
	}{
		{"attached from the start", early, []string{"h1", "l1", "l2", "h2", "l3", "l4"}},
		{"new", followCursor{}, []string{"h1", "h2", "l3", "l4"}},
		{"new after h1", followCursor{seq: 1}, []string{"h2", "l3", "l4"}},
		{"resumed", followCursor{resumed: true}, []string{"h1", "h2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cur := tt.cur
			frames, skipped, _ := r.follow(&cur)
			var got []string
			for _, f := range frames {
				got = append(got, f.ev.Type)
			}
			if !slices.Equal(got, tt.want) || skipped != 0 {
				t.Errorf("follow = %v (skipped %d), want %v", got, skipped, tt.want)
			}
			if frames, _, _ := r.follow(&cur); len(frames) != 0 {
				t.Errorf("follow again = %d frames, want none", len(frames))
			}
		})
	}
}

// TestLiveLogIsBounded checks that a follower that fell behind skips the
// live events dropped meanwhile, keeps every history event, and goes on
// in order.
func TestLiveLogIsBounded(t *testing.T) {
	t.Parallel()
	r := &run{status: runRunning, changed: make(chan struct{})}
	slow := followCursor{}
	r.follow(&slow)
	const n = 3 * maxLiveEvents
	for i := range n {
		if i%1000 == 0 {
			r.emit(fmt.Sprintf("h%d", i), nil)
		}
		r.emitLive(evModelDelta, i, 1)
	}
	if len(r.live.items) > maxLiveEvents {
		t.Fatalf("live log holds %d events, want at most %d", len(r.live.items), maxLiveEvents)
	}
	frames, skipped, _ := r.follow(&slow)
	history, last := 0, -1
	for _, f := range frames {
		if !f.live {
			history++
			continue
		}
		i := f.ev.Data.(int)
		if i <= last {
			t.Fatalf("live event %d after %d", i, last)
		}
		last = i
	}
	if history != len(r.events) || int(skipped)+len(frames)-history != n || last != n-1 {
		t.Errorf("slow follower: %d history events of %d, %d live skipped, %d sent, last %d; want all history, the rest of %d live in order", history, len(r.events), skipped, len(frames)-history, last, n)
	}
	r.emitLive(evModelDelta, 0, maxLiveBytes+1)
	if len(r.live.items) != 1 {
		t.Errorf("after an event over maxLiveBytes the log holds %d events, want it alone", len(r.live.items))
	}
}

// TestLiveDeltaKeepsSecretsWhole checks that a secret the model writes
// across pieces is never split between two deltas.
func TestLiveDeltaKeepsSecretsWhole(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-t0ken-value"
	r := &run{status: runRunning, changed: make(chan struct{}), secrets: newLiveRedactor(newRedactor(secret))}
	d := &deltaWriter{r: r, step: 1}
	text := "the token is " + secret + ", not s3cr3t-t0 alone"
	for piece := range slices.Chunk([]byte(text), 4) {
		d.write(string(piece))
	}
	d.flush()
	var joined, redacted string
	for _, item := range r.live.items {
		piece := item.ev.Data.(map[string]any)["text"].(string)
		joined += piece
		redacted += r.secrets.load().redact(piece)
	}
	if joined != text || redacted != r.secrets.load().redact(text) {
		t.Errorf("deltas add up to %q, redacted one by one to %q; want %q and %q", joined, redacted, text, r.secrets.load().redact(text))
	}
}

// TestLiveSlowFollowerDoesNotBlockTheRun follows a run that writes more
// text than the live log holds without reading the stream: the run ends
// anyway; read afterwards, the stream has the deltas it kept, in order,
// says how many it skipped, and ends with the history.
func TestLiveSlowFollowerDoesNotBlockTheRun(t *testing.T) {
	t.Parallel()
	const pieces, size = 6000, 200 // 1.2 MB: more than maxLiveBytes
	var text strings.Builder
	for i := range pieces {
		fmt.Fprintf(&text, "%0*d", size, i)
	}
	attached := make(chan struct{})
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: text.String(), OnChunk: func(i int) {
		if i == 0 {
			<-attached
		}
	}}).streamChunks(size)
	at := newAPITest(t, f, nil)
	r := at.startRun(t, `{"prompt":"a lot"}`)
	// A send buffer of 4 KiB: the API's writes block soon after the
	// follower stops reading (its receive buffer does not grow meanwhile).
	srv := httptest.NewUnstartedServer(at.api)
	srv.Listener = smallBufferListener{srv.Listener}
	srv.Start()
	t.Cleanup(srv.Close)
	slow := *at
	slow.url, slow.client = srv.URL, srv.Client()
	ls := openEvents(t, &slow, r.id)
	ls.until(t, evRunStarted)
	close(attached)
	if v := waitRun(t, r); v.Status != runCompleted { // the follower reads nothing meanwhile
		t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
	}
	var skipped, deltas int
	last := -1
	var tail []string
	for {
		ev, comment, err := ls.next(t)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("read after %d deltas: %v", deltas, err)
		}
		if n, ok := strings.CutSuffix(comment, " live events dropped: this stream fell behind"); ok {
			k, _ := strconv.Atoi(n)
			skipped += k
			continue
		}
		if comment != "" {
			continue
		}
		if ev.typ != evModelDelta {
			tail = append(tail, ev.typ)
			continue
		}
		n, err := strconv.Atoi(ev.data["text"].(string))
		if err != nil || n <= last || len(tail) > 0 {
			t.Fatalf("delta %d (%v) after %d and %v: want the pieces in order, before the history's end", n, err, last, tail)
		}
		last = n
		deltas++
	}
	if want := []string{evModelResponse, terminalEventType(runCompleted)}; !slices.Equal(tail, want) || deltas+skipped != pieces || last != pieces-1 {
		t.Errorf("stream after the run ended: %d deltas, %d skipped, the last %d, then %v; want %d in all, then %v", deltas, skipped, last, tail, pieces, want)
	}
	// Whether any were skipped depends on how much the follower had taken
	// before its writes blocked (TestLiveLogIsBounded covers skipping).
	t.Logf("%d deltas read, %d skipped", deltas, skipped)
}

// A smallBufferListener accepts TCP connections with a send buffer of
// 4 KiB.
type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if tcp, ok := conn.(*net.TCPConn); ok {
		tcp.SetWriteBuffer(4096)
	}
	return conn, err
}
