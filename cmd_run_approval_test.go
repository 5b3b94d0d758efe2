package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// This file tests that harnessd run decides approvals at the terminal and
// posts the decision, and, with stdin not a terminal (the real binary
// against the real daemon), prints how to decide them and goes on once
// one is decided over the API.

func TestRunFollowerDecidesApprovals(t *testing.T) {
	t.Parallel()
	const payload = `{"approval_id":"ap_1","tool":"mcp_everything_get_sum","server":"everything","server_tool":"get-sum","arguments":"{\"a\":1}"}`
	tests := []struct {
		name     string
		terminal string // what the person types; "" for no terminal
		want     string // the body posted; "" for none
		info     string // a line the follower shows
	}{
		{"approve", "y\n", `{"decision":"approve"}`, ""},
		{"deny with a reason", "n\nnot today\n", `{"decision":"deny","reason":"not today"}`, ""},
		{"no terminal", "", "", `curl -X POST ` + "SRV" + `/v1/runs/run_x/approvals/ap_1 -H 'Content-Type: application/json' -d '{"decision":"approve"}'`},
		{"the terminal gives no answer", "\x00", "", "the terminal gave no decision (EOF), so decide it with:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				posted []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/v1/runs/run_x/approvals/ap_1" {
					t.Errorf("request %s %s, want POST /v1/runs/run_x/approvals/ap_1", r.Method, r.URL.Path)
				}
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				posted = append(posted, string(body))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"run_id":"run_x","approval_id":"ap_1","decision":"approve"}`)
			}))
			t.Cleanup(srv.Close)
			var stdout, info bytes.Buffer
			c := &runClient{base: srv.URL, client: srv.Client(), out: &stdout, info: &info}
			switch tt.terminal {
			case "":
			case "\x00": // at once at its end
				c.prompter = &terminalPrompter{in: newBufferedLines(strings.NewReader("")), out: &info}
			default:
				c.prompter = &terminalPrompter{in: newBufferedLines(strings.NewReader(tt.terminal)), out: &info}
			}
			f := &runFollower{c: c, runID: "run_x", printed: map[int]string{}}
			if f.show(t.Context(), evApprovalRequested, json.RawMessage(payload)) {
				t.Fatal("show(approval.requested) ended the run")
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tt.want == "" && len(posted) > 0:
				t.Errorf("posted %q, want nothing", posted)
			case tt.want != "" && (len(posted) != 1 || !jsonEqual(posted[0], tt.want)):
				t.Errorf("posted %q, want %s", posted, tt.want)
			}
			if want := strings.ReplaceAll(tt.info, "SRV", srv.URL); !strings.Contains(info.String(), want) {
				t.Errorf("shown %q, want it to contain %q", info.String(), want)
			}
		})
	}
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// A lineLog collects the lines a process writes, for a test to wait on.
// Safe for concurrent use.
type lineLog struct {
	mu sync.Mutex
	// guards text
	text strings.Builder
}

// Write appends p.
func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.Write(p)
}

// String returns what was written so far.
func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.text.String()
}

func TestRunCommandWithoutTerminalWaitsForApproval(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	echo := fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"approved elsewhere"}`)}}
	f := newFakeModel(t, providerOpenAI, echo, answerWithResults, echo, answerWithResults)
	bin := buildHarnessd(t)
	home, workspace, _ := fakeServerHome(t, "fake", "normal", "")
	// Every call of the fake server needs approval.
	config, err := os.OpenFile(filepath.Join(home, "config.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(config, "approval = \"always\"\n")
	config.Close()
	_, at := serveHarnessd(t, bin, fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model"), workspace)
	waitReadyz(t, at)
	client := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HARNESS_ADDR=" + strings.TrimPrefix(at.url, "http://")}
	decide := regexp.MustCompile(`curl -X POST \S+(/v1/runs/run_\w+/approvals/\w+) `)
	tests := []struct {
		name  string
		stdin io.Reader // nil: /dev/null
	}{
		{"stdin is /dev/null", nil},
		{"stdin is a pipe", strings.NewReader("y\n")}, // a pipe is not a terminal: nothing is read from it
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin, "run", "echo it")
			cmd.Env, cmd.Stdin = client, tt.stdin
			var stdout, stderr lineLog
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			// Owned by the test; ends when the command exits (or is
			// killed with the test's context).
			go func() { exited <- cmd.Wait() }()
			var path []string
			waitUntil(t, "harnessd run prints how to decide the approval", func() bool {
				path = decide.FindStringSubmatch(stderr.String())
				return path != nil
			})
			select {
			case err := <-exited:
				t.Fatalf("harnessd run exited (%v) while the approval was open\nstderr %s", err, stderr.String())
			default:
			}
			if resp, data := at.do(t, http.MethodPost, path[1], "", `{"decision":"approve"}`); resp.StatusCode != http.StatusOK {
				t.Fatalf("POST %s = %d %s, want 200", path[1], resp.StatusCode, data)
			}
			var exitErr *exec.ExitError
			if err := <-exited; err != nil && !errors.As(err, &exitErr) {
				t.Fatal(err)
			}
			if code := cmd.ProcessState.ExitCode(); code != 0 || stdout.String() != "ok: approved elsewhere\n" ||
				!strings.Contains(stderr.String(), "approve by caller") || strings.Contains(stderr.String(), "EOF") {
				t.Errorf("harnessd run = exit %d\nstdout %q\nstderr %q\nwant exit 0 with the tool's result once approved over the API", code, stdout.String(), stderr.String())
			}
		})
	}
}
