package main

import (
	"encoding/json"
	"testing"
)

// TestFindToolUnreadyServers checks what find_tool tells the model of
// servers that are not ready: a select of their tools names the server
// and why, a query says whose tools it could not search, and a found tool
// of a server that is down says it is not callable now.
func TestFindToolUnreadyServers(t *testing.T) {
	t.Parallel()
	files, err := newServerTools("files", []toolInfo{{Name: "read", Description: "Read a file"}}, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	web, err := newServerTools("web", []toolInfo{{Name: "fetch", Description: "Fetch a web page"}}, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	unready := []serverStatus{
		{Name: "every", Status: statusConnecting, Tools: []statusTool{}},
		{Name: "broken", Status: statusFailed, Error: `server "broken": exited with status 1`, Tools: []statusTool{}},
		{Name: "web", Status: statusRestarting, Error: `server "web": connection lost`, Tools: []statusTool{{Name: "mcp_web_fetch"}}},
		{Name: "off", Status: statusDisabled, Tools: []statusTool{}},
	}
	const (
		connecting = `server "every" is still connecting and has not listed its tools yet; call find_tool again in a few seconds`
		failed     = `server "broken" is failed: exited with status 1`
		notListed  = "Not searched, no tools listed yet: " + connecting + "; " + failed
	)
	tests := []struct {
		name    string
		query   string
		want    string
		wantErr string
	}{
		{name: "select of a connecting server's tool", query: "select:mcp_every_echo",
			wantErr: "find_tool: select: mcp_every_echo: " + connecting},
		{name: "select of a failed server's tool", query: "select:mcp_broken_x",
			wantErr: "find_tool: select: mcp_broken_x: " + failed},
		{name: "select of a disabled server's tool", query: "select:mcp_off_x",
			wantErr: `find_tool: select: mcp_off_x: server "off" is disabled in the configuration`},
		{name: "select of an unknown and a pending tool", query: "select:mcp_nope_x,mcp_every_echo",
			wantErr: "find_tool: select: unknown tools mcp_nope_x; search with words to find the right names; not available yet: mcp_every_echo: " + connecting},
		{name: "select of a ready and a pending tool", query: "select:mcp_files_read,MCP_EVERY_ECHO",
			want: "Activated 1 tool; it is now callable:\n- mcp_files_read: Read a file\nNot available yet: MCP_EVERY_ECHO: " + connecting},
		{name: "select of an unknown tool", query: "select:mcp_nope_x",
			wantErr: "find_tool: select: unknown tools mcp_nope_x; search with words to find the right names"},
		{name: "query matching nothing listed", query: "echo",
			want: `No tools match "echo". Try other words, or select:name for an exact name.` + "\n" + notListed},
		{name: "query matching a ready tool", query: "read a file",
			want: "Activated 1 tool; it is now callable:\n- mcp_files_read: Read a file\n" + notListed},
		{name: "query matching a tool of a server down", query: "fetch",
			want: "Activated 1 tool; it is now callable:\n- mcp_web_fetch: Fetch a web page\n  (not callable now: server \"web\" is restarting: connection lost)\n" + notListed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(func() []*serverTools { return []*serverTools{files, web} })
			c.unready = func() []serverStatus { return unready }
			args, _ := json.Marshal(map[string]any{"query": tt.query, "max_results": 1})
			got, err := c.findTool(args)
			if got != tt.want || errString(err) != tt.wantErr {
				t.Errorf("findTool(%s) = %q, %v\nwant %q, %q", tt.query, got, err, tt.want, tt.wantErr)
			}
		})
	}
}
