package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// This file runs the console's browser scenarios (testdata/console): a
// real headless Chromium, driven by the pinned playwright-core from
// testdata/npm, against the real harnessd binary with the scripted model
// and server-everything.

// requireChromium returns the browser the console tests drive: the
// HARNESS_CHROMIUM variable, else the first of chromiumNames on PATH.
// When none is there it fails the test if CI=true (.ci/run installs the
// distribution's package) and skips it otherwise, saying what to install.
func requireChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("HARNESS_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range chromiumNames {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("console browser tests: chromium-headless-shell is not on PATH: .ci/run installs it (apt-get install chromium-headless-shell)")
	}
	t.Skip("\n*** SKIPPED: console browser tests need Chromium: apt-get install chromium-headless-shell (or chromium, or set HARNESS_CHROMIUM). ***")
	return ""
}

// chromiumNames are the browsers requireChromium looks for, in order.
// Chromium's headless shell comes first: the same Blink and V8 as the
// full browser (Playwright's own default for headless runs), without the
// browser window's compositing, so TestConsoleInBrowser costs 26 CPU
// seconds in it against 60 in the full chromium, and 26 s instead of 38
// (2 cores, 2026-12-06). The full browser passes the same scenarios.
var chromiumNames = []string{"chromium-headless-shell", "chromium", "chromium-browser"}

// requirePlaywright skips the test in -short mode, and returns the
// browser (requireChromium) and the node_modules holding playwright-core
// that drive the console scenarios; when playwright-core is missing it
// fails the test if CI=true and skips it otherwise, saying what to run.
func requirePlaywright(t *testing.T) (browser, modules string) {
	t.Helper()
	if testing.Short() {
		t.Skip("drives a browser against the harnessd binary")
	}
	browser = requireChromium(t)
	modules = requireNode(t)
	if _, err := os.Stat(filepath.Join(modules, "playwright-core", "package.json")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("playwright-core is missing from testdata/npm: run ./test.sh (npm ci in testdata/npm): %v", err)
		}
		t.Skipf("\n*** SKIPPED: playwright-core is missing: run ./test.sh once (npm ci in testdata/npm). ***")
	}
	return browser, modules
}

// consoleScript is the scripted model of the browser scenarios, turn by
// turn in the order the scenarios start their runs. The first answer
// streams its first piece, then waits until gate is closed (the page
// showed that piece), so the page is seen showing text as it streams.
func consoleScript(payload string, gate <-chan struct{}) []fakeTurn {
	prompted := func(want string) func(fakeRequest) error {
		return func(req fakeRequest) error {
			if len(req.Messages) == 0 || !strings.Contains(req.Messages[0].Content, want) {
				return fmt.Errorf("first message %+v, want the prompt with %q", req.Messages, want)
			}
			return nil
		}
	}
	result := func(prefix string) fakeTurn {
		return fakeTurn{Reply: func(req fakeRequest) fakeTurn {
			res := req.toolResults()
			if len(res) != 1 {
				return fakeTurn{Text: fmt.Sprintf("unexpected results %+v", res)}
			}
			return fakeTurn{Text: prefix + res[0].Content}
		}}
	}
	return []fakeTurn{
		{Check: prompted("Echo hello console"), Text: "Calling echo now.", Chunks: []string{"Calling ", "echo ", "now."},
			OnChunk: func(i int) {
				if i == 1 {
					<-gate
				}
			},
			ToolCalls: []toolCall{call("mcp_everything_echo", `{"message":"hello console"}`)}},
		result("The server said: "),
		{Check: prompted("Ask me for my details"), ToolCalls: []toolCall{call("mcp_everything_trigger_elicitation_request", `{}`)}},
		result("You told the server:\n"),
		{Check: prompted("Echo this: " + payload), ToolCalls: []toolCall{call("mcp_everything_echo", fmt.Sprintf(`{"message":%s}`, strconv.Quote("<img src=x onerror=alert(1)></script>")))}},
		result("Result: "),
		// Approvals: the first sum is approved, the second denied.
		{Check: prompted("Add with approval"), ToolCalls: []toolCall{call("mcp_everything_get_sum", `{"a":1,"b":2}`)}},
		{ToolCalls: []toolCall{call("mcp_everything_get_sum", `{"a":3,"b":4}`)}},
		{Reply: func(req fakeRequest) fakeTurn {
			var results []string
			for _, m := range req.Messages {
				if m.Role == roleTool {
					results = append(results, m.Content)
				}
			}
			return fakeTurn{Text: "Sums: " + strings.Join(results, " | ")}
		}},
		// A run whose head changes while its prompt is clicked: the first
		// sum is approved, and the run is cancelled at the second.
		{Check: prompted("Add while the prompt is clicked"), ToolCalls: []toolCall{call("mcp_everything_get_sum", `{"a":1,"b":2}`)}},
		{ToolCalls: []toolCall{call("mcp_everything_get_sum", `{"a":3,"b":4}`)}},
		// A conversation of two runs, the second continued from its page.
		{Check: prompted("Remember the word kiwi"), Text: "Noted: kiwi."},
		{Check: func(req fakeRequest) error {
			var said []string
			for _, m := range req.Messages {
				said = append(said, m.Content)
			}
			if all := strings.Join(said, "\n"); !strings.Contains(all, "Remember the word kiwi") || !strings.Contains(all, "Noted: kiwi.") || !strings.HasSuffix(all, "What was the word?") {
				return fmt.Errorf("the second run of the conversation was sent %q, want the first run's prompt and answer, then its own", said)
			}
			return nil
		}, Text: "The word was kiwi."},
		// A schedule started from its page.
		{Check: prompted("Nightly check"), Text: "All quiet."},
		// A run started with every field of the form: its system prompt
		// reaches the model, its own server's echo waits for approval
		// (approval always), and it continues the kiwi conversation.
		{Check: func(req fakeRequest) error {
			last := req.Messages[len(req.Messages)-1]
			if !strings.Contains(req.System, "You are terse.") || !strings.Contains(last.Content, "Form fields check") || !strings.Contains(req.Messages[0].Content, "Remember the word kiwi") {
				return fmt.Errorf("system %q, messages %+v: want the form's system prompt, the kiwi conversation and the form's prompt", req.System, req.Messages)
			}
			return nil
		}, ToolCalls: []toolCall{call("mcp_mine_echo", `{"message":"form"}`)}, Usage: modelUsage{InputTokens: 1200, OutputTokens: 40}},
		result("Form: "),
		// A run whose timeline is watched growing: its sum waits for an
		// approval given on the page.
		{Check: prompted("Add slowly with approval"), Text: "Adding.", ToolCalls: []toolCall{call("mcp_everything_get_sum", `{"a":5,"b":6}`)},
			Usage: modelUsage{InputTokens: 900, OutputTokens: 30}},
		{Text: "Eleven.", Usage: modelUsage{InputTokens: 1000, OutputTokens: 12}},
	}
}

func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	browser, modules := requirePlaywright(t)
	everything := everythingStdioCommand(t)
	bin := buildHarnessd(t)
	const payload = "<img src=x onerror=alert(1)></script><script>alert(2)</script>"
	gate := make(chan struct{})
	var gateOnce sync.Once
	openGate := func() { gateOnce.Do(func() { close(gate) }) }
	t.Cleanup(openGate)
	gateSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { openGate() }))
	t.Cleanup(gateSrv.Close)
	f := newFakeModel(t, providerOpenAI, consoleScript(payload, gate)...)

	home, workspace := t.TempDir(), t.TempDir()
	var env []string
	for k, v := range everything.Env {
		env = append(env, fmt.Sprintf("%s = %q", k, v))
	}
	args := make([]string, len(everything.Args))
	for i, a := range everything.Args {
		args[i] = strconv.Quote(a)
	}
	config := fmt.Sprintf("[mcp_servers.everything]\ncommand = %q\nargs = [%s]\nenv = { %s }\napproval_tools = [\"get-sum\"]\n\n[model]\nname = \"openai/fake-model\"\n\n[model.prices.\"openai/fake-model\"]\ninput = 2.5\noutput = 10\n\n[[schedules]]\nname = \"nightly\"\ncron = \"0 3 * * *\"\nprompt = \"Nightly check\"\n",
		everything.Command, strings.Join(args, ", "), strings.Join(env, ", "))
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{"admin": "console-admin-0123456789", "write": "console-write-0123456789", "read": "console-read-0123456789"}
	apiKeys := fmt.Sprintf(`HARNESS_API_KEYS=[{"name":"ops","token":%q,"scopes":["admin"]},{"name":"writer","token":%q,"scopes":["runs:write"]},{"name":"viewer","token":%q,"scopes":["runs:read"]}]`,
		keys["admin"], keys["write"], keys["read"])
	_, at := serveHarnessd(t, bin, fakeModelEnv(f, home, apiKeys), workspace)
	waitUntil(t, "harnessd is ready", func() bool {
		resp, _ := at.do(t, http.MethodGet, "/readyz", "", "")
		return resp.StatusCode == http.StatusOK
	})

	server := map[string]any{"name": "mine", "command": everything.Command, "args": everything.Args}
	if len(everything.Env) > 0 {
		server["env"] = everything.Env
	}
	mine, err := json.Marshal(server)
	if err != nil {
		t.Fatal(err)
	}
	runConsoleScenarios(t, "console.test.mjs", browser, modules, at.url,
		"ADMIN_KEY="+keys["admin"], "WRITE_KEY="+keys["write"], "READ_KEY="+keys["read"],
		"GATE_URL="+gateSrv.URL,
		// The command of server-everything, for a run's own server.
		"EVERYTHING_SERVER="+string(mine))
}

// runConsoleScenarios runs the browser scenarios of testdata/console/file
// with node against the console at url, driving browser with the
// playwright-core in modules; env adds the scenarios' own variables (their
// keys, say). A failed scenario fails t, saying where its screenshot and
// console log are (HARNESS_CONSOLE_ARTIFACTS, else a temporary directory).
// With HARNESS_CONSOLE_SCREENSHOTS set, the scenarios save the README's
// pictures there (go test -run TestConsoleInBrowser with
// HARNESS_CONSOLE_SCREENSHOTS=$PWD/docs/console).
func runConsoleScenarios(t *testing.T, file, browser, modules, url string, env ...string) {
	t.Helper()
	artifacts := t.TempDir()
	if dir := os.Getenv("HARNESS_CONSOLE_ARTIFACTS"); dir != "" {
		artifacts = dir
	}
	cmd := exec.CommandContext(t.Context(), "node", "--test", "--test-reporter=spec", filepath.Join("testdata", "console", file))
	cmd.Env = append(os.Environ(), "NODE_MODULES="+modules, "CONSOLE_URL="+url, "CHROMIUM="+browser, "ARTIFACTS="+artifacts)
	cmd.Env = append(cmd.Env, env...)
	if dir := os.Getenv("HARNESS_CONSOLE_SCREENSHOTS"); dir != "" {
		cmd.Env = append(cmd.Env, "SCREENSHOTS="+dir)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("console scenarios of %s failed (%v); screenshots and console logs of the failed ones are in %s:\n%s", file, err, artifacts, out)
	}
	t.Logf("console scenarios of %s:\n%s", file, out)
}
