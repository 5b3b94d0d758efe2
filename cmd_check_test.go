package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests harnessd check: every source validated, exit 0 or 2,
// every problem at once.

func TestCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		home     string            // $HARNESS_HOME/config.toml
		profiles map[string]string // $HARNESS_HOME/profiles/<name>.toml
		env      map[string]string
		wantCode int
		want     []string // in stdout when 0, in stderr otherwise
	}{
		{name: "no configuration at all", want: []string{"configuration ok: 0 servers (no config files), 0 profiles"}},
		{name: "servers that are not started",
			home:     "[mcp_servers.a]\ncommand = \"/nonexistent/server\"\n",
			profiles: map[string]string{"dev": "[mcp_servers.b]\nurl = \"http://localhost:1/mcp\"\n"},
			env:      map[string]string{"HARNESS_MCP_SERVERS": `{"mcpServers": {"c": {"command": "/nonexistent/c"}}}`},
			want:     []string{"configuration ok: 2 servers (HOME/config.toml), 1 profile"}},
		{name: "every problem at once",
			home:     "[mcp_servers.a]\ncomand = \"x\"\n",
			profiles: map[string]string{"dev": "[mcp_servers.b]\ntimeout = \"soon\"\n"},
			env:      map[string]string{"HARNESS_MODEL": "nope", "HARNESS_MCP_SERVERS": `[{"name": "c"}]`},
			wantCode: 2,
			want: []string{
				"harnessd: check: configuration has problems:",
				`HOME/config.toml: unknown key "mcp_servers.a.comand"`,
				`HARNESS_MCP_SERVERS[0]: server "c": command/url: neither is set`,
				"HARNESS_MODEL:",
				`server "b": timeout: "soon" is not a duration`,
			}},
		{name: "profile colliding with a global",
			home:     "[mcp_servers.my-db]\ncommand = \"x\"\n",
			profiles: map[string]string{"dev": "[mcp_servers.my_db]\ncommand = \"y\"\n"},
			wantCode: 2,
			want:     []string{`profile server "my_db" (profile dev) and global server "my-db"`}},
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
			for name, text := range tt.profiles {
				dir := filepath.Join(home, "profiles")
				if err := os.MkdirAll(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, name+".toml"), []byte(text), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			env := map[string]string{"HARNESS_HOME": home}
			for k, v := range tt.env {
				env[k] = v
			}
			code, stdout, stderr := runHarnessd(t, env, "check")
			out := stdout
			if tt.wantCode != 0 {
				out = stderr
			}
			out = strings.ReplaceAll(out, home, "HOME")
			if code != tt.wantCode {
				t.Errorf("harnessd check = %d, want %d\nstdout %s\nstderr %s", code, tt.wantCode, stdout, stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("harnessd check output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}
