package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestSearchTokens(t *testing.T) {
	t.Parallel()
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

func TestFindToolSearch(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	c := newCatalog(staticGlobal(loadRealTools(t)...))
	desc := c.offered()[0].Description
	for _, want := range []string{"36 MCP tools from 3 servers", "filesystem (14)", "everything (13)", "memory (9)", "connect_mcp", "select:"} {
		if !strings.Contains(desc, want) {
			t.Errorf("find_tool description = %q, want it to contain %q", desc, want)
		}
	}
}

func TestFirstRequestStaysSmall(t *testing.T) {
	t.Parallel()
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
