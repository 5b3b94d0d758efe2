package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// This file holds the end-to-end checks that ordinary configured values
// reach every output as written while a real secret is still hidden: the
// mcp call command, and a run of the daemon (its view, its transcript and
// its lines on disk), both with server-everything (the fake stdio server
// when the npm peers are missing).

// ordinaryEnv is the env of the server in these tests: values that must
// be shown as written, and one secret (by its name) that must not.
func ordinaryEnv(peer peerCommand, token string) map[string]string {
	env := map[string]string{"NODE_ENV": "production", "LOG_FORMAT": "structured", "LOG_LEVEL": "warning", "TZ": "Europe/Berlin", "GITHUB_TOKEN": token}
	for k, v := range peer.Env {
		env[k] = v
	}
	return env
}

// TestMCPCallShowsOrdinaryValues calls the echo tool of a server whose env
// holds NODE_ENV=production and LOG_FORMAT=structured: the words come back
// as written, the GITHUB_TOKEN value as [redacted].
func TestMCPCallShowsOrdinaryValues(t *testing.T) {
	t.Parallel()
	server := e2eServerFor(t)
	const token = "ghp-cli-secret-0123456789"
	servers := serversJSON(t, map[string]any{"name": "every", "command": server.peer.Command, "args": server.peer.Args,
		"env": ordinaryEnv(server.peer, token)})
	args := []string{"mcp", "call", "mcp_every_echo", `{"message":"deploy to production with structured logs, token ` + token + `"}`}
	code, stdout, stderr := runHarnessd(t, map[string]string{"HARNESS_MCP_SERVERS": servers}, args...)
	want := server.echoPrefix + "deploy to production with structured logs, token [redacted]"
	if code != 0 || !strings.Contains(stdout, want) || strings.Contains(stdout+stderr, token) {
		t.Errorf("%v = %d\nstdout: %s\nstderr: %s\nwant %q", args, code, stdout, stderr, want)
	}
}

// TestRunShowsOrdinaryValues runs the daemon with the same server and a
// run whose prompt is "ship it to production now": the prompt, the
// model's answer and the echo read as written in GET /v1/runs/{id},
// /messages and the run's lines on disk, with only the token redacted.
func TestRunShowsOrdinaryValues(t *testing.T) {
	t.Parallel()
	server := e2eServerFor(t)
	const (
		token  = "ghp-run-secret-0123456789"
		prompt = "ship it to production now"
		answer = "shipped to production with structured logs"
	)
	echo, _ := json.Marshal(map[string]string{"message": "deploy to production with structured logs, token " + token})
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{{ID: "c1", Name: "mcp_every_echo", Arguments: echo}}},
		fakeTurn{Text: answer})
	home := t.TempDir()
	var env []string
	for k, v := range ordinaryEnv(server.peer, token) {
		env = append(env, fmt.Sprintf("%s = %q", k, v))
	}
	var args []string
	for _, a := range server.peer.Args {
		args = append(args, strconv.Quote(a))
	}
	writeFile(t, home, "config.toml", fmt.Sprintf("[mcp_servers.every]\ncommand = %q\nargs = [%s]\nenv = { %s }\n\n[model]\nname = \"openai/fake-model\"\n",
		server.peer.Command, strings.Join(args, ", "), strings.Join(env, ", ")))
	at := serveInProcess(t, home, f.getenv)
	waitUntil(t, "the server is ready", func() bool {
		resp, _ := at.do(t, "GET", "/readyz", "", "")
		return resp.StatusCode == http.StatusOK
	})

	id := at.postRun(t, "", `{"prompt":"`+prompt+`"}`)
	waitUntil(t, "the run ends", func() bool {
		body, _ := getMessages(t, at, id)
		return isTerminal(body.Status)
	})
	_, data := at.do(t, "GET", "/v1/runs/"+id, "", "")
	var view struct {
		Status, Prompt, Output string
	}
	if err := json.Unmarshal(data, &view); err != nil || view.Status != runCompleted || view.Prompt != prompt || view.Output != answer {
		t.Errorf("GET /v1/runs/%s = %s (%v), want completed with prompt %q and output %q", id, data, err, prompt, answer)
	}
	got, raw := getMessages(t, at, id)
	wantEcho := server.echoPrefix + "deploy to production with structured logs, token [redacted]"
	if len(got.Messages) != 4 || got.Messages[0].Content != prompt || got.Messages[2].Content != wantEcho || got.Messages[3].Content != answer {
		t.Errorf("GET /v1/runs/%s/messages = %s\nwant the prompt %q, the echo %q and the answer %q", id, raw, prompt, wantEcho, answer)
	}
	disk := runLinesOnDisk(t, filepath.Join(home, "runs"), id)
	for _, want := range []string{prompt, answer, wantEcho} {
		if !bytes.Contains(disk, []byte(want)) {
			t.Errorf("the run's lines on disk lack %q:\n%s", want, disk)
		}
	}
	if all := string(data) + raw + string(disk); strings.Contains(all, token) {
		t.Errorf("the run shows the token:\n%s", all)
	}
}

// serveInProcess runs "harnessd serve" in this process on a loopback port
// with home as HARNESS_HOME and HOME, the variables of model (a fake
// model's getenv) and PATH, and returns its API; the daemon stops when
// the test ends.
func serveInProcess(t *testing.T, home string, model func(string) (string, bool)) *apiTest {
	t.Helper()
	getenv := func(k string) (string, bool) {
		switch k {
		case "HARNESS_HOME", "HOME":
			return home, true
		case "PATH":
			return os.LookupEnv(k)
		}
		return model(k)
	}
	addr := serveUntilCleanup(t, getenv, "serve", "--workspace", home, "--addr", "127.0.0.1:0")
	return &apiTest{url: "http://" + addr, client: &http.Client{}}
}
