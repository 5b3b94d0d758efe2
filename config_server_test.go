package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestServerNameRule checks that every place that accepts a server name
// applies the one rule: the config sources (through buildServer),
// connect_mcp (its server) and the pattern in connect_mcp's schema.
func TestServerNameRule(t *testing.T) {
	t.Parallel()
	var schema struct {
		Properties struct {
			ServerName struct {
				Pattern string `json:"pattern"`
			} `json:"server_name"`
		} `json:"properties"`
	}
	connect, ok := lookupIn([]*serverTools{deferredBuiltins}, toolConnectMCP)
	if !ok {
		t.Fatal("connect_mcp is not a deferred built-in")
	}
	if err := json.Unmarshal(connect.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema.Properties.ServerName.Pattern; got != agentServerNameSchema {
		t.Fatalf("connect_mcp server_name pattern = %q, want %q", got, agentServerNameSchema)
	}
	pattern := regexp.MustCompile(agentServerNameSchema)
	// valid is the configured rule; agentValid is connect_mcp's, which the
	// seed restricts to letters, digits, "-" and "_".
	tests := []struct {
		name       string
		valid      bool
		agentValid bool
	}{
		{"github", true, true},
		{"My-Server_2", true, true},
		{"api.example", true, false},
		{"a.b-c_d", true, false},
		{strings.Repeat("x", maxNameLength), true, true},
		{strings.Repeat("x", maxNameLength+1), false, false},
		{"", false, false},
		{"a b", false, false},
		{"a/b", false, false},
		{"a:b", false, false},
		{"café", false, false},
	}
	for _, tt := range tests {
		if got := checkServerName(tt.name) == nil; got != tt.valid {
			t.Errorf("checkServerName(%q) valid = %v, want %v", tt.name, got, tt.valid)
		}
		if got := checkAgentServerName(tt.name) == nil; got != tt.agentValid {
			t.Errorf("checkAgentServerName(%q) valid = %v, want %v", tt.name, got, tt.agentValid)
		}
		if got := pattern.MatchString(tt.name); got != tt.agentValid {
			t.Errorf("schema pattern matches %q = %v, want %v", tt.name, got, tt.agentValid)
		}
		if _, err := connectServer(tt.name, "http://127.0.0.1:1/mcp"); (err == nil) != tt.agentValid {
			t.Errorf("connectServer(%q) error = %v, want valid %v", tt.name, err, tt.agentValid)
		}
		entry, _ := json.Marshal([]map[string]string{{"name": tt.name, "command": "x"}})
		_, err := parseServerJSON("S", entry, func(string) (string, bool) { return "", false })
		if (err == nil) != tt.valid {
			t.Errorf("parseServerJSON(name %q) error = %v, want valid %v", tt.name, err, tt.valid)
		}
	}
}

// TestSameToolPrefix checks the one collision rule: names collide when
// their sanitized forms, and so their tool prefixes, are equal.
func TestSameToolPrefix(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b    string
		collide bool
		prefix  string
	}{
		{"a.b", "a_b", true, "mcp_a_b_"},
		{"a-b", "a.b", true, "mcp_a_b_"},
		{"GitHub", "github", true, "mcp_github_"},
		{"same", "same", true, "mcp_same_"},
		{"a", "a_b", false, "mcp_a_"},
		{"ab", "a_b", false, "mcp_ab_"},
	}
	for _, tt := range tests {
		if got := sameToolPrefix(tt.a, tt.b); got != tt.collide {
			t.Errorf("sameToolPrefix(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.collide)
		}
		if got := mcpToolPrefix(tt.a); got != tt.prefix {
			t.Errorf("mcpToolPrefix(%q) = %q, want %q", tt.a, got, tt.prefix)
		}
		if got := strings.HasPrefix(mcpToolName(tt.b, "t"), mcpToolPrefix(tt.a)); tt.collide && !got {
			t.Errorf("mcpToolName(%q, \"t\") does not start with mcpToolPrefix(%q)", tt.b, tt.a)
		}
	}
}

func TestServerValidation(t *testing.T) {
	t.Parallel()
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
			wantErr: p + `server "a": url: no scheme; write a full URL like http://localhost:3001/mcp`},
		{name: "relative url with an address", in: `{"name":"a","url":"127.0.0.1:3001/mcp"}`,
			wantErr: p + `server "a": url: no scheme; write a full URL like http://localhost:3001/mcp`},
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
		{name: "pinned current revision", in: `{"name":"a","url":"http://h","protocol_version":"2026-07-28"}`, wantTransport: "http", wantInferred: true},
		{name: "pinned older revision on sse", in: `{"name":"a","transport":"sse","url":"http://h","protocol_version":"2024-11-05"}`, wantTransport: "sse"},
		{name: "unknown revision", in: `{"name":"a","command":"x","protocol_version":"2025-01-01"}`,
			wantErr: p + `server "a": protocol_version: "2025-01-01" is not a protocol revision harnessd speaks; use one of 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05, or leave it out to negotiate`},
		{name: "current revision on sse", in: `{"name":"a","transport":"sse","url":"http://h","protocol_version":"2026-07-28"}`,
			wantErr: p + `server "a": protocol_version: "2026-07-28" needs transport http or stdio; legacy sse speaks up to 2025-11-25`},
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

func TestExpandVars(t *testing.T) {
	t.Parallel()
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
		got, _, err := expandVars(tt.in, env)
		if got != tt.want || errString(err) != tt.wantErr {
			t.Errorf("expandVars(%q) = %q, %v, want %q, %q", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
	if _, _, err := expandVars("${A}", nil); errString(err) != "${A}: a per-run server cannot read harnessd's environment; put the value itself in the request" {
		t.Errorf("expandVars(${A}, nil) error = %v, want the per-run refusal", err)
	}
}

func TestExpansionFields(t *testing.T) {
	t.Parallel()
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
	// Unset, each variable is a problem of its server alone: the
	// configuration loads.
	servers, err = parseServerJSON("S", []byte(in), fakeEnv(nil))
	if err != nil {
		t.Fatalf("parseServerJSON(%q) with nothing set: %v, want the servers", in, err)
	}
	var got []string
	for _, s := range servers {
		for _, u := range s.Unset {
			got = append(got, s.Name+" "+u.String())
		}
	}
	want := []string{
		"a command: variable C is not set; set it in harnessd's environment or write ${C:-default}",
		"a cwd: variable D is not set; set it in harnessd's environment or write ${D:-default}",
		"a args[0]: variable X is not set; set it in harnessd's environment or write ${X:-default}",
		"a env.E: variable X is not set; set it in harnessd's environment or write ${X:-default}",
		"b url: variable U is not set; set it in harnessd's environment or write ${U:-default}",
		"b headers.H: variable X is not set; set it in harnessd's environment or write ${X:-default}",
	}
	if !slices.Equal(got, want) {
		t.Errorf("parseServerJSON(%q) unset =\n%s\nwant\n%s", in, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSanitizeName(t *testing.T) {
	t.Parallel()
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

func TestStdioEnv(t *testing.T) {
	t.Parallel()
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

// parseOneServer parses one [mcp_servers.s] table whose body is toml and
// returns its server; with wantErr it checks that the parse fails with an
// error containing it and reports false.
func parseOneServer(t *testing.T, toml, wantErr string) (serverConfig, bool) {
	t.Helper()
	layer, err := parseConfigTOML("config.toml", []byte("[mcp_servers.s]\n"+toml+"\n"), fakeEnv(nil))
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("parseConfigTOML(%q) = %v, want an error containing %q", toml, err, wantErr)
		}
		return serverConfig{}, false
	}
	if err != nil || len(layer.servers) != 1 {
		t.Fatalf("parseConfigTOML(%q) = %v, %v, want one server", toml, layer.servers, err)
	}
	return layer.servers[0], true
}
