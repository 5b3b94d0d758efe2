package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// This file tests "harnessd run": against the real daemon binary (a
// conversation over two commands, and the errors a shell user meets), and
// how it shows a run's events.

// runCLI runs bin with args and env and returns its stdout, stderr and
// exit code.
func runCLI(t *testing.T, bin string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		code = exitErr.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return stdout.String(), stderr.String(), code
}

func TestRunCommandAgainstDaemon(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"forty-two"}`)}},
		fakeTurn{Text: "The answer is forty-two."},
		fakeTurn{Check: conversationIs([]string{u, as, tl, as, u}, "what is the answer?", "and doubled?"), Text: "Eighty-four."},
		fakeTurn{Hang: true},
	)
	bin := buildHarnessd(t)
	home, workspace, _ := fakeServerHome(t, "fake", "normal", "")
	keys := `HARNESS_API_KEYS=[{"name":"cli","token":"tok-cli-0123456789abcdef","scopes":["runs:write"]}]`
	_, at := serveHarnessd(t, bin, fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model", keys), workspace)
	waitReadyz(t, at)
	addr := strings.TrimPrefix(at.url, "http://")
	client := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HARNESS_ADDR=" + addr, "HARNESS_TOKEN=tok-cli-0123456789abcdef"}

	stdout, stderr, code := runCLI(t, bin, client, "run", "what is the answer?")
	conv := regexp.MustCompile(`conversation (conv_[0-9a-f]+)`).FindStringSubmatch(stderr)
	if code != 0 || stdout != "The answer is forty-two.\n" || !strings.Contains(stderr, `→ mcp_fake_echo {"message":"forty-two"}`) || conv == nil {
		t.Fatalf("harnessd run = exit %d\nstdout %q\nstderr %q\nwant the answer on stdout, the tool call and the conversation on stderr", code, stdout, stderr)
	}
	stdout, stderr, code = runCLI(t, bin, client, "run", "--conversation", conv[1], "and", "doubled?")
	if code != 0 || stdout != "Eighty-four.\n" || !strings.Contains(stderr, conv[1]) {
		t.Fatalf("harnessd run --conversation = exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}

	// A run of the conversation that hangs makes it busy.
	auth := "Bearer tok-cli-0123456789abcdef"
	resp, data := at.do(t, http.MethodPost, "/v1/runs", auth, `{"prompt":"hold","conversation_id":"`+conv[1]+`"}`)
	var held struct {
		RunID string `json:"run_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &held) != nil {
		t.Fatalf("POST /v1/runs = %d %s", resp.StatusCode, data)
	}
	waitUntil(t, "the held run calls the model", func() bool { return len(f.requests()) == 4 })
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want []string
	}{
		{"busy", client, []string{"run", "--conversation", conv[1], "more"}, []string{held.RunID, "is still running", "one run at a time"}},
		{"bad token", []string{"HARNESS_ADDR=" + addr, "HARNESS_TOKEN=wrong"}, []string{"run", "hi"}, []string{"refused the token in HARNESS_TOKEN"}},
		{"no token", []string{"HARNESS_ADDR=" + addr}, []string{"run", "hi"}, []string{"set HARNESS_TOKEN"}},
		{"no daemon", client, []string{"run", "--addr", "127.0.0.1:1", "hi"}, []string{"cannot reach harnessd at http://127.0.0.1:1", "is it running?"}},
		{"unknown conversation", client, []string{"run", "--conversation", "conv_nope", "hi"}, []string{"404", `conversation "conv_nope": not found`}},
		{"no prompt", client, []string{"run"}, []string{"missing PROMPT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr, code := runCLI(t, bin, tc.env, tc.args...)
			if code == 0 || stdout != "" {
				t.Errorf("harnessd %v = exit %d, stdout %q; want a failure", tc.args, code, stdout)
			}
			for _, want := range tc.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("harnessd %v: stderr %q lacks %q", tc.args, stderr, want)
				}
			}
		})
	}
	if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+held.RunID+"/cancel", auth, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel = %d %s", resp.StatusCode, data)
	}
}

// TestRunFollowerShow feeds event sequences to the follower: streamed text
// is shown once, whatever of an answer the deltas did not show comes from
// model.response, and the run's end decides the outcome.
func TestRunFollowerShow(t *testing.T) {
	t.Parallel()
	type event struct {
		typ  string
		data string
	}
	for _, tc := range []struct {
		name         string
		events       []event
		stdout, info string
		failed       bool
	}{
		{"no deltas", []event{
			{evModelResponse, `{"step":1,"content":"whole answer"}`},
			{"run.completed", `{"status":"completed","output":"whole answer"}`},
		}, "whole answer\n", "", false},
		{"deltas then the response", []event{
			{evModelDelta, `{"step":1,"text":"who"}`},
			{evModelDelta, `{"step":1,"text":"le answer"}`},
			{evModelResponse, `{"step":1,"content":"whole answer"}`},
			{"run.completed", `{"status":"completed"}`},
		}, "whole answer\n", "", false},
		{"some deltas lost", []event{
			{evModelDelta, `{"step":1,"text":"whole "}`},
			{evModelResponse, `{"step":1,"content":"whole answer"}`},
			{"run.completed", `{"status":"completed"}`},
		}, "whole answer\n", "", false},
		{"tool steps", []event{
			{evModelDelta, `{"step":1,"text":"Let me look."}`},
			{evModelResponse, `{"step":1,"content":"Let me look.","tool_calls":["mcp_a_b"]}`},
			{evToolCallStarted, `{"step":1,"name":"mcp_a_b","arguments":"{\"q\": 1}"}`},
			{evToolCallCompleted, `{"step":1,"name":"mcp_a_b","is_error":true,"result":"it failed"}`},
			{evModelResponse, `{"step":2,"content":"Done."}`},
			{"run.completed", `{"status":"completed"}`},
		}, "Let me look.\nDone.\n", "→ mcp_a_b {\"q\": 1}\n✗ mcp_a_b: it failed\n", false},
		{"failed", []event{
			{evModelDelta, `{"step":1,"text":"half"}`},
			{"run.failed", `{"status":"failed","error":"step 1: model openai: boom"}`},
		}, "half\n", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, info bytes.Buffer
			f := &runFollower{c: &runClient{out: &stdout, info: &info}, runID: "run_x", printed: map[int]string{}}
			ended := false
			for _, ev := range tc.events {
				ended = f.show(t.Context(), ev.typ, json.RawMessage(ev.data))
			}
			if !ended || stdout.String() != tc.stdout || info.String() != tc.info || (f.outcome != nil) != tc.failed {
				t.Errorf("shown: ended %v, stdout %q, info %q, outcome %v; want stdout %q, info %q, failed %v",
					ended, stdout.String(), info.String(), f.outcome, tc.stdout, tc.info, tc.failed)
			}
		})
	}
}
