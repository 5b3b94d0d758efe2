package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests the command-line errors that used to mislead, each with
// its exact message: a tool hidden by a setting, a name collision said
// once, a URL without its scheme, TOML values of the wrong type, a wrong
// URL path.

func TestMisleadingErrors(t *testing.T) {
	t.Parallel()
	fake := fakeServerConfig(t, "normal")
	// A web server that answers every path with its HTML error page, as
	// Express does.
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Error</title>\n</head>\n<body>\n<pre>Cannot %s %s</pre>\n</body>\n</html>\n", r.Method, r.URL.Path)
	}))
	t.Cleanup(page.Close)
	fakeTable := func(name, extra string) string {
		return "[mcp_servers." + name + "]\ncommand = " + tomlString(fake.Command) +
			"\nenv = { " + fakeServerEnv + " = \"normal\" }\n" + extra
	}
	tests := []struct {
		name     string
		home     string // $HARNESS_HOME/config.toml
		args     []string
		wantCode int
		wantErr  string
		once     bool // wantErr appears exactly once
	}{
		{name: "tool of a disabled server", home: fakeTable("fk", "enabled = false\n"),
			args: []string{"mcp", "call", "mcp_fk_echo"}, wantCode: 1,
			wantErr: `harnessd: mcp call: "mcp_fk_echo" would be a tool of server "fk", which is disabled by enabled = false (HOME/config.toml); set enabled = true to use it`},
		{name: "tool removed by exclude_tools", home: fakeTable("fk", "exclude_tools = [\"ec*\"]\n"),
			args: []string{"mcp", "call", "mcp_fk_echo"}, wantCode: 1,
			wantErr: `harnessd: mcp call: tool "echo" of server "fk" is hidden by exclude_tools entry "ec*" (HOME/config.toml); remove it there to use it`},
		{name: "tool outside include_tools", home: fakeTable("fk", "include_tools = [\"fail\"]\n"),
			args: []string{"mcp", "call", "mcp_fk_echo"}, wantCode: 1,
			wantErr: `harnessd: mcp call: tool "echo" of server "fk" is hidden by include_tools ["fail"] (HOME/config.toml); add it there to use it`},
		{name: "name collision said once", home: "[mcp_servers.my-db]\ncommand = \"x\"\n[mcp_servers.my_db]\ncommand = \"y\"\n",
			args: []string{"mcp", "list"}, wantCode: 2, once: true,
			wantErr: `servers "my-db" (HOME/config.toml) and "my_db" (HOME/config.toml) both make tool names start with "mcp_my_db_"; rename one`},
		{name: "missing cwd", home: "[mcp_servers.fk]\ncommand = \"/bin/sh\"\ncwd = \"/nonexistent/dir\"\n",
			args: []string{"mcp", "list"}, wantCode: 1,
			wantErr: `error: server "fk": start: cwd "/nonexistent/dir" is not a directory; create it or fix the server's cwd`},
		{name: "TOML values of the wrong type, all at once",
			home: "max_connections = \"8\"\n[model]\nmax_output_tokens = \"lots\"\n[mcp_servers.ev]\ncommand = \"npx\"\nargs = \"-y @modelcontextprotocol/server-everything\"\n" +
				"enabled = \"yes\"\nenv = { PORT = 3001 }\n[mcp_servers.web]\nurl = \"http://localhost:3001/mcp\"\nheaders = [\"Authorization: Bearer x\"]\n" +
				"include_tools = [\"a\", 2]\noauth = { scopes = \"read write\" }\n[[auth.keys]]\nname = \"ci\"\nscopes = \"runs:write\"\n",
			args: []string{"mcp", "list"}, wantCode: 2,
			wantErr: `harnessd: HOME/config.toml: field "max_connections": a string is not allowed here; write a whole number
HOME/config.toml: [model] field "max_output_tokens": a string is not allowed here; write a whole number
HOME/config.toml: [mcp_servers.ev] field "args": a string is not allowed here; write a list of strings
HOME/config.toml: [mcp_servers.ev] field "enabled": a string is not allowed here; write true or false
HOME/config.toml: [mcp_servers.ev] field "env.PORT": a whole number is not allowed here; write a string
HOME/config.toml: [mcp_servers.web] field "headers": a list is not allowed here; write a table of strings
HOME/config.toml: [mcp_servers.web] field "include_tools[1]": a whole number is not allowed here; write a string
HOME/config.toml: [mcp_servers.web] field "oauth.scopes": a string is not allowed here; write a list of strings
HOME/config.toml: [[auth.keys]] #1 field "scopes": a string is not allowed here; write a list of strings`},
		{name: "TOML syntax error", home: "[mcp_servers.ev]\nargs = [\n",
			args: []string{"mcp", "list"}, wantCode: 2,
			wantErr: `harnessd: parse HOME/config.toml: toml: line 2 (last key "mcp_servers.ev.args"): unexpected EOF; expected value`},
		{name: "wrong URL path", args: []string{"mcp", "list", "--url", page.URL + "/wrong"}, wantCode: 1,
			wantErr: `error: server "adhoc": tried Streamable HTTP first: initialize: post message: http status 404: an HTML page "Error Cannot POST /wrong"; ` +
				`then the legacy HTTP+SSE fallback: sse connect: http status 404: an HTML page "Error Cannot GET /wrong"; check the url's path (often /mcp, or /sse for a legacy server)`},
		{name: "host name without scheme", args: []string{"mcp", "list", "--url", "localhost:3001/mcp"}, wantCode: 2,
			wantErr: `harnessd: command line: server "adhoc": url: no scheme; write a full URL like http://localhost:3001/mcp`},
		{name: "address without scheme", args: []string{"mcp", "list", "--url", "127.0.0.1:3001/mcp"}, wantCode: 2,
			wantErr: `harnessd: command line: server "adhoc": url: no scheme; write a full URL like http://localhost:3001/mcp`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			if tt.home != "" {
				if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(tt.home), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			code, stdout, stderr := runHarnessd(t, map[string]string{"HARNESS_HOME": home}, tt.args...)
			// A server's failure is printed with its status on stdout.
			stderr = strings.ReplaceAll(stderr+stdout, home, "HOME")
			if code != tt.wantCode || !strings.Contains(stderr, tt.wantErr) {
				t.Errorf("harnessd %q = %d, stderr %q; want %d and %q", tt.args, code, stderr, tt.wantCode, tt.wantErr)
			}
			if n := strings.Count(stderr, tt.wantErr); tt.once && n != 1 {
				t.Errorf("harnessd %q says %q %d times, want once", tt.args, tt.wantErr, n)
			}
		})
	}
}

func TestHTMLText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, page, want string
	}{
		{"express", "<!DOCTYPE html>\n<html><head><title>Error</title></head><body><pre>Cannot POST /x</pre></body></html>", "Error Cannot POST /x"},
		{"entities", "<p>a &amp; b &lt;c&gt;</p>", "a & b <c>"},
		{"script and style left out", "<style>body{color:red}</style><script>alert(1)</script><h1>Not Found</h1>", "Not Found"},
		{"cut inside a tag", "<h1>Gone</h1><a href=", "Gone"},
		{"empty tag", "<>x</>", "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := htmlText([]byte(tt.page)); got != tt.want {
				t.Errorf("htmlText(%q) = %q, want %q", tt.page, got, tt.want)
			}
		})
	}
}
