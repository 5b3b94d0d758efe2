package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// This file tests that a server's text reaches the operator's terminal
// escaped, through every command that shows it: the mcp commands and
// harnessd run.

// hostileMCP starts a Streamable HTTP MCP server whose every text carries
// hostileText: its server info, a tool's description and result, an
// error, a skill's name and description, a resource's name and text.
func hostileMCP(t *testing.T) *fakeMCP {
	t.Helper()
	const skillURI = "skill://esc/SKILL.md"
	skillMD := "---\nname: esc\ndescription: d\n---\nbody\n"
	return newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
		var call struct {
			Name string `json:"name"`
		}
		json.Unmarshal(m.Params, &call)
		switch {
		case m.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "hostile-session")
			writeRPCResult(w, m.ID, map[string]any{
				"protocolVersion": latestProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "extensions": map[string]any{skillsExtension: map[string]any{}}},
				"serverInfo":      map[string]any{"name": "evil " + hostileText, "version": "1"},
			})
		case m.Method == "tools/list":
			schema := map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "string", "description": "field " + hostileText}}}
			writeRPCResult(w, m.ID, map[string]any{"tools": []any{
				map[string]any{"name": "show", "description": "shows " + hostileText, "inputSchema": schema},
				map[string]any{"name": "boom", "description": "fails", "inputSchema": map[string]any{"type": "object"}}}})
		case m.Method == "tools/call" && call.Name == "show":
			writeRPCResult(w, m.ID, map[string]any{"content": []any{map[string]any{"type": "text", "text": "result " + hostileText + "\nline two"}}})
		case m.Method == "tools/call":
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32000, "message": "failed " + hostileText}})
		case m.Method == "skills/list":
			writeRPCResult(w, m.ID, map[string]any{"skills": []any{map[string]any{
				"uri":         skillURI,
				"frontmatter": map[string]any{"name": "esc" + hostileText, "description": "skill " + hostileText},
				"resources":   []any{map[string]any{"uri": skillURI, "digest": skillDigestOf(skillMD), "size": len(skillMD)}},
			}}})
		case m.Method == "resources/list":
			writeRPCResult(w, m.ID, map[string]any{"resources": []any{map[string]any{"uri": "file:///r", "name": "res " + hostileText, "description": "about " + hostileText}}})
		case m.Method == "resources/read":
			writeRPCResult(w, m.ID, map[string]any{"contents": []any{map[string]any{"uri": "file:///r", "mimeType": "text/plain", "text": "text " + hostileText}}})
		default:
			return false
		}
		return true
	})
}

// hostileStderr is a shell script that writes hostileText to stderr and
// exits: a stdio server whose failure and log lines quote it.
const hostileStderr = `printf 'stderr \033]0;pwned\007\033[2J\033[8mhidden\033[0m \342\200\256evil\342\200\254 \302\2332J\177\n' >&2; exit 3`

// TestMCPCommandsEscapeServerText runs each mcp command that shows a
// server's text against hostileMCP (and a stdio server's stderr, shown
// in its failure and its log lines): nothing a terminal acts on is
// printed raw, the text is there escaped, and --json output still
// decodes to what the server sent.
func TestMCPCommandsEscapeServerText(t *testing.T) {
	t.Parallel()
	srv := hostileMCP(t)
	env := map[string]string{"HARNESS_MCP_SERVERS": serversJSON(t, map[string]any{"name": "evil", "url": srv.URL})}
	tests := []struct {
		name     string
		args     []string
		wantCode int
		want     string // in stdout or stderr
		wantLog  string // in stderr: a log line, as slog quotes it
		jsonText string // when set, stdout is JSON holding this text as sent
	}{
		{name: "list", args: []string{"mcp", "list", "--verbose"}, want: "shows " + hostileEscaped},
		{name: "list json", args: []string{"mcp", "list", "--json"}, jsonText: "shows " + hostileText},
		{name: "get", args: []string{"mcp", "get", "evil"}, want: "server: evil " + hostileEscaped},
		{name: "call", args: []string{"mcp", "call", "mcp_evil_show"}, want: "result " + hostileEscaped + "\nline two"},
		{name: "call json", args: []string{"mcp", "call", "--json", "mcp_evil_show"}, jsonText: "result " + hostileText + "\nline two"},
		{name: "call error", args: []string{"mcp", "call", "mcp_evil_boom"}, wantCode: 1, want: "failed " + hostileEscaped},
		{name: "skills", args: []string{"mcp", "skills"}, want: "esc" + hostileEscaped + "  skill " + hostileEscaped},
		{name: "resources", args: []string{"mcp", "resources", "evil"}, want: "res " + hostileEscaped},
		{name: "read", args: []string{"mcp", "read", "evil", "file:///r"}, want: "text " + hostileEscaped},
		{name: "read json", args: []string{"mcp", "read", "evil", "file:///r", "--json"}, jsonText: "text " + hostileText},
		{name: "stderr of a stdio server", args: []string{"mcp", "list", "--log-level", "debug", "--", "/bin/sh", "-c", hostileStderr}, wantCode: 1,
			want: "stderr " + hostileEscaped, wantLog: `line="stderr \x1b]0;pwned\a\x1b[2J`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runHarnessd(t, env, tt.args...)
			checkNoRawControls(t, fmt.Sprintf("%v stdout", tt.args), stdout)
			checkNoRawControls(t, fmt.Sprintf("%v stderr", tt.args), stderr)
			if code != tt.wantCode || !strings.Contains(stdout+stderr, tt.want) || !strings.Contains(stderr, tt.wantLog) {
				t.Errorf("%v = %d, want %d showing %q\nstdout: %s\nstderr: %s", tt.args, code, tt.wantCode, tt.want, stdout, stderr)
			}
			if tt.jsonText != "" {
				var doc any
				if err := json.Unmarshal([]byte(stdout), &doc); err != nil || !holdsString(doc, tt.jsonText) {
					t.Errorf("%v printed %s (%v), want valid JSON holding %q", tt.args, stdout, err, tt.jsonText)
				}
			}
		})
	}
}

// holdsString reports whether s is a string somewhere in the decoded JSON
// doc.
func holdsString(doc any, s string) bool {
	switch v := doc.(type) {
	case string:
		return v == s
	case []any:
		for _, e := range v {
			if holdsString(e, s) {
				return true
			}
		}
	case map[string]any:
		for _, e := range v {
			if holdsString(e, s) {
				return true
			}
		}
	}
	return false
}

// TestRunCommandEscapesServerText follows a run with harnessd run whose
// tool call fails with hostileMCP's error and whose answer quotes the
// hostile text: the answer and the failed call are shown escaped.
func TestRunCommandEscapesServerText(t *testing.T) {
	t.Parallel()
	srv := hostileMCP(t)
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{call("mcp_evil_boom", `{}`)}},
		fakeTurn{Text: "answer " + hostileText})
	home := t.TempDir()
	writeFile(t, home, "config.toml", fmt.Sprintf("[mcp_servers.evil]\nurl = %q\n\n[model]\nname = \"openai/fake-model\"\n", srv.URL))
	at := serveInProcess(t, home, f.getenv)
	waitReadyz(t, at)
	code, stdout, stderr := runHarnessd(t, map[string]string{"HARNESS_ADDR": at.url}, "run", "use the tool")
	checkNoRawControls(t, "harnessd run stdout", stdout)
	checkNoRawControls(t, "harnessd run stderr", stderr)
	if code != 0 || stdout != "answer "+hostileEscaped+"\n" || !strings.Contains(stderr, "✗ mcp_evil_boom: ") || !strings.Contains(stderr, `failed \u001b]0;pwned`) {
		t.Errorf("harnessd run = %d\nstdout: %q\nstderr: %q\nwant the answer and the failed call escaped", code, stdout, stderr)
	}
}
