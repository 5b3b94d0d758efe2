package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// This file holds the built-in tools, each as one entry of builtinTools:
// its definition (name, description, input schema, tier) next to its
// implementation. Adding a built-in is adding an entry.

// A builtinTool is one built-in tool: what the model sees and what a call
// does. call returns the text for the model, or an error whose text is
// meant for the model.
type builtinTool struct {
	name        string
	core        bool   // offered from the first step (find_tool); the others are deferred
	description string // "" for find_tool, whose description the catalog writes
	inputSchema string
	call        func(ctx context.Context, r *run, args json.RawMessage) (string, error)
}

// builtinTools are the built-in tools, find_tool first.
var builtinTools = []builtinTool{{
	name: toolFindTool,
	core: true,
	inputSchema: `{"type":"object","properties":{` +
		`"query":{"type":"string","description":"Words describing the task, or select:name1,name2 to activate exact tool names"},` +
		`"max_results":{"type":"integer","minimum":1,"maximum":20,"description":"How many matching tools to activate (default 5)"}},` +
		`"required":["query"]}`,
	call: func(_ context.Context, r *run, args json.RawMessage) (string, error) {
		return r.catalog.findTool(args)
	},
}, {
	name:        toolConnectMCP,
	description: "Connect an MCP server over HTTP(S) for the rest of this run; its tools become available as mcp_<server_name>_<tool>.",
	inputSchema: `{"type":"object","properties":{` +
		`"url":{"type":"string","description":"http or https URL of the MCP endpoint"},` +
		`"server_name":{"type":"string","pattern":"` + agentServerNameSchema + `","description":"Name for the server: letters, digits, - and _ (default: from the URL host)"}},` +
		`"required":["url"]}`,
	call: connectMCP,
}, {
	name:        toolListMCPResources,
	description: "List the resources (files, documents, data) an MCP server exposes.",
	inputSchema: `{"type":"object","properties":{` +
		`"mcp_name":{"type":"string","description":"The MCP server's name"}},"required":["mcp_name"]}`,
	call: listResourcesTool,
}, {
	name:        toolReadMCPResource,
	description: "Read one resource of an MCP server by its URI.",
	inputSchema: `{"type":"object","properties":{` +
		`"mcp_name":{"type":"string","description":"The MCP server's name"},` +
		`"uri":{"type":"string","description":"The resource URI, as list_mcp_resources returns it"}},` +
		`"required":["mcp_name","uri"]}`,
	call: readResourceTool,
}, loadSkillBuiltin}

// coreFindTool (without its description, which findToolEntry writes),
// deferredBuiltins and builtinByName are derived from builtinTools once,
// in init (their implementations reach the catalog, which reads them), and
// never modified.
var (
	coreFindTool     toolEntry
	deferredBuiltins *serverTools
	builtinByName    map[string]*builtinTool
)

func init() {
	builtinByName = make(map[string]*builtinTool, len(builtinTools))
	deferredBuiltins = &serverTools{byName: map[string]int{}}
	for i := range builtinTools {
		b := &builtinTools[i]
		builtinByName[b.name] = b
		e := toolEntry{Name: b.name, Description: b.description,
			InputSchema: json.RawMessage(b.inputSchema), Tags: []string{"builtin"}}
		if b.core {
			coreFindTool = e
			continue
		}
		e.ServerTool = b.name
		deferredBuiltins.byName[e.Name] = len(deferredBuiltins.entries)
		deferredBuiltins.entries = append(deferredBuiltins.entries, e)
	}
	deferredBuiltins.buildIndex()
}

// deferredBuiltinNames returns the names of the deferred built-ins, in
// table order.
func deferredBuiltinNames() []string {
	names := make([]string, 0, len(deferredBuiltins.entries))
	for _, e := range deferredBuiltins.entries {
		names = append(names, e.Name)
	}
	return names
}

// connectMCP implements connect_mcp: connect an HTTP MCP server for the
// rest of the run and make its tools callable at once. The name is
// reserved first, so two calls of one step cannot take the same tool
// prefix, and the connection is made outside any lock, so a slow server
// holds up no other connect_mcp.
func connectMCP(ctx context.Context, r *run, args json.RawMessage) (string, error) {
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
	name := a.ServerName
	if name == "" {
		name = strings.NewReplacer(".", "-", ":", "-").Replace(u.Hostname())
	}
	if err := checkAgentServerName(name); err != nil {
		return "", fmt.Errorf("connect_mcp: server_name: %v", err)
	}
	if !r.req.Limits.allowsServer(name) {
		return "", fmt.Errorf("connect_mcp: server_name %q: this run's API key may use only the servers %q; choose a server_name among them", name, r.req.Limits.Servers)
	}
	if err := checkConnectHost(ctx, u.Hostname(), r.env.allowHosts()); err != nil {
		return "", fmt.Errorf("connect_mcp: %v", err)
	}
	cfg, err := connectServer(name, u.String())
	if err != nil {
		return "", err
	}
	if err := r.scope.add(ctx, cfg); err != nil {
		var taken *nameTakenError
		if errors.As(err, &taken) {
			return "", fmt.Errorf("connect_mcp: server_name %q: a server named %q is already in this run; choose another name", name, taken.existing)
		}
		r.emit(evServerFailed, serverFailedEvent(name, toolConnectMCP, err))
		return "", fmt.Errorf("connect_mcp: %v", err)
	}
	ms := r.scope.lookupLocal(name)
	var names []string
	if ms != nil {
		for _, e := range ms.toolSet().entries {
			names = append(names, e.Name)
		}
	}
	r.catalog.activate(names...)
	r.emit(evServerConnected, serverConnectedEvent(name, toolConnectMCP, len(names)))
	if len(names) == 0 {
		return fmt.Sprintf("Connected to %q; it offers no tools.", name), nil
	}
	return fmt.Sprintf("Connected to %q. These tools are now callable: %s", name, strings.Join(names, ", ")), nil
}

// listResourcesTool implements list_mcp_resources.
func listResourcesTool(ctx context.Context, r *run, args json.RawMessage) (string, error) {
	var a struct {
		MCPName string `json:"mcp_name"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.MCPName == "" {
		return "", fmt.Errorf("list_mcp_resources: send {\"mcp_name\": \"server\"}; servers in this run: %s", strings.Join(r.scope.serverNames(), ", "))
	}
	c, err := scopeClient(r.scope, a.MCPName)
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
func readResourceTool(ctx context.Context, r *run, args json.RawMessage) (string, error) {
	var a struct {
		MCPName string `json:"mcp_name"`
		URI     string `json:"uri"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.MCPName == "" || a.URI == "" {
		return "", errors.New(`read_mcp_resource: send {"mcp_name": "server", "uri": "resource uri"}`)
	}
	c, err := scopeClient(r.scope, a.MCPName)
	if err != nil {
		return "", fmt.Errorf("read_mcp_resource: %v", err)
	}
	if text, handled, err := readSkillResource(ctx, r.scope.server(a.MCPName), c, a.URI); handled {
		if err != nil {
			return "", fmt.Errorf("read_mcp_resource: server %q: %v; its content was not used", a.MCPName, err)
		}
		return text, nil
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
func scopeClient(scope *runScope, name string) (*mcpClient, error) {
	ms := scope.server(name)
	if ms == nil {
		return nil, fmt.Errorf("no server %q in this run; servers: %s", name, strings.Join(scope.serverNames(), ", "))
	}
	return ms.current()
}
