package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// This file tests that every problem of a TOML file is said at once:
// values of the wrong type no longer hide the file's unknown keys and
// invalid values.

func TestTOMLEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, toml string
		want       []string // the error's lines, F the file
	}{
		{name: "limits, a typo and a bad url",
			toml: "max_run_tokens = \"lots\"\nmax_concurrent_runs = \"many\"\ntypo_key = 1\n" +
				"[mcp_servers.a]\nurl = \"ftp://x\"\ntimeout = 5\n" +
				"[mcp_servers.b]\ncommand = \"sh\"\nargs = [\"a\", 2]\ncomand = \"x\"\n",
			want: []string{
				`F: field "max_run_tokens": a string is not allowed here; write a whole number`,
				`F: field "max_concurrent_runs": a string is not allowed here; write a whole number`,
				`F: [mcp_servers.a] field "timeout": a whole number is not allowed here; write a duration like "30s"`,
				`F: [mcp_servers.b] field "args[1]": a whole number is not allowed here; write a string`,
				`F: unknown key "typo_key"; remove it or check its spelling`,
				`F: unknown key "mcp_servers.b.comand"; valid keys are ` + strings.Join(taggedFields(reflect.TypeFor[rawServer](), "toml"), ", "),
				`F: server "a": url: scheme "ftp" is not supported; use http or https`,
			}},
		{name: "embedded settings are checked",
			toml: "max_queued_runs = true\nmax_run_cost_usd = \"cheap\"\n",
			want: []string{
				`F: field "max_queued_runs": true or false is not allowed here; write a whole number`,
				`F: field "max_run_cost_usd": a string is not allowed here; write a number`,
			}},
		{name: "a wrong value in a table keeps the table's other problems",
			toml: "[mcp_servers.a]\nurl = \"http://h/mcp\"\nenv = { PORT = 3001 }\nheaders = { \"X Y\" = \"v\" }\n",
			want: []string{
				`F: [mcp_servers.a] field "env.PORT": a whole number is not allowed here; write a string`,
				`F: server "a": headers.X Y: invalid header name; use letters, digits and "-"`,
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			writeFile(t, home, "config.toml", tt.toml)
			_, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(nil)})
			got := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "F")
			if want := strings.Join(tt.want, "\n"); got != want {
				t.Errorf("loadConfig(%q) error =\n%s\nwant\n%s", tt.toml, got, want)
			}
		})
	}
}
