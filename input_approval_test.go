package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// This file tests tool approvals: which calls need one (table), the
// config fields' validation, and runs over a real server-everything with
// the scripted model: approve and deny of parallel calls over the API,
// timeout, a run that is not interactive waiting all the same (approved,
// or denied by approval_timeout), and a run's approval that tightens and
// never loosens.

const (
	echoTool   = "mcp_everything_echo"                     // readOnlyHint: true
	toggleTool = "mcp_everything_toggle_simulated_logging" // readOnlyHint: false
	sumTool    = "mcp_everything_get_sum"                  // readOnlyHint: true
)

// newApprovalAPITest serves the API over a global server-everything with
// approval mode and approval_tools globs, keys (none: auth off), and a
// model scripted with turns.
func newApprovalAPITest(t *testing.T, mode string, globs []string, keys []authKey, turns ...fakeTurn) *apiTest {
	t.Helper()
	cfg := stdioPeerConfig("everything", everythingStdioCommand(t))
	cfg.Approval, cfg.ApprovalTools = mode, globs
	return newAPITest(t, newFakeModel(t, providerOpenAI, turns...), keys, cfg)
}

// runApprovals returns the run's status and open approvals as
// GET /v1/runs/{id} shows them.
func (at *apiTest) runApprovals(t *testing.T, auth string, r *run) (string, []approvalRequest) {
	t.Helper()
	resp, data := at.do(t, http.MethodGet, "/v1/runs/"+r.id, auth, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/runs/%s = %d %s", r.id, resp.StatusCode, data)
	}
	var v struct {
		Status    string            `json:"status"`
		Approvals []approvalRequest `json:"approvals"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Status, v.Approvals
}

// resultLines returns the lines of an answerWithResults output.
func resultLines(output string) []string { return strings.Split(output, "\n") }

func TestNeedsApproval(t *testing.T) {
	t.Parallel()
	readOnly := json.RawMessage(`{"readOnlyHint":true}`)
	write := json.RawMessage(`{"readOnlyHint":false,"destructiveHint":true}`)
	tests := []struct {
		name        string
		server      string // the server's approval
		globs       []string
		run         string // the run's approval
		tool        string // a server tool, or a built-in's name with builtin
		builtin     bool
		annotations json.RawMessage
		want        bool
	}{
		{name: "default never", tool: "delete", annotations: write, want: false},
		{name: "never", server: approvalNever, tool: "delete", annotations: write, want: false},
		{name: "writes, read-only tool", server: approvalWrites, tool: "get", annotations: readOnly, want: false},
		{name: "writes, write tool", server: approvalWrites, tool: "delete", annotations: write, want: true},
		{name: "writes, no annotations", server: approvalWrites, tool: "delete", want: true},
		{name: "writes, malformed annotations", server: approvalWrites, tool: "get", annotations: json.RawMessage(`{"readOnlyHint":"yes"}`), want: true},
		{name: "always, read-only tool", server: approvalAlways, tool: "get", annotations: readOnly, want: true},
		{name: "approval_tools glob", globs: []string{"get*"}, tool: "get_file", annotations: readOnly, want: true},
		{name: "approval_tools other tool", globs: []string{"get*"}, tool: "list", annotations: readOnly, want: false},
		{name: "run writes tightens never", run: approvalWrites, tool: "delete", annotations: write, want: true},
		{name: "run writes keeps read-only free", run: approvalWrites, tool: "get", annotations: readOnly, want: false},
		{name: "run writes cannot loosen always", server: approvalAlways, run: approvalWrites, tool: "get", annotations: readOnly, want: true},
		{name: "run always tightens writes", server: approvalWrites, run: approvalAlways, tool: "get", annotations: readOnly, want: true},
		{name: "connect_mcp, run never", tool: toolConnectMCP, builtin: true, want: false},
		{name: "connect_mcp counts as a write", run: approvalWrites, tool: toolConnectMCP, builtin: true, want: true},
		{name: "find_tool never", run: approvalAlways, tool: toolFindTool, builtin: true, want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			entry := toolEntry{Name: tt.tool, Annotations: tt.annotations}
			if !tt.builtin {
				entry = toolEntry{Name: mcpToolName("s", tt.tool), Server: "s", ServerTool: tt.tool, Annotations: tt.annotations}
			}
			cfg := serverConfig{Name: "s", Approval: tt.server, ApprovalTools: tt.globs}
			if got := needsApproval(entry, cfg, tt.run); got != tt.want {
				t.Errorf("needsApproval(%s, server %q %v, run %q) = %v, want %v", tt.tool, tt.server, tt.globs, tt.run, got, tt.want)
			}
		})
	}
}

func TestApprovalConfigFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, toml string
		wantErr    string // "" for none
		want       serverConfig
	}{
		{name: "default", toml: `command = "x"`, want: serverConfig{Approval: ""}}, // "" is never
		{name: "writes with globs", toml: "command = \"x\"\napproval = \"writes\"\napproval_tools = [\"delete_*\"]",
			want: serverConfig{Approval: approvalWrites, ApprovalTools: []string{"delete_*"}}},
		{name: "bad mode", toml: "command = \"x\"\napproval = \"sometimes\"",
			wantErr: `config.toml: server "s": approval: "sometimes" is not an approval mode; use never (the default), writes or always`},
		{name: "bad glob", toml: "command = \"x\"\napproval_tools = [\"[\"]",
			wantErr: `config.toml: server "s": approval_tools[0]: "[" is not a valid glob`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ok := parseOneServer(t, tt.toml, tt.wantErr)
			if !ok {
				return
			}
			if s.Approval != tt.want.Approval || fmt.Sprint(s.ApprovalTools) != fmt.Sprint(tt.want.ApprovalTools) {
				t.Errorf("parseConfigTOML(%q) = approval %q, approval_tools %v, want %q, %v", tt.toml, s.Approval, s.ApprovalTools, tt.want.Approval, tt.want.ApprovalTools)
			}
		})
	}
	servers, err := parseServerJSON("HARNESS_MCP_SERVERS", []byte(`[{"name":"j","command":"x","approval":"always"}]`), fakeEnv(nil))
	if err != nil || len(servers) != 1 || servers[0].Approval != approvalAlways {
		t.Errorf("parseServerJSON(approval always) = %+v, %v, want approval always", servers, err)
	}
}

func TestApprovalParallelApproveAndDeny(t *testing.T) {
	t.Parallel()
	const token = "ops-token-0123456789"
	keys := []authKey{testKey("ops", token, scopeRunsWrite)}
	auth := "Bearer " + token
	at := newApprovalAPITest(t, approvalAlways, nil, keys,
		fakeTurn{ToolCalls: calls(echoTool, `{"message":"first"}`, echoTool+"#2", `{"message":"second"}`)},
		answerWithResults)
	r := at.runs.get(at.postRun(t, auth, `{"prompt":"echo twice","interactive":true}`))

	var open []approvalRequest
	waitUntil(t, "both calls wait for approval", func() bool {
		_, open = at.runApprovals(t, auth, r)
		return len(open) == 2
	})
	status, _ := at.runApprovals(t, auth, r)
	if status != runWaitingApproval {
		t.Errorf("status with open approvals = %s, want %s", status, runWaitingApproval)
	}
	byMessage := map[string]approvalRequest{}
	for _, a := range open {
		if a.Tool != echoTool || a.Server != "everything" || a.ServerTool != "echo" || !isReadOnly(a.Annotations) || a.ExpiresAt.IsZero() {
			t.Errorf("open approval = %+v, want echo of everything with its read-only annotations and an expiry", a)
		}
		var args struct{ Message string }
		if err := json.Unmarshal([]byte(a.Arguments), &args); err != nil {
			t.Fatalf("approval arguments %q: %v", a.Arguments, err)
		}
		byMessage[args.Message] = a
	}
	first, second := byMessage["first"], byMessage["second"]
	if first.ID == "" || second.ID == "" || first.ID == second.ID {
		t.Fatalf("open approvals = %+v, want one per call", open)
	}

	path := func(id string) string { return fmt.Sprintf("/v1/runs/%s/approvals/%s", r.id, id) }
	if resp, data := at.do(t, http.MethodPost, path(first.ID), auth, `{"decision":"maybe"}`); resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "decision") {
		t.Errorf("POST decision maybe = %d %s, want 400 naming decision", resp.StatusCode, data)
	}
	if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r.id+"/input/"+first.ID, auth, `{"action":"accept"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST an approval's id to the input route = %d %s, want 404", resp.StatusCode, data)
	}
	if resp, data := at.do(t, http.MethodPost, path(first.ID), auth, `{"decision":"approve"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST approve = %d %s, want 200", resp.StatusCode, data)
	}
	// One by one: the other call still waits.
	if status, open := at.runApprovals(t, auth, r); status != runWaitingApproval || len(open) != 1 || open[0].ID != second.ID {
		t.Errorf("after one approval: %s with %+v, want %s still waiting", status, open, second.ID)
	}
	if resp, data := at.do(t, http.MethodPost, path(second.ID), auth, `{"decision":"deny","reason":"not that one"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST deny = %d %s, want 200", resp.StatusCode, data)
	}
	v := waitRun(t, r)
	requireCompleted(t, v)
	want := []string{"ok: Echo: first", "error: the operator denied this call: not that one"}
	if got := resultLines(v.Output); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("tool results = %q, want %q", got, want)
	}
	if resp, _ := at.do(t, http.MethodPost, path(first.ID), auth, `{"decision":"deny"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST on a decided approval = %d, want 404", resp.StatusCode)
	}
	resolved := map[string]map[string]any{}
	for _, d := range eventData(r, evApprovalResolved) {
		resolved[fmt.Sprint(d["approval_id"])] = d
	}
	if d := resolved[first.ID]; d["decision"] != decisionApprove || d["by"] != "ops" {
		t.Errorf("approval.resolved of %s = %v, want approve by ops", first.ID, d)
	}
	if d := resolved[second.ID]; d["decision"] != decisionDeny || d["by"] != "ops" || d["reason"] != "not that one" {
		t.Errorf("approval.resolved of %s = %v, want deny by ops with the reason", second.ID, d)
	}
	if requested := eventData(r, evApprovalRequested); len(requested) != 2 || requested[0]["server_tool"] != "echo" {
		t.Errorf("approval.requested events = %v, want two for echo", requested)
	}
}

func TestApprovalTimeoutDenies(t *testing.T) {
	t.Parallel()
	// The arguments quote a secret of the server's config and run past
	// max_tool_event_bytes (4 KiB): the event has them redacted, then cut.
	const secret = "everything-secret-0123456789"
	cfg := stdioPeerConfig("everything", everythingStdioCommand(t))
	cfg.Approval, cfg.Env = approvalAlways, map[string]string{"EVERYTHING_TOKEN": secret}
	args := fmt.Sprintf(`{"message":%q}`, secret+" "+strings.Repeat("x", 5000))
	at := newAPITest(t, newFakeModel(t, providerOpenAI, fakeTurn{ToolCalls: calls(echoTool, args)}, answerWithResults), nil, cfg)
	r := at.startRun(t, `{"prompt":"echo","interactive":true,"input_timeout":"200ms"}`)
	v := waitRun(t, r)
	requireCompleted(t, v)
	requested := eventData(r, evApprovalRequested)
	if len(requested) != 1 {
		t.Fatalf("approval.requested events = %v, want one", requested)
	}
	shown, _ := requested[0]["arguments"].(string)
	if strings.Contains(shown, secret) || !strings.Contains(shown, redactedText) || len(shown) > 4096+len("…") || requested[0]["arguments_bytes"] == nil {
		t.Errorf("approval.requested arguments = %.80q... (%d bytes, arguments_bytes %v), want the secret redacted, then cut at 4 KiB", shown, len(shown), requested[0]["arguments_bytes"])
	}
	if want := "error: the operator denied this call: no answer within 200ms (input_timeout)"; v.Output != want {
		t.Errorf("output = %q, want %q", v.Output, want)
	}
	if d := eventData(r, evApprovalResolved); len(d) != 1 || d[0]["decision"] != decisionDeny || d[0]["by"] != resolvedByTimeout {
		t.Errorf("approval.resolved events = %v, want one deny by timeout", d)
	}
	if len(v.Approvals) != 0 {
		t.Errorf("approvals of the ended run = %+v, want none", v.Approvals)
	}
}

func TestApprovalNonInteractiveWaits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name            string
		approvalTimeout time.Duration // the limit; 0 keeps the default
		decide          string        // the body posted once the call waits; "" for none
		wantResult      string        // the toggle's result, as a prefix
		wantBy          string
	}{
		{name: "approved over the API", decide: `{"decision":"approve"}`, wantResult: "ok: ", wantBy: resolvedByCaller},
		{name: "denied by approval_timeout", approvalTimeout: 150 * time.Millisecond,
			wantResult: "error: the operator denied this call: no answer within 150ms (approval_timeout)", wantBy: resolvedByTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			at := newApprovalAPITest(t, approvalWrites, nil, nil,
				fakeTurn{ToolCalls: calls(echoTool, `{"message":"free"}`, toggleTool, `{}`)}, answerWithResults)
			if tt.approvalTimeout != 0 {
				at.runs.opts.Limits.ApprovalTimeout = tt.approvalTimeout
			}
			r := at.startRun(t, `{"prompt":"echo and toggle"}`) // not interactive
			var open []approvalRequest
			waitUntil(t, "the toggle waits for approval", func() bool {
				_, open = at.runApprovals(t, "", r)
				return len(open) == 1
			})
			if open[0].Tool != toggleTool {
				t.Errorf("open approval = %+v, want the toggle's", open[0])
			}
			wantExpiry := cmp.Or(tt.approvalTimeout, defaultApprovalTimeout)
			if got := open[0].ExpiresAt.Sub(open[0].CreatedAt); got != wantExpiry {
				t.Errorf("approval expires %s after it opened, want %s", got, wantExpiry)
			}
			if tt.decide != "" {
				if status, _ := at.runApprovals(t, "", r); status != runWaitingApproval {
					t.Errorf("status of a run whose call waits = %s, want %s", status, runWaitingApproval)
				}
				path := fmt.Sprintf("/v1/runs/%s/approvals/%s", r.id, open[0].ID)
				if resp, data := at.do(t, http.MethodPost, path, "", tt.decide); resp.StatusCode != http.StatusOK {
					t.Fatalf("POST %s = %d %s, want 200", path, resp.StatusCode, data)
				}
			}
			v := waitRun(t, r)
			requireCompleted(t, v)
			lines := resultLines(v.Output)
			if len(lines) != 2 || lines[0] != "ok: Echo: free" || !strings.HasPrefix(lines[1], tt.wantResult) {
				t.Errorf("tool results = %q, want echo (read-only) run, then the toggle's result starting %q", lines, tt.wantResult)
			}
			requested, resolved := eventData(r, evApprovalRequested), eventData(r, evApprovalResolved)
			if len(requested) != 1 || len(resolved) != 1 || resolved[0]["by"] != tt.wantBy || resolved[0]["approval_id"] != requested[0]["approval_id"] {
				t.Errorf("approval events = %v then %v, want the toggle requested and resolved by %s", requested, resolved, tt.wantBy)
			}
		})
	}
}

func TestApprovalRunTightensOnly(t *testing.T) {
	t.Parallel()
	// The server needs approval for get-sum only; the run asks writes.
	at := newApprovalAPITest(t, approvalNever, []string{"get-sum"}, nil,
		fakeTurn{ToolCalls: calls(echoTool, `{"message":"free"}`, toggleTool, `{}`, sumTool, `{"a":1,"b":2}`, toolConnectMCP, `{"url":"http://127.0.0.1:9/mcp"}`)},
		answerWithResults)
	for _, tt := range []struct{ approval, want string }{
		{"never", `approval: \"never\": a run can only tighten approval`},
		{"sometimes", `approval: \"sometimes\": want writes or always`},
	} {
		resp, data := at.do(t, http.MethodPost, "/v1/runs", "", fmt.Sprintf(`{"prompt":"x","approval":%q}`, tt.approval))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), tt.want) {
			t.Errorf("POST /v1/runs approval %s = %d %s, want 400 containing %s", tt.approval, resp.StatusCode, data, tt.want)
		}
	}
	r := at.startRun(t, `{"prompt":"all four","approval":"writes","input_timeout":"200ms"}`)
	v := waitRun(t, r)
	requireCompleted(t, v)
	lines := resultLines(v.Output)
	if len(lines) != 4 || lines[0] != "ok: Echo: free" {
		t.Fatalf("tool results = %q, want echo run and three denied", lines)
	}
	for i, tool := range []string{toggleTool, sumTool, toolConnectMCP} {
		if want := "error: the operator denied this call: no answer within 200ms (input_timeout)"; lines[i+1] != want {
			t.Errorf("result of %s = %q, want %q", tool, lines[i+1], want)
		}
	}
	requested := map[any]bool{}
	for _, d := range eventData(r, evApprovalRequested) {
		requested[d["tool"]] = true
	}
	if len(requested) != 3 || !requested[toggleTool] || !requested[sumTool] || !requested[toolConnectMCP] || requested[echoTool] {
		t.Errorf("approvals requested for %v, want the toggle, get-sum and connect_mcp", requested)
	}
}

func TestApprovalCancelWhileWaiting(t *testing.T) {
	t.Parallel()
	at := newApprovalAPITest(t, approvalAlways, nil, nil, fakeTurn{ToolCalls: calls(echoTool, `{"message":"never"}`)})
	r := at.startRun(t, `{"prompt":"echo","interactive":true}`)
	waitEvent(t, r, evApprovalRequested)
	if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r.id+"/cancel", "", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST cancel = %d %s, want 200", resp.StatusCode, data)
	}
	if status, open := at.runApprovals(t, "", r); status != runCancelled || len(open) != 0 {
		t.Errorf("after cancel: %s with %+v open, want cancelled with none", status, open)
	}
	if d := eventData(r, evApprovalResolved); len(d) != 1 || d[0]["decision"] != decisionDeny || d[0]["by"] != resolvedByCancelled {
		t.Errorf("approval.resolved events = %v, want one deny by cancelled", d)
	}
	if types := eventTypes(r); types[len(types)-1] != "run.cancelled" {
		t.Errorf("events = %v, want run.cancelled last", types)
	}
}
