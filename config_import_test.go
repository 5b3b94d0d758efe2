package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests the server lists of other clients: HARNESS_MCP_SERVERS
// in the object shape with "type", and mcp import of each foreign format,
// on the snippets of testdata/clientconfigs (sources in its SOURCES.md).

func TestServerJSONObjectShape(t *testing.T) {
	t.Parallel()
	read := func(name string) string {
		data, err := os.ReadFile(filepath.Join("testdata", "clientconfigs", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	getenv := fakeEnv(map[string]string{"API_TOKEN": "token-123456789", "API_KEY": "key-123456789"})
	tests := []struct {
		name    string
		json    string
		want    []string // name transport command-or-url, per server
		wantErr string
	}{
		{name: "Claude Desktop", json: read("claude-desktop-filesystem.json"),
			want: []string{"filesystem stdio npx"}},
		{name: "Claude Code with type", json: read("claude-code-mcp.json"),
			want: []string{"my-tool stdio node", "remote-api sse https://api.example.com/mcp/sse", "http-service http https://api.example.com/mcp"}},
		{name: "VS Code servers", json: `{"servers": {"fs": {"type": "stdio", "command": "npx"}, "remote": {"type": "streamable-http", "url": "http://localhost:3001/mcp"}}}`,
			want: []string{"fs stdio npx", "remote http http://localhost:3001/mcp"}},
		{name: "array with type", json: `[{"name": "a", "type": "sse", "url": "http://h/sse"}]`,
			want: []string{"a sse http://h/sse"}},
		{name: "unknown type", json: `{"mcpServers": {"a": {"type": "websocket", "url": "ws://h"}}}`,
			wantErr: `HARNESS_MCP_SERVERS: server "a": type: "websocket" is not supported; use stdio, http, streamable-http or sse`},
		{name: "type and transport disagree", json: `[{"name": "a", "type": "sse", "transport": "http", "url": "http://h"}]`,
			wantErr: `HARNESS_MCP_SERVERS[0]: server "a": type/transport: they disagree; keep one`},
		{name: "other top-level keys", json: `{"mcpServers": {}, "inputs": []}`,
			wantErr: `HARNESS_MCP_SERVERS: a JSON object must hold only "mcpServers" or "servers"`},
		{name: "unknown field names the server", json: `{"mcpServers": {"a": {"command": "x", "envFile": ".env"}}}`,
			wantErr: `HARNESS_MCP_SERVERS: server "a": unknown field "envFile"`},
		{name: "name differs from key", json: `{"mcpServers": {"a": {"name": "b", "command": "x"}}}`,
			wantErr: `HARNESS_MCP_SERVERS: server "a": name: "b" differs from the key; remove it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers, err := parseServerJSON("HARNESS_MCP_SERVERS", []byte(tt.json), getenv)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("parseServerJSON(%s) error = %v, want %q", tt.json, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseServerJSON(%s): %v", tt.json, err)
			}
			var got []string
			for _, s := range servers {
				got = append(got, strings.Join([]string{s.Name, s.Transport, s.Command + s.URL}, " "))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("parseServerJSON(%s) = %q, want %q", tt.json, got, tt.want)
			}
		})
	}
}

func TestMCPImport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file       string
		wantOut    []string
		wantTables string
	}{
		{file: "claude-desktop-filesystem.json",
			wantOut: []string{`converted "filesystem" (stdio: npx -y @modelcontextprotocol/server-filesystem /Users/username/Desktop /path/to/other/allowed/dir)`, "wrote 1 server to "},
			wantTables: `[mcp_servers.filesystem]
command = "npx"
args = ["-y", "@modelcontextprotocol/server-filesystem", "/Users/username/Desktop", "/path/to/other/allowed/dir"]
`},
		{file: "claude-code-mcp.json",
			wantOut: []string{`converted "my-tool" (stdio: node ./my-mcp-server.js)`, `converted "remote-api" (sse: https://api.example.com/mcp/sse)`, "wrote 3 servers to "},
			wantTables: `[mcp_servers.my-tool]
command = "node"
args = ["./my-mcp-server.js"]
env = { DEBUG = "${DEBUG:-false}" }

[mcp_servers.remote-api]
transport = "sse"
url = "https://api.example.com/mcp/sse"
headers = { Authorization = "Bearer ${API_TOKEN}" }

[mcp_servers.http-service]
transport = "http"
url = "https://api.example.com/mcp"
headers = { X-API-Key = "${API_KEY}" }
`},
		{file: "vscode-github.json",
			wantOut: []string{
				`not converted "github": ${input:github_mcp_pat} asks the user for a value, which harnessd cannot; put the value or a ${VAR} in its place`,
				`converted "github-local" (stdio: docker run -i --rm -e GITHUB_PERSONAL_ACCESS_TOKEN ghcr.io/github/github-mcp-server)`,
				`  not converted: envFile: harnessd reads no env files; put the variables in env or in harnessd's environment`},
			wantTables: `[mcp_servers.github-local]
transport = "stdio"
command = "docker"
args = ["run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server"]
env = { GITHUB_PERSONAL_ACCESS_TOKEN = "${GITHUB_PERSONAL_ACCESS_TOKEN}" }
`},
		{file: "cursor-mcp.json",
			wantOut: []string{`converted "remote-server" (http: https://api.example.com/mcp)`},
			wantTables: `[mcp_servers.server-name]
command = "npx"
args = ["-y", "mcp-server"]
env = { API_KEY = "${API_KEY}" }

[mcp_servers.remote-server]
url = "https://api.example.com/mcp"
headers = { Authorization = "Bearer ${MY_SERVICE_TOKEN}" }
`},
		{file: "codex-config.toml",
			wantOut: []string{`converted "context7" (stdio: npx -y @upstash/context7-mcp)`, `converted "figma" (http: https://mcp.figma.com/mcp)`},
			wantTables: `[mcp_servers.context7]
command = "npx"
args = ["-y", "@upstash/context7-mcp"]
env = { CONTEXT7_API_KEY = "${CONTEXT7_API_KEY}", MY_VAR = "value" }
timeout = "1m0.5s"
startup_timeout = "20s"
include_tools = ["resolve-library-id", "get-library-docs"]

[mcp_servers.figma]
url = "https://mcp.figma.com/mcp"
headers = { Authorization = "Bearer ${FIGMA_OAUTH_TOKEN}", X-Figma-Region = "us-east-1", X-Team = "${FIGMA_TEAM}" }
enabled = false
exclude_tools = ["delete_file"]
`},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			file := filepath.Join(home, "config.toml")
			existing := "# mine\n[mcp_servers.mine]\ncommand = \"mine\"\n"
			if err := os.WriteFile(file, []byte(existing), 0o600); err != nil {
				t.Fatal(err)
			}
			env := map[string]string{"HARNESS_HOME": home}
			src, err := filepath.Abs(filepath.Join("testdata", "clientconfigs", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runHarnessd(t, env, "mcp", "import", src)
			if code != 0 {
				t.Fatalf("mcp import %s = %d, stderr %q", tt.file, code, stderr)
			}
			for _, want := range tt.wantOut {
				if !strings.Contains(stdout, want) {
					t.Errorf("mcp import %s output lacks %q:\n%s", tt.file, want, stdout)
				}
			}
			data, _ := os.ReadFile(file)
			if want := existing + "\n" + tt.wantTables; string(data) != want {
				t.Errorf("after mcp import %s the file is\n%s\nwant\n%s", tt.file, data, want)
			}
			code, _, stderr = runHarnessd(t, env, "mcp", "import", src)
			if code != 2 || !strings.Contains(stderr, "give --replace to overwrite") {
				t.Errorf("second mcp import %s = %d, stderr %q; want 2 and the --replace hint", tt.file, code, stderr)
			}
			if code, _, stderr := runHarnessd(t, env, "mcp", "import", "--replace", src); code != 0 {
				t.Errorf("mcp import --replace %s = %d, stderr %q", tt.file, code, stderr)
			}
			if again, _ := os.ReadFile(file); string(again) != string(data) {
				t.Errorf("mcp import --replace %s changed the file to\n%s\nwant\n%s", tt.file, again, data)
			}
		})
	}
}

func TestMCPImportErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, file string
		wantCode   int
		wantErr    string
	}{
		{name: "no servers key", file: write("a.json", `{"projects": {}}`), wantCode: 2,
			wantErr: `no "mcpServers" or "servers" object; give a Claude, Cursor or VS Code mcp.json or a Codex config.toml`},
		{name: "TOML without servers", file: write("b.toml", "model = \"x\"\n"), wantCode: 2,
			wantErr: `no [mcp_servers] tables`},
		{name: "nothing convertible", file: write("c.json", `{"mcpServers": {"a": {"type": "websocket", "url": "ws://h"}}}`), wantCode: 1,
			wantErr: `no server of`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runHarnessd(t, nil, "mcp", "import", tt.file)
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("mcp import %s = %d, stderr %q; want %d and %q", tt.file, code, stderr, tt.wantCode, tt.wantErr)
			}
		})
	}
}

// TestMCPImportUnsetVariables: each ${VAR} an import writes that is not
// set now is warned of, naming the server and field, and the import goes
// on (the server will fail alone until the variable is set).
func TestMCPImportUnsetVariables(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "mcp.json")
	cursor := `{"mcpServers": {
		"remote": {"url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${env:REMOTE_TOKEN}"}},
		"local": {"command": "npx", "args": ["-y", "mcp-server"], "env": {"KEY": "${env:SET_KEY}", "LEVEL": "${LOG_LEVEL:-info}"}}}}`
	if err := os.WriteFile(src, []byte(cursor), 0o600); err != nil {
		t.Fatal(err)
	}
	want := `warning: server "remote": headers.Authorization: ${REMOTE_TOKEN} is not set in this environment; set it where harnessd runs, or the server will fail to start` + "\n"
	for _, args := range [][]string{{"mcp", "import", "--dry-run", src}, {"mcp", "import", src}} {
		home := t.TempDir()
		code, stdout, stderr := runHarnessd(t, map[string]string{"HARNESS_HOME": home, "SET_KEY": "k"}, args...)
		data, _ := os.ReadFile(filepath.Join(home, "config.toml"))
		if code != 0 || stderr != want || !strings.Contains(stdout+string(data), `"Bearer ${REMOTE_TOKEN}"`) {
			t.Errorf("harnessd %q = %d, stdout %q, stderr %q; want 0, the table and the warning %q", args, code, stdout, stderr, want)
		}
	}
}

// TestMCPImportDryRunRefuses: a dry run refuses what the import would
// (with the same exit status), and changes nothing.
func TestMCPImportDryRunRefuses(t *testing.T) {
	t.Parallel()
	src := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(src, []byte(`{"mcpServers": {"my-db": {"command": "db-server"}, "web": {"url": "http://localhost:3001/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, existing string
		replace        bool
		wantCode       int
		wantErr        string
	}{
		{name: "no conflict", existing: "[mcp_servers.other]\ncommand = \"x\"\n"},
		{name: "same name", existing: "[mcp_servers.web]\ncommand = \"x\"\n", wantCode: 2,
			wantErr: `already defines server "web"; give --replace to overwrite`},
		{name: "same name replaced", existing: "[mcp_servers.web]\ncommand = \"x\"\n", replace: true},
		{name: "same tool names", existing: "[mcp_servers.my_db]\ncommand = \"x\"\n", wantCode: 1,
			wantErr: `servers "my_db" (HOME/config.toml) and "my-db" (HOME/config.toml) both make tool names start with "mcp_my_db_"; rename one`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			writeFile(t, home, "config.toml", tt.existing)
			env := map[string]string{"HARNESS_HOME": home}
			for _, dry := range []bool{true, false} {
				args := []string{"mcp", "import"}
				if dry {
					args = append(args, "--dry-run")
				}
				if tt.replace {
					args = append(args, "--replace")
				}
				args = append(args, src)
				code, stdout, stderr := runHarnessd(t, env, args...)
				stderr = strings.ReplaceAll(stderr, home, "HOME")
				if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
					t.Errorf("harnessd %q = %d, stderr %q; want %d and %q", args, code, stderr, tt.wantCode, tt.wantErr)
				}
				if data, _ := os.ReadFile(filepath.Join(home, "config.toml")); dry && string(data) != tt.existing {
					t.Errorf("harnessd %q changed the file to %q", args, data)
				}
				if dry && !strings.Contains(stdout, "[mcp_servers.web]") {
					t.Errorf("harnessd %q = %q, want the tables printed", args, stdout)
				}
			}
		})
	}
}
