package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file tests config.go: the four sources and their precedence,
// validation messages, expansion, profiles, auth keys and model settings.

// fakeEnv returns a getenv over m.
func fakeEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// configDirs returns a fresh HARNESS_HOME holding homeTOML as config.toml
// and a fresh workspace holding wsTOML as .harness/config.toml; an empty
// text writes no file.
func configDirs(t *testing.T, homeTOML, wsTOML string) (home, ws string) {
	t.Helper()
	home, ws = t.TempDir(), t.TempDir()
	if homeTOML != "" {
		writeFile(t, home, "config.toml", homeTOML)
	}
	if wsTOML != "" {
		writeFile(t, ws, ".harness/config.toml", wsTOML)
	}
	return home, ws
}

// writeFile writes data to dir/name, creating directories.
func writeFile(t *testing.T, dir, name, data string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// summary renders servers as "name=command args|url,..." to compare winners.
func summary(servers []serverConfig) string {
	var parts []string
	for _, s := range servers {
		v := strings.TrimSpace(s.Command + " " + strings.Join(s.Args, " "))
		if s.URL != "" {
			v = s.URL
		}
		parts = append(parts, s.Name+"="+v)
	}
	return strings.Join(parts, ",")
}

// tomlServer is a [mcp_servers.<name>] table running command.
func tomlServer(name, command string) string {
	return fmt.Sprintf("[mcp_servers.%q]\ncommand = %q\n", name, command)
}

// jsonServer is a server object running command.
func jsonServer(name, command string) string {
	return fmt.Sprintf(`{"name": %q, "command": %q}`, name, command)
}

// checkServer returns why s is not a resolved, valid server, or nil. It
// restates serverConfig's invariants independently of buildServer.
func checkServer(s serverConfig) error {
	switch {
	case checkName(s.Name, ".", "") != nil:
		return fmt.Errorf("bad name %q", s.Name)
	case s.Transport == transportStdio && (s.Command == "" || s.URL != ""):
		return errors.New("stdio without command only")
	case (s.Transport == transportHTTP || s.Transport == transportSSE) && (s.URL == "" || s.Command != "" || checkHTTPURL(s.URL) != nil):
		return errors.New("http without a valid url only")
	case s.Transport != transportStdio && s.Transport != transportHTTP && s.Transport != transportSSE:
		return fmt.Errorf("transport %q", s.Transport)
	case s.Timeout <= 0 || s.StartupTimeout <= 0:
		return errors.New("non-positive timeout")
	case s.MaxMessageBytes < minMaxMessageBytes || s.MaxMessageBytes > maxMaxMessageBytes:
		return fmt.Errorf("max_message_bytes %d", s.MaxMessageBytes)
	case s.Cwd != "" && !filepath.IsAbs(s.Cwd):
		return errors.New("relative cwd")
	}
	for _, g := range slices.Concat(s.IncludeTools, s.ExcludeTools) {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			return fmt.Errorf("bad glob %q", g)
		}
	}
	for k, v := range s.Headers {
		if !isHeaderName(k) || strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("bad header %q", k)
		}
	}
	return nil
}

func TestPrecedence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		home, ws   string // TOML files; "" means absent
		env        string // HARNESS_MCP_SERVERS
		profile    string // profiles/p.toml; "" means absent
		run        string // the run's mcp_servers
		wantGlobal string
		wantWarn   []string // servers skipped from the env var
		wantScope  string   // globals shadowed by the profile, then profile servers
		wantRun    string
		wantErr    string // from whichever stage fails first
	}{
		{name: "home only", home: tomlServer("a", "home"), wantGlobal: "a=home", wantScope: "a=home"},
		{name: "workspace replaces same name whole",
			home: tomlServer("a", "home") + "args = [\"-v\"]\ntimeout = \"5s\"\n", ws: tomlServer("a", "ws"),
			wantGlobal: "a=ws", wantScope: "a=ws"},
		{name: "workspace adds other names", home: tomlServer("a", "home"), ws: tomlServer("b", "ws"),
			wantGlobal: "a=home,b=ws", wantScope: "a=home,b=ws"},
		{name: "toml beats env", home: tomlServer("a", "home"), env: "[" + jsonServer("a", "env") + "]",
			wantGlobal: "a=home", wantWarn: []string{"a"}, wantScope: "a=home"},
		{name: "workspace toml beats env", ws: tomlServer("a", "ws"), env: "[" + jsonServer("a", "env") + "," + jsonServer("b", "env") + "]",
			wantGlobal: "a=ws,b=env", wantWarn: []string{"a"}, wantScope: "a=ws,b=env"},
		{name: "env after toml", home: tomlServer("b", "home"), env: "[" + jsonServer("a", "env") + "]",
			wantGlobal: "b=home,a=env", wantScope: "b=home,a=env"},
		{name: "env only", env: "[" + jsonServer("a", "env") + "]", wantGlobal: "a=env", wantScope: "a=env"},
		{name: "sanitized collision toml and env", home: tomlServer("my-tool", "home"), env: "[" + jsonServer("my_tool", "env") + "]",
			wantErr: `servers "my-tool" (HOME/config.toml) and "my_tool" (HARNESS_MCP_SERVERS) both make tool names start with "mcp_my_tool_"; rename one`},
		{name: "sanitized collision across toml layers", home: tomlServer("my-tool", "home"), ws: tomlServer("My_Tool", "ws"),
			wantErr: `servers "my-tool" (HOME/config.toml) and "My_Tool" (WS/.harness/config.toml) both make tool names start with "mcp_my_tool_"; rename one`},
		{name: "duplicate in env", env: "[" + jsonServer("a", "x") + "," + jsonServer("a", "y") + "]",
			wantErr: `server "a" is defined twice (HARNESS_MCP_SERVERS and HARNESS_MCP_SERVERS); remove or rename one`},
		{name: "profile shadows global", home: tomlServer("a", "home"), profile: tomlServer("a", "profile"),
			wantGlobal: "a=home", wantScope: "a=profile"},
		{name: "profile shadows env global", env: "[" + jsonServer("a", "env") + "]", profile: tomlServer("a", "profile"),
			wantGlobal: "a=env", wantScope: "a=profile"},
		{name: "profile adds", home: tomlServer("a", "home"), profile: tomlServer("c", "profile"),
			wantGlobal: "a=home", wantScope: "a=home,c=profile"},
		{name: "profile sanitized collision with global", home: tomlServer("a-b", "home"), profile: tomlServer("a.b", "profile"),
			wantGlobal: "a-b=home",
			wantErr:    `profile server "a.b" (profile p) and global server "a-b" (HOME/config.toml) both make tool names start with "mcp_a_b_"; rename the profile's server`},
		{name: "run adds", home: tomlServer("a", "home"), profile: tomlServer("c", "profile"), run: "[" + jsonServer("r", "run") + "]",
			wantGlobal: "a=home", wantScope: "a=home,c=profile", wantRun: "r=run"},
		{name: "run collides with toml global", home: tomlServer("a", "home"), run: "[" + jsonServer("a", "run") + "]",
			wantGlobal: "a=home", wantScope: "a=home",
			wantErr: `mcp_servers[0]: server "a": name: collides with global server "a"; choose another name`},
		{name: "run collides with env global", env: "[" + jsonServer("a", "env") + "]", run: "[" + jsonServer("A", "run") + "]",
			wantGlobal: "a=env", wantScope: "a=env",
			wantErr: `mcp_servers[0]: server "A": name: collides with global server "a"; choose another name`},
		{name: "run collides with shadowed global and profile", home: tomlServer("a", "home"), profile: tomlServer("a", "profile"),
			run: "[" + jsonServer("a", "run") + "]", wantGlobal: "a=home", wantScope: "a=profile",
			wantErr: "mcp_servers[0]: server \"a\": name: collides with global server \"a\"; choose another name\n" +
				`mcp_servers[0]: server "a": name: collides with server of the run's profile "a"; choose another name`},
		{name: "run collides with profile", profile: tomlServer("p-1", "profile"), run: "[" + jsonServer("p_1", "run") + "]",
			wantScope: "p-1=profile",
			wantErr:   `mcp_servers[0]: server "p_1": name: collides with server of the run's profile "p-1"; choose another name`},
		{name: "run entries collide", run: "[" + jsonServer("x", "run") + "," + jsonServer("x", "run2") + "]",
			wantErr: `mcp_servers[1]: server "x": name: collides with mcp_servers entry "x"; choose another name`},
		{name: "run collides with disabled global", home: tomlServer("a", "home") + "enabled = false\n", run: "[" + jsonServer("a", "run") + "]",
			wantGlobal: "a=home", wantScope: "a=home",
			wantErr: `mcp_servers[0]: server "a": name: collides with global server "a"; choose another name`},
		{name: "run collides with skipped env name", home: tomlServer("a", "home"), env: "[" + jsonServer("a", "env") + "]",
			run: "[" + jsonServer("a", "run") + "]", wantGlobal: "a=home", wantWarn: []string{"a"}, wantScope: "a=home",
			wantErr: `mcp_servers[0]: server "a": name: collides with global server "a"; choose another name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := configDirs(t, tt.home, tt.ws)
			if tt.profile != "" {
				writeFile(t, home, "profiles/p.toml", tt.profile)
			}
			clean := func(err error) string {
				return strings.NewReplacer(home, "HOME", ws, "WS").Replace(errString(err))
			}
			var logs bytes.Buffer
			getenv := fakeEnv(map[string]string{"HARNESS_MCP_SERVERS": tt.env})
			cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: getenv,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				if got := clean(err); got != tt.wantErr {
					t.Fatalf("loadConfig() error = %q, want %q", got, tt.wantErr)
				}
				return
			}
			if got := summary(cfg.Servers); got != tt.wantGlobal {
				t.Errorf("loadConfig() servers = %q, want %q", got, tt.wantGlobal)
			}
			for _, s := range tt.wantWarn {
				want := fmt.Sprintf(`level=WARN msg="skipping server from HARNESS_MCP_SERVERS: already defined in TOML" server=%s`, s)
				if !strings.Contains(logs.String(), want) {
					t.Errorf("loadConfig() logs = %q, want a line with %q", logs.String(), want)
				}
			}
			if tt.wantWarn == nil && logs.Len() > 0 {
				t.Errorf("loadConfig() logs = %q, want none", logs.String())
			}
			profile, found, err := loadProfile(home, "p", getenv)
			if err != nil || found != (tt.profile != "") {
				t.Fatalf("loadProfile(p) = found %v, error %v, want found %v", found, err, tt.profile != "")
			}
			if err := checkProfileServers(cfg.Servers, profile); err != nil {
				if got := clean(err); got != tt.wantErr {
					t.Fatalf("checkProfileServers() error = %q, want %q", got, tt.wantErr)
				}
				return
			}
			scope := shadow(cfg.Servers, profile, func(s serverConfig) string { return s.Name })
			if got := summary(scope); got != tt.wantScope {
				t.Errorf("shadow(globals, profile) = %q, want %q", got, tt.wantScope)
			}
			run, err := parseRunServers(json.RawMessage(tt.run), cfg.Servers, profile)
			if got := clean(err); got != tt.wantErr {
				t.Fatalf("parseRunServers(%q) error = %q, want %q", tt.run, got, tt.wantErr)
			}
			if got := summary(run); err == nil && got != tt.wantRun {
				t.Errorf("parseRunServers(%q) = %q, want %q", tt.run, got, tt.wantRun)
			}
		})
	}
}

func TestWorkspaceReplacesWhole(t *testing.T) {
	t.Parallel()
	home, ws := configDirs(t, tomlServer("a", "home")+"args = [\"-v\"]\ntimeout = \"5s\"\nenv = { K = \"v\" }\n", tomlServer("a", "ws"))
	cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: fakeEnv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Servers[0]
	if got.Args != nil || got.Env != nil || got.Timeout != defaultTimeout || got.Source != filepath.Join(ws, ".harness", "config.toml") {
		t.Errorf("loadConfig() server = %+v, want the workspace definition alone", got)
	}
	if want := []string{filepath.Join(home, "config.toml"), filepath.Join(ws, ".harness", "config.toml")}; !slices.Equal(cfg.Files, want) {
		t.Errorf("loadConfig() files = %q, want %q", cfg.Files, want)
	}
}

func TestTOMLFileOrderAndFields(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, home, "config.toml", `
[mcp_servers.zeta]
url = "https://example.com/mcp"
transport = "sse"
headers = { Authorization = "Bearer ${TOKEN}" }
timeout = "5s"
startup_timeout = "1m"
max_message_bytes = 2048
include_tools = ["read_*"]
exclude_tools = ["read_secret"]

[mcp_servers.alpha]
command = "${BIN:-/usr/bin/srv}"
args = ["--root", "${HOME}/data", "$$literal"]
cwd = "/tmp"
enabled = false
[mcp_servers.alpha.env]
API_KEY = "${SECRET}"
`)
	cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(map[string]string{"TOKEN": "t0k", "HOME": "/home/u", "SECRET": "s3"})})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(home, "config.toml")
	want := []serverConfig{
		{Name: "zeta", Transport: transportSSE, URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t0k"}, ExpandedSecrets: []string{"t0k"},
			Timeout: 5 * time.Second, StartupTimeout: time.Minute, Enabled: true, IncludeTools: []string{"read_*"},
			ExcludeTools: []string{"read_secret"}, MaxMessageBytes: 2048, Sampling: true, PinTools: pinHold, Source: src},
		{Name: "alpha", Transport: transportStdio, TransportInferred: true, Command: "/usr/bin/srv",
			Args: []string{"--root", "/home/u/data", "$literal"}, Env: map[string]string{"API_KEY": "s3"}, ExpandedSecrets: []string{"s3"}, Cwd: "/tmp",
			Timeout: defaultTimeout, StartupTimeout: defaultStartupTimeout, MaxMessageBytes: defaultMaxMessageBytes, Sampling: true, PinTools: pinWarn, Source: src},
	}
	if got, w := fmt.Sprintf("%+v", cfg.Servers), fmt.Sprintf("%+v", want); got != w {
		t.Errorf("loadConfig() servers =\n%s\nwant\n%s", got, w)
	}
}

func TestServerJSONEnvelope(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, wantErr string }{
		{name: "empty", in: "  "},
		{name: "empty array", in: "[]"},
		{name: "object", in: `{"name":"a"}`, wantErr: `HARNESS_MCP_SERVERS: a JSON object must hold only "mcpServers" or "servers"; write {"mcpServers": {"NAME": {"command": ...}}} or an array [{"name": ..., "command": ...}]`},
		{name: "trailing", in: `[] x`, wantErr: `HARNESS_MCP_SERVERS: invalid JSON: invalid character 'x' after top-level value`},
		{name: "every entry reported", in: `[{"name":"a"}, 5, {"name":"b","command":"x"}, {"name":"c","url":"x://"}]`,
			wantErr: "HARNESS_MCP_SERVERS[0]: server \"a\": command/url: neither is set; set command for a stdio server or url for an http server\n" +
				"HARNESS_MCP_SERVERS[1]: not a JSON object; each entry must be {...}\n" +
				`HARNESS_MCP_SERVERS[3]: server "c": url: scheme "x" is not supported; use http or https`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseServerJSON("HARNESS_MCP_SERVERS", []byte(tt.in), fakeEnv(nil))
			if got := errString(err); got != tt.wantErr {
				t.Errorf("parseServerJSON(%q) error =\n%s\nwant\n%s", tt.in, got, tt.wantErr)
			}
		})
	}
}

func TestUnknownTOMLKeys(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, toml, wantErr string }{
		{name: "server key", toml: tomlServer("a", "x") + "comand = \"y\"\n",
			wantErr: `F: unknown key "mcp_servers.a.comand"; valid keys are transport, command, args, url, env, secret_env, cwd, headers, timeout, startup_timeout, enabled, include_tools, exclude_tools, max_message_bytes, oauth, required, roots, sampling, log_level, protocol_version, approval, approval_tools, pin_tools`},
		{name: "name inside table", toml: tomlServer("a", "x") + "name = \"a\"\n",
			wantErr: `F: unknown key "mcp_servers.a.name"; the table key [mcp_servers.<name>] is the server's name; remove this key`},
		{name: "unknown table reported once", toml: "[server]\nx = 1\ny = 2\n",
			wantErr: `F: unknown key "server"; remove it or check its spelling`},
		{name: "model key", toml: "[model]\nmodel = \"x\"\n",
			wantErr: `F: unknown key "model.model"; valid keys are name, base_url, max_output_tokens, max_steps, temperature, top_p, reasoning_effort, stream, sampling_models, prices`},
		{name: "plaintext token", toml: "[[auth.keys]]\nname = \"k\"\ntoken = \"abc\"\ntoken_sha256 = \"" + strings.Repeat("a", 64) + "\"\nscopes = [\"admin\"]\n",
			wantErr: `F: unknown key "auth.keys.token"; store the token's SHA-256 as token_sha256 (printf %s "$TOKEN" | sha256sum), never the token`},
		{name: "type error", toml: tomlServer("a", "x") + "timeout = 30\n",
			wantErr: `F: [mcp_servers.a] field "timeout": a whole number is not allowed here; write a duration like "30s"`},
		{name: "syntax error", toml: "[mcp_servers.a\n",
			wantErr: `parse F: toml: line 2: expected '.' or ']' to end table name, but got '\n' instead`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			writeFile(t, home, "config.toml", tt.toml)
			_, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(nil)})
			got := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "F")
			if got != tt.wantErr {
				t.Errorf("loadConfig(%q) error =\n%s\nwant\n%s", tt.toml, got, tt.wantErr)
			}
		})
	}
}

func TestLoadConfigReportsEveryProblem(t *testing.T) {
	t.Parallel()
	home, ws := configDirs(t, tomlServer("a", "x")+"timeout = \"x\"\n[model]\nmax_steps = 0\n", "[mcp_servers.b]\nurl = \"ftp://h\"\n")
	getenv := fakeEnv(map[string]string{"HARNESS_MCP_SERVERS": `[{"name":"c"}]`, "HARNESS_MODEL": "gpt", "HARNESS_API_KEYS": `[{"name":"k"}]`})
	_, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: getenv})
	got := strings.NewReplacer(home, "HOME", ws, "WS").Replace(errString(err))
	want := `HOME/config.toml: server "a": timeout: "x" is not a duration; write one like "30s" or "2m"
HOME/config.toml: [model] max_steps: 0 is not positive; set a positive number or remove it
WS/.harness/config.toml: server "b": url: scheme "ftp" is not supported; use http or https
HARNESS_MCP_SERVERS[0]: server "c": command/url: neither is set; set command for a stdio server or url for an http server
HARNESS_MODEL: model "gpt": want provider/model, e.g. openai/gpt-4o, anthropic/claude-sonnet-4-5 or google/gemini-2.5-flash
HARNESS_API_KEYS[0]: key "k": token_sha256: missing; set token_sha256 to the SHA-256 of the token in lowercase hex
HARNESS_API_KEYS[0]: key "k": scopes: empty; list one or more of runs:read, runs:write, admin`
	if got != want {
		t.Errorf("loadConfig() error =\n%s\nwant\n%s", got, want)
	}
}

func TestLoadProfile(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, home, "profiles/db-analyst.toml", tomlServer("sqlite", "uvx")+"args = [\"--db\", \"${DB:-/data/a.db}\"]\n")
	writeFile(t, home, "profiles/bad.toml", "[model]\nname = \"openai/x\"\n"+tomlServer("s", "x")+"transport = \"http\"\n")
	writeFile(t, home, "secret.toml", tomlServer("s", "x"))
	tests := []struct {
		name, profile string
		want          string
		wantFound     bool
		wantErr       string
		wantInvalid   bool
	}{
		{name: "valid", profile: "db-analyst", want: "sqlite=uvx --db /data/a.db", wantFound: true},
		{name: "missing", profile: "nope_1"},
		{name: "empty", profile: "", wantInvalid: true, wantErr: `profile "": invalid profile name: empty; give a name`},
		{name: "traversal", profile: "../secret", wantInvalid: true,
			wantErr: `profile "../secret": invalid profile name: "../secret" has invalid characters; use only letters, digits, "-" and "_"`},
		{name: "dots", profile: "..", wantInvalid: true,
			wantErr: `profile "..": invalid profile name: ".." has invalid characters; use only letters, digits, "-" and "_"`},
		{name: "separator", profile: `a\b`, wantInvalid: true,
			wantErr: `profile "a\\b": invalid profile name: "a\\b" has invalid characters; use only letters, digits, "-" and "_"`},
		{name: "space", profile: "a b", wantInvalid: true,
			wantErr: `profile "a b": invalid profile name: "a b" has invalid characters; use only letters, digits, "-" and "_"`},
		{name: "invalid file", profile: "bad", wantFound: true,
			wantErr: "profile \"bad\" (P/bad.toml): unknown key \"model\"; a profile holds only [mcp_servers]; remove it\n" +
				`profile "bad" (P/bad.toml): server "s": transport: "http" needs url, not command; set url or change transport`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers, found, err := loadProfile(home, tt.profile, fakeEnv(nil))
			gotErr := strings.ReplaceAll(errString(err), filepath.Join(home, "profiles"), "P")
			if gotErr != tt.wantErr || found != tt.wantFound || errors.Is(err, errInvalidProfileName) != tt.wantInvalid {
				t.Fatalf("loadProfile(%q) = found %v, error %q, want found %v, error %q (invalid name %v)",
					tt.profile, found, gotErr, tt.wantFound, tt.wantErr, tt.wantInvalid)
			}
			if got := summary(servers); err == nil && got != tt.want {
				t.Errorf("loadProfile(%q) = %q, want %q", tt.profile, got, tt.want)
			}
			for _, s := range servers {
				if s.Source != "profile "+tt.profile {
					t.Errorf("loadProfile(%q) source = %q, want %q", tt.profile, s.Source, "profile "+tt.profile)
				}
			}
		})
	}
}

func TestParseRunServers(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, in, want, wantErr string }{
		{name: "absent", in: ""},
		{name: "null", in: "null"},
		{name: "two", in: `[{"name":"a","command":"x"},{"name":"b","url":"http://h"}]`, want: "a=x,b=http://h"},
		{name: "no expansion", in: `[{"name":"a","url":"http://h/${OPENAI_API_KEY}"}]`,
			wantErr: `mcp_servers[0]: server "a": url: ${OPENAI_API_KEY}: a per-run server cannot read harnessd's environment; put the value itself in the request`},
		{name: "unknown field", in: `[{"name":"a","command":"x","shell":true}]`,
			wantErr: `mcp_servers[0]: unknown field "shell"; valid fields are ` + serverFields},
		{name: "too many", in: "[" + strings.Repeat(`{"name":"a","command":"x"},`, maxRunServers) + `{"name":"a","command":"x"}]`,
			wantErr: "mcp_servers: 33 servers; a run may add at most 32"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRunServers(json.RawMessage(tt.in), nil, nil)
			if errString(err) != tt.wantErr || summary(got) != tt.want {
				t.Errorf("parseRunServers(%q) = %q, %v, want %q, %q", tt.in, summary(got), err, tt.want, tt.wantErr)
			}
			for _, s := range got {
				if s.Source != "run" {
					t.Errorf("parseRunServers(%q) source = %q, want %q", tt.in, s.Source, "run")
				}
			}
		})
	}
}

func TestAdhocServer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, server, url string
		command           []string
		want, wantErr     string
	}{
		{name: "url", server: "adhoc", url: "http://h/mcp", want: "adhoc=http://h/mcp"},
		{name: "command kept literally", server: "adhoc", command: []string{"srv", "$HOME", "${X}", "$$"}, want: "adhoc=srv $HOME ${X} $$"},
		{name: "neither", server: "adhoc",
			wantErr: `command line: server "adhoc": command/url: neither is set; set command for a stdio server or url for an http server`},
		{name: "bad name", server: "a b", command: []string{"srv"},
			wantErr: `command line: server "a b": name: "a b" has invalid characters; use only letters, digits, "-", "_" and "."`},
		{name: "bad url", server: "adhoc", url: "localhost:1",
			wantErr: `command line: server "adhoc": url: no scheme; write a full URL like http://localhost:3001/mcp`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := adhocServer(tt.server, tt.url, tt.command)
			if errString(err) != tt.wantErr {
				t.Fatalf("adhocServer(%q, %q, %q) error = %v, want %q", tt.server, tt.url, tt.command, err, tt.wantErr)
			}
			if got := summary([]serverConfig{s}); err == nil && (got != tt.want || s.Source != "command line" || !s.TransportInferred) {
				t.Errorf("adhocServer(%q, %q, %q) = %q from %q, want %q from command line", tt.server, tt.url, tt.command, got, s.Source, tt.want)
			}
		})
	}
}

func TestConnectAllowHosts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, home, ws string
		want           []string
		wantErr        string
	}{
		{name: "unset"},
		{name: "lowercased", home: "[connect_mcp]\nallow_hosts = [\"LocalHost\", \"*.Example.com\"]\n", want: []string{"localhost", "*.example.com"}},
		{name: "later replaces whole", home: "[connect_mcp]\nallow_hosts = [\"a\", \"b\"]\n", ws: "[connect_mcp]\nallow_hosts = [\"c\"]\n", want: []string{"c"}},
		{name: "empty list kept", home: "[connect_mcp]\nallow_hosts = [\"a\"]\n", ws: "[connect_mcp]\nallow_hosts = []\n", want: []string{}},
		{name: "invalid", home: "[connect_mcp]\nallow_hosts = [\"http://a/\", \"\", \"[\"]\n",
			wantErr: "H: [connect_mcp] allow_hosts[0]: \"http://a/\" is not a host name; give only the host, without scheme or path\n" +
				"H: [connect_mcp] allow_hosts[1]: empty; give a host name like \"localhost\" or a glob like \"*.example.com\"\n" +
				`H: [connect_mcp] allow_hosts[2]: "[" is not a valid glob; use * and ? as in path.Match`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := configDirs(t, tt.home, tt.ws)
			cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: fakeEnv(nil)})
			if got := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "H"); got != tt.wantErr {
				t.Fatalf("loadConfig() error =\n%s\nwant\n%s", got, tt.wantErr)
			}
			if err == nil && (!slices.Equal(cfg.ConnectAllowHosts, tt.want) || (cfg.ConnectAllowHosts == nil) != (tt.want == nil)) {
				t.Errorf("loadConfig() allow_hosts = %#v, want %#v", cfg.ConnectAllowHosts, tt.want)
			}
		})
	}
}

func TestDefaultHome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     map[string]string
		want    string
		wantErr bool
	}{
		{name: "harness home", env: map[string]string{"HARNESS_HOME": "/srv/h/", "HOME": "/home/u"}, want: "/srv/h"},
		{name: "home", env: map[string]string{"HOME": "/home/u"}, want: "/home/u/.harness"},
		{name: "empty harness home", env: map[string]string{"HARNESS_HOME": "", "HOME": "/home/u"}, want: "/home/u/.harness"},
		{name: "neither", wantErr: true},
	}
	for _, tt := range tests {
		got, err := defaultHome(fakeEnv(tt.env))
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("defaultHome(%v) = %q, %v, want %q (error %v)", tt.env, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestWorkspaceIsHome(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, ".harness/config.toml", tomlServer("a", "x"))
	cfg, err := loadConfig(loadOptions{Home: filepath.Join(dir, ".harness"), Workspace: dir, Getenv: fakeEnv(nil)})
	if err != nil || len(cfg.Files) != 1 || summary(cfg.Servers) != "a=x" {
		t.Errorf("loadConfig(home inside workspace) = %+v, %v, want the file read once", cfg, err)
	}
}

// FuzzServersJSON checks that HARNESS_MCP_SERVERS parsing never panics and
// that every server it returns without error is valid.
func FuzzServersJSON(f *testing.F) {
	f.Add(`[{"name":"a","command":"x","args":["${A:-b}"]}]`)
	f.Add(`[{"name":"b","url":"http://h/mcp","headers":{"A":"${A}"},"timeout":"1s"}]`)
	f.Add(`[{"name":"c","transport":"sse","url":"https://h","include_tools":["a*"],"max_message_bytes":1024}]`)
	getenv := fakeEnv(map[string]string{"A": "v"})
	f.Fuzz(func(t *testing.T, in string) {
		servers, err := parseServerJSON("HARNESS_MCP_SERVERS", []byte(in), getenv)
		if err != nil {
			return
		}
		for _, s := range servers {
			if err := checkServer(s); err != nil {
				t.Fatalf("parseServerJSON(%q) = %+v: %v", in, s, err)
			}
		}
		if err := validateServerNames(servers); err != nil {
			t.Fatalf("parseServerJSON(%q) succeeded with colliding names: %v", in, err)
		}
	})
}

// FuzzConfigTOML checks that parsing a config file never panics and that
// success implies valid servers, model and keys.
func FuzzConfigTOML(f *testing.F) {
	f.Add("[mcp_servers.a]\ncommand = \"x\"\n")
	f.Add("[mcp_servers.b]\nurl = \"http://h\"\nheaders = { A = \"${A}\" }\n[model]\nname = \"openai/m\"\n")
	f.Add("[[auth.keys]]\nname = \"k\"\ntoken_sha256 = \"" + strings.Repeat("0", 64) + "\"\nscopes = [\"admin\"]\n[connect_mcp]\nallow_hosts = [\"*.x\"]\n")
	getenv := fakeEnv(map[string]string{"A": "v"})
	f.Fuzz(func(t *testing.T, in string) {
		layer, err := parseConfigTOML("config.toml", []byte(in), getenv)
		if err != nil {
			return
		}
		for _, s := range layer.servers {
			if err := checkServer(s); err != nil {
				t.Fatalf("parseConfigTOML(%q) = %+v: %v", in, s, err)
			}
		}
		if err := validateServerNames(layer.servers); err != nil {
			t.Fatalf("parseConfigTOML(%q) succeeded with colliding names: %v", in, err)
		}
		if layer.model.MaxSteps < 0 || layer.model.MaxOutputTokens < 0 || len(layer.model.Tuning.rangeProblems()) > 0 || (layer.model.Provider == "") != (layer.model.Model == "") {
			t.Fatalf("parseConfigTOML(%q) model = %+v", in, layer.model)
		}
		for _, k := range layer.authKeys {
			if len(k.Scopes) == 0 || checkName(k.Name, ".", "") != nil {
				t.Fatalf("parseConfigTOML(%q) key = %+v", in, k)
			}
		}
	})
}
