package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file holds the tests of damage to the runs log on disk: a segment
// cut short, one emptied, junk written into one. Start-up names each
// damaged segment and run (WARN), marks the runs damaged, counts them,
// and harnessd check --store reports the same without starting.

// damagedStore writes three runs of 30 events each, written in turns so
// that each spans several segments, and ends them. It returns the runs
// directory, the runs' ids and the segments' paths, once the store is
// closed.
func damagedStore(t *testing.T) (dir string, ids []string, segs []string) {
	t.Helper()
	s := newTestRunStore(t)
	s.log.segBytes = 2048
	start := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	var logs []*runLog
	var views []runView
	for i := range 3 {
		v := testRunView(fmt.Sprintf("run_%d", i), start.Add(time.Duration(i)*time.Second))
		l, err := s.create(v, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids, logs, views = append(ids, v.ID), append(logs, l), append(views, v)
	}
	const events = 30
	for seq := 1; seq < events; seq++ {
		for i := range logs {
			writeEvents(t, logs[i], runEvent{Seq: seq, Type: "model.response", Time: start, Data: map[string]any{"step": seq, "text": strings.Repeat("x", 40)}})
		}
	}
	for i, l := range logs {
		last := runEvent{Seq: events, Type: "run.completed", Time: start, Data: map[string]any{"status": runCompleted, "output": "done"}}
		v := views[i]
		v.Status, v.Output, v.Steps = runCompleted, "done", events-1
		v.EndedAt = &start
		endRun(t, s, l, v, last)
	}
	s.log.mu.Lock()
	for _, seg := range s.log.segs {
		segs = append(segs, seg.path)
	}
	s.log.mu.Unlock()
	s.close()
	if len(segs) < 4 {
		t.Fatalf("the runs take %d segments, want 4 or more", len(segs))
	}
	return s.dir, ids, segs
}

// writtenPart returns the bytes of segment path before its zeros.
func writtenPart(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b[:writtenLen(b)]
}

func TestRunStoreDamage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// damage damages the store's segment path and returns the id of
		// the run it leaves alone damaged, "" when it touches every run.
		damage func(t *testing.T, path string) string
		reason string // in the segment's WARN line
	}{
		{"truncated to a third", func(t *testing.T, path string) string {
			if err := os.Truncate(path, int64(len(writtenPart(t, path))/3)); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "cut short"},
		{"emptied", func(t *testing.T, path string) string {
			if err := os.Truncate(path, 0); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "empty"},
		{"64 junk bytes in the middle", func(t *testing.T, path string) string {
			b := writtenPart(t, path)
			at := bytes.IndexByte(b[len(b)/2:], '\n') + len(b)/2 + 1
			victim, _, _ := strings.Cut(string(b[at:]), " ")
			junk := bytes.Repeat([]byte("#junk-64"), 8)
			damaged := slices.Concat(b[:at], junk, b[at:])
			if err := os.WriteFile(path, damaged, 0o600); err != nil {
				t.Fatal(err)
			}
			return victim
		}, "not a run's line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, ids, segs := damagedStore(t)
			path := segs[2]
			only := tc.damage(t, path)
			name := filepath.Base(path)
			wantDamaged := ids
			if only != "" {
				wantDamaged = []string{only}
			}

			// harnessd check --store, before any start-up.
			var out bytes.Buffer
			a := &app{stdout: &out, stderr: &out, getenv: fakeEnv(nil)}
			err := a.checkStore(dir)
			if err == nil || !strings.Contains(out.String(), "segment "+name+": damaged at offset") {
				t.Errorf("check --store = %v, printing:\n%s\nwant an error and %s named", err, out.String(), name)
			}
			for _, id := range wantDamaged {
				if !strings.Contains(out.String(), "run "+id+": damaged in "+name) {
					t.Errorf("check --store does not name run %s as damaged in %s:\n%s", id, name, out.String())
				}
			}

			// Start-up.
			var logged bytes.Buffer
			s, err := openRunStoreOnceFree(dir, slog.New(slog.NewTextHandler(&logged, nil)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.close)
			runs, err := s.load(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			segmentWarn := fmt.Sprintf(`level=WARN msg="the runs log is damaged" dir=%s segment=%s offset=`, dir, name)
			if !strings.Contains(logged.String(), segmentWarn) || !strings.Contains(logged.String(), tc.reason) {
				t.Errorf("start-up log:\n%s\nwant a WARN line naming %s and %q", logged.String(), name, tc.reason)
			}
			var damaged []string
			for _, r := range runs {
				if d := r.view.Damaged; d != nil {
					damaged = append(damaged, r.view.ID)
					if d.Segment != name || !d.EventsMissing || d.Reason == "" {
						t.Errorf("run %s damaged = %+v, want in %s, events missing, with a reason", r.view.ID, *d, name)
					}
					runWarn := fmt.Sprintf(`level=WARN msg="a run is damaged in the runs log" run=%s segment=%s offset=`, r.view.ID, name)
					if !strings.Contains(logged.String(), runWarn) {
						t.Errorf("start-up log:\n%s\nwant a WARN line for run %s", logged.String(), r.view.ID)
					}
				}
			}
			if len(runs) != len(ids) || !slices.Equal(damaged, wantDamaged) {
				t.Errorf("start-up loaded %d runs, damaged %v; want %d, damaged %v", len(runs), damaged, len(ids), wantDamaged)
			}
			if h := s.health(); h.damaged != len(wantDamaged) {
				t.Errorf("health counts %d damaged runs, want %d", h.damaged, len(wantDamaged))
			}

			// A later start-up, once compaction may have removed the
			// segment, still shows the runs damaged, and so does check.
			s = reopenRunStore(t, s)
			runs, err = s.load(time.Now())
			if err != nil {
				t.Fatal(err)
			}
			damaged = nil
			for _, r := range runs {
				if r.view.Damaged != nil {
					damaged = append(damaged, r.view.ID)
				}
			}
			if !slices.Equal(damaged, wantDamaged) || s.health().damaged != len(wantDamaged) {
				t.Errorf("after a second start-up, damaged %v (counted %d), want %v", damaged, s.health().damaged, wantDamaged)
			}

			// Through the API: the run's view says it is damaged, its
			// transcript that it may not be whole, /metrics counts.
			s.close()
			at := storeAPI(t, newFakeModel(t, providerOpenAI), reopenRunStore(t, s))
			for _, id := range ids {
				_, body := at.do(t, http.MethodGet, "/v1/runs/"+id, "", "")
				var v runView
				if err := json.Unmarshal(body, &v); err != nil {
					t.Fatalf("GET /v1/runs/%s = %s: %v", id, body, err)
				}
				_, body = at.do(t, http.MethodGet, "/v1/runs/"+id+"/messages", "", "")
				var m messagesAnswer
				json.Unmarshal(body, &m)
				if want := slices.Contains(wantDamaged, id); (v.Damaged != nil) != want || m.Truncated != want {
					t.Errorf("GET /v1/runs/%s damaged = %+v, messages truncated %v; want damaged and truncated %v", id, v.Damaged, m.Truncated, want)
				}
			}
			if n := metricValue(t, at, "harnessd_store_damaged_runs"); n != len(wantDamaged) {
				t.Errorf("harnessd_store_damaged_runs = %d, want %d", n, len(wantDamaged))
			}
		})
	}
}
