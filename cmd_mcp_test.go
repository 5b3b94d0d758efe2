package main

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
)

// This file tests the command line in-process: mcp list, mcp call,
// version and help, their output and exit codes.

// A lockedBuffer is a bytes.Buffer safe for concurrent writes (the
// logger's goroutines and the command both write to stderr).
type lockedBuffer struct {
	mu sync.Mutex
	// guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runHarnessd runs harnessd with args in-process, with an environment of
// env plus PATH and fresh HOME, HARNESS_HOME and HARNESS_WORKSPACE
// directories, and returns its exit status and output.
func runHarnessd(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	full := map[string]string{
		"PATH":              os.Getenv("PATH"),
		"HOME":              t.TempDir(),
		"HARNESS_HOME":      t.TempDir(),
		"HARNESS_WORKSPACE": t.TempDir(),
	}
	for k, v := range env {
		full[k] = v
	}
	var out, errOut lockedBuffer
	a := &app{stdout: &out, stderr: &errOut, getenv: fakeEnv(full)}
	code = exitCode(a.run(t.Context(), args), &errOut)
	return code, out.String(), errOut.String()
}

// serversJSON returns HARNESS_MCP_SERVERS for servers.
func serversJSON(t *testing.T, servers ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(servers)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCommandLine(t *testing.T) {
	t.Parallel()
	everything := everythingIfPresent(t) // cases with node set need it
	echoURL := startEchoServerHTTP(t, "http")
	fake := fakeServerConfig(t, "normal")
	everythingEnv := map[string]string{"HARNESS_MCP_SERVERS": serversJSON(t,
		map[string]any{"name": "everything", "command": everything.Command, "args": everything.Args})}
	fakeEnv := map[string]string{"HARNESS_MCP_SERVERS": serversJSON(t,
		map[string]any{"name": "fake", "command": fake.Command, "env": fake.Env})}
	brokenEnv := map[string]string{"HARNESS_MCP_SERVERS": serversJSON(t,
		map[string]any{"name": "everything", "command": everything.Command, "args": everything.Args},
		map[string]any{"name": "broken", "command": "/nonexistent/mcp-server"})}
	stdioAdhoc := append([]string{"--", everything.Command}, everything.Args...)

	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantCode   int
		wantStdout []string // each must appear
		wantStderr []string
		exact      string // the whole stdout, when set
		node       bool   // the case starts server-everything
	}{
		{
			name: "list configured stdio", env: everythingEnv, args: []string{"mcp", "list"}, node: true,
			wantStdout: []string{"everything  stdio  ready  mcp-servers/everything 2.0.0  protocol 2025-11-25", "mcp_everything_echo", "mcp_everything_get_env"},
		},
		{
			name: "list url", args: []string{"mcp", "list", "--url", echoURL},
			wantStdout: []string{"adhoc  http  ready  echoserver 1.0.0", "mcp_adhoc_echo  Returns the message it is given.", "mcp_adhoc_add"},
		},
		{
			name: "list url named", args: []string{"mcp", "list", "--name", "go-sdk", "--url", echoURL},
			wantStdout: []string{"go-sdk  http  ready", "mcp_go_sdk_echo", "mcp_go_sdk_add"},
		},
		{
			name: "list command", args: append([]string{"mcp", "list"}, stdioAdhoc...), node: true,
			wantStdout: []string{"adhoc  stdio  ready", "mcp_adhoc_echo", "mcp_adhoc_trigger_long_running_operation"},
		},
		{
			name: "list with a failed server", env: brokenEnv, args: []string{"mcp", "list"}, wantCode: 1, node: true,
			wantStdout: []string{"everything  stdio  ready", "broken  stdio  failed", `error: server "broken"`, "/nonexistent/mcp-server"},
			wantStderr: []string{"harnessd: 1 of 2 servers failed"},
		},
		{
			name: "list unreachable url", args: []string{"mcp", "list", "--url", "http://127.0.0.1:1/mcp"}, wantCode: 1,
			wantStdout: []string{"adhoc  http  failed", `error: server "adhoc"`},
			wantStderr: []string{"harnessd: 1 of 1 servers failed"},
		},
		{
			name: "call url", args: []string{"mcp", "call", "--url", echoURL, "mcp_adhoc_echo", `{"message":"hi there"}`},
			exact: "hi there\n",
		},
		{
			name: "call command", args: append([]string{"mcp", "call", "mcp_adhoc_echo", `{"message":"via stdio"}`}, stdioAdhoc...), node: true,
			exact: "Echo: via stdio\n",
		},
		{
			name: "call configured", env: everythingEnv, args: []string{"mcp", "call", "mcp_everything_get_sum", `{"a":2,"b":40}`}, node: true,
			wantStdout: []string{"42"},
		},
		{
			name: "call without arguments", env: fakeEnv, args: []string{"mcp", "call", "mcp_fake_echo"},
			exact: "\n",
		},
		{
			name: "call isError", env: fakeEnv, args: []string{"mcp", "call", "mcp_fake_fail"}, wantCode: 1,
			exact: "", wantStderr: []string{"harnessd: tool mcp_fake_fail reported an error: it failed"},
		},
		{
			name: "call isError json", env: fakeEnv, args: []string{"mcp", "call", "--json", "mcp_fake_fail"}, wantCode: 1,
			wantStdout: []string{`"isError":true`}, wantStderr: []string{"harnessd: tool mcp_fake_fail reported an error"},
		},
		{
			name: "call on a crashing server", env: fakeEnv, args: []string{"mcp", "call", "mcp_fake_crash"}, wantCode: 1,
			exact: "", wantStderr: []string{`harnessd: mcp call mcp_fake_crash: server "fake"`, "exited with status 3", "panic: boom"},
		},
		{
			name: "call unreachable url", args: []string{"mcp", "call", "--url", "http://127.0.0.1:1/mcp", "mcp_adhoc_echo"}, wantCode: 1,
			wantStderr: []string{"harnessd: mcp call mcp_adhoc_echo:", `server "adhoc"`},
		},
		{
			name: "call unknown tool", args: []string{"mcp", "call", "--url", echoURL, "mcp_adhoc_nope"}, wantCode: 1,
			wantStderr: []string{`harnessd: mcp call: no tool named "mcp_adhoc_nope" (see harnessd mcp list)`},
		},
		{
			name: "call tool of no server", args: []string{"mcp", "call", "--url", echoURL, "mcp_other_echo"}, wantCode: 1,
			wantStderr: []string{`no configured server has a tool named "mcp_other_echo"`},
		},
		{name: "bad flag", args: []string{"mcp", "list", "--bogus"}, wantCode: 2, wantStderr: []string{"flag provided but not defined: -bogus", "Usage: harnessd mcp list"}},
		{name: "bad log level", args: []string{"mcp", "list", "--log-level", "loud", "--url", echoURL}, wantCode: 2, wantStderr: []string{`harnessd: --log-level "loud"`}},
		{name: "bad workspace", args: []string{"mcp", "list", "--workspace", "/nonexistent/ws", "--url", echoURL}, wantCode: 2, wantStderr: []string{`harnessd: --workspace "/nonexistent/ws"`}},
		{
			name: "malformed servers json", env: map[string]string{"HARNESS_MCP_SERVERS": `[{"name":`}, args: []string{"mcp", "list"}, wantCode: 2,
			wantStderr: []string{"harnessd: HARNESS_MCP_SERVERS"},
		},
		{
			name: "invalid server entry", env: map[string]string{"HARNESS_MCP_SERVERS": `[{"name":"lonely"}]`}, args: []string{"mcp", "list"}, wantCode: 2,
			wantStderr: []string{"harnessd: HARNESS_MCP_SERVERS", `"lonely"`},
		},
		{name: "no servers", args: []string{"mcp", "list"}, wantCode: 2, wantStderr: []string{"harnessd: no MCP servers configured"}},
		{name: "url not http", args: []string{"mcp", "list", "--url", "ftp://example.com/mcp"}, wantCode: 2, wantStderr: []string{`harnessd: command line: server "adhoc": url: scheme "ftp" is not supported`}},
		{name: "url and command", args: []string{"mcp", "list", "--url", echoURL, "--", fake.Command}, wantCode: 2, wantStderr: []string{"harnessd: give either --url or a command after --"}},
		{name: "list argument", args: []string{"mcp", "list", "extra"}, wantCode: 2, wantStderr: []string{`harnessd: mcp list: unexpected argument "extra"`}},
		{name: "call without tool", args: []string{"mcp", "call", "--url", echoURL}, wantCode: 2, wantStderr: []string{"harnessd: mcp call: want TOOL [JSON-ARGS], got 0 arguments"}},
		{name: "call arguments not an object", args: []string{"mcp", "call", "--url", echoURL, "mcp_adhoc_echo", "[1]"}, wantCode: 2, wantStderr: []string{"harnessd: mcp call: JSON-ARGS must be a JSON object"}},
		{name: "mcp without subcommand", args: []string{"mcp"}, wantCode: 2, wantStderr: []string{"harnessd: mcp: missing subcommand"}},
		{name: "unknown mcp subcommand", args: []string{"mcp", "frob"}, wantCode: 2, wantStderr: []string{`harnessd: mcp: unknown subcommand "frob"`}},
		{name: "unknown command", args: []string{"frobnicate"}, wantCode: 2, wantStderr: []string{`harnessd: unknown command "frobnicate" (see harnessd --help)`}},
		{name: "serve on a public address without keys", args: []string{"serve", "--addr", "0.0.0.0:0"}, wantCode: 2, wantStderr: []string{"harnessd: --addr 0.0.0.0:0 is not a loopback address"}},
		{name: "version", args: []string{"version"}, wantStdout: []string{"harnessd " + buildVersion + "\n", "\nrevision ", "\ngo go1."}},
		{name: "-version", args: []string{"-version"}, wantStdout: []string{"harnessd ", "\nrevision ", "\ngo go1."}},
		{name: "mcp help", args: []string{"mcp", "--help"}, wantStdout: []string{"harnessd mcp add", "harnessd mcp import"}},
		{name: "help", args: []string{"--help"}, wantStdout: []string{"Usage:", "harnessd mcp list", "harnessd mcp call", "harnessd version"}},
		{name: "mcp list help", args: []string{"mcp", "list", "--help"}, wantStderr: []string{"Usage: harnessd mcp list", "-json", "-url", "-name"}},
		{name: "mcp call help", args: []string{"mcp", "call", "--help"}, wantStderr: []string{"Usage: harnessd mcp call", "-json"}},
		{name: "serve help", args: []string{"serve", "--help"}, wantStderr: []string{"Usage: harnessd [serve]", "-addr", "-insecure"}},
		{name: "mcp serve help", args: []string{"mcp", "serve", "--help"}, wantStderr: []string{"Usage: harnessd mcp serve", "-addr", "-grace", "HARNESS_TOKEN"}},
		{name: "mcp serve argument", args: []string{"mcp", "serve", "extra"}, wantCode: 2, wantStderr: []string{`harnessd: mcp serve: unexpected argument "extra": it takes flags only`}},
		{name: "mcp serve negative grace", args: []string{"mcp", "serve", "--grace", "-1s"}, wantCode: 2, wantStderr: []string{"harnessd: mcp serve: --grace -1s: want a duration of 0 or more"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.node {
				requireNode(t)
			}
			code, stdout, stderr := runHarnessd(t, tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("harnessd %q exit = %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, code, tt.wantCode, stdout, stderr)
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("harnessd %q stdout = %q, want it to contain %q", tt.args, stdout, want)
				}
			}
			if (tt.exact != "" || len(tt.wantStdout) == 0) && stdout != tt.exact {
				t.Errorf("harnessd %q stdout = %q, want %q", tt.args, stdout, tt.exact)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("harnessd %q stderr = %q, want it to contain %q", tt.args, stderr, want)
				}
			}
			if tt.wantCode == 0 && strings.Contains(stderr, "harnessd: ") {
				t.Errorf("harnessd %q stderr = %q, want no error", tt.args, stderr)
			}
		})
	}
}

// TestCommandLineJSON checks the shapes of mcp list --json and mcp call
// --json.
func TestCommandLineJSON(t *testing.T) {
	t.Parallel()
	echoURL := startEchoServerHTTP(t, "http")
	everything := everythingIfPresent(t) // list needs it
	env := map[string]string{"HARNESS_MCP_SERVERS": serversJSON(t, map[string]any{
		"name": "everything", "command": everything.Command, "args": everything.Args,
		"env": map[string]string{"SECRET_TOKEN": "tok-8d1e0b"},
	})}

	t.Run("list", func(t *testing.T) {
		t.Parallel()
		requireNode(t)
		code, stdout, stderr := runHarnessd(t, env, "mcp", "list", "--json")
		if code != 0 {
			t.Fatalf("mcp list --json exit = %d, stderr %q", code, stderr)
		}
		var got struct {
			Servers []map[string]json.RawMessage `json:"servers"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("mcp list --json stdout = %q: %v", stdout, err)
		}
		if len(got.Servers) != 1 {
			t.Fatalf("mcp list --json servers = %d, want 1", len(got.Servers))
		}
		server := got.Servers[0]
		for _, key := range []string{"name", "transport", "source", "status", "protocol_version", "server_info", "restarts", "tools"} {
			if _, ok := server[key]; !ok {
				t.Errorf("mcp list --json server has no %q: %s", key, stdout)
			}
		}
		for _, key := range []string{"env", "headers", "error"} {
			if _, ok := server[key]; ok {
				t.Errorf("mcp list --json server has %q, want none: %s", key, stdout)
			}
		}
		if strings.Contains(stdout, "tok-8d1e0b") {
			t.Errorf("mcp list --json shows an env value: %s", stdout)
		}
		var fields struct {
			Name       string         `json:"name"`
			Transport  string         `json:"transport"`
			Source     string         `json:"source"`
			Status     string         `json:"status"`
			Protocol   string         `json:"protocol_version"`
			ServerInfo implementation `json:"server_info"`
			Tools      []statusTool   `json:"tools"`
		}
		raw, _ := json.Marshal(server)
		if err := json.Unmarshal(raw, &fields); err != nil {
			t.Fatal(err)
		}
		if fields.Name != "everything" || fields.Transport != transportStdio || fields.Source != "HARNESS_MCP_SERVERS" ||
			fields.Status != statusReady || fields.Protocol != latestProtocolVersion || fields.ServerInfo.Name != "mcp-servers/everything" {
			t.Errorf("mcp list --json server = %+v, want everything, stdio, HARNESS_MCP_SERVERS, ready, %s, mcp-servers/everything", fields, latestProtocolVersion)
		}
		if !slices.ContainsFunc(fields.Tools, func(tool statusTool) bool {
			return tool.Name == "mcp_everything_get_env" && tool.ServerTool == "get-env" && tool.Description != ""
		}) {
			t.Errorf("mcp list --json tools = %+v, want mcp_everything_get_env for get-env with a description", fields.Tools)
		}
	})

	t.Run("call", func(t *testing.T) {
		t.Parallel()
		code, stdout, stderr := runHarnessd(t, nil, "mcp", "call", "--json", "--url", echoURL, "mcp_adhoc_add", `{"a":2,"b":40}`)
		if code != 0 {
			t.Fatalf("mcp call --json exit = %d, stderr %q", code, stderr)
		}
		var got struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent map[string]float64 `json:"structuredContent"`
		}
		if err := json.Unmarshal([]byte(stdout), &got); err != nil {
			t.Fatalf("mcp call --json stdout = %q: %v", stdout, err)
		}
		if len(got.Content) != 1 || got.Content[0].Type != "text" || got.Content[0].Text != "42" || got.StructuredContent["sum"] != 42 {
			t.Errorf("mcp call --json = %s, want one text block \"42\" and structuredContent sum 42", stdout)
		}
		if strings.Count(strings.TrimSpace(stdout), "\n") != 0 {
			t.Errorf("mcp call --json stdout = %q, want one JSON value on one line", stdout)
		}
	})
}

// TestMCPListSaysFailureOnce: a server that fails to start is said once,
// in the list, not again as a log line (stderr has none at the default
// level, warn).
func TestMCPListSaysFailureOnce(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, table, want string }{
		{name: "exits at start", table: "command = \"/bin/sh\"\nargs = [\"-c\", \"exit 3\"]\n", want: "exited with status 3"},
		{name: "missing cwd", table: "command = \"/bin/sh\"\ncwd = \"/nonexistent/dir\"\n", want: `cwd "/nonexistent/dir" is not a directory`},
		{name: "refused connection", table: "url = \"http://127.0.0.1:1/mcp\"\n", want: "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			writeFile(t, home, "config.toml", "[mcp_servers.bad]\n"+tt.table)
			code, stdout, stderr := runHarnessd(t, map[string]string{"HARNESS_HOME": home}, "mcp", "list")
			if code != 1 || !strings.Contains(stdout, tt.want) || strings.Contains(stderr, "level=") {
				t.Errorf("mcp list = %d, stdout %q, stderr %q; want 1 and %q said once, in the list", code, stdout, stderr, tt.want)
			}
		})
	}
}
