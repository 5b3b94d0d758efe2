package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file tests the MCP server's tasks extension with a task-aware
// client of our own (raw JSON-RPC over Streamable HTTP): run creates a
// task whose id is the run id, tasks/get polls it to its inlined result,
// an approval is answered through tasks/update, tasks/cancel cancels the
// run, a session hears notifications/tasks, another key's task is not
// found, and a task answers after the daemon is killed and restarted.

// A taskClient is a task-aware MCP client: it declares the tasks
// extension in initialize (a session at 2025-11-25) or in every request's
// _meta (2026-07-28, without a session).
type taskClient struct {
	raw       *mcpRawClient
	stateless bool
	next      int
	// caps are the client capabilities every stateless request's _meta
	// declares: the tasks extension, unless a test sets others.
	caps map[string]any
}

// newTaskClient returns a client of at's /mcp as token's key at version.
func newTaskClient(t *testing.T, at *apiTest, token, version string) *taskClient {
	t.Helper()
	c := &taskClient{raw: &mcpRawClient{at: at, token: token}, stateless: version == sessionlessProtocolVersion,
		caps: map[string]any{"extensions": map[string]any{extTasks: map[string]any{}}}}
	if !c.stateless {
		c.raw.initialize(t, `{"extensions":{"`+extTasks+`":{}}}`)
	}
	return c
}

// call sends a request and returns its response, read from JSON or SSE.
func (c *taskClient) call(t *testing.T, method string, params map[string]any) wireMessage {
	t.Helper()
	c.next++
	if c.stateless {
		params["_meta"] = map[string]any{"io.modelcontextprotocol/protocolVersion": sessionlessProtocolVersion,
			"io.modelcontextprotocol/clientCapabilities": c.caps}
	}
	id := json.RawMessage(encodeJSON(c.next))
	// A request of the extension answers at once: one held longer (a
	// server without the extension holding run) fails the test.
	ctx, cancel := context.WithTimeout(t.Context(), taskCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.raw.at.url+"/mcp", bytes.NewReader(encodeJSON(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.raw.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.raw.token)
	}
	if c.raw.session != "" {
		req.Header.Set(headerSessionID, c.raw.session)
	}
	resp, err := c.raw.at.client.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s = %d %s, want 200", method, resp.StatusCode, data)
	}
	var out wireMessage
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		readSSE(t, resp.Body, func(msg wireMessage) bool {
			out = msg
			return string(msg.ID) == string(id)
		})
		return out
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return out
}

// taskCallTimeout bounds each request of a taskClient.
const taskCallTimeout = 20 * time.Second

// task sends a tasks/* or tools/call request that answers with a task and
// returns the task.
func (c *taskClient) task(t *testing.T, method string, params map[string]any) mcpTask {
	t.Helper()
	msg := c.call(t, method, params)
	var task mcpTask
	if msg.Error != nil || json.Unmarshal(msg.Result, &task) != nil || task.TaskID == "" {
		t.Fatalf("%s = %s %v, want a task", method, msg.Result, msg.Error)
	}
	return task
}

// start calls run with args and returns the task it created.
func (c *taskClient) start(t *testing.T, args string) mcpTask {
	t.Helper()
	task := c.task(t, "tools/call", map[string]any{"name": "run", "arguments": json.RawMessage(args)})
	if task.ResultType != "task" || !strings.HasPrefix(task.TaskID, "run_") || task.PollIntervalMs != 1000 {
		t.Fatalf("run with the tasks extension = %+v, want a CreateTaskResult (resultType task) whose id is a run's", task)
	}
	return task
}

// poll polls tasks/get for id until done accepts the task, and returns it.
func (c *taskClient) poll(t *testing.T, id, what string, done func(mcpTask) bool) mcpTask {
	t.Helper()
	var task mcpTask
	waitUntil(t, what, func() bool {
		task = c.task(t, "tasks/get", map[string]any{"taskId": id})
		if task.ResultType != "complete" || task.TaskID != id {
			t.Fatalf("tasks/get %s = %+v, want resultType complete and the same taskId", id, task)
		}
		return done(task)
	})
	return task
}

// taskText returns the text of a task's inlined result.
func taskText(task mcpTask) string {
	if task.Result == nil || len(task.Result.Content) != 1 {
		return ""
	}
	return task.Result.Content[0].Text
}

// TestMCPServeTasks: at both kinds of revision, run creates a task that
// tasks/get polls to its end with the run tool's result inlined; an
// approval makes it input_required with an elicitation/create to answer
// through tasks/update; tasks/cancel cancels the run; a session hears the
// status changes as notifications/tasks on its GET stream.
func TestMCPServeTasks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   []fakeTurn
		args     string
		answer   string // the answer to each approval; "" for none asked
		cancel   bool
		status   string
		text     string
		runState string
	}{
		{"completes", findThenEcho(), `{"prompt":"echo hello"}`, "", false, mcpTaskCompleted, "echoed hello", runCompleted},
		{"approved", findThenEcho(), `{"prompt":"echo hello","approval":"always"}`, `{"action":"accept","content":{"decision":"approve"}}`, false, mcpTaskCompleted, "echoed hello", runCompleted},
		{"denied", findThenEcho(), `{"prompt":"echo hello","approval":"always"}`, `{"action":"decline"}`, false, mcpTaskCompleted, "denied", runCompleted},
		{"cancelled", []fakeTurn{{Hang: true}}, `{"prompt":"hang"}`, "", true, mcpTaskCancelled, "", runCancelled},
	}
	for _, version := range []string{"2025-11-25", sessionlessProtocolVersion} {
		for _, tc := range tests {
			t.Run(version+"/"+tc.name, func(t *testing.T) {
				at, f := newMCPTestModel(t, tc.script...)
				c := newTaskClient(t, at, mcpAliceToken, version)
				var listen *http.Response
				if !c.stateless {
					listen = openListen(t, at, c.raw.session)
				}
				created := c.start(t, tc.args)
				if r := at.runs.get(created.TaskID); r == nil {
					t.Fatalf("task %s: no run of that id", created.TaskID)
				}
				if tc.cancel {
					waitUntil(t, "the run calls the model", func() bool { return len(f.requests()) == 1 })
					if ack := c.call(t, "tasks/cancel", map[string]any{"taskId": created.TaskID}); ack.Error != nil || string(ack.Result) != `{"resultType":"complete"}` {
						t.Fatalf("tasks/cancel = %s %v, want the empty acknowledgement", ack.Result, ack.Error)
					}
				}
				answered := map[string]bool{}
				final := c.poll(t, created.TaskID, "the task ends", func(task mcpTask) bool {
					if task.Status == mcpTaskInputRequired {
						if tc.answer == "" || len(task.InputRequests) == 0 {
							t.Fatalf("task = %+v, want no input asked", task)
						}
						for key, req := range task.InputRequests {
							if answered[key] {
								continue
							}
							if msg, _ := req.Params["message"].(string); req.Method != "elicitation/create" || !strings.Contains(msg, "mcp_fake_echo") {
								t.Errorf("inputRequests[%s] = %+v, want an elicitation/create naming the tool", key, req)
							}
							answered[key] = true
							ack := c.call(t, "tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]json.RawMessage{key: json.RawMessage(tc.answer)}})
							if ack.Error != nil || string(ack.Result) != `{"resultType":"complete"}` {
								t.Fatalf("tasks/update = %s %v, want the empty acknowledgement", ack.Result, ack.Error)
							}
						}
					}
					return task.Status != mcpTaskWorking && task.Status != mcpTaskInputRequired
				})
				if final.Status != tc.status || !strings.Contains(taskText(final), tc.text) {
					t.Errorf("final task = %s %q (%s), want %s with %q", final.Status, taskText(final), final.StatusMessage, tc.status, tc.text)
				}
				if (tc.answer != "") != (len(answered) > 0) {
					t.Errorf("answered %v, want input asked: %v", answered, tc.answer != "")
				}
				if got := at.runs.get(created.TaskID).view().Status; got != tc.runState {
					t.Errorf("run %s = %s, want %s", created.TaskID, got, tc.runState)
				}
				if listen == nil {
					return
				}
				var seen []string
				readSSE(t, listen.Body, func(msg wireMessage) bool {
					var task mcpTask
					if msg.Method != "notifications/tasks" || json.Unmarshal(msg.Params, &task) != nil || task.TaskID != created.TaskID {
						return false
					}
					seen = append(seen, task.Status)
					return task.Status == tc.status
				})
				if tc.answer != "" && !slices.Contains(seen, mcpTaskInputRequired) {
					t.Errorf("notifications/tasks statuses = %v, want input_required among them", seen)
				}
			})
		}
	}
}

// openListen opens session's GET stream.
func openListen(t *testing.T, at *apiTest, session string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, at.url+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+mcpAliceToken)
	req.Header.Set(headerSessionID, session)
	resp, err := at.client.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp = %v %v, want 200", resp, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestMCPServeTaskNegotiation: the server advertises the extension, and a
// client that did not declare it gets run's ordinary result, not a task.
func TestMCPServeTaskNegotiation(t *testing.T) {
	t.Parallel()
	at := newMCPTest(t, fakeTurn{Text: "plain"})
	raw := &mcpRawClient{at: at, token: mcpAliceToken}
	resp := raw.post(t, `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	data, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(data), `"extensions":{"`+extTasks+`":{}}`) {
		t.Errorf("server/discover = %s, want the tasks extension in capabilities.extensions", data)
	}
	raw.initialize(t, `{}`)
	resp = raw.post(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run","arguments":{"prompt":"hi"}}}`)
	var out wireMessage
	readSSE(t, resp.Body, func(msg wireMessage) bool {
		out = msg
		return string(msg.ID) == "2"
	})
	if strings.Contains(string(out.Result), `"resultType"`) || !strings.Contains(string(out.Result), `"text":"plain"`) {
		t.Errorf("run without the extension = %s, want the held result", out.Result)
	}
}

// TestMCPServeTaskErrors: another key's task is not found, as is an
// unknown one; malformed params say what to send.
func TestMCPServeTaskErrors(t *testing.T) {
	t.Parallel()
	at, f := newMCPTestModel(t, fakeTurn{Hang: true})
	alice := newTaskClient(t, at, mcpAliceToken, sessionlessProtocolVersion)
	created := alice.start(t, `{"prompt":"hang"}`)
	waitUntil(t, "the run calls the model", func() bool { return len(f.requests()) == 1 })
	bob := newTaskClient(t, at, mcpBobToken, sessionlessProtocolVersion)
	update := map[string]any{"taskId": created.TaskID, "inputResponses": map[string]any{"x": map[string]any{"action": "accept"}}}
	tests := []struct {
		name   string
		client *taskClient
		method string
		params map[string]any
		want   string
	}{
		{"another key's get", bob, "tasks/get", map[string]any{"taskId": created.TaskID}, "not found"},
		{"another key's update", bob, "tasks/update", update, "not found"},
		{"another key's cancel", bob, "tasks/cancel", map[string]any{"taskId": created.TaskID}, "not found"},
		{"unknown task", alice, "tasks/get", map[string]any{"taskId": "run_nope"}, "not found"},
		{"no taskId", alice, "tasks/get", map[string]any{}, "want params {taskId}"},
		{"no inputResponses", alice, "tasks/update", map[string]any{"taskId": created.TaskID}, "inputResponses: missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.client.call(t, tc.method, tc.params)
			if msg.Error == nil || msg.Error.Code != codeInvalidParams || !strings.Contains(msg.Error.Message, tc.want) {
				t.Errorf("%s = %s %+v, want error %d saying %q", tc.method, msg.Result, msg.Error, codeInvalidParams, tc.want)
			}
		})
	}
	if got := at.runs.get(created.TaskID).view().Status; got != runRunning {
		t.Errorf("alice's run after bob's cancel = %s, want running", got)
	}
	if ack := alice.call(t, "tasks/cancel", map[string]any{"taskId": created.TaskID}); ack.Error != nil {
		t.Errorf("tasks/cancel = %v", ack.Error)
	}
}

// TestMCPServeTaskRestart: the real harnessd binary, killed with SIGKILL
// with one task completed and one working, answers tasks/get for both
// after a restart on the same home: the completed one with its result,
// the interrupted one as the run records it (failed, so a completed task
// with the run tool's isError result).
func TestMCPServeTaskRestart(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "first answer"}, fakeTurn{Hang: true})
	bin := buildHarnessd(t)
	home, workspace := t.TempDir(), t.TempDir()
	env := fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model")
	first, at := serveHarnessd(t, bin, env, workspace)
	c := newTaskClient(t, at, "", sessionlessProtocolVersion)

	done := c.start(t, `{"prompt":"first"}`)
	c.poll(t, done.TaskID, "the first task completes", func(task mcpTask) bool { return task.Status == mcpTaskCompleted })
	working := c.start(t, `{"prompt":"second"}`)
	waitUntil(t, "the second run calls the model", func() bool { return len(f.requests()) == 2 })
	if task := c.task(t, "tasks/get", map[string]any{"taskId": working.TaskID}); task.Status != mcpTaskWorking {
		t.Fatalf("second task before the kill = %+v, want working", task)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited

	_, at = serveHarnessd(t, bin, env, workspace)
	c = newTaskClient(t, at, "", sessionlessProtocolVersion)
	tests := []struct {
		name, id, text, message string
		isError                 bool
	}{
		{"completed before", done.TaskID, "first answer", "", false},
		{"interrupted", working.TaskID, interruptedError, "run failed: " + interruptedError, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			task := c.task(t, "tasks/get", map[string]any{"taskId": tc.id})
			if task.Status != mcpTaskCompleted || !strings.Contains(taskText(task), tc.text) || task.Result.IsError != tc.isError || task.StatusMessage != tc.message {
				t.Errorf("tasks/get %s after the restart = %+v, want completed with %q (isError %v, statusMessage %q)", tc.id, task, tc.text, tc.isError, tc.message)
			}
		})
	}
}

// TestMCPServeTaskListen: at 2026-07-28, subscriptions/listen naming task
// ids acknowledges those the key sees, then streams their
// notifications/tasks (input_required answered meanwhile through
// tasks/update) and ends once they have ended; without the extension, or
// without taskIds, it is refused.
func TestMCPServeTaskListen(t *testing.T) {
	t.Parallel()
	at := newMCPTest(t, findThenEcho()...)
	c := newTaskClient(t, at, mcpAliceToken, sessionlessProtocolVersion)
	created := c.start(t, `{"prompt":"echo hello","approval":"always"}`)

	refusals := []struct {
		name, msg string
		code      int
	}{
		{"no extension", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["` + created.TaskID + `"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, codeTasksNotDeclared},
		{"no taskIds", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"` + extTasks + `":{}}}}}}`, codeMethodNotFound},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			var out wireMessage
			readSSE(t, c.raw.post(t, tc.msg).Body, func(msg wireMessage) bool {
				out = msg
				return string(msg.ID) == "1"
			})
			if out.Error == nil || out.Error.Code != tc.code {
				t.Errorf("subscriptions/listen = %s %+v, want error %d", out.Result, out.Error, tc.code)
			}
		})
	}

	listen := c.raw.post(t, `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"taskIds":["`+created.TaskID+`","run_nope"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"`+extTasks+`":{}}}}}}`)
	var acked []string
	var seen []string
	readSSE(t, listen.Body, func(msg wireMessage) bool {
		switch msg.Method {
		case "notifications/subscriptions/acknowledged":
			var p struct {
				Notifications struct {
					TaskIDs []string `json:"taskIds"`
				} `json:"notifications"`
			}
			json.Unmarshal(msg.Params, &p)
			acked = p.Notifications.TaskIDs
		case "notifications/tasks":
			var task mcpTask
			if err := json.Unmarshal(msg.Params, &task); err != nil || task.TaskID != created.TaskID {
				t.Fatalf("notifications/tasks = %s, want task %s", msg.Params, created.TaskID)
			}
			seen = append(seen, task.Status)
			for key := range task.InputRequests {
				c.call(t, "tasks/update", map[string]any{"taskId": task.TaskID, "inputResponses": map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)}})
			}
			if task.Status == mcpTaskCompleted && taskText(task) != "echoed hello" {
				t.Errorf("completed task notified = %+v, want the result inlined", task)
			}
		}
		return string(msg.ID) == "9"
	})
	if !slices.Equal(acked, []string{created.TaskID}) {
		t.Errorf("acknowledged taskIds = %v, want only %s", acked, created.TaskID)
	}
	if !slices.Contains(seen, mcpTaskInputRequired) || len(seen) == 0 || seen[len(seen)-1] != mcpTaskCompleted {
		t.Errorf("notified statuses = %v, want input_required then completed last", seen)
	}
}

// TestMCPServeTaskBadAnswer: an answer the approval does not take is an
// error naming its key, the approval staying open; keys that are not open
// are ignored.
func TestMCPServeTaskBadAnswer(t *testing.T) {
	t.Parallel()
	at := newMCPTest(t, findThenEcho()...)
	c := newTaskClient(t, at, mcpAliceToken, sessionlessProtocolVersion)
	created := c.start(t, `{"prompt":"echo hello","approval":"always"}`)
	waiting := c.poll(t, created.TaskID, "the task asks for approval", func(task mcpTask) bool { return task.Status == mcpTaskInputRequired })
	var key string
	for key = range waiting.InputRequests {
	}
	tests := []struct {
		name      string
		responses map[string]json.RawMessage
		wantErr   string // "" for the acknowledgement
	}{
		{"malformed decision", map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"decision":"maybe"}}`)}, key + ": "},
		{"unknown key", map[string]json.RawMessage{"apr_nope": json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := c.call(t, "tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": tc.responses})
			switch {
			case tc.wantErr == "" && msg.Error != nil:
				t.Errorf("tasks/update = %+v, want the acknowledgement", msg.Error)
			case tc.wantErr != "" && (msg.Error == nil || msg.Error.Code != codeInvalidParams || !strings.Contains(msg.Error.Message, tc.wantErr)):
				t.Errorf("tasks/update = %s %+v, want error %d naming %q", msg.Result, msg.Error, codeInvalidParams, tc.wantErr)
			}
			if task := c.task(t, "tasks/get", map[string]any{"taskId": created.TaskID}); task.Status != mcpTaskInputRequired {
				t.Errorf("task after the update = %s, want still input_required", task.Status)
			}
		})
	}
	if ack := c.call(t, "tasks/update", map[string]any{"taskId": created.TaskID, "inputResponses": map[string]json.RawMessage{key: json.RawMessage(`{"action":"accept","content":{"decision":"approve"}}`)}}); ack.Error != nil {
		t.Fatalf("tasks/update with a good answer = %+v", ack.Error)
	}
	if task := c.poll(t, created.TaskID, "the task ends", func(task mcpTask) bool { return task.Status == mcpTaskCompleted }); taskText(task) != "echoed hello" {
		t.Errorf("task = %+v, want completed with echoed hello", task)
	}
}
