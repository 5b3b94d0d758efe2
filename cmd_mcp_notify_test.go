package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
)

// This file holds the test of mcp add, remove and import telling a
// running daemon (the harnessd binary, serving) about the file they
// changed, and saying plainly what to run when they cannot.

// TestMCPEditTellsDaemon runs mcp add and mcp remove against a real
// harnessd serving the same home: with an admin token the change is
// applied at once (the server appears in, then leaves, GET
// /v1/mcp/servers); without one, with a key that is not admin, or with no
// daemon at the address, the edit still succeeds and the output says the
// daemon was not told and what to run.
func TestMCPEditTellsDaemon(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	bin := buildHarnessd(t)
	home, workspace, marker := fakeServerHome(t, "echo", "normal", "")
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HARNESS_HOME=" + home,
		fmt.Sprintf(`HARNESS_API_KEYS=[{"name":"ops","token":%q,"scopes":["admin"]},{"name":"viewer","token":%q,"scopes":["runs:read"]}]`,
			strings.TrimPrefix(manageAdmin, "Bearer "), strings.TrimPrefix(manageReader, "Bearer "))}
	p, at := serveHarnessd(t, bin, env, workspace)
	waitReadyz(t, at) // so that the check after the edits says they kept it ready
	addr := strings.TrimPrefix(at.url, "http://")
	f := &manageFixture{at: at, home: home, marker: marker}
	exe := fakeServerBinary(t)
	tests := []struct {
		name, addr, token string
		// applied: the daemon must have the change right after the command
		applied bool
		want    string
	}{
		{name: "admin token", addr: addr, token: manageAdmin, applied: true,
			want: "applied: the daemon at " + addr + " reloaded its configuration"},
		{name: "no token", addr: addr,
			want: "the daemon at " + addr + " was not told (it needs an admin key: set HARNESS_TOKEN"},
		{name: "runs:read token", addr: addr, token: manageReader,
			want: "the daemon at " + addr + " was not told (the key in HARNESS_TOKEN is not an admin key)"},
		{name: "no daemon", addr: "127.0.0.1:1", token: manageAdmin,
			want: `the daemon at 127.0.0.1:1 was not told (nothing answers there; set HARNESS_ADDR to the daemon's address if it runs elsewhere): run "systemctl reload harnessd" (under systemd) or "kill -HUP <pid>"`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("told%d", i)
			cli := map[string]string{"HARNESS_HOME": home, "HARNESS_ADDR": tt.addr, "HARNESS_TOKEN": strings.TrimPrefix(tt.token, "Bearer ")}
			for _, step := range []struct {
				args  []string
				wrote string
				gone  bool
			}{
				{[]string{"mcp", "add", name, "--env", fakeServerEnv + "=normal", "--env", e2eMarkerEnv + "=" + marker, "--", exe}, `added server "` + name + `"`, false},
				{[]string{"mcp", "remove", name}, `removed server "` + name + `"`, true},
			} {
				code, stdout, stderr := runHarnessd(t, cli, step.args...)
				if code != 0 || !strings.Contains(stdout, step.wrote) || !strings.Contains(stdout, tt.want) {
					t.Fatalf("%s = %d, stdout %q, stderr %q; want 0, %q and %q", strings.Join(step.args[:2], " "), code, stdout, stderr, step.wrote, tt.want)
				}
				_, listed := f.servers(t)[name]
				if tt.applied && listed == step.gone {
					t.Errorf("after %s the daemon lists %s: %t, want %t", strings.Join(step.args[:2], " "), name, listed, !step.gone)
				}
				if !tt.applied && listed {
					t.Errorf("after %s the daemon lists %s without being told", strings.Join(step.args[:2], " "), name)
				}
			}
		})
	}
	if n := len(logEntries(p, "configuration reloaded through the API")); n != 2 {
		t.Errorf("the daemon logged %d reloads through the API, want 2 (add and remove with the admin token)", n)
	}
	if resp, body := at.do(t, http.MethodGet, "/readyz", "", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz after the edits = %d %s, want 200", resp.StatusCode, body)
	}
}
