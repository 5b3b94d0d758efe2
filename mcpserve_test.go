package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// This file tests the MCP server at /mcp: harnessd's own MCP client
// against it at 2025-11-25 and 2026-07-28 (tools, a run that calls an MCP
// tool, progress, resources), one harnessd consuming another through a
// configured server entry, ownership and auth, and an approval answered
// through elicitation by a raw Streamable HTTP client.

// Tokens of the MCP server tests' keys.
const (
	mcpAliceToken = "alice-token-0123456789"
	mcpBobToken   = "bob-token-0123456789"
)

// newMCPTest serves the API with two keys of two tenants (alice, bob) over
// a fake model playing script, with the fake stdio server "fake" as a
// global server.
func newMCPTest(t *testing.T, script ...fakeTurn) *apiTest {
	t.Helper()
	at, _ := newMCPTestModel(t, script...)
	return at
}

// newMCPTestModel is newMCPTest, also returning the fake model.
func newMCPTestModel(t *testing.T, script ...fakeTurn) (*apiTest, *fakeModel) {
	t.Helper()
	f := newFakeModel(t, "openai", script...)
	keys := []authKey{testKey("alice", mcpAliceToken, scopeRunsWrite), testKey("bob", mcpBobToken, scopeRunsWrite)}
	return newAPITest(t, f, keys, fakeServerConfig(t, "normal")), f
}

// mcpClientConfig returns a server entry for at's /mcp as token's key,
// pinned to version ("" negotiates).
func mcpClientConfig(at *apiTest, name, token, version string) serverConfig {
	cfg := httpPeerConfig(name, transportHTTP, at.url+"/mcp")
	cfg.Headers = map[string]string{"Authorization": "Bearer " + token}
	cfg.ProtocolVersion = version
	return cfg
}

// TestMCPServeHarnessClient drives /mcp with harnessd's own MCP client at
// both kinds of revision: the tools are listed, run holds a run that calls
// an MCP tool and returns its output with the ids, progress arrives, the
// run is the REST API's (alice sees it, bob gets 404), and its resources
// read back.
func TestMCPServeHarnessClient(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			at := newMCPTest(t, findThenEcho()...)
			c, err := connect(t.Context(), mcpClientConfig(at, "harnessd", mcpAliceToken, version), clientOptions{Logger: discardLogger()})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer c.close()
			if got := c.protocolVersion(); got != version {
				t.Errorf("protocolVersion() = %q, want %q", got, version)
			}
			tools, err := c.listTools(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
			}
			want := []string{"run", "start_run", "get_run", "wait_run", "list_runs", "cancel_run", "decide_approval", "answer_input"}
			if !slices.Equal(names, want) {
				t.Errorf("tools = %v, want %v", names, want)
			}

			var mu sync.Mutex
			var notes []string
			ctx := withCallProgress(t.Context(), func(p progressParams) {
				mu.Lock()
				notes = append(notes, p.Message)
				mu.Unlock()
			})
			res, err := c.callTool(ctx, "run", json.RawMessage(`{"prompt":"echo hello"}`))
			if err != nil {
				t.Fatalf("call run: %v", err)
			}
			if res.IsError || len(res.Content) != 1 || res.Content[0].Text != "echoed hello" {
				t.Fatalf("run = %s, want the text echoed hello", res.Raw)
			}
			var ids struct {
				RunID          string `json:"run_id"`
				ConversationID string `json:"conversation_id"`
				Status         string `json:"status"`
			}
			if err := json.Unmarshal(res.StructuredContent, &ids); err != nil || ids.RunID == "" || ids.ConversationID == "" || ids.Status != runCompleted {
				t.Fatalf("structuredContent = %s (%v), want run_id, conversation_id and status completed", res.StructuredContent, err)
			}
			mu.Lock()
			if !slices.Contains(notes, "calling tool mcp_fake_echo") {
				t.Errorf("progress = %q, want a note of the echo call", notes)
			}
			mu.Unlock()

			for _, tc := range []struct {
				token string
				want  int
			}{{mcpAliceToken, http.StatusOK}, {mcpBobToken, http.StatusNotFound}} {
				if resp, data := at.do(t, "GET", "/v1/runs/"+ids.RunID, "Bearer "+tc.token, ""); resp.StatusCode != tc.want {
					t.Errorf("GET /v1/runs/%s as %s = %d %s, want %d", ids.RunID, tc.token, resp.StatusCode, data, tc.want)
				}
			}

			for _, uri := range []string{"harnessd://runs/" + ids.RunID, "harnessd://runs/" + ids.RunID + "/messages", "harnessd://conversations/" + ids.ConversationID} {
				read, err := c.readResource(t.Context(), uri)
				if err != nil {
					t.Fatalf("read %s: %v", uri, err)
				}
				if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, ids.RunID) {
					t.Errorf("read %s = %+v, want the run's JSON", uri, read.Contents)
				}
			}
			listed, err := c.listResources(t.Context())
			if err != nil || len(listed) != 1 || listed[0].URI != "harnessd://runs/"+ids.RunID {
				t.Errorf("resources/list = %+v (%v), want the one run", listed, err)
			}

			bob, err := connect(t.Context(), mcpClientConfig(at, "harnessd", mcpBobToken, version), clientOptions{Logger: discardLogger()})
			if err != nil {
				t.Fatal(err)
			}
			defer bob.close()
			for _, tool := range []string{"get_run", "wait_run", "cancel_run"} {
				res, err := bob.callTool(t.Context(), tool, json.RawMessage(`{"run_id":"`+ids.RunID+`"}`))
				if err != nil || !res.IsError || !strings.Contains(res.Content[0].Text, "not found") {
					t.Errorf("bob's %s of alice's run = %+v (%v), want an isError result saying not found", tool, res, err)
				}
			}
			if _, err := bob.readResource(t.Context(), "harnessd://runs/"+ids.RunID); err == nil || !strings.Contains(err.Error(), "not found") {
				t.Errorf("bob reads alice's run: err = %v, want not found", err)
			}
			if listed, err := bob.listResources(t.Context()); err != nil || len(listed) != 0 {
				t.Errorf("bob's resources/list = %+v (%v), want none", listed, err)
			}
		})
	}
}

// TestMCPServeHarnessConsumesHarness: one harnessd's run calls another's
// run tool through a configured HTTP server entry (at either revision);
// the inner run is the inner daemon's, seen by its key.
func TestMCPServeHarnessConsumesHarness(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28", ""} {
		t.Run("pin="+version, func(t *testing.T) {
			inner := newMCPTest(t, findThenEcho()...)
			outerModel := newFakeModel(t, "openai",
				fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"select:mcp_inner_run"}`)}},
				fakeTurn{ToolCalls: []toolCall{call("mcp_inner_run", `{"prompt":"echo hello"}`)}},
				fakeTurn{Reply: func(req fakeRequest) fakeTurn {
					res := req.toolResults()
					if len(res) != 1 {
						return fakeTurn{Text: fmt.Sprintf("unexpected results %+v", res)}
					}
					return fakeTurn{Text: "inner said: " + res[0].Content}
				}},
			)
			outer := newAPITest(t, outerModel, nil, mcpClientConfig(inner, "inner", mcpAliceToken, version))
			r := outer.startRun(t, `{"prompt":"delegate"}`)
			waitRun(t, r)
			if v := r.view(); v.Status != runCompleted || v.Output != "inner said: echoed hello" {
				t.Fatalf("outer run = %s %q (%s), want completed with the inner run's output", v.Status, v.Output, v.Error)
			}
			resp, data := inner.do(t, "GET", "/v1/runs", "Bearer "+mcpAliceToken, "")
			var list struct {
				Runs []runSummary `json:"runs"`
			}
			if err := json.Unmarshal(data, &list); err != nil || resp.StatusCode != http.StatusOK || len(list.Runs) != 1 || list.Runs[0].Owner != "alice" || list.Runs[0].Status != runCompleted {
				t.Errorf("inner GET /v1/runs as alice = %d %s, want alice's one completed run", resp.StatusCode, data)
			}
		})
	}
}

// An mcpRawClient speaks Streamable HTTP to /mcp by hand, for what
// harnessd's client does not do (elicitation by a host) and for the
// transport's own answers.
type mcpRawClient struct {
	at      *apiTest
	token   string
	session string
}

// post sends one message and returns the response, its body unread.
func (c *mcpRawClient) post(t *testing.T, msg string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, c.at.url+"/mcp", strings.NewReader(msg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set(headerSessionID, c.session)
	}
	resp, err := c.at.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// initialize opens a session declaring capabilities.
func (c *mcpRawClient) initialize(t *testing.T, capabilities string) {
	t.Helper()
	resp := c.post(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+capabilities+`,"clientInfo":{"name":"raw","version":"0"}}}`)
	data, _ := io.ReadAll(resp.Body)
	c.session = resp.Header.Get(headerSessionID)
	if resp.StatusCode != http.StatusOK || c.session == "" || !bytes.Contains(data, []byte(`"protocolVersion":"2025-11-25"`)) {
		t.Fatalf("initialize = %d %s (session %q), want 200 at 2025-11-25 with a session", resp.StatusCode, data, c.session)
	}
	if resp := c.post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized = %d, want 202", resp.StatusCode)
	}
}

// readSSE calls handle with every message of an SSE answer until handle
// returns true (or the stream ends).
func readSSE(t *testing.T, body io.Reader, handle func(wireMessage) bool) {
	t.Helper()
	sc := bufio.NewScanner(body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var msg wireMessage
		if err := json.Unmarshal([]byte(data), &msg); err != nil {
			t.Fatalf("SSE data %q: %v", data, err)
		}
		if handle(msg) {
			return
		}
	}
	t.Fatalf("SSE stream ended early: %v", sc.Err())
}

// TestMCPServeElicitation: a run needing approval, held by the run tool of
// a client that declared elicitation, asks the client with
// elicitation/create; the client's approval (or denial) decides the tool
// call, and the call's stream carries progress first.
func TestMCPServeElicitation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, answer, want string
	}{
		{"approve", `{"action":"accept","content":{"decision":"approve"}}`, `"text":"echoed hello"`},
		{"deny", `{"action":"decline"}`, "denied"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at := newMCPTest(t, findThenEcho()...)
			c := &mcpRawClient{at: at, token: mcpAliceToken}
			c.initialize(t, `{"elicitation":{}}`)
			resp := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run","arguments":{"prompt":"echo hello","approval":"always"},"_meta":{"progressToken":"p1"}}}`)
			if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
				t.Fatalf("tools/call run = %d %s, want 200 text/event-stream", resp.StatusCode, ct)
			}
			var elicited, progress bool
			readSSE(t, resp.Body, func(msg wireMessage) bool {
				switch {
				case msg.Method == "notifications/progress":
					progress = true
				case msg.Method == "elicitation/create":
					elicited = true
					if !strings.Contains(string(msg.Params), "mcp_fake_echo") {
						t.Errorf("elicitation params = %s, want the tool named", msg.Params)
					}
					answer := c.post(t, `{"jsonrpc":"2.0","id":`+string(msg.ID)+`,"result":`+tc.answer+`}`)
					if answer.StatusCode != http.StatusAccepted {
						t.Errorf("answer POST = %d, want 202", answer.StatusCode)
					}
				case string(msg.ID) == "1":
					if !strings.Contains(string(msg.Result), tc.want) {
						t.Errorf("run result = %s, want %s", msg.Result, tc.want)
					}
					return true
				}
				return false
			})
			if !elicited || !progress {
				t.Errorf("elicited = %v, progress = %v, want both", elicited, progress)
			}
		})
	}
}

// TestMCPServeTransport checks the endpoint's own answers: 401 naming
// where the key goes, a session of another key, requests without a
// session or revision, DELETE ending a session, and the GET stream.
func TestMCPServeTransport(t *testing.T) {
	t.Parallel()
	at := newMCPTest(t)
	alice := &mcpRawClient{at: at, token: mcpAliceToken}
	alice.initialize(t, `{}`)

	tests := []struct {
		name       string
		client     *mcpRawClient
		msg        string
		wantStatus int
		wantBody   string
	}{
		{"no key", &mcpRawClient{at: at}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.StatusUnauthorized, "Bearer"},
		{"another key's session", &mcpRawClient{at: at, token: mcpBobToken, session: alice.session}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.StatusNotFound, "not found"},
		{"no session nor revision", &mcpRawClient{at: at, token: mcpAliceToken}, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, http.StatusBadRequest, "send initialize first"},
		{"unknown revision", &mcpRawClient{at: at, token: mcpAliceToken}, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}`, http.StatusBadRequest, `"supported":["2026-07-28"]`},
		{"stateless", &mcpRawClient{at: at, token: mcpAliceToken}, `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`, http.StatusOK, `"name":"run"`},
		{"batch", alice, `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, http.StatusBadRequest, "batches are not supported"},
		{"unknown method", alice, `{"jsonrpc":"2.0","id":1,"method":"prompts/list"}`, http.StatusOK, `"code":-32601`},
		{"unknown tool", alice, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope","arguments":{}}}`, http.StatusOK, `unknown tool \"nope\"`},
		{"bad arguments", alice, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_run","arguments":{"id":"x"}}}`, http.StatusOK, `"isError":true`},
		{"unknown resource", alice, `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"harnessd://runs/run_nope"}}`, http.StatusOK, `"code":-32002`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			resp := tc.client.post(t, tc.msg)
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(data), tc.wantBody) {
				t.Errorf("POST %s = %d %s, want %d with %s", tc.msg, resp.StatusCode, data, tc.wantStatus, tc.wantBody)
			}
			if tc.wantStatus == http.StatusUnauthorized && !strings.Contains(resp.Header.Get("WWW-Authenticate"), "Authorization: Bearer") {
				t.Errorf("WWW-Authenticate = %q, want it to say where the key goes", resp.Header.Get("WWW-Authenticate"))
			}
		})
	}

	t.Run("delete", func(t *testing.T) {
		c := &mcpRawClient{at: at, token: mcpAliceToken}
		c.initialize(t, `{}`)
		resp, _ := at.do(t, http.MethodDelete, "/mcp", "Bearer "+mcpAliceToken, "", headerSessionID, c.session)
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE = %d, want 204", resp.StatusCode)
		}
		if resp := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); resp.StatusCode != http.StatusNotFound {
			t.Errorf("ping after DELETE = %d, want 404", resp.StatusCode)
		}
	})
}

// TestMCPServeSubscribe: a session subscribed to a run hears
// notifications/resources/updated on its GET stream when the run changes.
func TestMCPServeSubscribe(t *testing.T) {
	t.Parallel()
	at := newMCPTest(t, findThenEcho()...)
	c := &mcpRawClient{at: at, token: mcpAliceToken}
	c.initialize(t, `{}`)
	resp := c.post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"start_run","arguments":{"prompt":"echo hello"}}}`)
	var out struct {
		Result struct {
			StructuredContent struct {
				RunID string `json:"run_id"`
			} `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Result.StructuredContent.RunID == "" {
		t.Fatalf("start_run: %v %+v", err, out)
	}
	uri := "harnessd://runs/" + out.Result.StructuredContent.RunID
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, at.url+"/mcp", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+mcpAliceToken)
	req.Header.Set(headerSessionID, c.session)
	listen, err := at.client.Do(req)
	if err != nil || listen.StatusCode != http.StatusOK {
		t.Fatalf("GET /mcp = %v %v, want 200", listen, err)
	}
	defer listen.Body.Close()
	if resp := c.post(t, `{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"`+uri+`"}}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("subscribe = %d", resp.StatusCode)
	}
	readSSE(t, listen.Body, func(msg wireMessage) bool {
		return msg.Method == "notifications/resources/updated" && strings.Contains(string(msg.Params), uri)
	})
	at.waitAllRuns(t)
}

// TestMCPServeCancel: the client's notifications/cancelled for a held run
// cancels the run, and wait_run returns a run's current state once its
// timeout passes.
func TestMCPServeCancel(t *testing.T) {
	t.Parallel()
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			at := newMCPTest(t, fakeTurn{Hang: true})
			c := &mcpRawClient{at: at, token: mcpAliceToken}
			meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`
			if version != "2026-07-28" {
				c.initialize(t, `{}`)
				meta = `"_meta":{}`
			}
			resp := c.post(t, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"run","arguments":{"prompt":"hang"},`+meta+`}}`)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("tools/call run = %d", resp.StatusCode)
			}
			var runID string
			waitUntil(t, "the run starts", func() bool {
				runs := at.runs.list()
				if len(runs) == 1 {
					runID = runs[0].id
				}
				return runID != ""
			})
			wait := c.post(t, `{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"wait_run","arguments":{"run_id":"`+runID+`","timeout_seconds":1},`+meta+`}}`)
			readSSE(t, wait.Body, func(msg wireMessage) bool {
				if string(msg.ID) != "8" {
					return false
				}
				if !strings.Contains(string(msg.Result), "is running") || strings.Contains(string(msg.Result), `"isError":true`) {
					t.Errorf("wait_run after its timeout = %s, want the running state", msg.Result)
				}
				return true
			})
			if cancel := c.post(t, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user",`+meta+`}}`); cancel.StatusCode != http.StatusAccepted {
				t.Fatalf("notifications/cancelled = %d, want 202", cancel.StatusCode)
			}
			readSSE(t, resp.Body, func(msg wireMessage) bool {
				if string(msg.ID) != "7" {
					return false
				}
				if !strings.Contains(string(msg.Result), `"status":"cancelled"`) || !strings.Contains(string(msg.Result), `"isError":true`) {
					t.Errorf("cancelled run's result = %s, want isError with status cancelled", msg.Result)
				}
				return true
			})
			if r := at.runs.get(runID); r.view().Status != runCancelled {
				t.Errorf("run status = %s, want cancelled", r.view().Status)
			}
		})
	}
}
