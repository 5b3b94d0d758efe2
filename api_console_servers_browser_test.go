package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// This file runs the browser scenarios of the servers page's management
// (testdata/console/servers.test.mjs): a real headless Chromium against
// the harnessd binary serving a fake stdio server.

// TestConsoleServersInBrowser restarts a server and tries its tools from
// the servers page, disables and enables it, sees a refused change
// explained, and checks that a runs:read key gets none of it. The config
// file holds the outcome afterwards.
func TestConsoleServersInBrowser(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("drives a browser against the harnessd binary")
	}
	browser, modules := requirePlaywright(t)
	bin := buildHarnessd(t)
	home, workspace, marker := fakeServerHome(t, "echo", "pid", "")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(home, "config.toml")
	config := fmt.Sprintf("[mcp_servers.echo]\ncommand = %q\nenv = { %s = \"pid\", %s = %q }\napproval = \"writes\"\napproval_tools = [\"pid\"]\n",
		exe, fakeServerEnv, e2eMarkerEnv, marker)
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	const admin, reader = "console-servers-admin-0123456789", "console-servers-read-0123456789"
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "HARNESS_HOME=" + home,
		fmt.Sprintf(`HARNESS_API_KEYS=[{"name":"ops","token":%q,"scopes":["admin"]},{"name":"viewer","token":%q,"scopes":["runs:read"]}]`, admin, reader),
		`HARNESS_MCP_SERVERS=[{"name":"from_env","command":"/bin/true","enabled":false}]`}
	_, at := serveHarnessd(t, bin, env, workspace)
	waitUntil(t, "harnessd is ready", func() bool {
		resp, _ := at.do(t, http.MethodGet, "/readyz", "", "")
		return resp.StatusCode == http.StatusOK
	})
	artifacts := t.TempDir()
	if dir := os.Getenv("HARNESS_CONSOLE_ARTIFACTS"); dir != "" {
		artifacts = dir
	}
	cmd := exec.CommandContext(t.Context(), "node", "--test", "--test-reporter=spec", filepath.Join("testdata", "console", "servers.test.mjs"))
	cmd.Env = append(os.Environ(), "NODE_MODULES="+modules, "CONSOLE_URL="+at.url, "ADMIN_KEY="+admin, "READ_KEY="+reader,
		"CHROMIUM="+browser, "ARTIFACTS="+artifacts)
	if dir := os.Getenv("HARNESS_CONSOLE_SCREENSHOTS"); dir != "" {
		cmd.Env = append(cmd.Env, "SCREENSHOTS="+dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("servers page scenarios failed (%v); screenshots and console logs of the failed ones are in %s:\n%s", err, artifacts, out)
	}
	t.Logf("servers page scenarios:\n%s", out)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if want := "enabled = true\napproval = \"writes\"\napproval_tools = [\"pid\"]\n"; !strings.HasSuffix(string(data), want) {
		t.Errorf("config file after disable and enable from the page =\n%s\nwant it to end with\n%s", data, want)
	}
}
