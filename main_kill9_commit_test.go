package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// This file holds the crash test of the run store's shared commits: the
// real harnessd binary killed with SIGKILL while eight clients post runs
// as fast as it takes them, so that the runs log's shared syncs, the
// runs' events and their ends are all under way, then restarted on the
// same home.

// TestKill9DuringCommits checks what a crash in the middle of batches
// keeps: every run answered 202 is there after the restart, ended
// (completed, or failed as interrupted); every run seen ended before the
// kill reads as it did, view and events; nothing else but runs whose
// answer the kill cut off is listed.
func TestKill9DuringCommits(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	model := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c","object":"chat.completion","model":"fake-model","choices":[{"index":0,"message":{"role":"assistant","content":"done"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}`)
	}))
	t.Cleanup(model.Close)
	bin := buildHarnessd(t)
	home, workspace := t.TempDir(), t.TempDir()
	writeFile(t, home, "config.toml", "max_concurrent_runs = 8\nmax_queued_runs = 64\n[model]\nname = \"openai/fake-model\"\nstream = false\n")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HARNESS_HOME=" + home,
		"OPENAI_BASE_URL=" + model.URL + "/v1", "OPENAI_API_KEY=" + fakeModelKey}
	first, at := serveHarnessd(t, bin, env, workspace)

	var (
		mu       sync.Mutex
		accepted []string
		ended    = map[string][2]string{} // run id → view and events, as read before the kill
	)
	enough := make(chan struct{})
	killed := make(chan struct{})
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Go(func() {
			client := &http.Client{}
			for i := 0; ; i++ {
				id, ok := postOnce(client, at.url, fmt.Sprintf(`{"prompt":"client %d run %d"}`, c, i))
				if !ok {
					return // the kill
				}
				mu.Lock()
				accepted = append(accepted, id)
				mu.Unlock()
				// Follow the run to its end; the stream ends with it.
				events, ok := getOnce(client, at.url+"/v1/runs/"+id+"/events")
				if !ok {
					return
				}
				view, ok := getOnce(client, at.url+"/v1/runs/"+id)
				if !ok {
					return
				}
				select {
				case <-killed:
					return // read after the kill was sent: not known to be before it
				default:
				}
				mu.Lock()
				ended[id] = [2]string{view, events}
				if len(ended) == 200 {
					close(enough)
				}
				mu.Unlock()
			}
		})
	}
	<-enough
	close(killed)
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	wg.Wait()

	_, at = serveHarnessd(t, bin, env, workspace)
	listed := map[string]runSummary{}
	for _, r := range listAllRuns(t, at) {
		listed[r.ID] = r
	}
	for _, id := range accepted {
		r, ok := listed[id]
		if !ok {
			t.Errorf("run %s, answered 202 before the kill, is not listed after the restart", id)
			continue
		}
		if r.Status != runCompleted && (r.Status != runFailed || r.Error != interruptedError) {
			t.Errorf("run %s after the restart = %s %q, want completed or failed %q", id, r.Status, r.Error, interruptedError)
		}
		events := string(getOK(t, at, "/v1/runs/"+id+"/events"))
		if !strings.Contains(events, "event: run.completed") && !strings.Contains(events, "event: run.failed") {
			t.Errorf("events of run %s after the restart do not end it:\n%s", id, events)
		}
	}
	// The kill may cut off the answer to runs it accepted: at most one per
	// client.
	if extra := len(listed) - len(accepted); extra < 0 || extra > 8 {
		t.Errorf("%d runs listed after the restart, %d answered 202: want at most 8 more, whose answers the kill cut off", len(listed), len(accepted))
	}
	for id, before := range ended {
		view, events := string(getOK(t, at, "/v1/runs/"+id)), string(getOK(t, at, "/v1/runs/"+id+"/events"))
		if view != before[0] || events != before[1] {
			t.Errorf("run %s, ended before the kill, reads otherwise after the restart:\n%s\n%s\nwant\n%s\n%s", id, view, events, before[0], before[1])
		}
	}
	t.Logf("%d runs answered 202, %d seen ended before the kill, %d listed after it", len(accepted), len(ended), len(listed))
}

// postOnce posts a run and returns its id; false when harnessd did not
// answer 202 (it was killed).
func postOnce(client *http.Client, url, body string) (string, bool) {
	resp, err := client.Post(url+"/v1/runs", "application/json", strings.NewReader(body))
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var out struct {
		RunID string `json:"run_id"`
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &out) != nil {
		return "", false
	}
	return out.RunID, true
}

// getOnce returns the body of a GET answered 200 whole; false otherwise.
func getOnce(client *http.Client, url string) (string, bool) {
	resp, err := client.Get(url)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return "", false
	}
	return string(data), true
}
