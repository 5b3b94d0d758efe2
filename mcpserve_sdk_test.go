package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests the MCP server with the official TypeScript SDK client
// (from testdata/npm): it connects to /mcp over Streamable HTTP with a
// bearer key, or over stdio to harnessd mcp serve (the built binary,
// forwarding to /mcp), lists the tools, runs a prompt whose run calls an
// MCP tool and needs approval (answered through elicitation), receives
// progress, and reads the run as a resource.

// tsSDKClientScript is the client, run with node; it prints one JSON
// object of what it saw.
const tsSDKClientScript = `
import { Client } from "MODULES/@modelcontextprotocol/sdk/dist/esm/client/index.js";
import { StreamableHTTPClientTransport } from "MODULES/@modelcontextprotocol/sdk/dist/esm/client/streamableHttp.js";
import { StdioClientTransport } from "MODULES/@modelcontextprotocol/sdk/dist/esm/client/stdio.js";
import { ElicitRequestSchema } from "MODULES/@modelcontextprotocol/sdk/dist/esm/types.js";

const client = new Client({ name: "ts-sdk-test", version: "1.0.0" }, { capabilities: { elicitation: {} } });
let elicited = 0;
client.setRequestHandler(ElicitRequestSchema, async (req) => {
  elicited++;
  return { action: "accept", content: { decision: "approve" } };
});
const stdio = !!process.env.MCP_COMMAND;
const transport = stdio
  ? new StdioClientTransport({ command: process.env.MCP_COMMAND, args: ["mcp", "serve", "--addr", process.env.MCP_URL],
      env: { HARNESS_TOKEN: process.env.MCP_TOKEN, PATH: process.env.PATH } })
  : new StreamableHTTPClientTransport(new URL(process.env.MCP_URL), {
      requestInit: { headers: { Authorization: "Bearer " + process.env.MCP_TOKEN } },
    });
await client.connect(transport);
const tools = (await client.listTools()).tools.map((t) => t.name);
const progress = [];
const res = await client.callTool(
  { name: "run", arguments: { prompt: "echo hello", approval: "always" } },
  undefined,
  { onprogress: (p) => progress.push(p.message), timeout: 60000 },
);
const read = await client.readResource({ uri: "harnessd://runs/" + res.structuredContent.run_id });
console.log(JSON.stringify({ version: stdio ? "stdio" : transport.protocolVersion, tools, text: res.content[0].text, isError: !!res.isError,
  structured: res.structuredContent, progress, elicited, resource: read.contents[0].text }));
if (!stdio) await transport.terminateSession();
await client.close();
`

// TestMCPServeTypeScriptSDK runs tsSDKClientScript against /mcp, over
// Streamable HTTP and over stdio through harnessd mcp serve.
func TestMCPServeTypeScriptSDK(t *testing.T) {
	t.Parallel()
	// The reference servers requireNode checks for depend on the SDK.
	modules := requireNode(t)
	for _, tt := range []struct {
		name, version string
		stdio         bool
	}{
		{"streamable http", "2025-11-25", false},
		{"stdio through harnessd mcp serve", "stdio", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{}
			if tt.stdio {
				env = append(env, "MCP_COMMAND="+buildHarnessd(t))
			}
			tsSDKRun(t, modules, tt.version, env)
		})
	}
}

// tsSDKRun runs tsSDKClientScript with env added against a fresh /mcp and
// checks what it saw; version is the revision it must report ("stdio"
// over stdio, where the SDK's transport does not say).
func tsSDKRun(t *testing.T, modules, version string, env []string) {
	at := newMCPTest(t, findThenEcho()...)
	script := filepath.Join(t.TempDir(), "client.mjs")
	if err := os.WriteFile(script, []byte(strings.ReplaceAll(tsSDKClientScript, "MODULES", modules)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "node", script)
	cmd.Env = append(append(os.Environ(), "MCP_URL="+at.url+"/mcp", "MCP_TOKEN="+mcpAliceToken), env...)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("node client: %v\n%s%s", err, out, stderr)
	}
	var got struct {
		Version    string            `json:"version"`
		Tools      []string          `json:"tools"`
		Text       string            `json:"text"`
		IsError    bool              `json:"isError"`
		Structured map[string]string `json:"structured"`
		Progress   []string          `json:"progress"`
		Elicited   int               `json:"elicited"`
		Resource   string            `json:"resource"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node client printed %s: %v", out, err)
	}
	if got.Version != version || len(got.Tools) != 8 || got.Text != "echoed hello" || got.IsError || got.Structured["run_id"] == "" || got.Elicited != 1 {
		t.Errorf("TypeScript SDK client saw %s, want %s, 8 tools, the text echoed hello with a run_id, one elicitation", out, version)
	}
	if !strings.Contains(strings.Join(got.Progress, "\n"), "calling tool mcp_fake_echo") {
		t.Errorf("progress = %q, want the echo call", got.Progress)
	}
	if !strings.Contains(got.Resource, `"status": "completed"`) {
		t.Errorf("resource = %s, want the completed run", got.Resource)
	}
}
