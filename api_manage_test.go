package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// This file holds the tests of live management through the API against
// harnessd serve in this process, over real config files and fake stdio
// servers: servers added, replaced, enabled, disabled, removed and
// restarted, a tool tried, schedules created, changed, paused, resumed and
// deleted, and every refusal leaving the file and the daemon as they were.

const (
	manageAdmin  = "Bearer manage-admin-token-0123456789"
	manageReader = "Bearer manage-reader-token-0123456789"
	// manageSecret is the value of a secret env variable of server echo.
	manageSecret = "manage-secret-value-0123456789"
)

// A manageFixture is harnessd serve over a home whose config.toml holds a
// default model and the fake stdio server "echo" (mode pid, with a secret
// env value); HARNESS_MCP_SERVERS defines "env_tools" (disabled); one
// admin key and one runs:read key.
type manageFixture struct {
	at     *apiTest
	home   string
	file   string // $HARNESS_HOME/config.toml
	exe    string // the fake server's command
	marker string // in every fake server's env, so cleanup finds them
}

// newManageFixture starts the fixture's harnessd and waits until echo is
// ready.
func newManageFixture(t *testing.T) *manageFixture {
	t.Helper()
	home, workspace, marker := fakeServerHome(t, "echo", "pid", "")
	exe := fakeServerBinary(t)
	f := &manageFixture{home: home, file: filepath.Join(home, "config.toml"), exe: exe, marker: marker}
	config := fmt.Sprintf("# managed by the test\n[model]\nname = \"openai/fake-model\"\n\n[mcp_servers.echo]\ncommand = %q\nenv = { %s = \"pid\", %s = %q, API_TOKEN = %q }\n",
		exe, fakeServerEnv, e2eMarkerEnv, marker, manageSecret)
	if err := os.WriteFile(f.file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{
		"HARNESS_HOME": home, "HOME": home, "PATH": os.Getenv("PATH"),
		"HARNESS_API_KEYS": fmt.Sprintf(`[{"name":"ops","token":%q,"scopes":["admin"]},{"name":"viewer","token":%q,"scopes":["runs:read"]}]`,
			strings.TrimPrefix(manageAdmin, "Bearer "), strings.TrimPrefix(manageReader, "Bearer ")),
		"HARNESS_MCP_SERVERS": `[{"name":"env_tools","command":"/bin/true","enabled":false}]`,
	}
	addr := serveUntilCleanup(t, fakeEnv(env), "serve", "--workspace", workspace, "--addr", "127.0.0.1:0")
	f.at = &apiTest{url: "http://" + addr, client: &http.Client{}}
	f.waitStatus(t, "echo", statusReady)
	return f
}

// serverJSON returns the body of a fake server in mode.
func (f *manageFixture) serverJSON(name, mode string) string {
	b, _ := json.Marshal(map[string]any{"name": name, "command": f.exe, "env": map[string]string{fakeServerEnv: mode, e2eMarkerEnv: f.marker}})
	return string(b)
}

// servers returns GET /v1/mcp/servers by name.
func (f *manageFixture) servers(t *testing.T) map[string]serverStatus {
	t.Helper()
	resp, body := f.at.do(t, http.MethodGet, "/v1/mcp/servers", manageReader, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/mcp/servers = %d %s", resp.StatusCode, body)
	}
	var list struct {
		Servers []serverStatus `json:"servers"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]serverStatus{}
	for _, s := range list.Servers {
		out[s.Name] = s
	}
	return out
}

// serverState returns each server's name, source and status, sorted: what
// a refused change must leave as it was.
func (f *manageFixture) serverState(t *testing.T) []string {
	t.Helper()
	var out []string
	for name, s := range f.servers(t) {
		out = append(out, fmt.Sprintf("%s %s %s restarts=%d", name, s.Source, s.Status, s.Restarts))
	}
	slices.Sort(out)
	return out
}

// waitStatus waits until GET /v1/mcp/servers shows server name in status
// (statusGone: not listed).
func (f *manageFixture) waitStatus(t *testing.T, name, status string) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("server %q is %s", name, status), func() bool {
		s, ok := f.servers(t)[name]
		return (status == statusGone && !ok) || (ok && s.Status == status)
	})
}

// statusGone stands for a server that GET /v1/mcp/servers does not list.
const statusGone = "gone"

// read returns the config file's bytes.
func (f *manageFixture) read(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(f.file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// mcpAddBytes returns what harnessd mcp add with args writes to a
// config.toml that held before.
func mcpAddBytes(t *testing.T, before []byte, args ...string) []byte {
	t.Helper()
	home := t.TempDir()
	file := filepath.Join(home, "config.toml")
	if err := os.WriteFile(file, before, 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HARNESS_HOME": home, "HARNESS_ADDR": "127.0.0.1:1"}
	if code, stdout, stderr := runHarnessd(t, env, append([]string{"mcp", "add"}, args...)...); code != 0 {
		t.Fatalf("mcp add %q = %d, stdout %q, stderr %q", args, code, stdout, stderr)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A manageStep is one request of a management test and what it must do.
// A step whose want is not 2xx must leave the file and the servers (or
// the schedules) exactly as they were.
type manageStep struct {
	name         string
	method, path string
	auth, body   string
	want         int
	// wantText must appear in the answer.
	wantText string
	// check runs after a step that succeeded; before is the file's bytes
	// before the step.
	check func(t *testing.T, before, answer []byte)
}

// runSteps runs steps in order, each as a subtest; state returns what a
// refused step must leave unchanged besides the file.
func (f *manageFixture) runSteps(t *testing.T, steps []manageStep, state func(*testing.T) []string) {
	for _, tt := range steps {
		t.Run(tt.name, func(t *testing.T) {
			before, stateBefore := f.read(t), state(t)
			resp, answer := f.at.do(t, tt.method, tt.path, tt.auth, tt.body)
			if resp.StatusCode != tt.want || !strings.Contains(string(answer), tt.wantText) {
				t.Fatalf("%s %s = %d %s, want %d with %q", tt.method, tt.path, resp.StatusCode, answer, tt.want, tt.wantText)
			}
			if resp.StatusCode >= 300 {
				if after := f.read(t); string(after) != string(before) {
					t.Errorf("refused %s %s changed the file:\n%s\nwant it as it was:\n%s", tt.method, tt.path, after, before)
				}
				if after := state(t); !slices.Equal(after, stateBefore) {
					t.Errorf("refused %s %s changed the daemon: %q, want %q", tt.method, tt.path, after, stateBefore)
				}
				return
			}
			if tt.check != nil {
				tt.check(t, before, answer)
			}
		})
	}
}

// TestAPIManageServers adds, refuses, disables, enables, replaces and
// removes global servers through the API: each success is in GET
// /v1/mcp/servers and in the file, written byte for byte as mcp add
// writes it; each refusal leaves the file's bytes and the servers as they
// were, with a status and a message naming the server and what to do.
func TestAPIManageServers(t *testing.T) {
	t.Parallel()
	f := newManageFixture(t)
	original := f.read(t)
	addedTable := fmt.Sprintf("[mcp_servers.added]\ncommand = %q\nenv = { %s = %q, %s = \"pid\" }\n", f.exe, e2eMarkerEnv, f.marker, fakeServerEnv)
	steps := []manageStep{
		{name: "add", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageAdmin, body: f.serverJSON("added", "pid"), want: http.StatusCreated,
			wantText: `"change": "added"`,
			check: func(t *testing.T, before, _ []byte) {
				want := mcpAddBytes(t, before, "added", "--env", fakeServerEnv+"=pid", "--env", e2eMarkerEnv+"="+f.marker, "--", f.exe)
				if got := f.read(t); string(got) != string(want) {
					t.Errorf("file after POST =\n%s\nwant what mcp add writes:\n%s", got, want)
				}
				if !strings.HasSuffix(string(want), "\n"+addedTable) {
					t.Errorf("mcp add wrote\n%s\nwant it to end with\n%s", want, addedTable)
				}
				f.waitStatus(t, "added", statusReady)
			}},
		{name: "add a name the file has", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageAdmin, body: f.serverJSON("echo", "pid"),
			want: http.StatusConflict, wantText: `server \"echo\" already exists`},
		{name: "add a name HARNESS_MCP_SERVERS has", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageAdmin, body: f.serverJSON("env_tools", "pid"),
			want: http.StatusConflict, wantText: "HARNESS_MCP_SERVERS"},
		{name: "add both command and url", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageAdmin,
			body: `{"name":"bad","command":"x","url":"http://127.0.0.1:1/mcp"}`, want: http.StatusBadRequest, wantText: `server \"bad\"`},
		{name: "add an unknown field", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageAdmin,
			body: `{"name":"bad","comand":"x"}`, want: http.StatusBadRequest, wantText: `unknown field \"comand\"`},
		{name: "add without a name", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageAdmin,
			body: `{"command":"x"}`, want: http.StatusBadRequest, wantText: "name: missing"},
		{name: "add a name whose tools clash with another source's", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageAdmin,
			body: f.serverJSON("env-tools", "pid"), want: http.StatusBadRequest, wantText: "the configuration would not load"},
		{name: "add with a runs:read key", method: http.MethodPost, path: "/v1/mcp/servers", auth: manageReader, body: f.serverJSON("other", "pid"),
			want: http.StatusForbidden},
		{name: "add in a workspace harnessd does not have", method: http.MethodPost, path: "/v1/mcp/servers?scope=elsewhere", auth: manageAdmin,
			body: f.serverJSON("other", "pid"), want: http.StatusBadRequest, wantText: "want home or workspace"},
		{name: "replace an unknown server", method: http.MethodPut, path: "/v1/mcp/servers/nope", auth: manageAdmin, body: f.serverJSON("nope", "pid"),
			want: http.StatusNotFound, wantText: `no global MCP server \"nope\"`},
		{name: "replace a server of HARNESS_MCP_SERVERS", method: http.MethodPut, path: "/v1/mcp/servers/env_tools", auth: manageAdmin,
			body: `{"command":"/bin/true"}`, want: http.StatusConflict, wantText: "cannot be edited through the API"},
		{name: "replace with another name in the body", method: http.MethodPut, path: "/v1/mcp/servers/added", auth: manageAdmin,
			body: f.serverJSON("other", "pid"), want: http.StatusBadRequest, wantText: "differs from the path"},
		{name: "disable", method: http.MethodPost, path: "/v1/mcp/servers/added/disable", auth: manageAdmin, want: http.StatusOK,
			check: func(t *testing.T, before, _ []byte) {
				want := string(original) + "\n" + addedTable + "enabled = false\n"
				if got := f.read(t); string(got) != want {
					t.Errorf("file after disable =\n%s\nwant\n%s", got, want)
				}
				f.waitStatus(t, "added", statusDisabled)
			}},
		{name: "enable", method: http.MethodPost, path: "/v1/mcp/servers/added/enable", auth: manageAdmin, want: http.StatusOK,
			check: func(t *testing.T, before, _ []byte) {
				if got, want := string(f.read(t)), string(original)+"\n"+addedTable+"enabled = true\n"; got != want {
					t.Errorf("file after enable =\n%s\nwant\n%s", got, want)
				}
				f.waitStatus(t, "added", statusReady)
			}},
		{name: "disable with a runs:read key", method: http.MethodPost, path: "/v1/mcp/servers/added/disable", auth: manageReader, want: http.StatusForbidden},
		{name: "replace", method: http.MethodPut, path: "/v1/mcp/servers/added", auth: manageAdmin, body: f.serverJSON("", "normal"), want: http.StatusOK,
			check: func(t *testing.T, before, _ []byte) {
				want := mcpAddBytes(t, original, "added", "--env", fakeServerEnv+"=normal", "--env", e2eMarkerEnv+"="+f.marker, "--", f.exe)
				if got := f.read(t); string(got) != string(want) {
					t.Errorf("file after PUT =\n%s\nwant what mcp add writes:\n%s", got, want)
				}
				waitUntil(t, "the replaced server lists no pid tool", func() bool {
					s := f.servers(t)["added"]
					return s.Status == statusReady && !slices.ContainsFunc(s.Tools, func(tool statusTool) bool { return tool.ServerTool == "pid" })
				})
			}},
		{name: "remove with a runs:read key", method: http.MethodDelete, path: "/v1/mcp/servers/added", auth: manageReader, want: http.StatusForbidden},
		{name: "remove an unknown server", method: http.MethodDelete, path: "/v1/mcp/servers/nope", auth: manageAdmin, want: http.StatusNotFound},
		{name: "remove", method: http.MethodDelete, path: "/v1/mcp/servers/added", auth: manageAdmin, want: http.StatusOK,
			check: func(t *testing.T, before, _ []byte) {
				if got := f.read(t); string(got) != string(original) {
					t.Errorf("file after add and remove =\n%s\nwant it byte for byte as before:\n%s", got, original)
				}
				f.waitStatus(t, "added", statusGone)
			}},
	}
	f.runSteps(t, steps, f.serverState)
}

// TestAPIManageUnwritableConfig refuses an edit when the config file
// cannot be read or written, naming the file and what to do, and leaves
// the servers as they were.
func TestAPIManageUnwritableConfig(t *testing.T) {
	t.Parallel()
	f := newManageFixture(t)
	before := f.serverState(t)
	// A directory in the file's place fails as root too.
	if err := os.Rename(f.file, f.file+".saved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(f.file, 0o700); err != nil {
		t.Fatal(err)
	}
	resp, body := f.at.do(t, http.MethodPost, "/v1/mcp/servers", manageAdmin, f.serverJSON("added", "pid"))
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "config_not_writable") || !strings.Contains(string(body), f.file) {
		t.Errorf("POST with the config file unreadable = %d %s, want 409 config_not_writable naming %s", resp.StatusCode, body, f.file)
	}
	if after := f.serverState(t); !slices.Equal(after, before) {
		t.Errorf("servers after the refused POST = %q, want %q", after, before)
	}
	if entries, _ := os.ReadDir(f.file); len(entries) != 0 {
		t.Errorf("the directory in the file's place holds %d entries after the refused POST, want none", len(entries))
	}
}

// callPid calls the pid tool of server name through the API and returns
// the pid it answers, or 0 while the server cannot answer.
func (f *manageFixture) callPid(t *testing.T, name string) int {
	t.Helper()
	resp, body := f.at.do(t, http.MethodPost, "/v1/mcp/servers/"+name+"/tools/pid/call", manageAdmin, `{}`)
	if resp.StatusCode != http.StatusOK {
		return 0
	}
	var out struct {
		Result callResult `json:"result"`
	}
	if err := json.Unmarshal(body, &out); err != nil || len(out.Result.Content) == 0 {
		t.Fatalf("tool call answer %s: %v", body, err)
	}
	pid, _ := strconv.Atoi(out.Result.Content[0].Text)
	return pid
}

// TestAPIManageRestartAndTryTool restarts a real stdio server through the
// API (a new process answers, the old one is gone) and tries its tools:
// results come back redacted, a tool's own error is a result, unknown
// servers and tools are 404, and only admin keys may do either.
func TestAPIManageRestartAndTryTool(t *testing.T) {
	t.Parallel()
	f := newManageFixture(t)
	first := f.callPid(t, "echo")
	if first == 0 {
		t.Fatal("the pid tool of echo did not answer")
	}
	tries := []struct {
		name, path, auth, body string
		want                   int
		wantText, notText      string
	}{
		{"echo, redacted", "/v1/mcp/servers/echo/tools/echo/call", manageAdmin, `{"arguments":{"message":"say ` + manageSecret + `"}}`, http.StatusOK, "say [redacted]", manageSecret},
		{"a tool error is a result", "/v1/mcp/servers/echo/tools/fail/call", manageAdmin, `{}`, http.StatusOK, `"isError": true`, ""},
		{"arguments not an object", "/v1/mcp/servers/echo/tools/echo/call", manageAdmin, `{"arguments":[1]}`, http.StatusBadRequest, "not a JSON object", ""},
		{"unknown tool", "/v1/mcp/servers/echo/tools/nope/call", manageAdmin, `{}`, http.StatusNotFound, `has no tool \"nope\"`, ""},
		{"unknown server", "/v1/mcp/servers/nope/tools/echo/call", manageAdmin, `{}`, http.StatusNotFound, `no global MCP server \"nope\"`, ""},
		{"runs:read key", "/v1/mcp/servers/echo/tools/echo/call", manageReader, `{}`, http.StatusForbidden, "", ""},
		{"restart with a runs:read key", "/v1/mcp/servers/echo/restart", manageReader, "", http.StatusForbidden, "", ""},
		{"restart an unknown server", "/v1/mcp/servers/nope/restart", manageAdmin, "", http.StatusNotFound, `no global MCP server \"nope\"`, ""},
		{"restart a disabled server", "/v1/mcp/servers/env_tools/restart", manageAdmin, "", http.StatusConflict, "is disabled", ""},
	}
	for _, tt := range tries {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := f.at.do(t, http.MethodPost, tt.path, tt.auth, tt.body)
			if resp.StatusCode != tt.want || !strings.Contains(string(body), tt.wantText) || (tt.notText != "" && strings.Contains(string(body), tt.notText)) {
				t.Errorf("POST %s = %d %s, want %d with %q and without %q", tt.path, resp.StatusCode, body, tt.want, tt.wantText, tt.notText)
			}
		})
	}
	if f.callPid(t, "echo") != first {
		t.Fatal("echo changed process before the restart")
	}
	resp, body := f.at.do(t, http.MethodPost, "/v1/mcp/servers/echo/restart", manageAdmin, "")
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("restart = %d %s, want 202", resp.StatusCode, body)
	}
	var second int
	waitUntil(t, "a new process answers for echo", func() bool {
		second = f.callPid(t, "echo")
		return second != 0 && second != first
	})
	waitUntil(t, fmt.Sprintf("the old process %d is gone", first), func() bool { return !processAlive(first) })
	if !processAlive(second) {
		t.Errorf("the new process %d is not alive", second)
	}
}

// scheduleList returns GET /v1/schedules by name.
func (f *manageFixture) scheduleList(t *testing.T) map[string]scheduleView {
	t.Helper()
	resp, body := f.at.do(t, http.MethodGet, "/v1/schedules", manageAdmin, "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/schedules = %d %s", resp.StatusCode, body)
	}
	var list struct {
		Schedules []scheduleView `json:"schedules"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	out := map[string]scheduleView{}
	for _, s := range list.Schedules {
		out[s.Name] = s
	}
	return out
}

// scheduleState returns each schedule as listed, sorted.
func (f *manageFixture) scheduleState(t *testing.T) []string {
	t.Helper()
	var out []string
	for name, s := range f.scheduleList(t) {
		out = append(out, fmt.Sprintf("%s %s %s paused=%t next=%v", name, s.Cron, s.Source, s.Paused, s.NextRunAt))
	}
	slices.Sort(out)
	return out
}

// TestAPIManageSchedules creates, refuses, pauses, resumes, changes and
// deletes a schedule through the API: each success is in GET
// /v1/schedules and in the file, each refusal leaves both as they were.
func TestAPIManageSchedules(t *testing.T) {
	t.Parallel()
	f := newManageFixture(t)
	original := f.read(t)
	const table = "[[schedules]]\nname = \"nightly\"\ncron = \"0 3 * * *\"\nprompt = \"tidy up\"\n"
	listed := func(t *testing.T, check func(s scheduleView, ok bool) string) {
		t.Helper()
		s, ok := f.scheduleList(t)["nightly"]
		if problem := check(s, ok); problem != "" {
			t.Errorf("GET /v1/schedules: nightly %s (listed %t: %+v)", problem, ok, s)
		}
	}
	fileIs := func(t *testing.T, want string) {
		t.Helper()
		if got := f.read(t); string(got) != want {
			t.Errorf("file =\n%s\nwant\n%s", got, want)
		}
	}
	steps := []manageStep{
		{name: "create", method: http.MethodPost, path: "/v1/schedules", auth: manageAdmin, body: `{"name":"nightly","cron":"0 3 * * *","prompt":"tidy up"}`,
			want: http.StatusCreated, check: func(t *testing.T, _, _ []byte) {
				fileIs(t, string(original)+"\n"+table)
				listed(t, func(s scheduleView, ok bool) string {
					if !ok || s.NextRunAt == nil || s.Paused || s.Source != f.file {
						return "want listed, from " + f.file + ", with a next run"
					}
					return ""
				})
			}},
		{name: "create a name taken", method: http.MethodPost, path: "/v1/schedules", auth: manageAdmin, body: `{"name":"nightly","cron":"@daily","prompt":"again"}`,
			want: http.StatusConflict, wantText: `schedule \"nightly\" already exists`},
		{name: "create with a bad cron", method: http.MethodPost, path: "/v1/schedules", auth: manageAdmin, body: `{"name":"broken","cron":"every day","prompt":"x"}`,
			want: http.StatusBadRequest, wantText: "cron:"},
		{name: "create with a runs:read key", method: http.MethodPost, path: "/v1/schedules", auth: manageReader, body: `{"name":"other","cron":"@daily","prompt":"x"}`,
			want: http.StatusForbidden},
		{name: "pause", method: http.MethodPost, path: "/v1/schedules/nightly/pause", auth: manageAdmin, want: http.StatusOK,
			check: func(t *testing.T, _, _ []byte) {
				fileIs(t, string(original)+"\n"+table+"paused = true\n")
				listed(t, func(s scheduleView, ok bool) string {
					if !s.Paused || s.NextRunAt != nil {
						return "want paused, with no next run"
					}
					return ""
				})
			}},
		{name: "pause an unknown schedule", method: http.MethodPost, path: "/v1/schedules/nope/pause", auth: manageAdmin, want: http.StatusNotFound,
			wantText: `schedule \"nope\": not found`},
		{name: "resume with a runs:read key", method: http.MethodPost, path: "/v1/schedules/nightly/resume", auth: manageReader, want: http.StatusForbidden},
		{name: "resume", method: http.MethodPost, path: "/v1/schedules/nightly/resume", auth: manageAdmin, want: http.StatusOK,
			check: func(t *testing.T, _, _ []byte) {
				fileIs(t, string(original)+"\n"+table)
				listed(t, func(s scheduleView, ok bool) string {
					if s.Paused || s.NextRunAt == nil {
						return "want running, with a next run"
					}
					return ""
				})
			}},
		{name: "change with a bad timezone", method: http.MethodPut, path: "/v1/schedules/nightly", auth: manageAdmin, body: `{"cron":"@hourly","prompt":"x","timezone":"Mars/Base"}`,
			want: http.StatusBadRequest, wantText: "timezone"},
		{name: "change an unknown schedule", method: http.MethodPut, path: "/v1/schedules/nope", auth: manageAdmin, body: `{"cron":"@hourly","prompt":"x"}`,
			want: http.StatusNotFound},
		{name: "change", method: http.MethodPut, path: "/v1/schedules/nightly", auth: manageAdmin, body: `{"cron":"@hourly","prompt":"tidy up","max_cost_usd":1}`,
			want: http.StatusOK, check: func(t *testing.T, _, _ []byte) {
				fileIs(t, string(original)+"\n[[schedules]]\nname = \"nightly\"\ncron = \"@hourly\"\nprompt = \"tidy up\"\nmax_cost_usd = 1.0\n")
				listed(t, func(s scheduleView, ok bool) string {
					if s.Cron != "@hourly" {
						return "want cron @hourly"
					}
					return ""
				})
			}},
		{name: "delete with a runs:read key", method: http.MethodDelete, path: "/v1/schedules/nightly", auth: manageReader, want: http.StatusForbidden},
		{name: "delete", method: http.MethodDelete, path: "/v1/schedules/nightly", auth: manageAdmin, want: http.StatusOK,
			check: func(t *testing.T, _, _ []byte) {
				fileIs(t, string(original))
				listed(t, func(_ scheduleView, ok bool) string {
					if ok {
						return "want gone"
					}
					return ""
				})
			}},
		{name: "delete again", method: http.MethodDelete, path: "/v1/schedules/nightly", auth: manageAdmin, want: http.StatusNotFound},
	}
	f.runSteps(t, steps, f.scheduleState)
}

// TestAPIManageConcurrentEdits adds servers from many requests at once:
// every one is in the file and the list afterwards (no edit lost).
func TestAPIManageConcurrentEdits(t *testing.T) {
	t.Parallel()
	f := newManageFixture(t)
	const n = 8
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, _ := f.at.do(t, http.MethodPost, "/v1/mcp/servers", manageAdmin, fmt.Sprintf(`{"name":"s%d","url":"http://127.0.0.1:1/mcp","enabled":false}`, i))
			codes[i] = resp.StatusCode
		}()
	}
	wg.Wait()
	data, servers := string(f.read(t)), f.servers(t)
	for i := range n {
		name := fmt.Sprintf("s%d", i)
		if codes[i] != http.StatusCreated {
			t.Errorf("POST %s = %d, want 201", name, codes[i])
		}
		if !strings.Contains(data, "[mcp_servers."+name+"]\n") {
			t.Errorf("the file lacks %s:\n%s", name, data)
		}
		if s, ok := servers[name]; !ok || s.Status != statusDisabled {
			t.Errorf("GET /v1/mcp/servers: %s = %+v (listed %t), want disabled", name, s, ok)
		}
	}
}
