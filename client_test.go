package main

import (
	"cmp"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// This file tests the MCP client against the real peers over every
// transport they offer; HTTP faults at the client level are tested in
// client_http_test.go, a conn's deadlines in client_conn_test.go.

// stdioPeerConfig returns the config of a stdio server run by peer.
func stdioPeerConfig(name string, peer peerCommand) serverConfig {
	return serverConfig{
		Name:            name,
		Transport:       transportStdio,
		Command:         peer.Command,
		Args:            peer.Args,
		Env:             peer.Env,
		Timeout:         defaultTimeout,
		StartupTimeout:  peerStartTimeout,
		Enabled:         true,
		MaxMessageBytes: defaultMaxMessageBytes,
		Source:          "test",
	}
}

// httpPeerConfig returns the config of an HTTP server at endpoint spoken
// to over transport (http or sse).
func httpPeerConfig(name, transport, endpoint string) serverConfig {
	return serverConfig{
		Name:            name,
		Transport:       transport,
		URL:             endpoint,
		Timeout:         defaultTimeout,
		StartupTimeout:  peerStartTimeout,
		Enabled:         true,
		MaxMessageBytes: defaultMaxMessageBytes,
		Source:          "test",
	}
}

// connectPeer connects to cfg and closes the session at cleanup.
func connectPeer(t *testing.T, cfg serverConfig, opts clientOptions) *mcpClient {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = discardLogger()
	}
	c, err := connect(t.Context(), cfg, opts)
	if err != nil {
		t.Fatalf("connect(%q over %s) = %v", cfg.Name, cfg.Transport, err)
	}
	t.Cleanup(func() { c.close() })
	return c
}

// recordedToolNames returns the tool names in testdata/tools/<file>.
func recordedToolNames(t *testing.T, file string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "tools", file))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Tools []toolInfo `json:"tools"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatalf("decode %s: %v", file, err)
	}
	names := make([]string, 0, len(list.Tools))
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// callText calls a tool, fails the test on an error or an isError result,
// and returns the result's text blocks joined by newlines.
func callText(t *testing.T, c *mcpClient, tool, args string) string {
	t.Helper()
	res, err := c.callTool(t.Context(), tool, json.RawMessage(args))
	if err != nil {
		t.Fatalf("callTool(%q, %s) = %v", tool, args, err)
	}
	if res.IsError {
		t.Fatalf("callTool(%q, %s) isError, text %q", tool, args, resultText(t, res))
	}
	return resultText(t, res)
}

// everythingDocsDir is where server-everything serves its static documents
// from.
func everythingDocsDir(t *testing.T) string {
	t.Helper()
	return filepath.Join(requireNode(t), "@modelcontextprotocol", "server-everything", "dist", "docs")
}

// checkEverything exercises server-everything: echo, every resource page,
// a text resource (compared with its file) and a blob resource.
func checkEverything(t *testing.T, c *mcpClient, _ string) {
	if got, want := callText(t, c, "echo", `{"message":"hello"}`), "Echo: hello"; got != want {
		t.Errorf("echo = %q, want %q", got, want)
	}
	resources, err := c.listResources(t.Context())
	if err != nil {
		t.Fatalf("listResources() = %v", err)
	}
	docs, err := os.ReadDir(everythingDocsDir(t))
	if err != nil {
		t.Fatal(err)
	}
	uris := make([]string, 0, len(resources))
	for _, r := range resources {
		uris = append(uris, r.URI)
	}
	for _, doc := range docs {
		want := "demo://resource/static/document/" + url.PathEscape(doc.Name())
		if !slices.Contains(uris, want) {
			t.Errorf("listResources() = %q, want it to contain %q", uris, want)
		}
	}

	const textURI = "demo://resource/static/document/features.md"
	wantText, err := os.ReadFile(filepath.Join(everythingDocsDir(t), "features.md"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.readResource(t.Context(), textURI)
	if err != nil {
		t.Fatalf("readResource(%q) = %v", textURI, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].Text != string(wantText) || res.Contents[0].MIMEType != "text/markdown" {
		t.Errorf("readResource(%q) = %+v, want the text of features.md as text/markdown", textURI, res.Contents)
	}

	const blobURI = "demo://resource/dynamic/blob/7"
	res, err = c.readResource(t.Context(), blobURI)
	if err != nil {
		t.Fatalf("readResource(%q) = %v", blobURI, err)
	}
	if len(res.Contents) != 1 || res.Contents[0].Blob == "" {
		t.Fatalf("readResource(%q) = %+v, want one blob", blobURI, res.Contents)
	}
	blob, err := base64.StdEncoding.DecodeString(res.Contents[0].Blob)
	if err != nil || !strings.HasPrefix(string(blob), "Resource 7: This is a base64 blob") {
		t.Errorf("readResource(%q) blob = %q (%v), want it to start with %q", blobURI, blob, err, "Resource 7: This is a base64 blob")
	}
}

// checkFilesystem reads a file of the allowed directory, the one the
// server was started with (the client answers no roots).
func checkFilesystem(t *testing.T, c *mcpClient, dir string) {
	const content = "written by the harnessd client test\n"
	file := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"path": file})
	if got := callText(t, c, "read_text_file", string(args)); got != content {
		t.Errorf("read_text_file(%q) = %q, want %q", file, got, content)
	}
	outside, _ := json.Marshal(map[string]string{"path": "/etc/hostname"})
	res, err := c.callTool(t.Context(), "read_text_file", outside)
	if err != nil || !res.IsError {
		t.Errorf("read_text_file(/etc/hostname) = %v, %v, want an isError result (outside the allowed directory)", res, err)
	}
}

// checkMemory creates an entity and reads it back from the graph.
func checkMemory(t *testing.T, c *mcpClient, _ string) {
	callText(t, c, "create_entities", `{"entities":[{"name":"harnessd","entityType":"daemon","observations":["speaks MCP over stdio"]}]}`)
	graph := callText(t, c, "read_graph", `{}`)
	for _, want := range []string{`"harnessd"`, `"daemon"`, "speaks MCP over stdio"} {
		if !strings.Contains(graph, want) {
			t.Errorf("read_graph = %q, want it to contain %q", graph, want)
		}
	}
}

// checkEchoServer calls both tools of the Go SDK's echoserver and checks it
// has no resources.
func checkEchoServer(t *testing.T, c *mcpClient, _ string) {
	if got, want := callText(t, c, "echo", `{"message":"hello, go sdk"}`), "hello, go sdk"; got != want {
		t.Errorf("echo = %q, want %q", got, want)
	}
	res, err := c.callTool(t.Context(), "add", json.RawMessage(`{"a":2,"b":3}`))
	if err != nil {
		t.Fatalf("callTool(add) = %v", err)
	}
	if string(res.StructuredContent) != `{"sum":5}` {
		t.Errorf("add structuredContent = %s, want %s", res.StructuredContent, `{"sum":5}`)
	}
	if _, err := c.listResources(t.Context()); !errors.Is(err, errNoResources) {
		t.Errorf("listResources() = %v, want errNoResources", err)
	}
}

func TestClientRealPeers(t *testing.T) {
	t.Parallel()
	echoStdio := func(t *testing.T, _ string) serverConfig {
		return stdioPeerConfig("echoserver", peerCommand{Command: buildEchoServer(t), Args: []string{"stdio"}})
	}
	echoHTTP := func(mode, transport string) func(t *testing.T, _ string) serverConfig {
		return func(t *testing.T, _ string) serverConfig {
			return httpPeerConfig("echoserver", transport, startEchoServerHTTP(t, mode))
		}
	}
	everythingTools := func(t *testing.T) []string { return recordedToolNames(t, "server-everything-2026.8.31.json") }
	echoTools := func(*testing.T) []string { return []string{"echo", "add"} }
	tests := []struct {
		name       string
		config     func(t *testing.T, dir string) serverConfig
		wantServer string
		// wantVersion is the revision negotiated; empty means latestProtocolVersion.
		wantVersion string
		wantTools   func(t *testing.T) []string // each must be listed
		check       func(t *testing.T, c *mcpClient, dir string)
	}{
		{
			name: "everything stdio",
			config: func(t *testing.T, _ string) serverConfig {
				return stdioPeerConfig("everything", everythingStdioCommand(t))
			},
			wantServer: "mcp-servers/everything", wantTools: everythingTools, check: checkEverything,
		},
		{
			name: "everything streamableHttp",
			config: func(t *testing.T, _ string) serverConfig {
				return httpPeerConfig("everything", transportHTTP, startEverythingHTTP(t, "streamableHttp"))
			},
			wantServer: "mcp-servers/everything", wantTools: everythingTools, check: checkEverything,
		},
		{
			name: "everything sse",
			config: func(t *testing.T, _ string) serverConfig {
				return httpPeerConfig("everything", transportSSE, startEverythingHTTP(t, "sse"))
			},
			wantServer: "mcp-servers/everything", wantTools: everythingTools, check: checkEverything,
		},
		{
			name: "filesystem stdio",
			config: func(t *testing.T, dir string) serverConfig {
				return stdioPeerConfig("filesystem", filesystemStdioCommand(t, dir))
			},
			wantServer: "secure-filesystem-server",
			wantTools:  func(t *testing.T) []string { return recordedToolNames(t, "server-filesystem-2026.8.31.json") },
			check:      checkFilesystem,
		},
		{
			name: "memory stdio",
			config: func(t *testing.T, _ string) serverConfig {
				return stdioPeerConfig("memory", memoryStdioCommand(t))
			},
			wantServer: "memory-server",
			wantTools:  func(t *testing.T) []string { return recordedToolNames(t, "server-memory-2026.8.31.json") },
			check:      checkMemory,
		},
		{name: "echoserver stdio", config: echoStdio, wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer, wantVersion: sessionlessProtocolVersion},
		{name: "echoserver http", config: echoHTTP("http", transportHTTP), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer},
		{name: "echoserver http-stateless", config: echoHTTP("http-stateless", transportHTTP), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer, wantVersion: sessionlessProtocolVersion},
		{name: "echoserver http-json", config: echoHTTP("http-json", transportHTTP), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer},
		{name: "echoserver sse", config: echoHTTP("sse", transportSSE), wantServer: "echoserver", wantTools: echoTools, check: checkEchoServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			cfg := tt.config(t, dir)
			c := connectPeer(t, cfg, clientOptions{})
			// The Go SDK server speaks the current revision, except behind
			// its stateful HTTP handler; the npm reference servers do not.
			if want := cmp.Or(tt.wantVersion, latestProtocolVersion); c.protocolVersion() != want {
				t.Errorf("protocolVersion() = %q, want %q", c.protocolVersion(), want)
			}
			if got := c.serverInfo(); got.Name != tt.wantServer || got.Version == "" {
				t.Errorf("serverInfo() = %+v, want name %q and a version", got, tt.wantServer)
			}
			if got := c.transportKind(); got != cfg.Transport {
				t.Errorf("transportKind() = %q, want %q", got, cfg.Transport)
			}
			tools, err := c.listTools(t.Context())
			if err != nil {
				t.Fatalf("listTools() = %v", err)
			}
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
				if !json.Valid(tool.InputSchema) {
					t.Errorf("tool %q inputSchema = %q, want JSON", tool.Name, tool.InputSchema)
				}
			}
			for _, want := range tt.wantTools(t) {
				if !slices.Contains(names, want) {
					t.Errorf("listTools() = %q, want it to contain %q", names, want)
				}
			}
			tt.check(t, c, dir)
		})
	}
}

// TestClientInferredHTTPFallsBackToSSE gives legacy SSE endpoints as
// inferred http servers: the initialize POST is refused and the client
// falls back to the legacy transport. An explicit http never falls back.
func TestClientInferredHTTPFallsBackToSSE(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		endpoint func(t *testing.T) string
		echo     string // echo's answer to "fallback"
	}{
		{"everything", func(t *testing.T) string { return startEverythingHTTP(t, "sse") }, "Echo: fallback"},
		{"echoserver", func(t *testing.T) string { return startEchoServerHTTP(t, "sse") }, "fallback"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			endpoint := tt.endpoint(t)

			inferred := httpPeerConfig(tt.name, transportHTTP, endpoint)
			inferred.TransportInferred = true
			c := connectPeer(t, inferred, clientOptions{})
			if got := c.transportKind(); got != transportSSE {
				t.Errorf("transportKind() = %q, want %q", got, transportSSE)
			}
			if got := callText(t, c, "echo", `{"message":"fallback"}`); got != tt.echo {
				t.Errorf("echo = %q, want %q", got, tt.echo)
			}

			explicit := httpPeerConfig(tt.name, transportHTTP, endpoint)
			if c, err := connect(t.Context(), explicit, clientOptions{Logger: discardLogger()}); err == nil {
				c.close()
				t.Errorf("connect(explicit http to %s) succeeded, want an http status error", endpoint)
			} else if want := fmt.Sprintf("server %q", tt.name); !strings.Contains(err.Error(), want) {
				t.Errorf("connect(explicit http) = %v, want it to name %s", err, want)
			}
		})
	}
}
