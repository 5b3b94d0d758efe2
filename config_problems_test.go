package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file tests that a problem only this machine decides (an unset
// variable, a command or cwd missing) fails its server alone: mcp list
// and mcp call reach the other servers, check warns (and fails only with
// --strict), and the daemon serves.

// badServerCases are servers with such a problem, as [mcp_servers.bad]
// bodies, and the error their status gives (HOME is $HARNESS_HOME).
var badServerCases = []struct {
	name    string
	table   string
	wantErr string // the status error; check's warning is the part after "server \"bad\": "
}{
	{name: "unset variable in env",
		table:   "command = \"/bin/sh\"\nenv = { API_TOKEN = \"${MISSING_TOKEN}\" }\n",
		wantErr: `server "bad": env.API_TOKEN: variable MISSING_TOKEN is not set; set it in harnessd's environment or write ${MISSING_TOKEN:-default}`},
	{name: "unset variable in a header",
		table:   "url = \"https://mcp.example.com/mcp\"\nheaders = { Authorization = \"Bearer ${REMOTE_TOKEN}\" }\n",
		wantErr: `server "bad": headers.Authorization: variable REMOTE_TOKEN is not set; set it in harnessd's environment or write ${REMOTE_TOKEN:-default}`},
	{name: "unset variable in args",
		table:   "command = \"/bin/sh\"\nargs = [\"-c\", \"${DATA_DIR}\"]\n",
		wantErr: `server "bad": args[1]: variable DATA_DIR is not set; set it in harnessd's environment or write ${DATA_DIR:-default}`},
	{name: "unset variable in the url",
		table:   "url = \"${BASE_URL}/mcp\"\n",
		wantErr: `server "bad": url: variable BASE_URL is not set; set it in harnessd's environment or write ${BASE_URL:-default}`},
	{name: "two unset variables",
		table:   "url = \"${BASE_URL}/mcp\"\nheaders = { Authorization = \"Bearer ${REMOTE_TOKEN}\" }\n",
		wantErr: `server "bad": url: variable BASE_URL is not set; set it in harnessd's environment or write ${BASE_URL:-default} (and 1 more variable: harnessd check lists them)`},
	{name: "command that does not exist",
		table:   "command = \"/usr/bin/does-not-exist\"\n",
		wantErr: `server "bad": start: command "/usr/bin/does-not-exist" does not exist; install it or fix the server's command`},
	{name: "command not on PATH",
		table:   "command = \"nodee\"\n",
		wantErr: `server "bad": start: command "nodee" is not found on PATH (PATH); install it, or write its full path`},
	{name: "cwd that does not exist",
		table:   "command = \"/bin/sh\"\ncwd = \"/nonexistent/dir\"\n",
		wantErr: `server "bad": start: cwd "/nonexistent/dir" is not a directory; create it or fix the server's cwd`},
}

func TestServerProblemFailsAlone(t *testing.T) {
	t.Parallel()
	fake := fakeServerConfig(t, "normal")
	okTable := "[mcp_servers.ok]\ncommand = " + tomlString(fake.Command) + "\nenv = { " + fakeServerEnv + " = \"normal\" }\n"
	for _, tt := range badServerCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			writeFile(t, home, "config.toml", okTable+"[mcp_servers.bad]\n"+tt.table)
			env := map[string]string{"HARNESS_HOME": home}
			clean := func(s string) string {
				return strings.ReplaceAll(strings.ReplaceAll(s, home, "HOME"), os.Getenv("PATH"), "PATH")
			}

			code, stdout, stderr := runHarnessd(t, env, "mcp", "list", "--json")
			var list struct{ Servers []serverStatus }
			if err := json.Unmarshal([]byte(stdout), &list); err != nil || code != 1 || len(list.Servers) != 2 {
				t.Fatalf("mcp list = %d, %q, %q; want 1 and two servers", code, stdout, stderr)
			}
			if ok := list.Servers[0]; ok.Status != statusReady || len(ok.Tools) == 0 {
				t.Errorf("mcp list: server ok = %s %q, want ready with its tools", ok.Status, ok.Error)
			}
			if bad := list.Servers[1]; bad.Status != statusFailed || clean(bad.Error) != tt.wantErr {
				t.Errorf("mcp list: server bad = %s %q, want failed with %q", bad.Status, clean(bad.Error), tt.wantErr)
			}
			if strings.Contains(stderr, "level=WARN") {
				t.Errorf("mcp list stderr = %q, want the failure said once, in the list", stderr)
			}

			if code, stdout, stderr := runHarnessd(t, env, "mcp", "call", "mcp_ok_echo", `{"message":"still here"}`); code != 0 || stdout != "still here\n" {
				t.Errorf("mcp call mcp_ok_echo = %d, %q, %q; want the other server to answer", code, stdout, stderr)
			}

			warning := "warning: HOME/config.toml: " + strings.Replace(tt.wantErr, "start: ", "", 1)
			if tt.name == "two unset variables" {
				warning = "warning: HOME/config.toml: server \"bad\": url: variable BASE_URL is not set; set it in harnessd's environment or write ${BASE_URL:-default}\n" +
					"warning: HOME/config.toml: server \"bad\": headers.Authorization: variable REMOTE_TOKEN is not set; set it in harnessd's environment or write ${REMOTE_TOKEN:-default}"
			}
			code, stdout, stderr = runHarnessd(t, env, "check")
			if code != 0 || clean(stderr) != warning+"\n" || !strings.HasPrefix(stdout, "configuration ok: 2 servers") || !strings.Contains(stdout, "warning") {
				t.Errorf("check = %d, stdout %q, stderr %q; want 0 and the warning\n%s", code, stdout, clean(stderr), warning)
			}
			code, _, stderr = runHarnessd(t, env, "check", "--strict")
			if code != 1 || !strings.Contains(clean(stderr), warning) || !strings.Contains(stderr, "--strict") {
				t.Errorf("check --strict = %d, stderr %q; want 1 with the warning", code, clean(stderr))
			}
		})
	}
}

// TestCheckStaysFatal: what the file itself gets wrong is still an error
// (exit 2), with the warnings of the servers printed too.
func TestCheckStaysFatal(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, config, wantErr string }{
		{name: "unknown key", config: "[mcp_servers.a]\ncommand = \"/bin/sh\"\ncomand = \"x\"\n", wantErr: `unknown key "mcp_servers.a.comand"`},
		{name: "invalid value", config: "[mcp_servers.a]\nurl = \"ftp://h/x\"\n", wantErr: `server "a": url: scheme "ftp" is not supported`},
		{name: "bad variable syntax", config: "[mcp_servers.a]\nurl = \"http://h/${A\"\n", wantErr: `server "a": url: unterminated "${"`},
		{name: "unparsable", config: "[mcp_servers.a\n", wantErr: "parse HOME/config.toml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir()
			writeFile(t, home, "config.toml", tt.config+"[mcp_servers.z]\ncommand = \"/bin/sh\"\nenv = { T = \"${UNSET_T}\" }\n")
			for _, args := range [][]string{{"check"}, {"mcp", "list"}} {
				code, _, stderr := runHarnessd(t, map[string]string{"HARNESS_HOME": home}, args...)
				stderr = strings.ReplaceAll(stderr, home, "HOME")
				if code != 2 || !strings.Contains(stderr, tt.wantErr) {
					t.Errorf("harnessd %q = %d, stderr %q; want 2 and %q", args, code, stderr, tt.wantErr)
				}
			}
		})
	}
}

// TestDaemonServesWithFailedServer starts the daemon with a server whose
// variable is unset and no model: it serves, the other server is ready,
// the bad one failed (once: no retries, its environment cannot change),
// and the log says how to set a model.
func TestDaemonServesWithFailedServer(t *testing.T) {
	t.Parallel()
	bin := buildHarnessd(t)
	home, workspace, _ := fakeServerHome(t, "ok", "normal",
		"[mcp_servers.remote]\nurl = \"https://mcp.example.com/mcp\"\nheaders = { Authorization = \"Bearer ${REMOTE_TOKEN}\" }\n")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HARNESS_HOME=" + home}
	p, at := serveHarnessd(t, bin, env, workspace)
	var servers []serverStatus
	waitUntil(t, "both servers' first attempt", func() bool {
		resp, _ := at.do(t, "GET", "/readyz", "", "")
		if resp.StatusCode != http.StatusOK {
			return false
		}
		_, data := at.do(t, "GET", "/v1/mcp/servers", "", "")
		var out struct{ Servers []serverStatus }
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("GET /v1/mcp/servers = %s: %v", data, err)
		}
		servers = out.Servers
		return true
	})
	byName := map[string]serverStatus{}
	for _, s := range servers {
		byName[s.Name] = s
	}
	if ok := byName["ok"]; ok.Status != statusReady {
		t.Errorf("server ok = %s %q, want ready", ok.Status, ok.Error)
	}
	remote := byName["remote"]
	want := `server "remote": headers.Authorization: variable REMOTE_TOKEN is not set; set it in harnessd's environment or write ${REMOTE_TOKEN:-default}`
	if remote.Status != statusFailed || remote.Error != want || remote.NextRetry != nil {
		t.Errorf("server remote = %s %q next retry %v, want failed with %q and no retry", remote.Status, remote.Error, remote.NextRetry, want)
	}
	if !eventually(5*time.Second, func() bool { return strings.Contains(p.log(), `"msg":"no model configured`) }) {
		t.Errorf("log has no warning about the missing model:\n%s", p.log())
	}
	if !strings.Contains(p.log(), "HARNESS_MODEL") || !strings.Contains(p.log(), "/etc/harnessd/env") {
		t.Errorf("the missing model's warning does not say how to set one:\n%s", p.log())
	}
}

// TestLaunchProblems covers the command and cwd checks on their own.
func TestLaunchProblems(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "bin/tool", "#!/bin/sh\n")
	if err := os.Chmod(filepath.Join(dir, "bin/tool"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "bin/plain", "data")
	path := "relative:" + filepath.Join(dir, "bin")
	tests := []struct {
		name, command, cwd, want string
	}{
		{name: "on PATH", command: "tool"},
		{name: "absolute", command: filepath.Join(dir, "bin/tool")},
		{name: "relative to cwd", command: "./bin/tool", cwd: dir},
		{name: "not on PATH", command: "nodee", want: `command "nodee" is not found on PATH (P); install it, or write its full path`},
		{name: "not executable", command: filepath.Join(dir, "bin/plain"), want: `command "D/bin/plain": is not executable (chmod +x it); fix the server's command`},
		{name: "a directory", command: filepath.Join(dir, "bin"), want: `command "D/bin": is a directory; fix the server's command`},
		{name: "missing cwd", command: "tool", cwd: filepath.Join(dir, "nope"), want: `cwd "D/nope" is not a directory; create it or fix the server's cwd`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := serverConfig{Name: "s", Transport: transportStdio, Command: tt.command, Cwd: tt.cwd}
			got := strings.ReplaceAll(strings.Join(cfg.launchProblems(path), "\n"), path, "P")
			if got = strings.ReplaceAll(got, dir, "D"); got != tt.want {
				t.Errorf("launchProblems(%q in %q) = %q, want %q", tt.command, tt.cwd, got, tt.want)
			}
		})
	}
}
