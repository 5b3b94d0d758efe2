package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file holds the end-to-end test of what a run shows of what it did,
// with the real binary and a real MCP server: the arguments and results
// in its events, cut and redacted, its transcript, read again after a
// restart, and the debug trace of the MCP traffic, with payloads only
// when asked for.

// checkTrace fails the test unless log holds trace lines of server's
// tools/call and its answer, with payloads exactly when payloads is set,
// and never secret.
func checkTrace(t *testing.T, log, server, secret string, payloads bool) {
	t.Helper()
	if strings.Contains(log, secret) {
		t.Errorf("the log shows the server's secret")
	}
	var call, answer bool
	for _, l := range traceLines(t, log) {
		if l.Server != server {
			continue
		}
		if (l.Payload != nil) != payloads {
			t.Errorf("trace line %+v: payload present = %v, want %v", l, l.Payload != nil, payloads)
		}
		call = call || (l.Direction == "send" && l.Kind == "request" && l.Method == "tools/call")
		answer = answer || (l.Direction == "recv" && l.Kind == "response" && l.Method == "tools/call" && l.Outcome == "ok" && l.DurationMS != nil)
	}
	if !call || !answer {
		t.Errorf("trace of %s: tools/call sent %v, answered %v; want both", server, call, answer)
	}
}

func TestEndToEndTranscript(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	server := e2eServerFor(t)
	bin := buildHarnessd(t)
	const secret = "s3cr3t-transcript-value"
	long := strings.Repeat("L", 3000)
	f := newFakeModel(t, "openai",
		fakeTurn{Text: "echoing twice", ToolCalls: []toolCall{
			{ID: "c1", Name: "mcp_everything_echo", Arguments: []byte(`{"message":"the token is ` + secret + `"}`)},
			{ID: "c2", Name: "mcp_everything_echo", Arguments: []byte(`{"message":"` + long + `"}`)},
		}},
		fakeTurn{Text: "both echoed"},
	)
	home, workspace := t.TempDir(), t.TempDir()
	env := []string{fmt.Sprintf("SECRET = %q", secret)}
	for k, v := range server.peer.Env {
		env = append(env, fmt.Sprintf("%s = %q", k, v))
	}
	var args []string
	for _, a := range server.peer.Args {
		args = append(args, strconv.Quote(a))
	}
	config := fmt.Sprintf("[mcp_servers.everything]\ncommand = %q\nargs = [%s]\nenv = { %s }\n\n[model]\nname = \"openai/fake-model\"\n",
		server.peer.Command, strings.Join(args, ", "), strings.Join(env, ", "))
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	harnessEnv := fakeModelEnv(f, home, "HARNESS_MAX_TOOL_EVENT_BYTES=1024")
	p, at := serveHarnessd(t, bin, harnessEnv, workspace, "--log-level", "debug")
	waitUntil(t, "the server is ready", func() bool {
		resp, _ := at.do(t, "GET", "/readyz", "", "")
		return resp.StatusCode == 200
	})

	id := at.postRun(t, "", `{"prompt":"echo the token and a long text"}`)
	_, data := at.do(t, "GET", "/v1/runs/"+id+"/events", "", "")
	if bytes.Contains(data, []byte(secret)) {
		t.Errorf("events show the server's secret:\n%s", data)
	}
	calls := map[string]map[string]any{}
	for _, ev := range readEvents(t, bytes.NewReader(data)) {
		d, _ := ev.Data.(map[string]any)
		if strings.HasPrefix(ev.Type, "tool.call.") {
			calls[ev.Type+" "+fmt.Sprint(d["call_id"])] = d
		}
	}
	echoed := server.echoPrefix + long
	for key, want := range map[string]map[string]any{
		"tool.call.started c1":   {"arguments": `{"message":"the token is [redacted]"}`},
		"tool.call.completed c1": {"result": server.echoPrefix + "the token is [redacted]", "is_error": false},
		"tool.call.started c2":   {"arguments": (`{"message":"` + long)[:1024] + "…", "arguments_bytes": float64(len(long) + len(`{"message":""}`))},
		"tool.call.completed c2": {"result": echoed[:1024] + "…", "result_bytes": float64(len(echoed)), "is_error": false},
	} {
		for field, value := range want {
			if got := calls[key][field]; got != value {
				t.Errorf("%s: %s = %.80v, want %.80v", key, field, got, value)
			}
		}
	}

	waitUntil(t, "the run shows ended", func() bool {
		body, _ := getMessages(t, at, id)
		return isTerminal(body.Status)
	})
	got, raw := getMessages(t, at, id)
	if want := []string{"user", "assistant", "tool", "tool", "assistant"}; strings.Join(roles(got.Messages), " ") != strings.Join(want, " ") || got.Truncated {
		t.Fatalf("messages = %s, want roles %v, not truncated", raw, want)
	}
	if strings.Contains(raw, secret) {
		t.Errorf("messages show the server's secret:\n%s", raw)
	}
	if tool := got.Messages[2]; tool.ToolCallID != "c1" || tool.Content != server.echoPrefix+"the token is [redacted]" {
		t.Errorf("first tool result = %+v, want c1's echo with the secret redacted", tool)
	}
	if tool := got.Messages[3]; tool.ToolCallID != "c2" || tool.Content != echoed {
		t.Errorf("second tool result = %.200v, want c2's whole echo (the transcript is not cut at max_tool_event_bytes)", tool)
	}

	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		t.Fatal("harnessd did not exit within 15s of SIGTERM")
	}
	checkTrace(t, p.log(), "everything", secret, false)

	// After a restart on the same home, the transcript reads the same.
	// This time the trace carries the payloads.
	f2 := newFakeModel(t, "openai", fakeTurn{ToolCalls: []toolCall{{ID: "c3", Name: "mcp_everything_echo", Arguments: []byte(`{"message":"again ` + secret + `"}`)}}},
		fakeTurn{Text: "echoed again"})
	p2, at := serveHarnessd(t, bin, fakeModelEnv(f2, home, "HARNESS_LOG_MCP_PAYLOADS=true"), workspace, "--log-level", "debug")
	if _, again := getMessages(t, at, id); again != raw {
		t.Errorf("messages after a restart:\n%s\nwant\n%s", again, raw)
	}
	waitUntil(t, "the server is ready again", func() bool {
		resp, _ := at.do(t, "GET", "/readyz", "", "")
		return resp.StatusCode == 200
	})
	id2 := at.postRun(t, "", `{"prompt":"echo again"}`)
	waitUntil(t, "the second run ends", func() bool {
		body, _ := getMessages(t, at, id2)
		return isTerminal(body.Status)
	})
	checkTrace(t, p2.log(), "everything", secret, true)
}
