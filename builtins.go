package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// This file holds the built-in tools other than find_tool's search:
// their definitions (connect_mcp, list_mcp_resources, read_mcp_resource,
// find_tool) and implementations.

// connectMCP implements connect_mcp: connect an HTTP MCP server for the
// rest of the run and make its tools callable at once.
func (m *runManager) connectMCP(ctx context.Context, r *run, scope *runScope, cat *catalog, args json.RawMessage) (string, error) {
	var a struct {
		URL        string `json:"url"`
		ServerName string `json:"server_name"`
	}
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("connect_mcp: arguments: %v; send {\"url\": \"http://host:port/mcp\", \"server_name\": \"name\"}", err)
	}
	u, err := parseHTTPURL(a.URL)
	if err != nil {
		return "", fmt.Errorf("connect_mcp: url %q: %v", a.URL, err)
	}
	r.connectMu.Lock()
	defer r.connectMu.Unlock()
	name := a.ServerName
	if name == "" {
		name = strings.NewReplacer(".", "-", ":", "-").Replace(u.Hostname())
	}
	if err := checkServerName(name); err != nil {
		return "", fmt.Errorf("connect_mcp: server_name: %v", err)
	}
	for _, existing := range scope.serverNames() {
		if sameToolPrefix(existing, name) {
			return "", fmt.Errorf("connect_mcp: server_name %q: a server named %q is already in this run; choose another name", name, existing)
		}
	}
	if err := checkConnectHost(ctx, u.Hostname(), m.opts.AllowHosts); err != nil {
		return "", fmt.Errorf("connect_mcp: %v", err)
	}
	cfg, err := connectServer(name, u.String())
	if err != nil {
		return "", err
	}
	if err := scope.add(ctx, cfg, agentServer); err != nil {
		r.emit("mcp.server.failed", map[string]any{"server": name, "source": toolConnectMCP, "error": err.Error()})
		return "", fmt.Errorf("connect_mcp: %v", err)
	}
	ms := scope.lookupLocal(name)
	var names []string
	if ms != nil {
		for _, e := range ms.toolSet().entries {
			names = append(names, e.Name)
		}
	}
	cat.activate(names...)
	r.emit("mcp.server.connected", map[string]any{"server": name, "source": toolConnectMCP, "tools": len(names)})
	if len(names) == 0 {
		return fmt.Sprintf("Connected to %q; it offers no tools.", name), nil
	}
	return fmt.Sprintf("Connected to %q. These tools are now callable: %s", name, strings.Join(names, ", ")), nil
}

// listResourcesTool implements list_mcp_resources.
func listResourcesTool(ctx context.Context, scope *runScope, args json.RawMessage) (string, error) {
	var a struct {
		MCPName string `json:"mcp_name"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.MCPName == "" {
		return "", fmt.Errorf("list_mcp_resources: send {\"mcp_name\": \"server\"}; servers in this run: %s", strings.Join(scope.serverNames(), ", "))
	}
	c, err := scopeClient(scope, a.MCPName)
	if err != nil {
		return "", fmt.Errorf("list_mcp_resources: %v", err)
	}
	resources, err := c.listResources(ctx)
	if errors.Is(err, errNoResources) {
		return "", fmt.Errorf("list_mcp_resources: server %q does not offer resources", a.MCPName)
	}
	if err != nil {
		return "", fmt.Errorf("list_mcp_resources: server %q: %v", a.MCPName, err)
	}
	if len(resources) == 0 {
		return fmt.Sprintf("Server %q has no resources.", a.MCPName), nil
	}
	out, err := json.Marshal(resources)
	if err != nil {
		return "", err
	}
	return string(out), nil
}

// readResourceTool implements read_mcp_resource.
func readResourceTool(ctx context.Context, scope *runScope, args json.RawMessage) (string, error) {
	var a struct {
		MCPName string `json:"mcp_name"`
		URI     string `json:"uri"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.MCPName == "" || a.URI == "" {
		return "", errors.New(`read_mcp_resource: send {"mcp_name": "server", "uri": "resource uri"}`)
	}
	c, err := scopeClient(scope, a.MCPName)
	if err != nil {
		return "", fmt.Errorf("read_mcp_resource: %v", err)
	}
	res, err := c.readResource(ctx, a.URI)
	if errors.Is(err, errNoResources) {
		return "", fmt.Errorf("read_mcp_resource: server %q does not offer resources", a.MCPName)
	}
	if err != nil {
		return "", fmt.Errorf("read_mcp_resource: server %q: %v", a.MCPName, err)
	}
	return resourceContentsToText(res), nil
}

// scopeClient returns the session of the named server in scope.
func scopeClient(scope *runScope, name string) (*client, error) {
	ms := scope.server(name)
	if ms == nil {
		return nil, fmt.Errorf("no server %q in this run; servers: %s", name, strings.Join(scope.serverNames(), ", "))
	}
	return ms.current()
}

// newBuiltinTools returns the built-in tools: find_tool (core) and the
// deferred ones, which find_tool searches like any server's tools.
func newBuiltinTools() (findTool toolEntry, deferred *serverTools) {
	builtin := []string{"builtin"}
	findTool = toolEntry{
		Name: toolFindTool, Tags: builtin,
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"query":{"type":"string","description":"Words describing the task, or select:name1,name2 to activate exact tool names"},` +
			`"max_results":{"type":"integer","minimum":1,"maximum":20,"description":"How many matching tools to activate (default 5)"}},` +
			`"required":["query"]}`),
	}
	deferred = &serverTools{byName: map[string]int{}, entries: []toolEntry{{
		Name: toolConnectMCP, Tags: builtin,
		Description: "Connect an MCP server over HTTP(S) for the rest of this run; its tools become available as mcp_<server_name>_<tool>.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"url":{"type":"string","description":"http or https URL of the MCP endpoint"},` +
			`"server_name":{"type":"string","pattern":"` + serverNameSchema + `","description":"Name for the server (default: from the URL host)"}},` +
			`"required":["url"]}`),
	}, {
		Name: toolListMCPResources, Tags: builtin,
		Description: "List the resources (files, documents, data) an MCP server exposes.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"mcp_name":{"type":"string","description":"The MCP server's name"}},"required":["mcp_name"]}`),
	}, {
		Name: toolReadMCPResource, Tags: builtin,
		Description: "Read one resource of an MCP server by its URI.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{` +
			`"mcp_name":{"type":"string","description":"The MCP server's name"},` +
			`"uri":{"type":"string","description":"The resource URI, as list_mcp_resources returns it"}},` +
			`"required":["mcp_name","uri"]}`),
	}}}
	for i, e := range deferred.entries {
		deferred.entries[i].ServerTool = e.Name
		deferred.byName[e.Name] = i
	}
	deferred.buildIndex()
	return findTool, deferred
}

// coreFindTool (without its description, which findToolEntry writes) and
// deferredBuiltins are shared by every catalog and never modified.
var coreFindTool, deferredBuiltins = newBuiltinTools()
