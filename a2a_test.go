package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file tests the A2A agent (a2a*.go) with its own JSON-RPC client
// over the API served by httptest and a scripted model: the card, the
// methods and their errors, ownership, streams and approvals. The official
// @a2a-js/sdk client is driven in a2a_sdk_test.go.

// a2aReply is one JSON-RPC answer of /a2a.
type a2aReply struct {
	Status int
	Result json.RawMessage
	Error  *rpcError
}

// a2aCall posts method with params (JSON) to /a2a as auth and returns
// the answer, failing the test unless it is a JSON-RPC response to id 1.
func (at *apiTest) a2aCall(t *testing.T, auth, method, params string, header ...string) a2aReply {
	t.Helper()
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":%q,"params":%s}`, method, params)
	resp, data := at.do(t, http.MethodPost, "/a2a", auth, body, header...)
	var out struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.JSONRPC != "2.0" || string(out.ID) != "1" {
		t.Fatalf("%s = %d %s (%v), want a JSON-RPC response to id 1", method, resp.StatusCode, data, err)
	}
	return a2aReply{Status: resp.StatusCode, Result: out.Result, Error: out.Error}
}

// The model's turns of a task that calls the fake server's echo: it
// selects mcp_fake_echo, calls it with "hello", and answers "result: "
// and the tool's result.
var (
	echoFindTurn   = fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"select:mcp_fake_echo"}`)}}
	echoCallTurn   = fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"hello"}`)}}
	echoResultTurn = fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		res := req.toolResults()
		if len(res) != 1 {
			return fakeTurn{Text: fmt.Sprintf("unexpected results %+v", res)}
		}
		return fakeTurn{Text: "result: " + res[0].Content}
	}}
)

// a2aStream posts body, a JSON-RPC request of a streaming method, to /a2a
// and returns the response, whose body the test's end closes.
func (at *apiTest) a2aStream(t *testing.T, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, at.url+"/a2a", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := at.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// a2aTaskOf decodes the task of a SendMessage result ({"task": ...}) or of
// a GetTask result, failing the test on an error answer.
func a2aTaskOf(t *testing.T, rep a2aReply) a2aTask {
	t.Helper()
	if rep.Error != nil {
		t.Fatalf("answer = error %d %s, want a task", rep.Error.Code, rep.Error.Message)
	}
	var wrapped struct {
		Task *a2aTask `json:"task"`
	}
	if json.Unmarshal(rep.Result, &wrapped) == nil && wrapped.Task != nil {
		return *wrapped.Task
	}
	var task a2aTask
	if err := json.Unmarshal(rep.Result, &task); err != nil || task.ID == "" {
		t.Fatalf("result %s (%v): want a task", rep.Result, err)
	}
	return task
}

// userMessage returns SendMessage params of a user message with text and
// extra message fields (`"contextId":"..."`, say).
func userMessage(text, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":%q}]%s}}`, text, extra)
}

// outputOf returns the text of a task's output artifact, "" for none.
func outputOf(task a2aTask) string {
	for _, a := range task.Artifacts {
		if a.ArtifactID == a2aOutputArtifact && len(a.Parts) == 1 && a.Parts[0].Text != nil {
			return *a.Parts[0].Text
		}
	}
	return ""
}

func TestA2ACard(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name       string
		keys       []authKey
		wantScheme bool
	}{
		{name: "auth off"},
		{name: "keys", keys: []authKey{testKey("alice", "alice-token", scopeRunsWrite)}, wantScheme: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			at := newAPITest(t, newFakeModel(t, providerOpenAI), tt.keys)
			dir := filepath.Join(at.runs.opts.Home, "profiles")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "research.toml"), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			resp, data := at.do(t, http.MethodGet, a2aCardPath, "", "", "Host", "localhost:8080")
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s = %d %s", a2aCardPath, resp.StatusCode, data)
			}
			var card a2aCard
			if err := json.Unmarshal(data, &card); err != nil {
				t.Fatal(err)
			}
			want := a2aInterface{URL: "http://localhost:8080/a2a", ProtocolBinding: "JSONRPC", ProtocolVersion: "1.0"}
			if len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0] != want {
				t.Errorf("supportedInterfaces = %+v, want [%+v]", card.SupportedInterfaces, want)
			}
			if !card.Capabilities.Streaming || !card.Capabilities.PushNotifications || card.Name == "" || card.Version == "" || card.Description == "" {
				t.Errorf("card = %s, want a name, description, version, streaming and pushNotifications", data)
			}
			var ids []string
			for _, s := range card.Skills {
				ids = append(ids, s.ID)
			}
			if strings.Join(ids, ",") != "default,research" {
				t.Errorf("skills = %v, want default and research", ids)
			}
			var scheme struct {
				HTTP struct {
					Scheme string `json:"scheme"`
				} `json:"httpAuthSecurityScheme"`
			}
			json.Unmarshal(card.SecuritySchemes[a2aBearerScheme], &scheme)
			if got := scheme.HTTP.Scheme == "Bearer" && len(card.SecurityRequirements) == 1; got != tt.wantScheme {
				t.Errorf("securitySchemes = %s, requirements %s: bearer scheme %v, want %v", scheme, card.SecurityRequirements, got, tt.wantScheme)
			}
		})
	}
}

func TestA2AErrors(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	at := newAPITest(t, f, nil)
	done := a2aTaskOf(t, at.a2aCall(t, "", "SendMessage", userMessage("hi", "")))
	if done.Status.State != taskCompleted {
		t.Fatalf("task state = %s, want completed", done.Status.State)
	}
	for _, tt := range []struct {
		name, body string
		header     []string
		wantCode   int
		wantMsg    string
	}{
		{name: "not json", body: `{"jsonrpc":`, wantCode: rpcParseError, wantMsg: "not JSON"},
		{name: "batch", body: `[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]`, wantCode: codeInvalidRequest, wantMsg: "batches are not served"},
		{name: "no id", body: `{"jsonrpc":"2.0","method":"GetTask","params":{}}`, wantCode: codeInvalidRequest, wantMsg: `an "id"`},
		{name: "unknown method", body: `{"jsonrpc":"2.0","id":1,"method":"Frobnicate"}`, wantCode: codeMethodNotFound, wantMsg: "SendMessage, SendStreamingMessage"},
		{name: "legacy method", body: `{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}`, wantCode: codeMethodNotFound, wantMsg: "call SendMessage"},
		{name: "list tasks", body: `{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{}}`, wantCode: a2aUnsupportedOperation, wantMsg: "GET /v1/runs"},
		{name: "extended card", body: `{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}`, wantCode: a2aUnsupportedOperation, wantMsg: "is the whole card"},
		{name: "version", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`, header: []string{"A2A-Version", "0.3"}, wantCode: a2aVersionNotSupported, wantMsg: "send A2A-Version: 1.0"},
		{name: "unknown field", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","colour":1}}`, wantCode: codeInvalidParams, wantMsg: `GetTask params: unknown field "colour"`},
		{name: "no task id", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`, wantCode: codeInvalidParams, wantMsg: "id: missing"},
		{name: "unknown task", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"run_nope"}}`, wantCode: a2aTaskNotFound, wantMsg: `id "run_nope": task not found`},
		{name: "negative history", body: `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x","historyLength":-1}}`, wantCode: codeInvalidParams, wantMsg: "historyLength -1"},
		{name: "cancel ended", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"CancelTask","params":{"id":%q}}`, done.ID), wantCode: a2aTaskNotCancelable, wantMsg: "already completed"},
		{name: "subscribe ended", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SubscribeToTask","params":{"id":%q}}`, done.ID), wantCode: a2aUnsupportedOperation, wantMsg: "GetTask gives its result"},
		{name: "message to ended task", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":%s}`, userMessage("more", fmt.Sprintf(`"taskId":%q`, done.ID))), wantCode: a2aUnsupportedOperation, wantMsg: "no taskId to continue the conversation"},
		{name: "no message", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`, wantCode: codeInvalidParams, wantMsg: "message: missing"},
		{name: "file part", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"url":"https://x/y.pdf"}]}}}`, wantCode: a2aContentTypeNotSupported, wantMsg: "parts[0]: file parts"},
		{name: "agent role", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}}`, wantCode: codeInvalidParams, wantMsg: "message.role"},
		{name: "unknown context", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":` + userMessage("x", `"contextId":"conv_nope"`) + `}`, wantCode: codeInvalidParams, wantMsg: `contextId "conv_nope": no such context`},
		{name: "bad option", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"metadata":{"harnessd":{"profil":"x"}}}}`, wantCode: codeInvalidParams, wantMsg: `metadata.harnessd: unknown field "profil"`},
		{name: "bad profile", body: `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"x"}]},"metadata":{"harnessd":{"profile":"../x"}}}}`, wantCode: codeInvalidParams, wantMsg: "invalid profile name"},
		{name: "push bad url", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{"taskId":%q,"url":"ftp://x"}}`, done.ID), wantCode: codeInvalidParams, wantMsg: "url:"},
		{name: "push unknown config", body: fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"GetTaskPushNotificationConfig","params":{"taskId":%q,"id":"push_nope"}}`, done.ID), wantCode: a2aTaskNotFound, wantMsg: `push config "push_nope"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := at.do(t, http.MethodPost, "/a2a", "", tt.body, tt.header...)
			var out struct {
				Error *rpcError `json:"error"`
			}
			if err := json.Unmarshal(data, &out); err != nil || out.Error == nil {
				t.Fatalf("POST /a2a %s = %d %s, want an error", tt.body, resp.StatusCode, data)
			}
			if resp.StatusCode != http.StatusOK || out.Error.Code != tt.wantCode || !strings.Contains(out.Error.Message, tt.wantMsg) {
				t.Errorf("POST /a2a %s = %d %d %q, want 200 %d containing %q", tt.body, resp.StatusCode, out.Error.Code, out.Error.Message, tt.wantCode, tt.wantMsg)
			}
		})
	}
}

func TestA2AOwnership(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "alice's answer"})
	keys := []authKey{
		testKey("alice", "alice-token", scopeRunsWrite),
		testKey("bob", "bob-token", scopeRunsWrite),
		testKey("reader", "reader-token", scopeRunsRead),
	}
	at := newAPITest(t, f, keys)
	alice, bob := "Bearer alice-token", "Bearer bob-token"
	task := a2aTaskOf(t, at.a2aCall(t, alice, "SendMessage", userMessage("hi", "")))
	if v := at.runs.get(task.ID).view(); v.Owner != "alice" || v.ConversationID != task.ContextID || v.Output != "alice's answer" {
		t.Fatalf("run %s = owner %q conversation %q output %q, want alice's run of context %s", task.ID, v.Owner, v.ConversationID, v.Output, task.ContextID)
	}
	for _, tt := range []struct{ method, params string }{
		{"GetTask", fmt.Sprintf(`{"id":%q}`, task.ID)},
		{"CancelTask", fmt.Sprintf(`{"id":%q}`, task.ID)},
		{"SubscribeToTask", fmt.Sprintf(`{"id":%q}`, task.ID)},
		{"SendMessage", userMessage("approve", fmt.Sprintf(`"taskId":%q`, task.ID))},
		{"CreateTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"url":"http://127.0.0.1:9/hook"}`, task.ID)},
		{"ListTaskPushNotificationConfigs", fmt.Sprintf(`{"taskId":%q}`, task.ID)},
		{"DeleteTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"id":"x"}`, task.ID)},
	} {
		rep := at.a2aCall(t, bob, tt.method, tt.params)
		if rep.Error == nil || rep.Error.Code != a2aTaskNotFound {
			t.Errorf("bob's %s of alice's task = %s %+v, want TaskNotFound (%d)", tt.method, rep.Result, rep.Error, a2aTaskNotFound)
		}
	}
	rep := at.a2aCall(t, bob, "SendMessage", userMessage("hi", fmt.Sprintf(`"contextId":%q`, task.ContextID)))
	if rep.Error == nil || rep.Error.Code != codeInvalidParams || !strings.Contains(rep.Error.Message, "no such context") {
		t.Errorf("bob's message in alice's context = %+v, want no such context", rep.Error)
	}
	rep = at.a2aCall(t, "Bearer reader-token", "SendMessage", userMessage("hi", ""))
	if rep.Status != http.StatusForbidden || rep.Error == nil || !strings.Contains(rep.Error.Message, "lacks the runs:write scope") {
		t.Errorf("read-only key's SendMessage = %d %+v, want 403 naming runs:write", rep.Status, rep.Error)
	}
	resp, data := at.do(t, http.MethodPost, "/a2a", "", `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{}}`)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("POST /a2a without a token = %d %s (WWW-Authenticate %q), want 401 with a Bearer challenge", resp.StatusCode, data, resp.Header.Get("WWW-Authenticate"))
	}
	if got := a2aTaskOf(t, at.a2aCall(t, alice, "GetTask", fmt.Sprintf(`{"id":%q}`, task.ID))); got.ID != task.ID || outputOf(got) != "alice's answer" {
		t.Errorf("alice's GetTask = %s %q, want her task with its output", got.ID, outputOf(got))
	}
}

func TestA2AAuthOffKeepsLoopback(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	for _, path := range []string{a2aCardPath, a2aPath} {
		method, body := http.MethodGet, ""
		if path == a2aPath {
			method, body = http.MethodPost, `{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}`
		}
		resp, data := at.do(t, method, path, "", body, "Host", "attacker.example")
		if resp.StatusCode != http.StatusMisdirectedRequest {
			t.Errorf("%s %s with Host attacker.example = %d %s, want 421", method, path, resp.StatusCode, data)
		}
		resp, data = at.do(t, method, path, "", body, "Origin", "https://attacker.example", "Sec-Fetch-Site", "cross-site")
		if method == http.MethodPost && resp.StatusCode != http.StatusForbidden {
			t.Errorf("cross-site %s %s = %d %s, want 403", method, path, resp.StatusCode, data)
		}
	}
}

// readA2AStream reads the events of an A2A SSE answer until it ends.
func readA2AStream(t *testing.T, body io.Reader, each func(a2aStreamResponse)) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var resp struct {
			Result a2aStreamResponse `json:"result"`
			Error  *rpcError         `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &resp); err != nil || resp.Error != nil {
			t.Fatalf("stream event %s (%v): want a result", data, err)
		}
		each(resp.Result)
	}
}

func TestA2AConversationAndStream(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{Text: "first answer"},
		fakeTurn{Chunks: []string{"second ", "answer ", "streamed"}, Check: func(req fakeRequest) error {
			var texts []string
			for _, m := range req.Messages {
				texts = append(texts, m.Role+":"+m.Content)
			}
			if got := strings.Join(texts, "|"); !strings.Contains(got, "user:first question|assistant:first answer|user:second question") {
				return fmt.Errorf("messages %q: want the first exchange before the second question", got)
			}
			return nil
		}},
	)
	at := newAPITest(t, f, nil)
	first := a2aTaskOf(t, at.a2aCall(t, "", "SendMessage", userMessage("first question", "")))
	if first.Status.State != taskCompleted || outputOf(first) != "first answer" || first.ContextID == "" {
		t.Fatalf("first task = %+v, want completed with artifact \"first answer\" and a context", first)
	}
	if len(first.History) != 2 || first.History[0].Role != roleA2AUser || first.History[1].Role != roleA2AAgent {
		t.Errorf("first task history = %+v, want the question and the answer", first.History)
	}
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":7,"method":"SendStreamingMessage","params":%s}`, userMessage("second question", fmt.Sprintf(`"contextId":%q`, first.ContextID)))
	resp := at.a2aStream(t, body)
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("SendStreamingMessage Content-Type = %q, want text/event-stream", ct)
	}
	var kinds []string
	var taskID, final, streamed string
	readA2AStream(t, resp.Body, func(ev a2aStreamResponse) {
		switch {
		case ev.Task != nil:
			kinds, taskID = append(kinds, "task"), ev.Task.ID
			if ev.Task.ContextID != first.ContextID {
				t.Errorf("second task context = %s, want %s", ev.Task.ContextID, first.ContextID)
			}
		case ev.ArtifactUpdate != nil && ev.ArtifactUpdate.LastChunk:
			kinds, final = append(kinds, "artifact.last"), *ev.ArtifactUpdate.Artifact.Parts[0].Text
		case ev.ArtifactUpdate != nil:
			kinds, streamed = append(kinds, "artifact"), streamed+*ev.ArtifactUpdate.Artifact.Parts[0].Text
		case ev.StatusUpdate != nil:
			kinds = append(kinds, ev.StatusUpdate.Status.State)
		}
	})
	if len(kinds) < 3 || kinds[0] != "task" || kinds[len(kinds)-1] != taskCompleted || kinds[len(kinds)-2] != "artifact.last" {
		t.Errorf("stream = %v, want the task first, then updates, the last artifact and COMPLETED last", kinds)
	}
	if streamed != "second answer streamed" || final != "second answer streamed" {
		t.Errorf("streamed text %q, final artifact %q, want \"second answer streamed\" both", streamed, final)
	}
	if v := at.runs.get(taskID).view(); v.ConversationID != first.ContextID || v.Output != final {
		t.Errorf("run %s = conversation %s output %q, want the stream's", taskID, v.ConversationID, v.Output)
	}
	got := a2aTaskOf(t, at.a2aCall(t, "", "GetTask", fmt.Sprintf(`{"id":%q,"historyLength":1}`, taskID)))
	if len(got.History) != 1 || *got.History[0].Parts[0].Text != final {
		t.Errorf("GetTask historyLength 1 = %+v, want the last answer only", got.History)
	}
}

func TestA2AApproval(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, answer string
		wantResult   string
	}{
		{name: "text approve", answer: `[{"text":"approve"}]`, wantResult: "result: hello"},
		{name: "data deny", answer: `[{"data":{"approve":false,"reason":"not today"}}]`, wantResult: "not today"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeServerConfig(t, "normal")
			cfg.Approval = approvalAlways
			f := newFakeModel(t, providerOpenAI, echoFindTurn, echoCallTurn, echoResultTurn)
			at := newAPITest(t, f, nil, cfg)
			waiting := a2aTaskOf(t, at.a2aCall(t, "", "SendMessage", userMessage("echo hello", "")))
			if waiting.Status.State != taskInputRequired || waiting.Status.Message == nil || !strings.Contains(*waiting.Status.Message.Parts[0].Text, "approve") {
				t.Fatalf("task = %+v, want input required saying how to approve", waiting.Status)
			}
			if v := at.runs.get(waiting.ID).view(); v.Status != runWaitingApproval {
				t.Fatalf("run status = %s, want %s", v.Status, runWaitingApproval)
			}
			params := fmt.Sprintf(`{"message":{"messageId":"m2","role":"ROLE_USER","taskId":%q,"parts":%s}}`, waiting.ID, tt.answer)
			done := a2aTaskOf(t, at.a2aCall(t, "", "SendMessage", params))
			if done.ID != waiting.ID || done.Status.State != taskCompleted || !strings.Contains(outputOf(done), tt.wantResult) {
				t.Errorf("answered task = %s %s %q, want %s completed containing %q", done.ID, done.Status.State, outputOf(done), waiting.ID, tt.wantResult)
			}
		})
	}
}

func TestA2ACancel(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Hang: true})
	at := newAPITest(t, f, nil)
	task := a2aTaskOf(t, at.a2aCall(t, "", "SendMessage", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"hang"}]},"configuration":{"returnImmediately":true}}`))
	if a2aTerminal(task.Status.State) {
		t.Fatalf("task state = %s, want not ended (returnImmediately)", task.Status.State)
	}
	waitUntil(t, "the run calls the model", func() bool { return len(f.requests()) == 1 })
	canceled := a2aTaskOf(t, at.a2aCall(t, "", "CancelTask", fmt.Sprintf(`{"id":%q}`, task.ID)))
	if canceled.Status.State != taskCanceled {
		t.Errorf("CancelTask = %s, want %s", canceled.Status.State, taskCanceled)
	}
	if v := waitRun(t, at.runs.get(task.ID)); v.Status != runCancelled {
		t.Errorf("run status = %s, want cancelled", v.Status)
	}
	rep := at.a2aCall(t, "", "CancelTask", fmt.Sprintf(`{"id":%q}`, task.ID))
	if rep.Error == nil || rep.Error.Code != a2aTaskNotCancelable {
		t.Errorf("second CancelTask = %+v, want TaskNotCancelable", rep.Error)
	}
}

// A pushed is one push notification a receiver got.
type pushed struct {
	header http.Header
	body   []byte
}

func TestA2APush(t *testing.T) {
	t.Parallel()
	cfg := fakeServerConfig(t, "normal")
	cfg.Approval = approvalAlways
	f := newFakeModel(t, providerOpenAI, echoFindTurn, echoCallTurn, fakeTurn{Text: "echoed"})
	keys := []authKey{testKey("ops", "ops-token", scopeAdmin), testKey("alice", "alice-token", scopeRunsWrite)}
	at := newAPITest(t, f, keys, cfg)
	const secret = "a2a-push-secret-0123456789"
	at.runs.setWebhooks(webhookSettings{Secret: secret})
	got := make(chan pushed, 10)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- pushed{header: r.Header.Clone(), body: body}
	}))
	t.Cleanup(receiver.Close)
	// receive returns the task of the next push, checking its headers.
	receive := func() a2aTask {
		t.Helper()
		select {
		case p := <-got:
			sig := p.header.Get(signatureHeader)
			ts, _, _ := strings.Cut(strings.TrimPrefix(sig, "t="), ",")
			sec, _ := strconv.ParseInt(ts, 10, 64)
			if sig != signWebhook(secret, time.Unix(sec, 0), p.body) {
				t.Errorf("push %s: Harness-Signature %q does not sign the body", p.body, sig)
			}
			if p.header.Get(a2aTokenHeader) != "push-token" || p.header.Get("Authorization") != "Bearer push-credentials" {
				t.Errorf("push headers = %v, want the config's token and authentication", p.header)
			}
			var resp a2aStreamResponse
			if err := json.Unmarshal(p.body, &resp); err != nil || resp.Task == nil {
				t.Fatalf("push = %s (%v), want {\"task\"}", p.body, err)
			}
			return *resp.Task
		case <-t.Context().Done():
			t.Fatal("no push")
		}
		return a2aTask{}
	}
	// next returns the next push in state want, past those of the task
	// working (which a later state may supersede before it goes out).
	next := func(want string) a2aTask {
		t.Helper()
		for {
			if task := receive(); task.Status.State == want {
				return task
			} else if task.Status.State != taskWorking {
				t.Fatalf("push in state %s, want %s", task.Status.State, want)
			}
		}
	}
	alice, ops := "Bearer alice-token", "Bearer ops-token"
	task := a2aTaskOf(t, at.a2aCall(t, alice, "SendMessage", userMessage("echo hello", "")))
	if task.Status.State != taskInputRequired {
		t.Fatalf("task state = %s, want input required", task.Status.State)
	}
	rep := at.a2aCall(t, alice, "CreateTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"url":"http://169.254.169.254/hook"}`, task.ID))
	if rep.Error == nil || rep.Error.Code != codeInvalidParams || !strings.Contains(rep.Error.Message, "connect_mcp checks") {
		t.Errorf("alice's push to a metadata address = %+v, want refused naming the connect_mcp checks", rep.Error)
	}
	rep = at.a2aCall(t, ops, "CreateTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"url":%q,"token":"push-token","authentication":{"scheme":"Bearer","credentials":"push-credentials"}}`, task.ID, receiver.URL+"/hook"))
	var created a2aPushConfig
	if rep.Error != nil || json.Unmarshal(rep.Result, &created) != nil || created.ID == "" || created.Token != "" || created.Authentication.Credentials != "" {
		t.Fatalf("CreateTaskPushNotificationConfig = %s %+v, want the config with an id and no secrets", rep.Result, rep.Error)
	}
	if pushedTask := next(taskInputRequired); pushedTask.ID != task.ID {
		t.Errorf("pushed task %s, want %s", pushedTask.ID, task.ID)
	}
	rep = at.a2aCall(t, alice, "ListTaskPushNotificationConfigs", fmt.Sprintf(`{"taskId":%q}`, task.ID))
	if !strings.Contains(string(rep.Result), created.ID) || strings.Contains(string(rep.Result), "push-credentials") {
		t.Errorf("ListTaskPushNotificationConfigs = %s %+v, want the config without its credentials", rep.Result, rep.Error)
	}
	rep = at.a2aCall(t, alice, "GetTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"id":%q}`, task.ID, created.ID))
	if rep.Error != nil || !strings.Contains(string(rep.Result), receiver.URL) {
		t.Errorf("GetTaskPushNotificationConfig = %s %+v, want the config", rep.Result, rep.Error)
	}
	a2aTaskOf(t, at.a2aCall(t, alice, "SendMessage", userMessage("approve", fmt.Sprintf(`"taskId":%q`, task.ID))))
	if done := next(taskCompleted); outputOf(done) != "echoed" {
		t.Errorf("pushed final task output %q, want echoed", outputOf(done))
	}
	if rep := at.a2aCall(t, alice, "ListTaskPushNotificationConfigs", fmt.Sprintf(`{"taskId":%q}`, task.ID)); strings.Contains(string(rep.Result), created.ID) {
		t.Errorf("List after the task ended = %s, want no config (a config lasts until its task ends)", rep.Result)
	}
	for range 2 { // idempotent
		if rep := at.a2aCall(t, alice, "DeleteTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"id":%q}`, task.ID, created.ID)); rep.Error != nil {
			t.Errorf("DeleteTaskPushNotificationConfig = %+v", rep.Error)
		}
	}
	// A config of an ended task gets its end at once.
	rep = at.a2aCall(t, ops, "CreateTaskPushNotificationConfig", fmt.Sprintf(`{"taskId":%q,"url":%q,"token":"push-token","authentication":{"scheme":"Bearer","credentials":"push-credentials"}}`, task.ID, receiver.URL+"/late"))
	if rep.Error != nil {
		t.Fatalf("CreateTaskPushNotificationConfig on an ended task = %+v", rep.Error)
	}
	if late := receive(); late.Status.State != taskCompleted {
		t.Errorf("push to a config of an ended task = %s, want %s", late.Status.State, taskCompleted)
	}
}

func TestA2AQuestion(t *testing.T) {
	t.Parallel()
	at := newInputAPITest(t, fakeTurn{ToolCalls: calls(elicitTool, `{}`)}, answerWithResults)
	waiting := a2aTaskOf(t, at.a2aCall(t, "", "SendMessage", userMessage("ask me", "")))
	if waiting.Status.State != taskInputRequired || waiting.Status.Message == nil || len(waiting.Status.Message.Parts) != 2 ||
		!strings.Contains(string(waiting.Status.Message.Parts[1].Data), `"input_request"`) {
		t.Fatalf("task status = %+v, want input required carrying the question", waiting.Status)
	}
	answer := func(parts string) a2aReply {
		return at.a2aCall(t, "", "SendMessage", fmt.Sprintf(`{"message":{"messageId":"m2","role":"ROLE_USER","taskId":%q,"parts":%s}}`, waiting.ID, parts))
	}
	for _, tt := range []struct{ parts, want string }{
		{`[{"data":{"name":"Ada","integer":500}}]`, "content.integer"},
		{`[{"text":"approve"}]`, `does not answer the question`},
	} {
		if rep := answer(tt.parts); rep.Error == nil || rep.Error.Code != codeInvalidParams || !strings.Contains(rep.Error.Message, tt.want) {
			t.Errorf("answer %s = %+v, want invalid params naming %s", tt.parts, rep.Error, tt.want)
		}
	}
	done := a2aTaskOf(t, answer(`[{"data":{"name":"Ada Lovelace","check":true}}]`))
	if done.Status.State != taskCompleted || !strings.Contains(outputOf(done), "Name: Ada Lovelace") {
		t.Errorf("answered task = %s %q, want completed with the answer", done.Status.State, outputOf(done))
	}
}

func TestA2ARedacts(t *testing.T) {
	t.Parallel()
	const secret = "a2a-secret-value-7f3c91"
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "the key is " + secret}, fakeTurn{Chunks: []string{"again: ", secret}})
	at := newAPITest(t, f, nil)
	at.runs.env.secrets.add(secret)
	resp, data := at.do(t, http.MethodPost, "/a2a", "", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":`+userMessage("key?", "")+`}`)
	if strings.Contains(string(data), secret) || !strings.Contains(string(data), "the key is [redacted]") {
		t.Errorf("SendMessage = %d %s, want the secret redacted", resp.StatusCode, data)
	}
	resp, data = at.do(t, http.MethodPost, "/a2a", "", `{"jsonrpc":"2.0","id":1,"method":"SendStreamingMessage","params":`+userMessage("key?", "")+`}`)
	if strings.Contains(string(data), secret) || !strings.Contains(string(data), "[redacted]") {
		t.Errorf("SendStreamingMessage = %d %s, want the secret redacted", resp.StatusCode, data)
	}
}

// A task subscribed to in the middle of a model step streams the step's
// text from its start: what was streamed before the subscription, then
// the rest.
func TestA2ASubscribeMidStep(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := newFakeModel(t, providerOpenAI, fakeTurn{Chunks: []string{"half ", "way ", "there"}, OnChunk: func(i int) {
		if i == 2 {
			<-release
		}
	}})
	at := newAPITest(t, f, nil)
	task := a2aTaskOf(t, at.a2aCall(t, "", "SendMessage", `{"message":{"messageId":"m","role":"ROLE_USER","parts":[{"text":"go"}]},"configuration":{"returnImmediately":true}}`))
	run := at.runs.get(task.ID)
	waitUntil(t, "the run streams its first two chunks", func() bool {
		run.mu.Lock()
		defer run.mu.Unlock()
		return run.live.last >= 2
	})
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"SubscribeToTask","params":{"id":%q}}`, task.ID)
	resp := at.a2aStream(t, body)
	var streamed, final string
	first := true
	readA2AStream(t, resp.Body, func(ev a2aStreamResponse) {
		if first {
			first = false
			close(release) // the task is out: the step may go on
		}
		switch {
		case ev.ArtifactUpdate != nil && ev.ArtifactUpdate.LastChunk:
			final = *ev.ArtifactUpdate.Artifact.Parts[0].Text
		case ev.ArtifactUpdate != nil:
			streamed += *ev.ArtifactUpdate.Artifact.Parts[0].Text
		}
	})
	if streamed != "half way there" || final != "half way there" {
		t.Errorf("streamed %q, final artifact %q, want \"half way there\" both: the text before the subscription too", streamed, final)
	}
}
