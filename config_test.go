package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
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

// errString returns err's message, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
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
			scope, err := profileScope(cfg.Servers, profile)
			if err != nil {
				if got := clean(err); got != tt.wantErr {
					t.Fatalf("profileScope() error = %q, want %q", got, tt.wantErr)
				}
				return
			}
			if got := summary(scope); got != tt.wantScope {
				t.Errorf("profileScope() = %q, want %q", got, tt.wantScope)
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
		{Name: "zeta", Transport: transportSSE, URL: "https://example.com/mcp", Headers: map[string]string{"Authorization": "Bearer t0k"},
			Timeout: 5 * time.Second, StartupTimeout: time.Minute, Enabled: true, IncludeTools: []string{"read_*"},
			ExcludeTools: []string{"read_secret"}, MaxMessageBytes: 2048, Source: src},
		{Name: "alpha", Transport: transportStdio, TransportInferred: true, Command: "/usr/bin/srv",
			Args: []string{"--root", "/home/u/data", "$literal"}, Env: map[string]string{"API_KEY": "s3"}, Cwd: "/tmp",
			Timeout: defaultTimeout, StartupTimeout: defaultStartupTimeout, MaxMessageBytes: defaultMaxMessageBytes, Source: src},
	}
	if got, w := fmt.Sprintf("%+v", cfg.Servers), fmt.Sprintf("%+v", want); got != w {
		t.Errorf("loadConfig() servers =\n%s\nwant\n%s", got, w)
	}
}

func TestServerValidation(t *testing.T) {
	env := fakeEnv(map[string]string{"SET": "v", "EMPTY": ""})
	const p = "HARNESS_MCP_SERVERS[0]: "
	tests := []struct {
		name, in, wantErr string
		wantTransport     string
		wantInferred      bool
	}{
		{name: "command infers stdio", in: `{"name":"a","command":"x"}`, wantTransport: "stdio", wantInferred: true},
		{name: "url infers http", in: `{"name":"a","url":"http://h/mcp"}`, wantTransport: "http", wantInferred: true},
		{name: "explicit stdio", in: `{"name":"a","transport":"stdio","command":"x"}`, wantTransport: "stdio"},
		{name: "explicit http", in: `{"name":"a","transport":"http","url":"https://h"}`, wantTransport: "http"},
		{name: "explicit sse", in: `{"name":"a","transport":"sse","url":"http://h:1/sse"}`, wantTransport: "sse"},
		{name: "both", in: `{"name":"a","command":"x","url":"http://h"}`,
			wantErr: p + `server "a": command/url: both are set; set command for a stdio server or url for an http server, not both`},
		{name: "neither", in: `{"name":"a"}`,
			wantErr: p + `server "a": command/url: neither is set; set command for a stdio server or url for an http server`},
		{name: "neither after expansion", in: `{"name":"a","command":"${EMPTY}"}`,
			wantErr: p + `server "a": command/url: neither is set; set command for a stdio server or url for an http server`},
		{name: "http with command", in: `{"name":"a","transport":"http","command":"x"}`,
			wantErr: p + `server "a": transport: "http" needs url, not command; set url or change transport`},
		{name: "sse with command", in: `{"name":"a","transport":"sse","command":"x"}`,
			wantErr: p + `server "a": transport: "sse" needs url, not command; set url or change transport`},
		{name: "stdio with url", in: `{"name":"a","transport":"stdio","url":"http://h"}`,
			wantErr: p + `server "a": transport: "stdio" needs command, not url; set command or change transport`},
		{name: "unknown transport", in: `{"name":"a","transport":"tcp","url":"http://h"}`,
			wantErr: p + `server "a": transport: "tcp" is not supported; use stdio, http or sse, or leave it out`},
		{name: "uppercase transport", in: `{"name":"a","transport":"HTTP","url":"http://h"}`,
			wantErr: p + `server "a": transport: "HTTP" is not supported; use stdio, http or sse, or leave it out`},
		{name: "ftp url", in: `{"name":"a","url":"ftp://h/x"}`,
			wantErr: p + `server "a": url: scheme "ftp" is not supported; use http or https`},
		{name: "url without host", in: `{"name":"a","url":"http:///mcp"}`,
			wantErr: p + `server "a": url: no host; write a full URL like http://localhost:3001/mcp`},
		{name: "relative url", in: `{"name":"a","url":"localhost:3001/mcp"}`,
			wantErr: p + `server "a": url: scheme "localhost" is not supported; use http or https`},
		{name: "unparsable url hides value", in: `{"name":"a","url":"http://user:s3cret@h\u0001"}`,
			wantErr: p + `server "a": url: cannot parse: net/url: invalid control character in URL; write a full URL like http://localhost:3001/mcp`},
		{name: "empty name", in: `{"command":"x"}`, wantErr: p + `server "": name: empty; give a name`},
		{name: "bad name", in: `{"name":"a/b","command":"x"}`,
			wantErr: p + `server "a/b": name: "a/b" has invalid characters; use only letters, digits, "-", "_" and "."`},
		{name: "long name", in: `{"name":"` + strings.Repeat("n", 65) + `","command":"x"}`,
			wantErr: p + `server "` + strings.Repeat("n", 65) + `": name: longer than 64 characters; shorten it`},
		{name: "unknown field", in: `{"name":"a","comand":"x"}`,
			wantErr: p + `unknown field "comand"; valid fields are ` + serverFields},
		{name: "wrong type", in: `{"name":"a","args":"x"}`,
			wantErr: p + `field "args": a JSON string is not allowed here; write a list of strings`},
		{name: "wrong number hides value", in: `{"name":"a","command":"x","max_message_bytes":1.5}`,
			wantErr: p + `field "max_message_bytes": a JSON number is not allowed here; write a whole number`},
		{name: "not an object", in: `"x"`, wantErr: p + `not a JSON object; each entry must be {...}`},
		{name: "durations and limits", in: `{"name":"a","command":"x","timeout":"0s","startup_timeout":"soon","max_message_bytes":1023}`,
			wantErr: p + "server \"a\": max_message_bytes: 1023 is out of range; use 1024 (1 KiB) to 1073741824 (1 GiB)\n" +
				p + "server \"a\": startup_timeout: \"soon\" is not a duration; write one like \"30s\" or \"2m\"\n" +
				p + `server "a": timeout: "0s" is not positive; write a duration like "30s"`},
		{name: "negative timeout", in: `{"name":"a","command":"x","timeout":"-1s"}`,
			wantErr: p + `server "a": timeout: "-1s" is not positive; write a duration like "30s"`},
		{name: "globs", in: `{"name":"a","command":"x","include_tools":["ok*","["],"exclude_tools":[""]}`,
			wantErr: p + "server \"a\": exclude_tools[0]: \"\" is not a valid glob; use *, ? and [a-z] as in path.Match\n" +
				p + `server "a": include_tools[1]: "[" is not a valid glob; use *, ? and [a-z] as in path.Match`},
		{name: "headers on stdio", in: `{"name":"a","command":"x","headers":{"A":"b"}}`,
			wantErr: p + `server "a": headers: only an http or sse server takes headers; remove them or use url instead of command`},
		{name: "stdio fields on http", in: `{"name":"a","url":"http://h","env":{"A":"b"}}`,
			wantErr: p + `server "a": args/env/cwd: only a stdio server takes them; remove them or use command instead of url`},
		{name: "relative cwd", in: `{"name":"a","command":"x","cwd":"data"}`,
			wantErr: p + `server "a": cwd: not an absolute path; write a full path (${HOME}/dir works)`},
		{name: "bad header", in: `{"name":"a","url":"http://h","headers":{"X Y":"v","Z":"s3cret\r\nEvil: 1"}}`,
			wantErr: p + "server \"a\": headers.X Y: invalid header name; use letters, digits and \"-\"\n" +
				p + `server "a": headers.Z: value contains a line break or NUL byte; remove it`},
		{name: "bad env name", in: `{"name":"a","command":"x","env":{"A=B":"v"}}`,
			wantErr: p + `server "a": env.A=B: invalid variable name; use a name without "="`},
		{name: "unset var", in: `{"name":"a","url":"http://h","headers":{"Authorization":"Bearer ${TOKEN}"}}`,
			wantErr: p + `server "a": headers.Authorization: variable TOKEN is not set; set it in harnessd's environment or write ${TOKEN:-default}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := "[" + tt.in + "]"
			servers, err := parseServerJSON("HARNESS_MCP_SERVERS", []byte(in), env)
			if got := errString(err); got != tt.wantErr {
				t.Fatalf("parseServerJSON(%q) error =\n%s\nwant\n%s", in, got, tt.wantErr)
			}
			if err != nil {
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("parseServerJSON(%q) error %q reveals a secret", in, err)
				}
				return
			}
			if len(servers) != 1 || servers[0].Transport != tt.wantTransport || servers[0].TransportInferred != tt.wantInferred {
				t.Fatalf("parseServerJSON(%q) = %+v, want transport %q inferred %v", in, servers, tt.wantTransport, tt.wantInferred)
			}
			if err := checkServer(servers[0]); err != nil {
				t.Errorf("parseServerJSON(%q) = invalid server: %v", in, err)
			}
		})
	}
}

func TestServerJSONEnvelope(t *testing.T) {
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

func TestExpandVars(t *testing.T) {
	env := fakeEnv(map[string]string{"A": "x", "EMPTY": "", "HOME": "/h"})
	tests := []struct{ in, want, wantErr string }{
		{in: "plain", want: "plain"},
		{in: "${A}", want: "x"},
		{in: "pre-${A}-post${A}", want: "pre-x-postx"},
		{in: "${EMPTY}", want: ""},
		{in: "${EMPTY:-d}", want: "d"},
		{in: "${UNSET:-d}", want: "d"},
		{in: "${UNSET:-}", want: ""},
		{in: "${A:-d}", want: "x"},
		{in: "${UNSET:-a:b-c}", want: "a:b-c"},
		{in: "$$", want: "$"},
		{in: "$${A}", want: "${A}"},
		{in: "cost: 5$", want: "cost: 5$"},
		{in: "s/x$/y/ $1 $-", want: "s/x$/y/ $1 $-"},
		{in: "${UNSET}", wantErr: "variable UNSET is not set; set it in harnessd's environment or write ${UNSET:-default}"},
		{in: "$HOME/x", wantErr: `"$" followed by a name is not expanded; write ${NAME} to expand a variable or "$$" for a literal "$"`},
		{in: "pa$sword", wantErr: `"$" followed by a name is not expanded; write ${NAME} to expand a variable or "$$" for a literal "$"`},
		{in: "${A", wantErr: `unterminated "${"; close it with "}" or write "$$" for a literal "$"`},
		{in: "${}", wantErr: `invalid variable name in "${...}"; use letters, digits and "_", not starting with a digit`},
		{in: "${1A}", wantErr: `invalid variable name in "${...}"; use letters, digits and "_", not starting with a digit`},
		{in: "${A-B}", wantErr: `invalid variable name in "${...}"; use letters, digits and "_", not starting with a digit`},
	}
	for _, tt := range tests {
		got, err := expandVars(tt.in, env)
		if got != tt.want || errString(err) != tt.wantErr {
			t.Errorf("expandVars(%q) = %q, %v, want %q, %q", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := expandVars("${A}", nil); errString(err) != "${A}: a per-run server cannot read harnessd's environment; put the value itself in the request" {
		t.Errorf("expandVars(${A}, nil) error = %v, want the per-run refusal", err)
	}
}

func TestExpansionFields(t *testing.T) {
	in := `[{"name":"a","command":"${C}","args":["${X}"],"cwd":"${D}","env":{"E":"${X}"}},` +
		`{"name":"b","url":"${U}","headers":{"H":"${X}"}}]`
	env := fakeEnv(map[string]string{"C": "cmd", "X": "xv", "D": "/d", "U": "http://u"})
	servers, err := parseServerJSON("S", []byte(in), env)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintln(servers[0].Command, servers[0].Args, servers[0].Cwd, servers[0].Env, servers[1].URL, servers[1].Headers); got != "cmd [xv] /d map[E:xv] http://u map[H:xv]\n" {
		t.Errorf("parseServerJSON(%q) expanded = %q", in, got)
	}
	_, err = parseServerJSON("S", []byte(in), fakeEnv(nil))
	want := "S[0]: server \"a\": args[0]: variable X is not set; set it in harnessd's environment or write ${X:-default}\n" +
		"S[0]: server \"a\": command: variable C is not set; set it in harnessd's environment or write ${C:-default}\n" +
		"S[0]: server \"a\": cwd: variable D is not set; set it in harnessd's environment or write ${D:-default}\n" +
		"S[0]: server \"a\": env.E: variable X is not set; set it in harnessd's environment or write ${X:-default}\n" +
		"S[1]: server \"b\": headers.H: variable X is not set; set it in harnessd's environment or write ${X:-default}\n" +
		"S[1]: server \"b\": url: variable U is not set; set it in harnessd's environment or write ${U:-default}"
	if got := errString(err); got != want {
		t.Errorf("parseServerJSON(%q) error =\n%s\nwant\n%s", in, got, want)
	}
}

func TestSanitizeName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"filesystem", "filesystem"},
		{"My-Server", "my_server"},
		{"a b/c.d", "a_b_c_d"},
		{"x@y:z", "x_y_z"},
		{"snake_9", "snake_9"},
		{"é", "_"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := sanitizeName(tt.in); got != tt.want {
			t.Errorf("sanitizeName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUnknownTOMLKeys(t *testing.T) {
	tests := []struct{ name, toml, wantErr string }{
		{name: "server key", toml: tomlServer("a", "x") + "comand = \"y\"\n",
			wantErr: `F: unknown key "mcp_servers.a.comand"; valid keys are transport, command, args, url, env, cwd, headers, timeout, startup_timeout, enabled, include_tools, exclude_tools, max_message_bytes, oauth, required`},
		{name: "name inside table", toml: tomlServer("a", "x") + "name = \"a\"\n",
			wantErr: `F: unknown key "mcp_servers.a.name"; the table key [mcp_servers.<name>] is the server's name; remove this key`},
		{name: "unknown table reported once", toml: "[server]\nx = 1\ny = 2\n",
			wantErr: `F: unknown key "server"; remove it or check its spelling`},
		{name: "model key", toml: "[model]\nmodel = \"x\"\n",
			wantErr: `F: unknown key "model.model"; remove it or check its spelling`},
		{name: "plaintext token", toml: "[[auth.keys]]\nname = \"k\"\ntoken = \"abc\"\ntoken_sha256 = \"" + strings.Repeat("a", 64) + "\"\nscopes = [\"admin\"]\n",
			wantErr: `F: unknown key "auth.keys.token"; store the token's SHA-256 as token_sha256 (printf %s "$TOKEN" | sha256sum), never the token`},
		{name: "type error", toml: tomlServer("a", "x") + "timeout = 30\n",
			wantErr: `parse F: toml: line 3 (last key "mcp_servers.a.timeout"): incompatible types: TOML value has type int64; destination has type string`},
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
	home, ws := configDirs(t, tomlServer("a", "x")+"timeout = \"x\"\n[model]\nmax_steps = 0\n", "[mcp_servers.b]\nurl = \"ftp://h\"\n")
	getenv := fakeEnv(map[string]string{"HARNESS_MCP_SERVERS": `[{"name":"c"}]`, "HARNESS_MODEL": "gpt", "HARNESS_API_KEYS": `[{"name":"k"}]`})
	_, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: getenv})
	got := strings.NewReplacer(home, "HOME", ws, "WS").Replace(errString(err))
	want := `HOME/config.toml: server "a": timeout: "x" is not a duration; write one like "30s" or "2m"
HOME/config.toml: [model] max_steps: 0 is not positive; set a positive number or remove it
WS/.harness/config.toml: server "b": url: scheme "ftp" is not supported; use http or https
HARNESS_MCP_SERVERS[0]: server "c": command/url: neither is set; set command for a stdio server or url for an http server
HARNESS_MODEL: model "gpt": want provider/model, e.g. openai/gpt-4o or anthropic/claude-sonnet-4-5
HARNESS_API_KEYS[0]: key "k": token_sha256: missing; set token_sha256 to the SHA-256 of the token in lowercase hex
HARNESS_API_KEYS[0]: key "k": scopes: empty; list one or more of runs:read, runs:write, admin`
	if got != want {
		t.Errorf("loadConfig() error =\n%s\nwant\n%s", got, want)
	}
}

func TestLoadProfile(t *testing.T) {
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
			wantErr: `command line: server "adhoc": url: scheme "localhost" is not supported; use http or https`},
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

func TestAuthKeys(t *testing.T) {
	hashOf := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	tokenHash := hashOf("0123456789abcdef-token")
	tests := []struct {
		name, toml, env string
		want            string // name:hash-prefix:scopes,...
		wantErr         string
	}{
		{name: "none"},
		{name: "toml", toml: "[[auth.keys]]\nname = \"ci\"\ntoken_sha256 = \"" + tokenHash + "\"\nscopes = [\"runs:write\"]\n",
			want: "ci:" + tokenHash[:8] + ":[runs:write]"},
		{name: "env plaintext hashed", env: `[{"name":"ops","token":"0123456789abcdef-token","scopes":["admin","runs:read"]}]`,
			want: "ops:" + tokenHash[:8] + ":[admin runs:read]"},
		{name: "toml then env", toml: "[[auth.keys]]\nname = \"a\"\ntoken_sha256 = \"" + hashOf("a-very-long-token-1") + "\"\nscopes = [\"admin\"]\n",
			env:  `[{"name":"b","token_sha256":"` + tokenHash + `","scopes":["runs:read"]}]`,
			want: "a:" + hashOf("a-very-long-token-1")[:8] + ":[admin],b:" + tokenHash[:8] + ":[runs:read]"},
		{name: "short token", env: `[{"name":"x","token":"s3cret","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token: shorter than 16 characters; use a long random token (openssl rand -hex 32)`},
		{name: "both", env: `[{"name":"x","token":"s3cret-s3cret-s3cret","token_sha256":"` + tokenHash + `","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token: both token and token_sha256 are set; keep one`},
		{name: "uppercase hash", env: `[{"name":"x","token_sha256":"` + strings.ToUpper(tokenHash) + `","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token_sha256: not 64 lowercase hex characters; use the output of: printf %s "$TOKEN" | sha256sum`},
		{name: "long hash", env: `[{"name":"x","token_sha256":"` + tokenHash + `00","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token_sha256: not 64 lowercase hex characters; use the output of: printf %s "$TOKEN" | sha256sum`},
		{name: "bad scope and name", toml: "[[auth.keys]]\nname = \"a b\"\ntoken_sha256 = \"" + tokenHash + "\"\nscopes = [\"write\"]\n",
			wantErr: "F: [[auth.keys]] #1: key \"a b\": name: \"a b\" has invalid characters; use only letters, digits, \"-\", \"_\" and \".\"\n" +
				`F: [[auth.keys]] #1: key "a b": scopes[0]: "write" is not a scope; use runs:read, runs:write, admin`},
		{name: "same name", toml: "[[auth.keys]]\nname = \"a\"\ntoken_sha256 = \"" + tokenHash + "\"\nscopes = [\"admin\"]\n",
			env:     `[{"name":"a","token":"another-long-token","scopes":["admin"]}]`,
			wantErr: `auth key "a" is defined twice (F and HARNESS_API_KEYS); remove or rename one`},
		{name: "same token", env: `[{"name":"a","token":"0123456789abcdef-token","scopes":["admin"]},{"name":"b","token_sha256":"` + tokenHash + `","scopes":["runs:read"]}]`,
			wantErr: `auth keys "a" (HARNESS_API_KEYS) and "b" (HARNESS_API_KEYS) have the same token; give each its own token`},
		{name: "unknown env field", env: `[{"name":"a","secret":"x"}]`,
			wantErr: `HARNESS_API_KEYS[0]: unknown field "secret"; valid fields are name, token, token_sha256, scopes`},
		{name: "not array", env: `{}`,
			wantErr: `HARNESS_API_KEYS: not a JSON array; write [{"name": ..., "token": ..., "scopes": [...]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.toml != "" {
				writeFile(t, home, "config.toml", tt.toml)
			}
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(map[string]string{"HARNESS_API_KEYS": tt.env})})
			gotErr := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "F")
			if gotErr != tt.wantErr {
				t.Fatalf("loadConfig() error =\n%s\nwant\n%s", gotErr, tt.wantErr)
			}
			if strings.Contains(gotErr, "s3cret") {
				t.Errorf("loadConfig() error %q reveals a token", gotErr)
			}
			if err != nil {
				return
			}
			var parts []string
			for _, k := range cfg.AuthKeys {
				parts = append(parts, fmt.Sprintf("%s:%x:%v", k.Name, k.TokenSHA256[:4], k.Scopes))
			}
			if got := strings.Join(parts, ","); got != tt.want {
				t.Errorf("loadConfig() keys = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestModelSettings(t *testing.T) {
	tests := []struct {
		name, home, ws, env string
		want                modelSettings
		wantErr             string
	}{
		{name: "none"},
		{name: "env only", env: "openai/gpt-4o", want: modelSettings{Provider: "openai", Model: "gpt-4o"}},
		{name: "model with slash", env: "openai/meta-llama/Llama-3-8B", want: modelSettings{Provider: "openai", Model: "meta-llama/Llama-3-8B"}},
		{name: "fields merge by layer",
			home: "[model]\nname = \"anthropic/claude-sonnet-4-5\"\nbase_url = \"http://h\"\nmax_tokens = 1000\n",
			ws:   "[model]\nmax_tokens = 2000\nmax_steps = 7\n",
			want: modelSettings{Provider: "anthropic", Model: "claude-sonnet-4-5", BaseURL: "http://h", MaxTokens: 2000, MaxSteps: 7}},
		{name: "env overrides name", home: "[model]\nname = \"anthropic/c\"\nmax_steps = 3\n", env: "openai/o",
			want: modelSettings{Provider: "openai", Model: "o", MaxSteps: 3}},
		{name: "bad provider", env: "google/gemini",
			wantErr: `HARNESS_MODEL: model "google/gemini": unknown provider "google": want openai or anthropic`},
		{name: "no model", home: "[model]\nname = \"openai/\"\n",
			wantErr: `H: [model] name: model "openai/": want provider/model, e.g. openai/gpt-4o or anthropic/claude-sonnet-4-5`},
		{name: "bad url and numbers", home: "[model]\nbase_url = \"api.openai.com\"\nmax_tokens = -1\n",
			wantErr: "H: [model] base_url: scheme \"\" is not supported; use http or https\n" +
				"H: [model] max_tokens: -1 is not positive; set a positive number or remove it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := configDirs(t, tt.home, tt.ws)
			cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: fakeEnv(map[string]string{"HARNESS_MODEL": tt.env})})
			if got := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "H"); got != tt.wantErr {
				t.Fatalf("loadConfig() error =\n%s\nwant\n%s", got, tt.wantErr)
			}
			if err == nil && cfg.Model != tt.want {
				t.Errorf("loadConfig() model = %+v, want %+v", cfg.Model, tt.want)
			}
		})
	}
}

func TestConnectAllowHosts(t *testing.T) {
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
	dir := t.TempDir()
	writeFile(t, dir, ".harness/config.toml", tomlServer("a", "x"))
	cfg, err := loadConfig(loadOptions{Home: filepath.Join(dir, ".harness"), Workspace: dir, Getenv: fakeEnv(nil)})
	if err != nil || len(cfg.Files) != 1 || summary(cfg.Servers) != "a=x" {
		t.Errorf("loadConfig(home inside workspace) = %+v, %v, want the file read once", cfg, err)
	}
}

func TestStdioEnv(t *testing.T) {
	harnessEnv := fakeEnv(map[string]string{
		"PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8", "OPENAI_API_KEY": "sk-secret",
		"HARNESS_API_KEYS": "[]", "AWS_SECRET_ACCESS_KEY": "x",
	})
	cfg := serverConfig{Env: map[string]string{"HOME": "/srv", "TOKEN": "t"}}
	got := stdioEnv(cfg, harnessEnv)
	want := []string{"HOME=/srv", "LANG=C.UTF-8", "PATH=/bin", "TOKEN=t"}
	if !slices.Equal(got, want) {
		t.Errorf("stdioEnv() = %q, want %q", got, want)
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
		if layer.model.MaxSteps < 0 || layer.model.MaxTokens < 0 || (layer.model.Provider == "") != (layer.model.Model == "") {
			t.Fatalf("parseConfigTOML(%q) model = %+v", in, layer.model)
		}
		for _, k := range layer.authKeys {
			if len(k.Scopes) == 0 || checkName(k.Name, ".", "") != nil {
				t.Fatalf("parseConfigTOML(%q) key = %+v", in, k)
			}
		}
	})
}
