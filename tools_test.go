package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
)

// realServerFiles are the tools/list answers of the reference MCP servers,
// recorded from their npm packages, by the server name used in tests.
var realServerFiles = []struct{ server, file string }{
	{"everything", "server-everything-2026.8.31.json"},
	{"filesystem", "server-filesystem-2026.8.31.json"},
	{"memory", "server-memory-2026.8.31.json"},
}

// loadRealTools returns the snapshots of the three reference servers.
func loadRealTools(tb testing.TB) []*serverTools {
	tb.Helper()
	var out []*serverTools
	for _, f := range realServerFiles {
		data, err := os.ReadFile(filepath.Join("testdata", "tools", f.file))
		if err != nil {
			tb.Fatal(err)
		}
		var list struct {
			Tools []toolInfo `json:"tools"`
		}
		if err := json.Unmarshal(data, &list); err != nil {
			tb.Fatalf("decode %s: %v", f.file, err)
		}
		st, err := newServerTools(f.server, list.Tools, nil, nil, false)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, st)
	}
	return out
}

// staticGlobal returns a catalog source that always yields sets.
func staticGlobal(sets ...*serverTools) func() []*serverTools {
	return func() []*serverTools { return sets }
}

// mustServerTools builds a snapshot of tools named names, each described
// by its name, or fails the test.
func mustServerTools(t *testing.T, server string, dynamic bool, names ...string) *serverTools {
	t.Helper()
	tools := make([]toolInfo, len(names))
	for i, n := range names {
		tools[i] = toolInfo{Name: n, Description: "Tool " + n}
	}
	st, err := newServerTools(server, tools, nil, nil, dynamic)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// offeredNames returns the names c offers now.
func offeredNames(c *catalog) []string {
	var names []string
	for _, e := range c.offered() {
		names = append(names, e.Name)
	}
	return names
}

func TestMCPToolName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, server, tool, want string
	}{
		{"plain", "filesystem", "read_file", "mcp_filesystem_read_file"},
		{"uppercase", "GitHub", "CreateIssue", "mcp_github_createissue"},
		{"dash", "my-tool", "get-sum", "mcp_my_tool_get_sum"},
		{"dots", "acme.corp", "v1.list", "mcp_acme_corp_v1_list"},
		{"spaces", "my server", "do thing", "mcp_my_server_do_thing"},
		{"slashes", "a/b", "x/y/z", "mcp_a_b_x_y_z"},
		{"other ascii", "srv", "a:b@c+d", "mcp_srv_a_b_c_d"},
		{"unicode one per rune", "café", "naïve", "mcp_caf__na_ve"},
		{"emoji", "srv", "go🚀", "mcp_srv_go_"},
		{"digits and underscore kept", "s3_v2", "put_0", "mcp_s3_v2_put_0"},
		{"exactly 64", "s", strings.Repeat("x", 58), "mcp_s_" + strings.Repeat("x", 58)},
		{"65 cut with hash", "s", strings.Repeat("x", 59), "mcp_s_" + strings.Repeat("x", 49) + "_b7e978fd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mcpToolName(tt.server, tt.tool)
			if got != tt.want {
				t.Errorf("mcpToolName(%q, %q) = %q, want %q", tt.server, tt.tool, got, tt.want)
			}
			if len(got) > maxToolNameLen {
				t.Errorf("mcpToolName(%q, %q) has %d characters, want at most %d", tt.server, tt.tool, len(got), maxToolNameLen)
			}
		})
	}
}

func TestMCPToolNameLongStaysDistinct(t *testing.T) {
	t.Parallel()
	prefix := strings.Repeat("very_long_tool_name_", 4)
	a, b := mcpToolName("server", prefix+"alpha"), mcpToolName("server", prefix+"beta")
	if a == b || len(a) != maxToolNameLen || len(b) != maxToolNameLen {
		t.Errorf("mcpToolName of two long names = %q and %q, want distinct names of %d characters", a, b, maxToolNameLen)
	}
	if again := mcpToolName("server", prefix+"alpha"); again != a {
		t.Errorf("mcpToolName is not stable: %q then %q", a, again)
	}
}

func TestNewServerToolsTags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		dynamic bool
		want    []string
	}{
		{"global", false, []string{"mcp", "integration", "external", "mcp_server:fs"}},
		{"dynamic", true, []string{"mcp", "integration", "external", "mcp_server:fs", "dynamic"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := mustServerTools(t, "fs", tt.dynamic, "read")
			if got := st.entries[0].Tags; !slices.Equal(got, tt.want) {
				t.Errorf("tags(dynamic=%v) = %q, want %q", tt.dynamic, got, tt.want)
			}
		})
	}
}

func TestNewServerToolsFilter(t *testing.T) {
	t.Parallel()
	tools := []toolInfo{{Name: "read_file"}, {Name: "read_dir"}, {Name: "write_file"}, {Name: "delete_file"}, {Name: ""}}
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{"all", nil, nil, []string{"read_file", "read_dir", "write_file", "delete_file"}},
		{"include glob", []string{"read_*"}, nil, []string{"read_file", "read_dir"}},
		{"include two", []string{"read_dir", "write_*"}, nil, []string{"read_dir", "write_file"}},
		{"exclude", nil, []string{"delete_*"}, []string{"read_file", "read_dir", "write_file"}},
		{"exclude wins", []string{"*_file"}, []string{"delete_file"}, []string{"read_file", "write_file"}},
		{"include nothing", []string{"nope"}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := newServerTools("fs", tools, tt.include, tt.exclude, false)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range st.entries {
				got = append(got, e.ServerTool)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("newServerTools(include %q, exclude %q) = %q, want %q", tt.include, tt.exclude, got, tt.want)
			}
		})
	}
}

func TestNewServerToolsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name             string
		tools            []toolInfo
		include, exclude []string
		wantInErr        []string
	}{
		{"collision", []toolInfo{{Name: "a.b"}, {Name: "a-b"}}, nil, nil, []string{`server "srv"`, `"a.b"`, `"a-b"`, `"mcp_srv_a_b"`}},
		{"case collision", []toolInfo{{Name: "Read"}, {Name: "read"}}, nil, nil, []string{`"Read"`, `"read"`}},
		{"duplicate", []toolInfo{{Name: "x"}, {Name: "x"}}, nil, nil, []string{`"mcp_srv_x"`}},
		{"bad include", []toolInfo{{Name: "x"}}, []string{"[a"}, nil, []string{`server "srv"`, `"[a"`, "include_tools"}},
		{"bad exclude", []toolInfo{{Name: "x"}}, nil, []string{"a\\"}, []string{`"a\\"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := newServerTools("srv", tt.tools, tt.include, tt.exclude, false)
			if err == nil {
				t.Fatalf("newServerTools(%v) = %d tools, want an error", tt.tools, len(st.entries))
			}
			for _, want := range tt.wantInErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("newServerTools(%v) error = %q, want it to contain %s", tt.tools, err, want)
				}
			}
		})
	}
	collisionAvoidedByExclude := []toolInfo{{Name: "a.b"}, {Name: "a-b"}}
	if _, err := newServerTools("srv", collisionAvoidedByExclude, nil, []string{"a-b"}, false); err != nil {
		t.Errorf("newServerTools with the colliding tool excluded: %v, want no error", err)
	}
}

func TestNewServerToolsDefaults(t *testing.T) {
	t.Parallel()
	tools := []toolInfo{
		{Name: "no_schema", Title: "Title only"},
		{Name: "null_schema", Description: "d", InputSchema: json.RawMessage("null")},
		{Name: "kept", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string"}}}`)},
	}
	st, err := newServerTools("srv", tools, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, wantDescription, wantSchema string
	}{
		{"mcp_srv_no_schema", "Title only", `{"type":"object","properties":{}}`},
		{"mcp_srv_null_schema", "d", `{"type":"object","properties":{}}`},
		{"mcp_srv_kept", "d", `{"type":"object","properties":{"a":{"type":"string"}}}`},
	}
	c := newCatalog(staticGlobal(st))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := c.lookup(tt.name)
			if !ok {
				t.Fatalf("lookup(%q) found nothing", tt.name)
			}
			if e.Description != tt.wantDescription || string(e.InputSchema) != tt.wantSchema {
				t.Errorf("lookup(%q) = description %q schema %s, want %q %s", tt.name, e.Description, e.InputSchema, tt.wantDescription, tt.wantSchema)
			}
		})
	}
}

func TestCatalogLookup(t *testing.T) {
	t.Parallel()
	c := newCatalog(staticGlobal(loadRealTools(t)...))
	tests := []struct {
		name, server, serverTool string
		builtin, found           bool
	}{
		{"find_tool", "", "", true, true},
		{"connect_mcp", "", "connect_mcp", true, true},
		{"read_mcp_resource", "", "read_mcp_resource", true, true},
		{"mcp_everything_get_sum", "everything", "get-sum", false, true},
		{"mcp_filesystem_read_text_file", "filesystem", "read_text_file", false, true},
		{"mcp_memory_nope", "", "", false, false},
		{"get-sum", "", "", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, ok := c.lookup(tt.name)
			if ok != tt.found || e.Server != tt.server || e.ServerTool != tt.serverTool {
				t.Fatalf("lookup(%q) = %q/%q %v, want %q/%q %v", tt.name, e.Server, e.ServerTool, ok, tt.server, tt.serverTool, tt.found)
			}
			if ok && slices.Contains(e.Tags, "builtin") != tt.builtin {
				t.Errorf("lookup(%q) tags = %q, want builtin %v", tt.name, e.Tags, tt.builtin)
			}
			if ok && !isJSONObject(e.InputSchema) {
				t.Errorf("lookup(%q) schema = %s, want a JSON object", tt.name, e.InputSchema)
			}
		})
	}
}

func TestCatalogOfferedFollowsLiveUpdates(t *testing.T) {
	t.Parallel()
	var current atomic.Pointer[[]*serverTools]
	set := func(sets ...*serverTools) { current.Store(&sets) }
	set(mustServerTools(t, "fs", false, "read", "write"))
	c := newCatalog(func() []*serverTools { return *current.Load() })

	if got := offeredNames(c); !slices.Equal(got, []string{"find_tool"}) {
		t.Fatalf("offered() before activation = %q, want only find_tool", got)
	}
	c.activate("mcp_fs_write", "mcp_fs_read", "mcp_fs_write")
	steps := []struct {
		name string
		sets []*serverTools
		want []string
	}{
		{"activation order", []*serverTools{mustServerTools(t, "fs", false, "read", "write")}, []string{"find_tool", "mcp_fs_write", "mcp_fs_read"}},
		{"re-listed without read", []*serverTools{mustServerTools(t, "fs", false, "write")}, []string{"find_tool", "mcp_fs_write"}},
		{"server gone", nil, []string{"find_tool"}},
		{"read back", []*serverTools{mustServerTools(t, "fs", false, "read", "write")}, []string{"find_tool", "mcp_fs_write", "mcp_fs_read"}},
	}
	for _, step := range steps {
		set(step.sets...)
		if got := offeredNames(c); !slices.Equal(got, step.want) {
			t.Errorf("%s: offered() = %q, want %q", step.name, got, step.want)
		}
	}
}

// firstRequestBytes returns the size of the tool definitions of a run's
// first model request, as JSON objects with name, description and schema.
func firstRequestBytes(tb testing.TB, c *catalog) int {
	tb.Helper()
	type definition struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
	}
	var defs []definition
	for _, e := range c.offered() {
		defs = append(defs, definition{e.Name, e.Description, e.InputSchema})
	}
	data, err := json.Marshal(defs)
	if err != nil {
		tb.Fatal(err)
	}
	return len(data)
}

func FuzzFindTool(f *testing.F) {
	global := loadRealTools(f)
	for _, seed := range []struct {
		query string
		max   int
	}{
		{"read a file", 5}, {"echo", 1}, {"select:mcp_everything_echo,nope", 5}, {"knowledge graph", 20},
		{"", 0}, {"select:", 3}, {"fil", 100}, {"ééé_ß", 2}, {"a b c d e f g h i j k l m n o p q r s t u v w x y z", 7},
	} {
		f.Add(seed.query, seed.max)
	}
	f.Fuzz(func(t *testing.T, query string, maxResults int) {
		c := newCatalog(staticGlobal(global...))
		args, err := json.Marshal(map[string]any{"query": query, "max_results": maxResults})
		if err != nil {
			t.Skip()
		}
		text, err := c.findTool(args)
		activated := len(c.offered()) - 1
		limit := min(maxResults, maxFindResults)
		if _, isSelect := cutPrefixFold(strings.TrimSpace(query), "select:"); isSelect {
			limit = maxFindResults
		}
		if err != nil && activated != 0 {
			t.Errorf("findTool(%q, %d) failed (%v) but activated %d tools", query, maxResults, err, activated)
		}
		if activated > max(limit, 0) {
			t.Errorf("findTool(%q, %d) activated %d tools, want at most %d", query, maxResults, activated, limit)
		}
		if err == nil && text == "" {
			t.Errorf("findTool(%q, %d) returned empty text", query, maxResults)
		}
	})
}
