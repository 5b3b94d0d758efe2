package main

import (
	"encoding/json"
	"fmt"
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
	prefix := strings.Repeat("very_long_tool_name_", 4)
	a, b := mcpToolName("server", prefix+"alpha"), mcpToolName("server", prefix+"beta")
	if a == b || len(a) != maxToolNameLen || len(b) != maxToolNameLen {
		t.Errorf("mcpToolName of two long names = %q and %q, want distinct names of %d characters", a, b, maxToolNameLen)
	}
	if again := mcpToolName("server", prefix+"alpha"); again != a {
		t.Errorf("mcpToolName is not stable: %q then %q", a, again)
	}
}

func TestSearchTokens(t *testing.T) {
	tests := []struct {
		name, text string
		splitCase  bool
		want       []string
	}{
		{"underscores", "read_text_file", true, []string{"read", "text", "fil"}},
		{"camel case", "getHTTPServerInfo", true, []string{"get", "http", "server", "info"}},
		{"camel case off", "getSum", false, []string{"getsum"}},
		{"stop words and plurals", "Read the contents of files", false, []string{"read", "content", "fil"}},
		{"endings", "echoes directories reading listed", false, []string{"echo", "directory", "read", "list"}},
		{"duplicates once", "file File FILES", false, []string{"fil"}},
		{"unicode letters", "Größe ändern", false, []string{"größ", "ändern"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := searchTokens(tt.text, tt.splitCase); !slices.Equal(got, tt.want) {
				t.Errorf("searchTokens(%q, %v) = %q, want %q", tt.text, tt.splitCase, got, tt.want)
			}
		})
	}
}

func TestNewServerToolsTags(t *testing.T) {
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

func TestFindToolSearch(t *testing.T) {
	global := loadRealTools(t)
	dynamicServer, err := newServerTools("weather", []toolInfo{{Name: "get_forecast", Description: "Get the weather forecast for a city"}}, nil, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		query     string
		wantTop   string
		wantAlso  []string // also among the activated tools
		wantCount int      // 0: any
	}{
		{"read a file", "mcp_filesystem_read_file", []string{"mcp_filesystem_read_text_file"}, 5},
		{"echo", "mcp_everything_echo", nil, 1},
		{"Echo back my message", "mcp_everything_echo", nil, 0},
		{"knowledge graph", "mcp_memory_read_graph", []string{"mcp_memory_create_entities"}, 5},
		{"list directory", "mcp_filesystem_list_directory", []string{"mcp_filesystem_list_directory_with_sizes"}, 0},
		{"add two numbers", "mcp_everything_get_sum", nil, 0},
		{"sum", "mcp_everything_get_sum", nil, 1},
		{"write to a file", "mcp_filesystem_write_file", nil, 0},
		{"rename a file", "mcp_filesystem_move_file", nil, 0},
		{"environment variables", "mcp_everything_get_env", nil, 1},
		{"image", "mcp_everything_get_tiny_image", nil, 0},
		{"search for files matching a pattern", "mcp_filesystem_search_files", nil, 0},
		{"file metadata size permissions", "mcp_filesystem_get_file_info", nil, 0},
		{"observations entities", "mcp_memory_add_observations", nil, 0},
		{"connect an MCP server", "connect_mcp", nil, 0},
		{"resources", "list_mcp_resources", []string{"read_mcp_resource"}, 0},
		{"weather forecast", "mcp_weather_get_forecast", nil, 1},
		{"dynamic", "mcp_weather_get_forecast", nil, 1},
		{"mcp_filesystem_read_file", "mcp_filesystem_read_file", nil, 0},
		{"filesystem", "mcp_filesystem_create_directory", nil, 5},
	}
	for _, tt := range tests {
		t.Run(tt.query, func(t *testing.T) {
			c := newCatalog(staticGlobal(append([]*serverTools{dynamicServer}, global...)...))
			args, _ := json.Marshal(map[string]string{"query": tt.query})
			text, err := c.findTool(args)
			if err != nil {
				t.Fatalf("findTool(%q) error: %v", tt.query, err)
			}
			got := offeredNames(c)[1:]
			if len(got) == 0 || got[0] != tt.wantTop {
				t.Fatalf("findTool(%q) activated %q, want %q first", tt.query, got, tt.wantTop)
			}
			for _, want := range tt.wantAlso {
				if !slices.Contains(got, want) {
					t.Errorf("findTool(%q) activated %q, want it to include %q", tt.query, got, want)
				}
			}
			if tt.wantCount != 0 && len(got) != tt.wantCount {
				t.Errorf("findTool(%q) activated %d tools %q, want %d", tt.query, len(got), got, tt.wantCount)
			}
			for _, name := range got {
				e, _ := c.lookup(name)
				if line := "- " + name + ": " + oneLine(e.Description, findLineLen); !strings.Contains(text, line) {
					t.Errorf("findTool(%q) text = %q, want the line %q", tt.query, text, line)
				}
			}
			if !strings.Contains(text, "now callable") || !strings.Contains(text, fmt.Sprintf("Activated %d tool", len(got))) {
				t.Errorf("findTool(%q) text = %q, want it to say the tools are now callable", tt.query, text)
			}
		})
	}
}

func TestFindToolSearchIsDeterministic(t *testing.T) {
	global := loadRealTools(t)
	view := append([]*serverTools{deferredBuiltins}, global...)
	first := search(view, "file", maxFindResults)
	for range 20 {
		if again := search(view, "file", maxFindResults); !slices.EqualFunc(first, again, func(a, b toolEntry) bool { return a.Name == b.Name }) {
			t.Fatalf("search(%q) changed between calls", "file")
		}
	}
}

func TestFindToolSelect(t *testing.T) {
	global := loadRealTools(t)
	tests := []struct {
		name, query   string
		wantActivated []string
		wantErr       bool
		wantInText    []string
	}{
		{"two names", "select:mcp_everything_echo,mcp_memory_read_graph", []string{"mcp_everything_echo", "mcp_memory_read_graph"}, false, []string{"Activated 2 tools", "Echoes back the input string"}},
		{"spaces and case", " SELECT: mcp_everything_echo ,  connect_mcp ", []string{"mcp_everything_echo", "connect_mcp"}, false, nil},
		{"uppercase name", "select:MCP_Everything_Echo", []string{"mcp_everything_echo"}, false, nil},
		{"repeated name once", "select:connect_mcp,connect_mcp", []string{"connect_mcp"}, false, []string{"Activated 1 tool;"}},
		{"unknown reported", "select:mcp_everything_echo,mcp_nope_x", []string{"mcp_everything_echo"}, false, []string{"Unknown tools, not activated: mcp_nope_x"}},
		{"only unknown", "select:mcp_nope_x,other", nil, true, []string{"mcp_nope_x, other"}},
		{"empty", "select: , ", nil, true, []string{"no tool names"}},
		{"find_tool itself is not an error", "select:find_tool,list_mcp_resources", []string{"list_mcp_resources"}, false, nil},
		{"server tool name is unknown", "select:get-sum", nil, true, []string{"get-sum"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCatalog(staticGlobal(global...))
			args, _ := json.Marshal(map[string]string{"query": tt.query})
			text, err := c.findTool(args)
			if (err != nil) != tt.wantErr {
				t.Fatalf("findTool(%q) error = %v, want error %v", tt.query, err, tt.wantErr)
			}
			if err != nil {
				text = err.Error()
			}
			if got := offeredNames(c)[1:]; !slices.Equal(got, tt.wantActivated) {
				t.Errorf("findTool(%q) activated %q, want %q", tt.query, got, tt.wantActivated)
			}
			for _, want := range tt.wantInText {
				if !strings.Contains(text, want) {
					t.Errorf("findTool(%q) = %q, want it to contain %q", tt.query, text, want)
				}
			}
		})
	}
}

func TestFindToolSelectCap(t *testing.T) {
	names := make([]string, 30)
	for i := range names {
		names[i] = "t" + strings.Repeat("x", i)
	}
	st := mustServerTools(t, "s", false, names...)
	c := newCatalog(staticGlobal(st))
	var selected []string
	for _, e := range st.entries {
		selected = append(selected, e.Name)
	}
	args, _ := json.Marshal(map[string]string{"query": "select:" + strings.Join(selected, ",")})
	text, err := c.findTool(args)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(c.offered()) - 1; got != maxFindResults {
		t.Errorf("select of 30 names activated %d, want %d", got, maxFindResults)
	}
	if !strings.Contains(text, "10 more names") {
		t.Errorf("select of 30 names = %q, want it to report the 10 names left out", text)
	}
}

func TestFindToolArgs(t *testing.T) {
	c := newCatalog(staticGlobal(loadRealTools(t)...))
	tests := []struct {
		name, args    string
		wantErr       string // "" for success
		wantActivated int
	}{
		{"not json", `{"query":`, "find_tool: arguments", 0},
		{"wrong type", `{"query": 3}`, "find_tool: arguments", 0},
		{"null", `null`, "query is empty", 0},
		{"missing query", `{}`, "query is empty", 0},
		{"blank query", `{"query": "  "}`, "query is empty", 0},
		{"zero max", `{"query": "file", "max_results": 0}`, "max_results 0", 0},
		{"negative max", `{"query": "file", "max_results": -3}`, "max_results -3", 0},
		{"fractional max", `{"query": "file", "max_results": 2.5}`, "find_tool: arguments", 0},
		{"max 2", `{"query": "file", "max_results": 2}`, "", 2},
		{"max clamped", `{"query": "mcp", "max_results": 1000}`, "", maxFindResults},
		{"only stop words", `{"query": "the a of"}`, "", 0},
		{"no match", `{"query": "zzzqqq"}`, "", 0},
		{"unknown fields ignored", `{"query": "echo", "extra": true}`, "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run := newCatalog(c.sources)
			text, err := run.findTool(json.RawMessage(tt.args))
			switch {
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("findTool(%s) error = %v, want one containing %q", tt.args, err, tt.wantErr)
			case tt.wantErr == "" && err != nil:
				t.Fatalf("findTool(%s) error = %v, want none", tt.args, err)
			}
			if got := len(run.offered()) - 1; got != tt.wantActivated {
				t.Errorf("findTool(%s) activated %d tools, want %d", tt.args, got, tt.wantActivated)
			}
			if tt.wantErr == "" && tt.wantActivated == 0 && !strings.Contains(text, "No tools match") {
				t.Errorf("findTool(%s) = %q, want it to say nothing matched", tt.args, text)
			}
		})
	}
}

func TestFindToolDescription(t *testing.T) {
	c := newCatalog(staticGlobal(loadRealTools(t)...))
	desc := c.offered()[0].Description
	for _, want := range []string{"36 MCP tools from 3 servers", "filesystem (14)", "everything (13)", "memory (9)", "connect_mcp", "select:"} {
		if !strings.Contains(desc, want) {
			t.Errorf("find_tool description = %q, want it to contain %q", desc, want)
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

func TestFirstRequestStaysSmall(t *testing.T) {
	const limit = 2048
	sizes := map[int]int{}
	for _, tools := range []int{200, 2000, 10000} {
		c := newCatalog(staticGlobal(syntheticServers(t, tools)...))
		sizes[tools] = firstRequestBytes(t, c)
		if sizes[tools] > limit {
			t.Errorf("first request with %d deferred tools has %d bytes of tool definitions, want at most %d", tools, sizes[tools], limit)
		}
	}
	// Past maxDescribedServers servers only the counts' digits grow.
	if grow := sizes[10000] - sizes[2000]; grow > 32 {
		t.Errorf("first request grows by %d bytes from 2,000 to 10,000 tools, want it flat (at most 32)", grow)
	}
	t.Logf("first request tool definitions: %v bytes by deferred tool count", sizes)
}

func TestResultToText(t *testing.T) {
	tests := []struct {
		name   string
		result callResult
		want   string
	}{
		{"empty", callResult{}, ""},
		{"one text", callResult{Content: []contentBlock{{Type: "text", Text: "hello"}}}, "hello"},
		{"texts joined", callResult{Content: []contentBlock{{Type: "text", Text: "a"}, {Type: "text", Text: "b"}}}, "a\nb"},
		{"structured without text", callResult{StructuredContent: json.RawMessage("{\n \"temp\": 21,\n \"unit\": \"C\"\n}")}, `{"temp":21,"unit":"C"}`},
		{"structured ignored with text", callResult{Content: []contentBlock{{Type: "text", Text: "21C"}}, StructuredContent: json.RawMessage(`{"temp":21}`)}, "21C"},
		{"structured null", callResult{StructuredContent: json.RawMessage("null")}, ""},
		{"image", callResult{Content: []contentBlock{{Type: "image", MIMEType: "image/png", Data: "iVBORw0KGgo="}}}, "[image: image/png, 8 bytes]"},
		{"audio unpadded", callResult{Content: []contentBlock{{Type: "audio", MIMEType: "audio/wav", Data: "UklGRg"}}}, "[audio: audio/wav, 4 bytes]"},
		{"image beside structured", callResult{Content: []contentBlock{{Type: "image", MIMEType: "image/png", Data: "AAAA"}}, StructuredContent: json.RawMessage(`{"a":1}`)}, "[image: image/png, 3 bytes]\n{\"a\":1}"},
		{"text resource", callResult{Content: []contentBlock{{Type: "resource", Resource: &resourceBody{URI: "file:///a.txt", Text: "contents"}}}}, "contents"},
		{"blob resource", callResult{Content: []contentBlock{{Type: "resource", Resource: &resourceBody{URI: "file:///a.gz", MIMEType: "application/gzip", Blob: "H4sIAAAAAAAA"}}}}, "[resource file:///a.gz: application/gzip, 9 bytes]"},
		{"resource without body", callResult{Content: []contentBlock{{Type: "resource"}}}, "[resource content]"},
		{"resource link", callResult{Content: []contentBlock{{Type: "resource_link", URI: "test://static/1", Name: "Resource 1"}}}, "[resource link: test://static/1 Resource 1]"},
		{"resource link without name", callResult{Content: []contentBlock{{Type: "resource_link", URI: "test://x"}}}, "[resource link: test://x]"},
		{"unknown type", callResult{Content: []contentBlock{{Type: "video"}}}, "[video content]"},
		{"missing type", callResult{Content: []contentBlock{{}}}, "[unknown content]"},
		{"mixed in order", callResult{Content: []contentBlock{{Type: "text", Text: "see"}, {Type: "image", MIMEType: "image/jpeg", Data: "AAAAAAAA"}, {Type: "text", Text: "done"}}}, "see\n[image: image/jpeg, 6 bytes]\ndone"},
		{"error result keeps text", callResult{IsError: true, Content: []contentBlock{{Type: "text", Text: "no such file"}}}, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resultToText(&tt.result); got != tt.want {
				t.Errorf("resultToText(%+v) = %q, want %q", tt.result, got, tt.want)
			}
		})
	}
}

func TestResourceContentsToText(t *testing.T) {
	tests := []struct {
		name     string
		contents []resourceBody
		want     string
	}{
		{"none", nil, ""},
		{"one text", []resourceBody{{URI: "file:///a", Text: "alpha"}}, "alpha"},
		{"one blob", []resourceBody{{URI: "file:///b", MIMEType: "image/png", Blob: "AAAA"}}, "[resource file:///b: image/png, 3 bytes]"},
		{"blob without type", []resourceBody{{URI: "x://b", Blob: "AAAA"}}, "[resource x://b: unknown type, 3 bytes]"},
		{"several", []resourceBody{{URI: "file:///a", Text: "alpha"}, {URI: "file:///b", MIMEType: "image/png", Blob: "AAAA"}},
			"--- file:///a\nalpha\n--- file:///b\n[resource file:///b: image/png, 3 bytes]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := resourceContentsToText(&readResourceResult{Contents: tt.contents}); got != tt.want {
				t.Errorf("resourceContentsToText(%+v) = %q, want %q", tt.contents, got, tt.want)
			}
		})
	}
}

func TestBase64Size(t *testing.T) {
	tests := []struct {
		data string
		want int
	}{
		{"", 0}, {"QQ==", 1}, {"QUI=", 2}, {"QUJD", 3}, {"QQ", 1}, {"QUJD\nREVG", 6}, {"-_-_", 3},
	}
	for _, tt := range tests {
		if got := base64Size(tt.data); got != tt.want {
			t.Errorf("base64Size(%q) = %d, want %d", tt.data, got, tt.want)
		}
	}
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
