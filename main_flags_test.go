package main

import (
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// This file tests that flags may follow the other arguments, as people
// type them, in every command, and that "--" ends them.

func TestInterspersed(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.Bool("json", false, "")
	fs.String("name", "", "")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{name: "flags first", args: []string{"--json", "TOOL"}, want: []string{"--json", "--", "TOOL"}},
		{name: "flag last", args: []string{"TOOL", "{}", "--json"}, want: []string{"--json", "--", "TOOL", "{}"}},
		{name: "value after the arguments", args: []string{"TOOL", "--name", "x"}, want: []string{"--name", "x", "--", "TOOL"}},
		{name: "value with =", args: []string{"TOOL", "--name=x"}, want: []string{"--name=x", "--", "TOOL"}},
		{name: "boolean with =", args: []string{"T", "-json=false"}, want: []string{"-json=false", "--", "T"}},
		{name: "a boolean takes no value", args: []string{"--json", "T", "U"}, want: []string{"--json", "--", "T", "U"}},
		{name: "after -- nothing is a flag", args: []string{"NAME", "--json", "--", "cmd", "--json", "-y"},
			want: []string{"--json", "--", "NAME", "cmd", "--json", "-y"}},
		{name: "unknown flag stays a flag", args: []string{"T", "--jsno"}, want: []string{"--jsno", "--", "T"}},
		{name: "a lone dash is an argument", args: []string{"-", "--json"}, want: []string{"--json", "--", "-"}},
		{name: "value flag at the end", args: []string{"T", "--name"}, want: []string{"--name", "--", "T"}},
		{name: "nothing", args: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := interspersed(fs, tt.args); !slices.Equal(got, tt.want) {
				t.Errorf("interspersed(%q) = %q, want %q", tt.args, got, tt.want)
			}
		})
	}
}

// TestFlagsAfterArguments runs commands with their flags last.
func TestFlagsAfterArguments(t *testing.T) {
	t.Parallel()
	home, workspace, _ := fakeServerHome(t, "fk", "normal", "")
	src := filepath.Join(t.TempDir(), "mcp.json")
	if err := os.WriteFile(src, []byte(`{"mcpServers": {"web": {"url": "http://localhost:3001/mcp"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HARNESS_HOME": home, "HARNESS_WORKSPACE": workspace}

	code, stdout, stderr := runHarnessd(t, env, "mcp", "call", "mcp_fk_echo", `{"message":"hi"}`, "--json")
	var result struct{ Content []struct{ Text string } }
	if err := json.Unmarshal([]byte(stdout), &result); code != 0 || err != nil || len(result.Content) != 1 || result.Content[0].Text != "hi" {
		t.Errorf("mcp call TOOL ARGS --json = %d, %q, %q; want the result as JSON", code, stdout, stderr)
	}
	if code, stdout, stderr := runHarnessd(t, env, "mcp", "list", "--json"); code != 0 || !json.Valid([]byte(stdout)) {
		t.Errorf("mcp list --json = %d, %q, %q", code, stdout, stderr)
	}
	if code, stdout, stderr := runHarnessd(t, env, "mcp", "import", src, "--dry-run"); code != 0 || !strings.Contains(stdout, "[mcp_servers.web]") {
		t.Errorf("mcp import FILE --dry-run = %d, %q, %q; want the table printed", code, stdout, stderr)
	}
	// The command's own flags after -- stay its own.
	args := []string{"mcp", "add", "tool", "--scope", "workspace", "--", "/bin/echo", "--json", "-x"}
	if code, _, stderr := runHarnessd(t, env, args...); code != 0 {
		t.Fatalf("harnessd %q = %d, %q", args, code, stderr)
	}
	data, _ := os.ReadFile(filepath.Join(workspace, ".harness", "config.toml"))
	if !strings.Contains(string(data), "command = \"/bin/echo\"\nargs = [\"--json\", \"-x\"]\n") {
		t.Errorf("after harnessd %q the workspace file is %q, want the command's flags as args", args, data)
	}
	if code, _, stderr := runHarnessd(t, env, "mcp", "call", "mcp_fk_echo", "--jsno"); code != 2 || !strings.Contains(stderr, "flag provided but not defined: -jsno") {
		t.Errorf("mcp call TOOL --jsno = %d, %q; want 2 and the unknown flag", code, stderr)
	}
}

// TestRunFlagsAfterPrompt: harnessd run takes its flags after the prompt
// too (the daemon is not reached: the address is refused first).
func TestRunFlagsAfterPrompt(t *testing.T) {
	t.Parallel()
	a := &app{stdout: io.Discard, stderr: io.Discard, getenv: fakeEnv(nil)}
	err := a.runPrompt(t.Context(), []string{"say", "hi", "--addr", "127.0.0.1:1"})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("run say hi --addr 127.0.0.1:1 = %v, want an error reaching 127.0.0.1:1", err)
	}
}
