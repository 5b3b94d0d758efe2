package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// This file tests conversations through the API with the scripted
// models: continuing runs, one run at a time, closing the tool calls of a
// cancelled run, trimming, context-length errors, and restarts.

// postInConversation posts a run request and returns the ids of the run
// and of its conversation, failing the test unless the answer is a 202
// carrying both.
func postInConversation(t *testing.T, at *apiTest, auth, body string) (string, string) {
	t.Helper()
	resp, data := at.do(t, http.MethodPost, "/v1/runs", auth, body)
	var out struct {
		RunID          string `json:"run_id"`
		ConversationID string `json:"conversation_id"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(data, &out) != nil || out.RunID == "" || !strings.HasPrefix(out.ConversationID, "conv_") {
		t.Fatalf("POST /v1/runs %s = %d %s, want 202 with run_id and conversation_id", body, resp.StatusCode, data)
	}
	return out.RunID, out.ConversationID
}

// waitReadyz waits until the API at at answers GET /readyz with 200:
// every global server is ready.
func waitReadyz(t *testing.T, at *apiTest) {
	t.Helper()
	waitUntil(t, "GET /readyz answers 200", func() bool {
		resp, _ := at.do(t, http.MethodGet, "/readyz", "", "")
		return resp.StatusCode == http.StatusOK
	})
}

// waitRunID waits for run id of at's manager to end and returns its view.
func waitRunID(t *testing.T, at *apiTest, id string) runView {
	t.Helper()
	r := at.runs.get(id)
	if r == nil {
		t.Fatalf("run %s is not kept", id)
	}
	return waitRun(t, r)
}

// checks combines request checks: the first error wins.
func checks(fs ...func(fakeRequest) error) func(fakeRequest) error {
	return func(req fakeRequest) error {
		for _, f := range fs {
			if err := f(req); err != nil {
				return err
			}
		}
		return nil
	}
}

// systemIs checks the request's system prompt.
func systemIs(want string) func(fakeRequest) error {
	return func(req fakeRequest) error {
		if req.System != want {
			return fmt.Errorf("system prompt = %q, want %q", req.System, want)
		}
		return nil
	}
}

// conversationIs checks the roles of the request's messages, and the
// contents of its user messages in order.
func conversationIs(roles []string, prompts ...string) func(fakeRequest) error {
	return func(req fakeRequest) error {
		var got, users []string
		for _, m := range req.Messages {
			got = append(got, m.Role)
			if m.Role == roleUser {
				users = append(users, m.Content)
			}
		}
		if !slices.Equal(got, roles) || !slices.Equal(users, prompts) {
			return fmt.Errorf("messages = %v with prompts %q, want %v with %q", got, users, roles, prompts)
		}
		return nil
	}
}

const (
	u  = roleUser
	as = roleAssistant
	tl = roleTool
)

func TestConversationThreeRuns(t *testing.T) {
	t.Parallel()
	const code = "the vault code is 4711"
	f := newFakeModel(t, providerOpenAI,
		// Run 1 fetches the code with a tool.
		fakeTurn{Check: systemIs("be brief"), ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"`+code+`"}`)}},
		fakeTurn{Text: "I looked it up."},
		// Run 2 inherits the system prompt and the activated tool.
		fakeTurn{Check: checks(systemIs("be brief"), offers("find_tool", "mcp_fake_echo"),
			conversationIs([]string{u, as, tl, as, u}, "look up the code", "thanks")), Text: "You're welcome."},
		// Run 3 answers from run 1's tool result.
		fakeTurn{Check: checks(systemIs("answer in French"), conversationIs([]string{u, as, tl, as, u, as, u}, "look up the code", "thanks", "what was it?")),
			Reply: func(req fakeRequest) fakeTurn {
				return fakeTurn{Text: "C'était: " + req.Messages[2].Content}
			}},
	)
	at := newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
	r1, conv := postInConversation(t, at, "", `{"prompt":"look up the code","system_prompt":"be brief"}`)
	if v := waitRunID(t, at, r1); v.Status != runCompleted || v.ConversationID != conv {
		t.Fatalf("run 1 = %s %q in conversation %q, want completed in %s", v.Status, v.Error, v.ConversationID, conv)
	}
	r2, conv2 := postInConversation(t, at, "", `{"prompt":"thanks","conversation_id":"`+conv+`"}`)
	if v := waitRunID(t, at, r2); v.Status != runCompleted || conv2 != conv {
		t.Fatalf("run 2 = %s %q in conversation %q, want completed in %s", v.Status, v.Error, conv2, conv)
	}
	r3, _ := postInConversation(t, at, "", `{"prompt":"what was it?","conversation_id":"`+conv+`","system_prompt":"answer in French"}`)
	v := waitRunID(t, at, r3)
	if v.Status != runCompleted || !strings.Contains(v.Output, code) {
		t.Fatalf("run 3 = %s %q output %q, want completed quoting %q", v.Status, v.Error, v.Output, code)
	}

	var got struct {
		conversationView
		Messages []struct {
			RunID string `json:"run_id"`
			transcriptMessage
		} `json:"messages"`
	}
	if err := json.Unmarshal(getOK(t, at, "/v1/conversations/"+conv), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != conv || !slices.Equal(got.Runs, []string{r1, r2, r3}) || got.Status != runCompleted || got.UpdatedAt.Before(got.CreatedAt) {
		t.Errorf("GET /v1/conversations/%s = %+v, want runs %v completed", conv, got.conversationView, []string{r1, r2, r3})
	}
	var roles, runs []string
	for _, m := range got.Messages {
		if m.Role != roleSystem {
			roles = append(roles, m.Role)
		}
		if len(runs) == 0 || runs[len(runs)-1] != m.RunID {
			runs = append(runs, m.RunID)
		}
	}
	if want := []string{u, as, tl, as, u, as, u, as}; !slices.Equal(roles, want) || !slices.Equal(runs, []string{r1, r2, r3}) {
		t.Errorf("conversation messages = %v of runs %v, want %v of %v", roles, runs, want, []string{r1, r2, r3})
	}
	var list struct {
		Conversations []conversationView `json:"conversations"`
	}
	if err := json.Unmarshal(getOK(t, at, "/v1/conversations"), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Conversations) != 1 || list.Conversations[0].ID != conv || len(list.Conversations[0].Messages) != 0 {
		t.Errorf("GET /v1/conversations = %+v, want %s alone, without messages", list.Conversations, conv)
	}
}

func TestConversationBusy(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{Hang: true},
		// The cancelled run left its prompt without an answer.
		fakeTurn{Check: conversationIs([]string{u, u}, "first", "second"), Text: "done"},
	)
	at := newAPITest(t, f, nil)
	r1, conv := postInConversation(t, at, "", `{"prompt":"first"}`)
	waitUntil(t, "run 1 calls the model", func() bool { return len(f.requests()) == 1 })
	for _, tc := range []struct{ method, path, body string }{
		{http.MethodPost, "/v1/runs", `{"prompt":"second","conversation_id":"` + conv + `"}`},
		{http.MethodDelete, "/v1/conversations/" + conv, ""},
	} {
		resp, data := at.do(t, tc.method, tc.path, "", tc.body)
		e, err := decodeAPIError(data)
		if resp.StatusCode != http.StatusConflict || err != nil || e.Error.Code != "conversation_busy" || !strings.Contains(e.Error.Message, r1) {
			t.Errorf("%s %s while run 1 runs = %d %s, want 409 conversation_busy naming %s", tc.method, tc.path, resp.StatusCode, data, r1)
		}
	}
	if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r1+"/cancel", "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel run 1 = %d %s", resp.StatusCode, data)
	}
	r2, _ := postInConversation(t, at, "", `{"prompt":"second","conversation_id":"`+conv+`"}`)
	if v := waitRunID(t, at, r2); v.Status != runCompleted {
		t.Fatalf("run 2 after run 1 was cancelled = %s %q, want completed", v.Status, v.Error)
	}
	resp, data := at.do(t, http.MethodPost, "/v1/runs", "", `{"prompt":"x","conversation_id":"conv_unknown"}`)
	if e, _ := decodeAPIError(data); resp.StatusCode != http.StatusNotFound || e.Error.Code != "not_found" {
		t.Errorf("POST /v1/runs with an unknown conversation_id = %d %s, want 404", resp.StatusCode, data)
	}
}

// TestConversationAfterCancelledToolCall cancels a run while its tool call
// hangs; the next run's transcript must be one both real APIs accept (the
// fakes refuse unanswered tool calls as they do).
func TestConversationAfterCancelledToolCall(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire,
				fakeTurn{ToolCalls: []toolCall{call("mcp_fake_hang", `{}`)}},
				fakeTurn{Check: checks(conversationIs([]string{u, as, tl, u}, "wait for it", "go on"), func(req fakeRequest) error {
					if res := req.Messages[2]; res.ToolCallID != "call_mcp_fake_hang" || !res.IsError || !strings.HasPrefix(res.Content, closedCancelled) {
						return fmt.Errorf("result of the cancelled call = %+v, want an error answering call_mcp_fake_hang", res)
					}
					return nil
				}), Text: "going on"},
			)
			at := newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
			r1, conv := postInConversation(t, at, "", `{"prompt":"wait for it"}`)
			waitEvent(t, at.runs.get(r1), evToolCallStarted)
			if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r1+"/cancel", "", ""); resp.StatusCode != http.StatusOK {
				t.Fatalf("cancel run 1 = %d %s", resp.StatusCode, data)
			}
			r2, _ := postInConversation(t, at, "", `{"prompt":"go on","conversation_id":"`+conv+`"}`)
			if v := waitRunID(t, at, r2); v.Status != runCompleted {
				t.Fatalf("run 2 after a cancelled tool call = %s %q, want completed", v.Status, v.Error)
			}
		})
	}
}

func TestValidTranscript(t *testing.T) {
	t.Parallel()
	callA, callB := call("a", `{}`), call("b", `{}`)
	answer := chatMessage{Role: roleAssistant, ToolCalls: []toolCall{callA, callB}}
	result := func(tc toolCall) chatMessage { return chatMessage{Role: roleTool, ToolCallID: tc.ID, Content: "ok"} }
	prompt := chatMessage{Role: roleUser, Content: "p"}
	for _, tc := range []struct {
		name  string
		msgs  []chatMessage
		valid bool
		want  []string // the roles after
	}{
		{"answered", []chatMessage{prompt, answer, result(callA), result(callB), prompt}, true, []string{u, as, tl, tl, u}},
		{"unanswered at the end", []chatMessage{prompt, answer}, false, []string{u, as, tl, tl}},
		{"half answered before a prompt", []chatMessage{prompt, answer, result(callB), prompt}, false, []string{u, as, tl, tl, u}},
		{"stray result", []chatMessage{prompt, result(callA), prompt}, false, []string{u, u}},
		{"duplicate result", []chatMessage{prompt, answer, result(callA), result(callA), result(callB)}, false, []string{u, as, tl, tl}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fixed := validTranscript(tc.msgs)
			var roles []string
			for _, m := range fixed {
				roles = append(roles, m.Role)
			}
			if !slices.Equal(roles, tc.want) {
				t.Errorf("validTranscript roles = %v, want %v", roles, tc.want)
			}
			for _, wire := range []string{providerOpenAI, providerAnthropic} {
				if msg := unansweredToolCalls(wire, modelRequest{Messages: tc.msgs}); (msg == "") != tc.valid {
					t.Errorf("fake %s on the transcript as kept = %q, want valid %v", wire, msg, tc.valid)
				}
				if msg := unansweredToolCalls(wire, modelRequest{Messages: fixed}); msg != "" {
					t.Errorf("fake %s on validTranscript = %q, want accepted", wire, msg)
				}
			}
		})
	}
}

func TestTrimConversation(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 1000)
	callA := call("a", `{}`)
	turn := func(prompt, result, answer string) []chatMessage {
		return []chatMessage{{Role: roleUser, Content: prompt}, {Role: roleAssistant, ToolCalls: []toolCall{callA}},
			{Role: roleTool, ToolCallID: callA.ID, Content: result}, {Role: roleAssistant, Content: answer}}
	}
	history := slices.Concat(turn("p1", big, "a1"), turn("p2", big, "a2"), turn("p3", "small", big))
	for _, tc := range []struct {
		name              string
		limit             int
		results, turns    int
		prompts           []string
		wantUntouchedSize bool
	}{
		{name: "fits", limit: 1 << 20, prompts: []string{"p1", "p2", "p3"}, wantUntouchedSize: true},
		{name: "oldest result first", limit: 2300, results: 1, prompts: []string{"p1", "p2", "p3"}},
		{name: "every result", limit: 1300, results: 2, prompts: []string{"p1", "p2", "p3"}},
		{name: "then turns, first prompt kept", limit: 900, results: 2, turns: 3, prompts: []string{"p1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, trim := trimConversation(history, 10, tc.limit)
			var prompts []string
			for _, m := range got {
				if m.Role == roleUser {
					prompts = append(prompts, m.Content)
				}
			}
			if trim.ToolResults != tc.results || trim.Turns != tc.turns || !slices.Equal(prompts, tc.prompts) {
				t.Errorf("trimConversation(limit %d) = %d results, %d turns, prompts %v; want %d, %d, %v",
					tc.limit, trim.ToolResults, trim.Turns, prompts, tc.results, tc.turns, tc.prompts)
			}
			if tc.wantUntouchedSize != (trim.BytesAfter == trim.BytesBefore) {
				t.Errorf("bytes %d → %d", trim.BytesBefore, trim.BytesAfter)
			}
			if msg := unansweredToolCalls(providerAnthropic, modelRequest{Messages: got}); msg != "" {
				t.Errorf("trimmed conversation refused: %s", msg)
			}
			if len(history[2].Content) != len(big) {
				t.Errorf("trimConversation changed its input")
			}
		})
	}
}

func TestConversationTrimmedAtLimit(t *testing.T) {
	t.Parallel()
	big := fakeServerConfig(t, "normal")
	big.Env[faultTagEnv] = "1" // offers the tool "big"
	bigCall := call("mcp_fake_big", `{"size":4000}`)
	note := fmt.Sprintf(trimmedResultNote, 4000)
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{bigCall}},
		fakeTurn{Text: "got it"},
		// Run 2: the big result became a note.
		fakeTurn{Check: checks(conversationIs([]string{u, as, tl, as, u}, "fetch", "again"), func(req fakeRequest) error {
			if req.Messages[2].Content != note {
				return fmt.Errorf("trimmed result = %.80q, want %q", req.Messages[2].Content, note)
			}
			return nil
		}), Text: strings.Repeat("y", 3000)},
		// Run 3: whole turns dropped, the first prompt kept.
		fakeTurn{Check: conversationIs([]string{u, u}, "fetch", "last"), Text: "ok"},
	)
	reg := newRegistry([]serverConfig{big}, registryOptions{Client: clientOptions{}})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.Limits = runLimits{MaxConversationBytes: 3000}
	at := serveRuns(t, newRunsWith(t, opts))

	r1, conv := postInConversation(t, at, "", `{"prompt":"fetch"}`)
	waitRunID(t, at, r1)
	trimmed := func(prompt string) map[string]any {
		id, _ := postInConversation(t, at, "", `{"prompt":"`+prompt+`","conversation_id":"`+conv+`"}`)
		if v := waitRunID(t, at, id); v.Status != runCompleted {
			t.Fatalf("run %q = %s %q, want completed", prompt, v.Status, v.Error)
		}
		evs := eventsOf(at.runs.get(id), evConversationTrimmed)
		if len(evs) != 1 {
			t.Fatalf("run %q: %d conversation.trimmed events, want 1", prompt, len(evs))
		}
		return evs[0]
	}
	if ev := trimmed("again"); fmt.Sprintf("%v %v %v %v", ev["tool_results_trimmed"], ev["turns_dropped"], ev["conversation_id"], ev["max_conversation_bytes"]) != "1 0 "+conv+" 3000" {
		t.Errorf("run 2 conversation.trimmed = %v, want 1 tool result, no turn", ev)
	}
	if ev := trimmed("last"); fmt.Sprint(ev["turns_dropped"], ev["messages_dropped"]) != "2 5" {
		t.Errorf("run 3 conversation.trimmed = %v, want 2 turns (5 messages)", ev)
	}
}

func TestConversationContextLengthError(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Status: http.StatusBadRequest,
		Text: "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens."})
	at := newAPITest(t, f, nil)
	id, conv := postInConversation(t, at, "", `{"prompt":"a long story"}`)
	v := waitRunID(t, at, id)
	if v.Status != runFailed || !strings.Contains(v.Error, conv) || !strings.Contains(v.Error, "max_conversation_bytes") {
		t.Errorf("run = %s %q, want failed naming %s and max_conversation_bytes", v.Status, v.Error, conv)
	}
}

// TestConversationSurvivesRestart stops a run manager and starts another
// on its directory: the conversation, its owner and its messages are
// back, and a run continues it.
func TestConversationSurvivesRestart(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{Text: "first answer"},
		fakeTurn{Check: conversationIs([]string{u, as, u}, "one", "two"), Text: "second answer"},
	)
	dir := t.TempDir()
	m := newStoredRuns(t, f, dir, nil)
	r1, err := m.start(runRequest{Prompt: "one", Owner: "alice"}, true)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, r1)
	conv := r1.conversationID()
	stopRuns(t, m)

	m = newStoredRuns(t, f, dir, nil)
	c := m.conversation(conv)
	if c == nil || c.owner != "alice" || len(m.conversationRuns(c, nil)) != 1 {
		t.Fatalf("after the restart conversation %s = %+v, want alice's with one run", conv, c)
	}
	r2, err := m.start(runRequest{Prompt: "two", ConversationID: conv, Owner: "alice"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := waitRun(t, r2); v.Status != runCompleted || v.ConversationID != conv {
		t.Fatalf("run 2 after the restart = %s %q in %q, want completed in %s", v.Status, v.Error, v.ConversationID, conv)
	}
	if err := m.deleteConversation(conv, nil); err != nil {
		t.Fatal(err)
	}
	left, _ := os.ReadDir(dir)
	for _, e := range left {
		if e.Name() != "lock" && !strings.HasPrefix(e.Name(), logFilePrefix) {
			t.Errorf("file left after the conversation was deleted: %s", e.Name())
		}
	}
	if len(runLinesOnDisk(t, dir, r2.id)) > 0 || bytes.Contains(logOnDisk(t, dir), []byte(conv)) {
		t.Errorf("the runs log after the conversation was deleted holds lines of its runs")
	}
}

// TestConversationRetentionKeepsWhole checks that retention drops a
// conversation's runs together, by its last run.
func TestConversationRetentionKeepsWhole(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "a"}, fakeTurn{Text: "b"}, fakeTurn{Text: "c"}, fakeTurn{Text: "d"})
	m := newStoredRuns(t, f, t.TempDir(), &retention{MaxRuns: 3})
	a := startRun(t, m, runRequest{Prompt: "a"})
	waitRun(t, a)
	alone := startRun(t, m, runRequest{Prompt: "alone"})
	waitRun(t, alone)
	b := startRun(t, m, runRequest{Prompt: "b", ConversationID: a.conversationID()})
	waitRun(t, b)
	// Four runs kept: the oldest entry, by last activity, is "alone".
	c := startRun(t, m, runRequest{Prompt: "c", ConversationID: a.conversationID()})
	waitRun(t, c)
	waitUntil(t, "retention drops a run", func() bool { return len(m.list()) == 3 })
	if m.get(alone.id) != nil || m.get(a.id) == nil || len(m.conversationRuns(m.conversation(a.conversationID()), nil)) != 3 {
		t.Errorf("kept %d runs; alone kept: %v; the conversation's first run kept: %v; want the conversation whole", len(m.list()), m.get(alone.id) != nil, m.get(a.id) != nil)
	}
	if m.conversation(alone.conversationID()) != nil {
		t.Errorf("the dropped run's conversation is still listed")
	}
}

// TestConversationKill9 kills the real harnessd with SIGKILL while a run
// of a conversation waits on a tool call, restarts it on the same home,
// and continues the conversation: the interrupted call is closed with a
// result saying so, and the tool result of the first run is still there.
func TestConversationKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	const code = "the vault code is 4711"
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"`+code+`"}`)}},
		fakeTurn{Text: "looked it up"},
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_hang", `{}`)}},
		fakeTurn{Check: checks(conversationIs([]string{u, as, tl, as, u, as, tl, u}, "look it up", "now wait", "what was it?"), func(req fakeRequest) error {
			if got := req.Messages[2].Content; got != code {
				return fmt.Errorf("run 1's tool result = %q, want %q", got, code)
			}
			if res := req.Messages[6]; res.ToolCallID != "call_mcp_fake_hang" || !res.IsError || res.Content != closedInterrupted {
				return fmt.Errorf("result of the interrupted call = %+v, want %q", res, closedInterrupted)
			}
			return nil
		}), Text: "it was 4711"},
	)
	bin := buildHarnessd(t)
	home, workspace, _ := fakeServerHome(t, "fake", "normal", "")
	env := fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model")
	first, at := serveHarnessd(t, bin, env, workspace)
	waitReadyz(t, at)

	r1, conv := postInConversation(t, at, "", `{"prompt":"look it up"}`)
	waitUntil(t, "run 1 completes", func() bool { return runStatus(t, at, r1) == runCompleted })
	r2, _ := postInConversation(t, at, "", `{"prompt":"now wait","conversation_id":"`+conv+`"}`)
	waitUntil(t, "run 2 calls the hanging tool", func() bool {
		msgs, _ := getMessages(t, at, r2)
		return len(msgs.Messages) > 0 && len(msgs.Messages[len(msgs.Messages)-1].ToolCalls) > 0
	})
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited

	_, at = serveHarnessd(t, bin, env, workspace)
	var v runView
	if err := json.Unmarshal(getOK(t, at, "/v1/runs/"+r2), &v); err != nil || v.Status != runFailed || v.Error != interruptedError || v.ConversationID != conv {
		t.Fatalf("run 2 after the restart = %+v (%v), want failed %q in %s", v, err, interruptedError, conv)
	}
	r3, _ := postInConversation(t, at, "", `{"prompt":"what was it?","conversation_id":"`+conv+`"}`)
	waitUntil(t, "run 3 ends", func() bool { return isTerminal(runStatus(t, at, r3)) })
	if err := json.Unmarshal(getOK(t, at, "/v1/runs/"+r3), &v); err != nil || v.Status != runCompleted || v.Output != "it was 4711" {
		t.Fatalf("run 3 after the restart = %s %q %q, want completed", v.Status, v.Error, v.Output)
	}
	var got conversationView
	if err := json.Unmarshal(getOK(t, at, "/v1/conversations/"+conv), &got); err != nil || !slices.Equal(got.Runs, []string{r1, r2, r3}) {
		t.Errorf("conversation after the restart = %+v (%v), want runs %v", got, err, []string{r1, r2, r3})
	}
}

// TestRunEndClosesOpenToolCalls ends runs whose last answer's tool calls
// have no result: the end records one for each, saying how the run ended.
func TestRunEndClosesOpenToolCalls(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status, errMsg, want string
	}{
		{runCancelled, "run cancelled", closedCancelled},
		{runFailed, "budget exceeded", fmt.Sprintf(closedFailed, "budget exceeded")},
	} {
		t.Run(tc.status, func(t *testing.T) {
			m := newTestRuns(t, newFakeModel(t, providerAnthropic))
			r, err := m.prepare(runRequest{Prompt: "p"}, true)
			if err != nil {
				t.Fatal(err)
			}
			answered, open := call("answered", `{}`), call("open", `{}`)
			r.record(0, []chatMessage{{Role: roleUser, Content: "p"}}, nil)
			r.record(1, []chatMessage{{Role: roleAssistant, ToolCalls: []toolCall{answered, open}}}, nil)
			r.record(1, []chatMessage{{Role: roleTool, ToolCallID: answered.ID, Content: "ok"}}, []toolCall{answered})
			r.finish(tc.status, "", tc.errMsg)
			raw, _, err := r.messages()
			if err != nil {
				t.Fatal(err)
			}
			var msgs []chatMessage
			var last transcriptMessage
			for _, line := range raw {
				if err := json.Unmarshal(line, &last); err != nil {
					t.Fatal(err)
				}
				msgs = append(msgs, last.chat())
			}
			if last.ToolCallID != open.ID || last.Name != "open" || !last.IsError || last.Content != tc.want || len(msgs) != 4 {
				t.Errorf("last of %d messages = %+v, want the open call closed with %q", len(msgs), last, tc.want)
			}
			if msg := unansweredToolCalls(providerAnthropic, modelRequest{Messages: msgs}); msg != "" {
				t.Errorf("transcript refused: %s", msg)
			}
		})
	}
}
