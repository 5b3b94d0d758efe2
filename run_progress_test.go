package main

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"
)

// This file tests tool.call.progress: the rate limit on a fake clock, and
// the progress of a real long-running operation of server-everything seen
// by a follower of the API.

func TestProgressLimiter(t *testing.T) {
	t.Parallel()
	type note struct {
		at       time.Duration
		progress float64
	}
	tests := []struct {
		name   string
		notes  []note
		stopAt time.Duration
		want   []note // sent: when, which
	}{
		{name: "slow notes all pass", notes: []note{{0, 1}, {300 * time.Millisecond, 2}, {600 * time.Millisecond, 3}}, stopAt: 700 * time.Millisecond,
			want: []note{{0, 1}, {300 * time.Millisecond, 2}, {600 * time.Millisecond, 3}}},
		{name: "a burst keeps the newest at the interval's end", notes: []note{{0, 1}, {10 * time.Millisecond, 2}, {20 * time.Millisecond, 3}, {30 * time.Millisecond, 4}},
			stopAt: time.Second, want: []note{{0, 1}, {250 * time.Millisecond, 4}}},
		{name: "the last before the end goes out at once", notes: []note{{0, 1}, {100 * time.Millisecond, 2}}, stopAt: 120 * time.Millisecond,
			want: []note{{0, 1}, {120 * time.Millisecond, 2}}},
		{name: "nothing after the end", notes: []note{{0, 1}, {200 * time.Millisecond, 2}}, stopAt: 100 * time.Millisecond,
			want: []note{{0, 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &run{status: runRunning, changed: make(chan struct{}), env: &runEnv{limits: runLimits{MaxToolEventBytes: 100}}}
				start := time.Now()
				l := r.newProgressLimiter("c1")
				stopped := false
				for _, n := range tt.notes {
					if !stopped && n.at > tt.stopAt {
						time.Sleep(tt.stopAt - time.Since(start))
						l.stop()
						stopped = true
					}
					time.Sleep(n.at - time.Since(start))
					l.note(progressParams{Progress: n.progress, Total: 4})
				}
				if !stopped {
					time.Sleep(tt.stopAt - time.Since(start))
					l.stop()
				}
				time.Sleep(time.Second)
				synctest.Wait()
				var got []note
				for _, item := range r.live.items {
					data := item.ev.Data.(map[string]any)
					if data["call_id"] != "c1" || data["total"] != float64(4) || item.ev.Type != evToolCallProgress {
						t.Errorf("event %s %v, want tool.call.progress of c1 with total 4", item.ev.Type, data)
					}
					got = append(got, note{item.ev.Time.Sub(start.UTC()), data["progress"].(float64)})
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("sent %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// TestLiveToolCallProgress calls server-everything's long-running
// operation, which reports progress 20 times a second, over stdio and
// Streamable HTTP, and follows the run: at most one tool.call.progress per
// interval, the last step among them, all before tool.call.completed,
// none in the history.
func TestLiveToolCallProgress(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		server func(t *testing.T) serverConfig
	}{
		{"stdio", func(t *testing.T) serverConfig { return stdioPeerConfig("everything", everythingStdioCommand(t)) }},
		{"streamableHttp", func(t *testing.T) serverConfig {
			return httpPeerConfig("everything", transportHTTP, startEverythingHTTP(t, "streamableHttp"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const steps = 24
			requireNode(t) // before the scripted model, whose cleanup wants its turns taken
			f := newFakeModel(t, providerOpenAI,
				fakeTurn{ToolCalls: []toolCall{call("mcp_everything_trigger_long_running_operation", `{"duration":1.2,"steps":24}`)}},
				fakeTurn{Text: "done"},
			)
			at := newAPITest(t, f, nil, tt.server(t))
			r := at.startRun(t, `{"prompt":"run long"}`)
			events := openEvents(t, at, r.id).rest(t)
			var progress []followedEvent
			var completed bool
			var callID string
			var took float64 // the call's duration_ms
			for _, ev := range events {
				switch ev.typ {
				case evToolCallStarted:
					callID, _ = ev.data["call_id"].(string)
				case evToolCallProgress:
					if completed {
						t.Errorf("tool.call.progress %v after tool.call.completed", ev.data)
					}
					progress = append(progress, ev)
				case evToolCallCompleted:
					completed = true
					took, _ = ev.data["duration_ms"].(float64)
				}
			}
			if !completed || len(progress) < 2 {
				t.Fatalf("events %v: want tool.call.progress events, then tool.call.completed", followedTypes(events))
			}
			// One at the start, one per interval after it, and the last.
			if most := int(took/float64(progressInterval.Milliseconds())) + 2; len(progress) > most {
				t.Errorf("%d tool.call.progress events for %d notifications in %vms, want at most %d", len(progress), steps, took, most)
			}
			last := 0.0
			for _, ev := range progress {
				p := ev.data["progress"].(float64)
				if ev.data["call_id"] != callID || ev.data["total"] != float64(steps) || p <= last {
					t.Errorf("tool.call.progress %v, want call %s, total %d, progress rising", ev.data, callID, steps)
				}
				last = p
			}
			t.Logf("%d tool.call.progress events for %d notifications", len(progress), steps)
			if last != steps {
				t.Errorf("the last tool.call.progress says %v, want %d: the last one before the end goes out", last, steps)
			}
			if slices.Contains(eventTypes(r), evToolCallProgress) {
				t.Errorf("history %v holds tool.call.progress", eventTypes(r))
			}
			at.waitAllRuns(t)
		})
	}
}
