package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file tests the runs part of the API: following a run's events
// (the stream, its resumption and heartbeats) and cancelling a run.

// A streamEvent is one event of a text/event-stream.
type streamEvent struct {
	ID, Event, Data string
}

// A streamReader reads events and comments from a stream.
type streamReader struct {
	r *bufio.Reader
}

// next returns the next event, or a comment (without its colon) when the
// stream had one first. It returns io.EOF at the end of the stream.
func (s *streamReader) next() (ev streamEvent, comment string, err error) {
	started := false
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			if err == io.EOF && (started || line != "") {
				return ev, "", io.ErrUnexpectedEOF
			}
			return ev, "", err
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "" && started:
			return ev, "", nil
		case line == "":
		case strings.HasPrefix(line, ":"):
			if !started {
				return ev, strings.TrimSpace(line[1:]), nil
			}
		default:
			started = true
			field, value, _ := strings.Cut(line, ": ")
			switch field {
			case "id":
				ev.ID = value
			case "event":
				ev.Event = value
			case "data":
				ev.Data += value
			default:
				return ev, "", fmt.Errorf("unexpected SSE line %q", line)
			}
		}
	}
}

// checkEvent checks that an SSE event agrees with its JSON data.
func checkEvent(t *testing.T, ev streamEvent) runEvent {
	t.Helper()
	var data runEvent
	if err := json.Unmarshal([]byte(ev.Data), &data); err != nil {
		t.Fatalf("event %+v: data is not a run event: %v", ev, err)
	}
	if strconv.Itoa(data.Seq) != ev.ID || data.Type != ev.Event {
		t.Errorf("event id %s type %s, data seq %d type %s: want them equal", ev.ID, ev.Event, data.Seq, data.Type)
	}
	return data
}

// readEvents reads a whole stream and returns its events.
func readEvents(t *testing.T, body io.Reader) []runEvent {
	t.Helper()
	events, err := readEventStream(body, func(ev streamEvent) (runEvent, error) { return checkEvent(t, ev), nil })
	if err != nil {
		t.Fatalf("read event stream: %v", err)
	}
	return events
}

// readEventStream reads a stream to its end, decoding each event with
// decode; comments are skipped.
func readEventStream(body io.Reader, decode func(streamEvent) (runEvent, error)) ([]runEvent, error) {
	s := &streamReader{r: bufio.NewReader(body)}
	var events []runEvent
	for {
		ev, comment, err := s.next()
		if err == io.EOF {
			return events, nil
		}
		if err != nil {
			return events, err
		}
		if comment != "" {
			continue
		}
		data, err := decode(ev)
		if err != nil {
			return events, err
		}
		events = append(events, data)
	}
}

// idsAndTypes returns the ids and types of events.
func idsAndTypes(events []runEvent) (ids, types []string) {
	for _, ev := range events {
		ids = append(ids, strconv.Itoa(ev.Seq))
		types = append(types, ev.Type)
	}
	return ids, types
}

func TestAPIRunEvents(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{Reply: func(fakeRequest) fakeTurn {
			select {
			case <-release:
			case <-t.Context().Done():
			}
			return fakeTurn{Text: "done"}
		}},
	)
	at := newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
	at.api.heartbeat = 10 * time.Millisecond
	r := at.startRun(t, `{"prompt":"follow me"}`)
	wantTypes := []string{"run.started", "model.response", "tool.call.started", "tool.call.completed", "model.response", "run.completed"}

	t.Run("live", func(t *testing.T) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, at.url+"/v1/runs/"+r.id+"/events", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := at.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("GET events = %d %s, want 200 text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		s := &streamReader{r: bufio.NewReader(resp.Body)}
		var types []string
		heartbeats, released := 0, false
		for {
			ev, comment, err := s.next()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("read events after %v: %v", types, err)
			}
			if comment != "" {
				heartbeats++
				// The run waits in its second model turn: the stream
				// is idle, so a heartbeat came; now let the run end.
				// (Under load a heartbeat may also come earlier.)
				if len(types) == 4 && !released {
					close(release)
					released = true
				}
				continue
			}
			if got := checkEvent(t, ev).Seq; got != len(types)+1 {
				t.Errorf("event %d has id %d, want ids counting from 1", len(types)+1, got)
			}
			types = append(types, ev.Event)
		}
		if !slices.Equal(types, wantTypes) {
			t.Errorf("live events = %v, want %v", types, wantTypes)
		}
		if heartbeats == 0 {
			t.Errorf("live stream had no heartbeat while the run was idle")
		}
	})
	waitRun(t, r)

	tests := []struct {
		name, query, lastEventID string
		wantFirst                int // 0: no events
	}{
		{name: "whole history", wantFirst: 1},
		{name: "Last-Event-ID", lastEventID: "4", wantFirst: 5},
		{name: "after", query: "?after=2", wantFirst: 3},
		{name: "after 0", query: "?after=0", wantFirst: 1},
		{name: "Last-Event-ID wins over after", query: "?after=1", lastEventID: "5", wantFirst: 6},
		{name: "at the end", lastEventID: "6"},
		{name: "past the end", query: "?after=99"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var header []string
			if tt.lastEventID != "" {
				header = []string{"Last-Event-ID", tt.lastEventID}
			}
			resp, data := at.do(t, http.MethodGet, "/v1/runs/"+r.id+"/events"+tt.query, "", "", header...)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET events%s = %d %s, want 200", tt.query, resp.StatusCode, data)
			}
			ids, types := idsAndTypes(readEvents(t, bytes.NewReader(data)))
			var wantIDs []string
			var want []string
			if tt.wantFirst > 0 {
				for i := tt.wantFirst; i <= len(wantTypes); i++ {
					wantIDs = append(wantIDs, strconv.Itoa(i))
				}
				want = wantTypes[tt.wantFirst-1:]
			}
			if !slices.Equal(ids, wantIDs) || !slices.Equal(types, want) {
				t.Errorf("events (Last-Event-ID %q, query %q) = %v %v, want %v %v", tt.lastEventID, tt.query, ids, types, wantIDs, want)
			}
		})
	}
}

func TestAPICancelRun(t *testing.T) {
	t.Parallel()
	received := make(chan struct{})
	f := newFakeModel(t, "openai", fakeTurn{Hang: true, Check: func(fakeRequest) error { close(received); return nil }})
	at := newAPITest(t, f, nil)
	r := at.startRun(t, `{"prompt":"wait forever"}`)
	// Cancel once the model has the request, so the cancel interrupts it.
	select {
	case <-received:
	case <-t.Context().Done():
		t.Fatal("the run never called the model")
	}
	resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r.id+"/cancel", "", "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(data), `"status": "cancelled"`) {
		t.Fatalf("POST cancel = %d %s, want 200 cancelled", resp.StatusCode, data)
	}
	if v := r.view(); v.Status != runCancelled || v.EndedAt == nil {
		t.Errorf("run = %s ended %v, want cancelled with an end time", v.Status, v.EndedAt)
	}
	_, events := at.do(t, http.MethodGet, "/v1/runs/"+r.id+"/events", "", "")
	if _, types := idsAndTypes(readEvents(t, bytes.NewReader(events))); len(types) == 0 || types[len(types)-1] != "run.cancelled" {
		t.Errorf("events = %v, want them to end with run.cancelled", types)
	}
	if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r.id+"/cancel", "", ""); resp.StatusCode != http.StatusConflict {
		t.Errorf("second cancel = %d %s, want 409", resp.StatusCode, data)
	}
}
