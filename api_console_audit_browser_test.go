package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// This file runs the browser scenarios of the console's audit page
// (testdata/console/audit.test.mjs): a real headless Chromium against the
// harnessd binary, after a run of a runs:write key that called a tool of
// a scripted HTTP MCP server and an admin's restart of that server.

// TestConsoleAuditInBrowser lists the audit trail on the console as an
// admin: the run's tool calls and the admin's action, each filter of the
// API, and a tool name written to inject markup shown as text; a
// runs:read key gets a notice instead.
func TestConsoleAuditInBrowser(t *testing.T) {
	t.Parallel()
	browser, modules := requirePlaywright(t)
	bin := buildHarnessd(t)
	web := newFakeMCP(t, fakeMCPConfig{})
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{call("mcp_web_echo", `{"message":"audited"}`), call("<img src=x onerror=alert(1)>", `{}`)}},
		fakeTurn{Text: "done"},
	)
	home, workspace := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(fmt.Sprintf("[mcp_servers.web]\nurl = %q\n\n[model]\nname = \"openai/fake-model\"\n", web.URL)), 0o600); err != nil {
		t.Fatal(err)
	}
	const admin, writer, reader = "console-audit-admin-0123456789", "console-audit-write-0123456789", "console-audit-read-0123456789"
	apiKeys := fmt.Sprintf(`HARNESS_API_KEYS=[{"name":"ops","token":%q,"scopes":["admin"]},{"name":"writer","token":%q,"scopes":["runs:write"]},{"name":"viewer","token":%q,"scopes":["runs:read"]}]`,
		admin, writer, reader)
	_, at := serveHarnessd(t, bin, fakeModelEnv(f, home, apiKeys), workspace)
	waitUntil(t, "harnessd is ready", func() bool {
		resp, _ := at.do(t, http.MethodGet, "/readyz", "", "")
		return resp.StatusCode == http.StatusOK
	})
	id := at.postRun(t, "Bearer "+writer, `{"prompt":"Echo for the audit"}`)
	var v runView
	waitUntil(t, "run "+id+" ends", func() bool {
		resp, data := at.do(t, http.MethodGet, "/v1/runs/"+id, "Bearer "+admin, "")
		if err := json.Unmarshal(data, &v); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/runs/%s = %d %s (%v)", id, resp.StatusCode, data, err)
		}
		return isTerminal(v.Status)
	})
	if v.Status != runCompleted {
		t.Fatalf("run %s = %s (%s), want completed", id, v.Status, v.Error)
	}
	if resp, data := at.do(t, http.MethodPost, "/v1/mcp/servers/web/restart", "Bearer "+admin, "{}"); resp.StatusCode/100 != 2 {
		t.Fatalf("POST /v1/mcp/servers/web/restart = %d %s", resp.StatusCode, data)
	}
	runConsoleScenarios(t, "audit.test.mjs", browser, modules, at.url, "ADMIN_KEY="+admin, "READ_KEY="+reader, "RUN_ID="+id)
}
