package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// This file tests the config.toml editing of mcp add, remove and import:
// the table splice, the TOML text of a server, and the commands end to end.

func TestRemoveServerTables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, server, want string
		found                  bool
	}{
		{name: "middle table with its comment",
			in:     "# top\n[mcp_servers.a]\ncommand = \"a\"\n\n# the b server\n[mcp_servers.b]\ncommand = \"b\"\n\n[mcp_servers.c]\ncommand = \"c\"\n",
			server: "b", found: true,
			want: "# top\n[mcp_servers.a]\ncommand = \"a\"\n\n[mcp_servers.c]\ncommand = \"c\"\n"},
		{name: "last table takes the blank lines above",
			in:     "[model]\nname = \"x\"\n\n[mcp_servers.a]\ncommand = \"a\"\n",
			server: "a", found: true,
			want: "[model]\nname = \"x\"\n"},
		{name: "sub-tables elsewhere in the file",
			in:     "[mcp_servers.a]\ncommand = \"a\"\n[mcp_servers.b]\nurl = \"http://h/mcp\"\n[mcp_servers.a.env]\nK = \"v\"\n[model]\nname = \"x\"\n",
			server: "a", found: true,
			want: "[mcp_servers.b]\nurl = \"http://h/mcp\"\n[model]\nname = \"x\"\n"},
		{name: "quoted name and spaces in the header",
			in:     "[ mcp_servers . \"api.example\" ]  # remote\nurl = \"http://h/mcp\"\n[mcp_servers.other]\ncommand = \"o\"\n",
			server: "api.example", found: true,
			want: "[mcp_servers.other]\ncommand = \"o\"\n"},
		{name: "a line starting with [ inside an array or string is no header",
			in:     "[mcp_servers.a]\nargs = [\n  \"x\",\n[\"nested\"],\n]\nnote = '''\n[mcp_servers.b]\n'''\n[mcp_servers.c]\ncommand = \"c\"\n",
			server: "a", found: true,
			want: "[mcp_servers.c]\ncommand = \"c\"\n"},
		{name: "absent server",
			in:     "[mcp_servers.a]\ncommand = \"a\"\n",
			server: "b", found: false,
			want: "[mcp_servers.a]\ncommand = \"a\"\n"},
		{name: "a table whose name only starts like the server's",
			in:     "[mcp_servers.ab]\ncommand = \"a\"\n",
			server: "a", found: false,
			want: "[mcp_servers.ab]\ncommand = \"a\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, found := removeServerTables([]byte(tt.in), tt.server)
			if string(got) != tt.want || found != tt.found {
				t.Errorf("removeServerTables(%q, %q) = %q, %t, want %q, %t", tt.in, tt.server, got, found, tt.want, tt.found)
			}
		})
	}
}

func TestServerTOMLRoundTrip(t *testing.T) {
	t.Parallel()
	enabled := false
	timeout := "90s"
	raw := rawServer{
		Command: `C:\tools\srv "x"`, Args: []string{"-y", "a\tb", "${HOME}/dir", "$$literal"},
		Env: map[string]string{"API_KEY": "${API_KEY}", "odd.key": "1"}, Timeout: &timeout,
		Enabled: &enabled, ExcludeTools: []string{"delete_*"},
	}
	text := serverTOML("my.server", raw)
	getenv := func(k string) (string, bool) {
		return map[string]string{"HOME": "/home/u", "API_KEY": "secret-value"}[k], true
	}
	layer, err := parseConfigTOML("test.toml", []byte(text), getenv)
	if err != nil {
		t.Fatalf("parseConfigTOML(%q): %v", text, err)
	}
	s := layer.servers[0]
	wantArgs := []string{"-y", "a\tb", "/home/u/dir", "$literal"}
	if s.Name != "my.server" || s.Command != raw.Command || !slices.Equal(s.Args, wantArgs) ||
		s.Env["API_KEY"] != "secret-value" || s.Env["odd.key"] != "1" || s.Enabled || s.Timeout.String() != "1m30s" {
		t.Errorf("serverTOML round trip = %+v, from %q", s, text)
	}
}

// homeFixture is a home config.toml with comments, other servers, other
// tables and a server written with sub-tables.
const homeFixture = `# harnessd configuration of this host
allowed_hosts = ["agent.internal"]

[model]
name = "anthropic/claude-sonnet-4-5" # the default model

# The team's database server: read-only.
[mcp_servers.db]
command = "/usr/local/bin/db-mcp"
args = [
  "--read-only",   # never writes
  "--dsn=${DB_DSN:-postgres://localhost/app}",
]

[mcp_servers.db.env]
LOG = "warn"

[mcp_servers.search]
url = "https://search.example/mcp"
headers = { Authorization = "Bearer ${SEARCH_TOKEN:-none}" }
`

func TestMCPAddGetRemove(t *testing.T) {
	t.Parallel()
	everything := everythingStdioCommand(t)
	home := t.TempDir()
	file := filepath.Join(home, "config.toml")
	if err := os.WriteFile(file, []byte(homeFixture), 0o640); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HARNESS_HOME": home}
	args := append([]string{"mcp", "add", "everything", "--env", "EVERYTHING_TOKEN=sekret-value-123", "--"}, everything.Command)
	args = append(args, everything.Args...)
	if code, stdout, stderr := runHarnessd(t, env, args...); code != 0 || !strings.Contains(stdout, `added server "everything"`) {
		t.Fatalf("mcp add = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	added, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(added), homeFixture+"\n[mcp_servers.everything]\n") {
		t.Errorf("after mcp add the file is\n%s\nwant the old bytes, a blank line and the new table", added)
	}
	if info, _ := os.Stat(file); info.Mode().Perm() != 0o640 {
		t.Errorf("mode after mcp add = %v, want 0640 kept", info.Mode().Perm())
	}

	code, _, stderr := runHarnessd(t, env, "mcp", "add", "everything", "--url", "http://127.0.0.1:1/mcp")
	if code != 2 || !strings.Contains(stderr, "already defines server \"everything\"; give --replace to overwrite") {
		t.Errorf("second mcp add = %d, stderr %q, want 2 and the --replace hint", code, stderr)
	}

	code, stdout, stderr := runHarnessd(t, env, "mcp", "get", "everything")
	for _, want := range []string{"status: ready", "EVERYTHING_TOKEN=" + maskedValue, "mcp_everything_echo", `"message"`, "protocol "} {
		if !strings.Contains(stdout, want) {
			t.Errorf("mcp get output lacks %q:\n%s", want, stdout)
		}
	}
	if code != 0 || strings.Contains(stdout+stderr, "sekret-value-123") {
		t.Errorf("mcp get = %d (want 0), secret shown: %t\nstderr %s", code, strings.Contains(stdout+stderr, "sekret-value-123"), stderr)
	}

	if code, stdout, stderr := runHarnessd(t, env, "mcp", "remove", "everything"); code != 0 {
		t.Fatalf("mcp remove = %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	after, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if string(after) != homeFixture {
		t.Errorf("after add and remove the file is\n%s\nwant it byte for byte as before:\n%s", after, homeFixture)
	}

	if code, _, stderr := runHarnessd(t, env, "mcp", "remove", "db"); code != 0 {
		t.Fatalf("mcp remove db = %d, stderr %q", code, stderr)
	}
	after, _ = os.ReadFile(file)
	want := strings.Replace(homeFixture, homeFixture[strings.Index(homeFixture, "# The team's"):strings.Index(homeFixture, "[mcp_servers.search]")], "", 1)
	if string(after) != want {
		t.Errorf("after mcp remove db the file is\n%s\nwant\n%s", after, want)
	}
}

func TestMCPEditErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		file     string // the home config.toml, if not empty
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "remove of an absent server", args: []string{"mcp", "remove", "nope"}, wantCode: 2,
			wantErr: `defines no server "nope" (see harnessd mcp list; --scope picks the file)`},
		{name: "remove of an inline server", file: "[mcp_servers]\ninline = { command = \"x\" }\n",
			args: []string{"mcp", "remove", "inline"}, wantCode: 1,
			wantErr: `server "inline" in HOME/config.toml is not written as [mcp_servers.inline] tables; edit the file by hand`},
		{name: "add with neither command nor url", args: []string{"mcp", "add", "x"}, wantCode: 2,
			wantErr: `mcp add: server "x": command/url: neither is set; set command for a stdio server or url for an http server`},
		{name: "add of a colliding name", file: "[mcp_servers.my-db]\ncommand = \"x\"\n",
			args: []string{"mcp", "add", "my_db", "--", "y"}, wantCode: 1,
			wantErr: `both make tool names start with "mcp_my_db_"; rename one`},
		{name: "add to a broken file", file: "[mcp_servers.a]\ncomand = \"x\"\n",
			args: []string{"mcp", "add", "b", "--", "y"}, wantCode: 1,
			wantErr: `has problems; fix them first, nothing was changed`},
		{name: "bad scope", args: []string{"mcp", "add", "x", "--scope", "global", "--", "y"}, wantCode: 2,
			wantErr: `--scope "global": want home or workspace`},
		{name: "env with url", args: []string{"mcp", "add", "x", "--url", "http://h/mcp", "--env", "A=b"}, wantCode: 2,
			wantErr: `args/env/cwd: only a stdio server takes them`},
		{name: "url placeholder after a literal that is no scheme", args: []string{"mcp", "add", "x", "--url", "localhost:${PORT}/mcp"}, wantCode: 2,
			wantErr: `harnessd: mcp add: server "x": url: no scheme; write a full URL like http://localhost:3001/mcp`},
		{name: "cwd placeholder after a relative path", args: []string{"mcp", "add", "x", "--cwd", "srv/${DIR}", "--", "y"}, wantCode: 2,
			wantErr: `harnessd: mcp add: server "x": cwd: not an absolute path; write a full path (${HOME}/dir works)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			if tt.file != "" {
				if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(tt.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, _, stderr := runHarnessd(t, map[string]string{"HARNESS_HOME": home}, tt.args...)
			stderr = strings.ReplaceAll(stderr, home, "HOME")
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("harnessd %q = %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.wantCode, tt.wantErr)
			}
			if data, _ := os.ReadFile(filepath.Join(home, "config.toml")); string(data) != tt.file {
				t.Errorf("file changed to %q, want %q", data, tt.file)
			}
		})
	}
}

func TestMCPAddWorkspaceScope(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	code, _, stderr := runHarnessd(t, map[string]string{"HARNESS_WORKSPACE": ws},
		"mcp", "add", "remote", "--scope", "workspace", "--url", "http://localhost:3001/mcp", "--header", "Authorization=Bearer ${TOKEN}")
	if code != 0 {
		t.Fatalf("mcp add --scope workspace = %d, stderr %q", code, stderr)
	}
	data, err := os.ReadFile(filepath.Join(ws, ".harness", "config.toml"))
	want := "[mcp_servers.remote]\nurl = \"http://localhost:3001/mcp\"\nheaders = { Authorization = \"Bearer ${TOKEN}\" }\n"
	if err != nil || string(data) != want {
		t.Errorf("workspace config = %q, %v; want %q", data, err, want)
	}
}

// TestMCPAddPlaceholders adds servers whose url, cwd or headers hold
// ${VAR} placeholders: each is written as given, and loads once the
// daemon's environment sets the variables, where its URL is checked after
// expansion as for any config.
func TestMCPAddPlaceholders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		env     map[string]string // the daemon's environment
		wantURL string
		wantErr string // loading with env
		// wantUnset is the server's unsetErr: it loads, but fails to start
		wantUnset string
	}{
		{name: "the whole url", args: []string{"--url", "${URL}"},
			env: map[string]string{"URL": "https://mcp.example.com/mcp"}, wantURL: "https://mcp.example.com/mcp"},
		{name: "host", args: []string{"--url", "http://${HOST}/mcp"},
			env: map[string]string{"HOST": "10.0.0.7"}, wantURL: "http://10.0.0.7/mcp"},
		{name: "port", args: []string{"--url", "http://localhost:${PORT}/mcp"},
			env: map[string]string{"PORT": "3001"}, wantURL: "http://localhost:3001/mcp"},
		{name: "default", args: []string{"--url", "https://${HOST:-localhost:3001}/mcp"}, wantURL: "https://localhost:3001/mcp"},
		{name: "base and path", args: []string{"--url", "${BASE}/mcp", "--header", "Authorization=Bearer ${TOKEN}"},
			env: map[string]string{"BASE": "http://h:1", "TOKEN": "t"}, wantURL: "http://h:1/mcp"},
		{name: "a bad value is caught when loading", args: []string{"--url", "${URL}"},
			env: map[string]string{"URL": "localhost:3001/mcp"}, wantErr: `server "x": url: no scheme; write a full URL like http://localhost:3001/mcp`},
		{name: "an unset variable fails the server alone", args: []string{"--url", "${URL}"},
			wantUnset: `url: variable URL is not set; set it in harnessd's environment or write ${URL:-default}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			args := append([]string{"mcp", "add", "x"}, tt.args...)
			if code, _, stderr := runHarnessd(t, map[string]string{"HARNESS_HOME": home}, args...); code != 0 {
				t.Fatalf("harnessd %q = %d, stderr %q; want it added", args, code, stderr)
			}
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(tt.env)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("loadConfig() after %q = %v, want an error with %q", args, err, tt.wantErr)
				}
				return
			}
			if tt.wantUnset != "" {
				if err != nil || len(cfg.Servers) != 1 || errString(cfg.Servers[0].unsetErr()) != tt.wantUnset {
					t.Errorf("loadConfig() after %q = %+v, %v; want one server failing with %q", args, cfg.Servers, err, tt.wantUnset)
				}
				return
			}
			if err != nil || len(cfg.Servers) != 1 || cfg.Servers[0].URL != tt.wantURL {
				t.Errorf("loadConfig() after %q = %+v, %v; want one server at %s", args, cfg.Servers, err, tt.wantURL)
			}
		})
	}
}
