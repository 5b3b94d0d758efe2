package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// This file drives harnessd's A2A agent with the official A2A client,
// @a2a-js/sdk (pinned in testdata/npm), through testdata/npm/a2a-client.mjs.

// requireA2ASDK returns the directory of testdata/npm when node and the
// @a2a-js/sdk package are there; otherwise it fails the test with CI=true
// and skips it elsewhere, as requireNode does.
func requireA2ASDK(t *testing.T) string {
	t.Helper()
	modules := requireNode(t)
	entry := filepath.Join(modules, "@a2a-js", "sdk", "dist", "client", "index.js")
	if _, err := os.Stat(entry); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the A2A client: %s is missing: run ./test.sh (or npm ci in testdata/npm)", entry)
		}
		t.Skipf("\n*** SKIPPED: the A2A client is unavailable: %s is missing.\n*** Run ./test.sh once (it runs npm ci in testdata/npm) to test against it. ***", entry)
	}
	return filepath.Dir(modules)
}

func TestA2ASDKClient(t *testing.T) {
	dir := requireA2ASDK(t)
	t.Parallel()
	cfg := fakeServerConfig(t, "normal")
	cfg.Approval = approvalAlways
	// released unblocks the model's answer to the task the client
	// cancels, once the test is over.
	released := make(chan struct{})
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{Text: "first answer"},
		fakeTurn{Chunks: []string{"second ", "answer ", "streamed"}},
		echoFindTurn, echoCallTurn, echoResultTurn,
		fakeTurn{Chunks: []string{"thinking", " forever"}, OnChunk: func(i int) {
			if i == 1 {
				<-released
			}
		}},
	)
	t.Cleanup(func() { close(released) })
	at := newAPITest(t, f, []authKey{testKey("orchestrator", "orchestrator-token", scopeRunsWrite)}, cfg)

	cmd := exec.CommandContext(t.Context(), "node", "a2a-client.mjs", at.url)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "A2A_TOKEN=orchestrator-token")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node a2a-client.mjs: %v\nstdout:\n%s\nstderr:\n%s", err, out, stderr.String())
	}
	steps := map[string]map[string]any{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var step map[string]any
		if err := json.Unmarshal(sc.Bytes(), &step); err != nil {
			t.Fatalf("a2a-client.mjs wrote %q: %v", sc.Text(), err)
		}
		steps[step["step"].(string)] = step
	}
	str := func(step, field string) string {
		s, _ := steps[step][field].(string)
		return s
	}
	list := func(step, field string) []string {
		var out []string
		items, _ := steps[step][field].([]any)
		for _, it := range items {
			s, _ := it.(string)
			out = append(out, s)
		}
		return out
	}

	if str("card", "url") != at.url+"/a2a" || str("card", "version") != "1.0" || steps["card"]["streaming"] != true || steps["card"]["push"] != true ||
		!slices.Equal(list("card", "skills"), []string{"default"}) || !slices.Equal(list("card", "schemes"), []string{"bearer"}) {
		t.Errorf("card as the SDK read it = %v, want %s/a2a at 1.0, streaming, push, the default skill and the bearer scheme", steps["card"], at.url)
	}

	firstID := str("send", "id")
	if str("send", "state") != "completed" || str("send", "output") != "first answer" || str("send", "contextId") == "" {
		t.Errorf("send = %v, want completed with output \"first answer\" in a context", steps["send"])
	}
	if r := at.runs.get(firstID); r == nil || r.view().Owner != "orchestrator" || r.view().ConversationID != str("send", "contextId") {
		t.Errorf("run %s: want a run of the orchestrator key in conversation %s", firstID, str("send", "contextId"))
	}

	kinds := list("stream", "kinds")
	if str("stream", "contextId") != str("send", "contextId") || len(kinds) < 3 || kinds[0] != "task" ||
		!slices.Equal(kinds[len(kinds)-2:], []string{"artifact.last", "completed"}) || !slices.Contains(kinds, "artifact") {
		t.Errorf("stream = %v, want the task, streamed artifacts, the last artifact and completed, in context %s", steps["stream"], str("send", "contextId"))
	}
	if str("stream", "streamed") != "second answer streamed" || str("stream", "final") != "second answer streamed" || steps["stream"]["history"] != 2.0 {
		t.Errorf("stream = %v, want the text streamed whole and the task's history: its question and answer", steps["stream"])
	}

	if str("approval", "waiting") != "input-required" || !strings.Contains(str("approval", "question"), "mcp_fake_echo") ||
		str("approval", "answeredId") != str("approval", "id") || str("approval", "state") != "completed" || str("approval", "output") != "result: hello" {
		t.Errorf("approval = %v, want input-required naming the tool, then the same task completed with the echo", steps["approval"])
	}

	cancelKinds := list("cancel", "kinds")
	if str("cancel", "state") != "canceled" || str("cancel", "again") != "TaskNotCancelableError" ||
		len(cancelKinds) < 3 || cancelKinds[0] != "task" || cancelKinds[len(cancelKinds)-1] != "canceled" {
		t.Errorf("cancel = %v, want canceled while streaming, the stream ending canceled, and TaskNotCancelable again", steps["cancel"])
	}
	if r := at.runs.get(str("cancel", "id")); r == nil || waitRun(t, r).Status != runCancelled {
		t.Errorf("run %s: want cancelled", str("cancel", "id"))
	}
}
