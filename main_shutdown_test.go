package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// streamResult is what one event follower saw: the event types, and how
// the stream ended (nil: cleanly, at the end of the chunked body).
type streamResult struct {
	types []string
	err   error
}

// followEvents reads the event stream of run id until it ends. It reports
// on attached once the first event has arrived.
func followEvents(url, id string, attached chan<- struct{}) streamResult {
	resp, err := http.Get(url + "/v1/runs/" + id + "/events")
	if err != nil {
		attached <- struct{}{}
		return streamResult{err: err}
	}
	defer resp.Body.Close()
	var res streamResult
	scanner := bufio.NewScanner(resp.Body)
	first := true
	for scanner.Scan() {
		if typ, ok := strings.CutPrefix(scanner.Text(), "event: "); ok {
			res.types = append(res.types, typ)
			if first {
				first = false
				attached <- struct{}{}
			}
		}
	}
	if first {
		attached <- struct{}{}
	}
	res.err = scanner.Err()
	return res
}

// At SIGTERM, with runs whose servers ignore SIGTERM and a model that
// never answers, every event follower sees its run end and every stream
// ends cleanly, within the shutdown budget.
func TestShutdownEndsEveryStream(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	const runs, followers = 10, 5
	var script []fakeTurn
	for range runs {
		script = append(script, fakeTurn{Hang: true})
	}
	f := newFakeModel(t, providerOpenAI, script...)
	bin := buildHarnessd(t)
	exe := fakeServerBinary(t)
	home, workspace := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("max_concurrent_runs = 64\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	p, at := serveHarnessd(t, bin, fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model"), workspace)

	perRun := fmt.Sprintf(`[{"name":"stubborn","command":%q,"env":{%q:"ignore-term"}}]`, exe, fakeServerEnv)
	var ids []string
	for i := range runs {
		ids = append(ids, at.postRun(t, "", fmt.Sprintf(`{"prompt":"hold %d","mcp_servers":%s}`, i, perRun)))
	}
	waitForModelRequests(t, f, runs)

	attached := make(chan struct{}, runs*followers)
	results := make([]streamResult, runs*followers)
	var wg sync.WaitGroup
	for i := range runs * followers {
		wg.Add(1)
		// Owned by the test; ends with the stream.
		go func() {
			defer wg.Done()
			results[i] = followEvents(at.url, ids[i/followers], attached)
		}()
	}
	for range runs * followers {
		<-attached
	}

	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * shutdownBudget):
		t.Fatalf("harnessd still running %s after SIGTERM", 2*shutdownBudget)
	}
	if took := time.Since(start); took > shutdownBudget+time.Second {
		t.Errorf("shutdown took %s, want within the %s budget", took, shutdownBudget)
	}
	wg.Wait()
	for i, res := range results {
		last := ""
		if len(res.types) > 0 {
			last = res.types[len(res.types)-1]
		}
		if res.err != nil || !isTerminalEvent(last) {
			t.Errorf("follower %d of run %s: events %v, ended with %v; want a terminal event last and a clean end", i%followers, ids[i/followers], res.types, res.err)
		}
		if errors.Is(res.err, io.ErrUnexpectedEOF) {
			t.Errorf("follower %d of run %s: stream cut mid-chunk", i%followers, ids[i/followers])
		}
	}
}
