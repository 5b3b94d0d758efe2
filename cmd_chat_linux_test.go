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
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file tests harnessd run as a person at a terminal meets it: the
// built binary on a pseudo-terminal, typed at like a person would,
// against a real daemon with a scripted model and the fake stdio MCP
// server; then --json parsed line by line, and the exit statuses.

// A ptyScreen is the master side of a pseudo-terminal and what the
// program on it wrote so far. Safe for concurrent use.
type ptyScreen struct {
	master *os.File
	mu     sync.Mutex
	// guards text, seen and grew
	text strings.Builder
	seen int           // how much of text expect has gone past
	grew chan struct{} // closed and replaced when text grows
	done bool          // the slave side closed
}

// newPTYScreen opens a pseudo-terminal (openPTY) and returns its screen,
// read until the program's end, and the slave side for the program,
// which the caller closes once the program started.
func newPTYScreen(t *testing.T) (*ptyScreen, *os.File) {
	t.Helper()
	master, slave := openPTY(t)
	s := &ptyScreen{master: master, grew: make(chan struct{})}
	// Owned by the screen; ends when every slave side is closed (EIO) or
	// the master is closed at cleanup.
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			s.mu.Lock()
			s.text.Write(buf[:n])
			s.done = err != nil
			close(s.grew)
			s.grew = make(chan struct{})
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s, slave
}

// expect waits until what the program wrote since the last expectation
// met holds want, and returns the text up to and with it; it fails the
// test after a deadline, or when the program's side closed first.
func (s *ptyScreen) expect(t *testing.T, want string) string {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		text := s.text.String()[s.seen:]
		grew, done := s.grew, s.done
		if i := strings.Index(text, want); i >= 0 {
			s.seen += i + len(want)
			s.mu.Unlock()
			return text[:i+len(want)]
		}
		s.mu.Unlock()
		if done {
			t.Fatalf("the terminal closed without %q; it shows:\n%s", want, text)
		}
		select {
		case <-grew:
		case <-deadline.C:
			t.Fatalf("the terminal did not show %q in 30s; it shows:\n%s", want, text)
		}
	}
}

// typeKeys writes keys to the terminal as if typed.
func (s *ptyScreen) typeKeys(t *testing.T, keys string) {
	t.Helper()
	if _, err := s.master.WriteString(keys); err != nil {
		t.Fatalf("typing %q: %v", keys, err)
	}
}

// startOnPTY starts bin with args on a new pseudo-terminal as its
// controlling terminal (stdin, stdout and stderr) and returns the screen
// and the channel its exit status arrives on.
func startOnPTY(t *testing.T, bin string, env []string, args ...string) (*ptyScreen, <-chan int) {
	t.Helper()
	screen, slave := newPTYScreen(t)
	cmd := exec.CommandContext(t.Context(), bin, args...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close()
	exited := make(chan int, 1)
	// Owned by the test; ends when the program exits (or is killed with
	// the test's context).
	go func() {
		err := cmd.Wait()
		var exitErr *exec.ExitError
		if err != nil && !errors.As(err, &exitErr) {
			t.Errorf("%s %v: %v", bin, args, err)
		}
		exited <- cmd.ProcessState.ExitCode()
	}()
	return screen, exited
}

// exitStatus waits for the program's exit status, with a deadline.
func exitStatus(t *testing.T, exited <-chan int, screen *ptyScreen) int {
	t.Helper()
	select {
	case code := <-exited:
		return code
	case <-time.After(30 * time.Second):
		screen.mu.Lock()
		defer screen.mu.Unlock()
		t.Fatalf("the program did not exit in 30s; the terminal shows:\n%s", screen.text.String())
		return 0
	}
}

func TestRunChatOnTerminal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	f := newFakeModel(t, providerOpenAI,
		// The chat: a tool call approved inline, then two more turns.
		fakeTurn{Check: conversationIs([]string{u}, "what is the answer?"), ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"forty-two"}`)}},
		answerWithResults,
		fakeTurn{Check: conversationIs([]string{u, as, tl, as, u}, "what is the answer?", "and again?"), Text: "Still forty-two.\x1b]0;pwned\x07"},
		fakeTurn{Check: conversationIs([]string{u, as, tl, as, u, as, u}, "what is the answer?", "and again?", "and again and again?"), Text: "Third time: forty-two."},
		// Another key's conversation.
		fakeTurn{Text: "not yours"},
		// --continue.
		fakeTurn{Check: conversationIs([]string{u, as, tl, as, u, as, u, as, u}, "what is the answer?", "and again?", "and again and again?", "back again"), Text: "Welcome back."},
		// --json.
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"for scripts"}`)}},
		answerWithResults,
		// Exit statuses: a model that refuses, then one that hangs.
		fakeTurn{Status: http.StatusBadRequest, Text: "no such model"},
		// Past --max-tokens after the first step: no second one.
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"costly"}`)}, Usage: modelUsage{InputTokens: 50, OutputTokens: 50}},
		fakeTurn{Hang: true},
	)
	bin := buildHarnessd(t)
	home, workspace, _ := fakeServerHome(t, "fake", "normal", "")
	token := "tok-chat-0123456789abcdef"
	keys := `HARNESS_API_KEYS=[{"name":"chatter","token":"` + token + `","scopes":["runs:write"]},{"name":"other","token":"tok-other-0123456789abcdef","scopes":["runs:write"]}]`
	_, at := serveHarnessd(t, bin, fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model", keys), workspace)
	waitReadyz(t, at)
	addr := strings.TrimPrefix(at.url, "http://")
	client := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HARNESS_ADDR=" + addr, "HARNESS_TOKEN=" + token, "TERM=xterm"}
	auth := "Bearer " + token

	// Three turns of one conversation, typed.
	screen, exited := startOnPTY(t, bin, client, "run", "--approval", "always", "--title", "The answer")
	screen.expect(t, "/exit or Ctrl-D ends")
	screen.expect(t, "> ")
	screen.typeKeys(t, "what is the answer?\r")
	turn1 := screen.expect(t, "→ mcp_fake_echo {\"message\":\"forty-two\"}")
	screen.expect(t, "Approve this call? [y/n]: ")
	screen.typeKeys(t, "y\r")
	screen.expect(t, "approval")
	screen.expect(t, "← mcp_fake_echo: forty-two")
	screen.expect(t, "ok: forty-two")
	screen.expect(t, "> ")
	conv := regexp.MustCompile(`\(conversation (conv_[0-9a-f]+)\)`).FindStringSubmatch(turn1)
	if conv == nil {
		t.Fatalf("the first turn did not show its conversation:\n%s", turn1)
	}
	// Typed out of order and mended with Home.
	screen.typeKeys(t, "again?\x1b[Hand \r")
	// The model's escape sequence is shown, not acted on.
	screen.expect(t, `Still forty-two.\u001b]0;pwned\u0007`)
	screen.expect(t, "> ")
	// The last line again with the up arrow, its "?" taken back, more typed.
	screen.typeKeys(t, "\x1b[A\x7f and again?\r")
	screen.expect(t, "Third time: forty-two.")
	screen.expect(t, "> ")
	screen.typeKeys(t, "/nonsense\r")
	screen.expect(t, "unknown command /nonsense")
	screen.expect(t, "> ")
	screen.typeKeys(t, "/exit\r")
	if code := exitStatus(t, exited, screen); code != 0 {
		t.Fatalf("the chat ended with exit status %d, want 0", code)
	}
	resp, data := at.do(t, http.MethodGet, "/v1/conversations/"+conv[1], auth, "")
	var cv struct {
		Title string   `json:"title"`
		Runs  []string `json:"runs"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &cv) != nil || cv.Title != "The answer" || len(cv.Runs) != 3 {
		t.Fatalf("GET /v1/conversations/%s = %d %s, want its 3 runs, titled by --title", conv[1], resp.StatusCode, data)
	}

	// Another key's newer conversation is not the caller's latest.
	other := "Bearer tok-other-0123456789abcdef"
	resp, data = at.do(t, http.MethodPost, "/v1/runs", other, `{"prompt":"x"}`)
	var started struct {
		RunID string `json:"run_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &started) != nil {
		t.Fatalf("POST /v1/runs as other = %d %s", resp.StatusCode, data)
	}
	waitUntil(t, "the other key's run ends", func() bool {
		_, data := at.do(t, http.MethodGet, "/v1/runs/"+started.RunID, other, "")
		var v runView
		return json.Unmarshal(data, &v) == nil && isTerminal(v.Status)
	})
	screen, exited = startOnPTY(t, bin, client, "run", "--continue")
	screen.expect(t, "continuing conversation "+conv[1])
	screen.expect(t, "> ")
	screen.typeKeys(t, "back again\r")
	screen.expect(t, "Welcome back.")
	screen.expect(t, "> ")
	screen.typeKeys(t, "\x04")
	if code := exitStatus(t, exited, screen); code != 0 {
		t.Fatalf("the continued chat ended at Ctrl-D with exit status %d, want 0", code)
	}

	t.Run("json", func(t *testing.T) {
		stdout, stderr, code := runCLI(t, bin, client, "run", "--json", "echo for scripts")
		if code != 0 {
			t.Fatalf("harnessd run --json = exit %d\nstderr %s", code, stderr)
		}
		var types []string
		last := 0
		for i, line := range strings.Split(strings.TrimSuffix(stdout, "\n"), "\n") {
			var ev struct {
				Seq  int             `json:"seq"`
				Type string          `json:"type"`
				Time time.Time       `json:"time"`
				Data json.RawMessage `json:"data"`
			}
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ev); err != nil || ev.Type == "" || ev.Time.IsZero() {
				t.Fatalf("stdout line %d %q: %v; want one event a line", i+1, line, err)
			}
			if ev.Seq != 0 {
				if ev.Seq <= last {
					t.Errorf("line %d: seq %d after %d", i+1, ev.Seq, last)
				}
				last = ev.Seq
			}
			if ev.Type == evToolCallCompleted && !bytes.Contains(ev.Data, []byte("for scripts")) {
				t.Errorf("tool.call.completed %s lacks the tool's result", ev.Data)
			}
			types = append(types, ev.Type)
		}
		for _, want := range []string{"run.started", evToolCallStarted, evToolCallCompleted, evModelResponse} {
			if !strings.Contains(strings.Join(types, " "), want) {
				t.Errorf("events %v lack %s", types, want)
			}
		}
		if types[len(types)-1] != "run.completed" {
			t.Errorf("events %v do not end with run.completed", types)
		}
	})

	tests := []struct {
		name   string
		args   []string
		cancel bool // cancel the run once it runs
		code   int
		stderr string
	}{
		{"failed", []string{"run", "refused"}, false, exitRunFailed, "failed"},
		{"budget", []string{"run", "--max-tokens", "1", "too big"}, false, exitRunBudget, "budget exceeded"},
		{"cancelled", []string{"run", "--title", "to cancel", "hang"}, true, exitRunCancelled, "cancelled"},
		{"unreachable", []string{"run", "--addr", "127.0.0.1:1", "hi"}, false, exitRunUnanswered, "cannot reach harnessd"},
		{"refused", []string{"run", "--max-steps", "100000", "hi"}, false, exitRunUnanswered, "max_steps: 100000 is out of range"},
		{"usage", []string{"run", "--continue", "--conversation", conv[1], "hi"}, false, 2, "not both"},
	}
	for _, tt := range tests {
		t.Run("exit "+tt.name, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin, tt.args...)
			cmd.Env = client
			var stdout, stderr lineLog
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if tt.cancel {
				var id string
				waitUntil(t, "the run to cancel runs", func() bool {
					_, data := at.do(t, http.MethodGet, "/v1/runs?status=running&q=to+cancel", auth, "")
					var p pageOf
					if json.Unmarshal(data, &p) == nil && len(p.Runs) == 1 {
						id = p.Runs[0].ID
					}
					return id != "" && len(f.requests()) == 11
				})
				if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+id+"/cancel", auth, ""); resp.StatusCode != http.StatusOK {
					t.Fatalf("cancel = %d %s", resp.StatusCode, data)
				}
			}
			var exitErr *exec.ExitError
			if err := cmd.Wait(); err != nil && !errors.As(err, &exitErr) {
				t.Fatal(err)
			}
			if code := cmd.ProcessState.ExitCode(); code != tt.code || !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("harnessd %v = exit %d, stderr %q; want exit %d with %q", tt.args, code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}
}
