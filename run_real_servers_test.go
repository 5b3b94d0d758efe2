package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// This file holds runs with servers of their own against the real
// reference servers: per-run servers and profile servers shadowing
// globals.

func TestRealPerRunServer(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, stdioPeerConfig("everything", everythingStdioCommand(t)))
	memory := memoryStdioCommand(t)
	body, err := json.Marshal([]map[string]any{{"name": "mem", "command": memory.Command, "args": memory.Args, "env": memory.Env}})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan *run, 1)
	memTools := func(req fakeRequest) []string {
		var names []string
		for _, name := range req.toolNames() {
			if strings.HasPrefix(name, "mcp_mem_") {
				names = append(names, name)
			}
		}
		return names
	}
	f := newFakeModel(t, providerAnthropic,
		fakeTurn{
			Check: func(req fakeRequest) error {
				if err := offers("find_tool")(req); err != nil {
					return err
				}
				if desc := req.Tools[0].Description; !strings.Contains(desc, "mem (9)") || !strings.Contains(desc, "everything (") {
					return fmt.Errorf("find_tool description = %q, want the per-run server mem (9) and everything counted", desc)
				}
				return nil
			},
			ToolCalls: calls("find_tool", `{"query":"knowledge graph","max_results":20}`),
		},
		fakeTurn{
			Check: func(req fakeRequest) error {
				if got := memTools(req); len(got) != 9 || len(req.Tools) != 10 {
					return fmt.Errorf("offered tools = %v, want find_tool and the 9 tools of mem", req.toolNames())
				}
				// While the run lasts, its scope holds mem's tools.
				r := <-started
				r.mu.Lock()
				scope := r.scope
				r.mu.Unlock()
				for _, e := range scope.lookupLocal("mem").toolSet().entries {
					if !slices.Contains(e.Tags, "dynamic") || !slices.Contains(e.Tags, "mcp_server:mem") {
						return fmt.Errorf("tags of %s = %v, want dynamic and mcp_server:mem", e.Name, e.Tags)
					}
				}
				return nil
			},
			ToolCalls: calls("mcp_mem_create_entities", `{"entities":[{"name":"harnessd","entityType":"program","observations":["speaks MCP"]}]}`),
		},
		fakeTurn{ToolCalls: calls("mcp_mem_open_nodes", `{"names":["harnessd"]}`)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", nil)
	r, err := m.start(runRequest{Prompt: "remember harnessd", MCPServers: body}, true)
	if err != nil {
		t.Fatalf("start with mcp_servers %s = %v", body, err)
	}
	started <- r
	v := waitRun(t, r)
	requireCompleted(t, v)
	if !strings.HasPrefix(v.Output, "ok: ") || !strings.Contains(v.Output, `"speaks MCP"`) {
		t.Errorf("output = %q, want the node read back with its observation", v.Output)
	}
	connected := eventData(r, "mcp.server.connected")
	if len(connected) != 1 || connected[0]["server"] != "mem" || connected[0]["source"] != "run" || connected[0]["tools"] != 9 {
		t.Errorf("mcp.server.connected events = %v, want one for mem from run with 9 tools", connected)
	}
	if len(v.Servers) != 1 || v.Servers[0].Name != "mem" || v.Servers[0].Status != statusClosed {
		t.Errorf("run servers = %+v, want mem closed", v.Servers)
	}
	graph, err := os.ReadFile(memory.Env["MEMORY_FILE_PATH"])
	if err != nil || !strings.Contains(string(graph), `"name":"harnessd"`) {
		t.Errorf("memory file = %q, %v, want the entity the run created", graph, err)
	}
}

func TestRealProfileShadowsGlobal(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, stdioPeerConfig("everything", everythingStdioCommand(t)))
	memory := memoryStdioCommand(t)
	home := t.TempDir()
	var args []string
	for _, a := range memory.Args {
		args = append(args, strconv.Quote(a))
	}
	profile := fmt.Sprintf("[mcp_servers.everything]\ncommand = %q\nargs = [%s]\n\n[mcp_servers.everything.env]\nMEMORY_FILE_PATH = %q\n",
		memory.Command, strings.Join(args, ", "), memory.Env["MEMORY_FILE_PATH"])
	if err := os.MkdirAll(filepath.Join(home, "profiles"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "profiles", "graph.toml"), []byte(profile), 0o644); err != nil {
		t.Fatal(err)
	}

	// Both runs send their first request before either gets an answer, so
	// they are in flight together.
	var (
		mu      sync.Mutex
		waiting = 2
		both    = make(chan struct{})
	)
	turn := fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		switch len(req.Messages) {
		case 1:
			mu.Lock()
			if waiting--; waiting == 0 {
				close(both)
			}
			mu.Unlock()
			select {
			case <-both:
			case <-t.Context().Done():
			}
			return fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:mcp_everything_echo,mcp_everything_read_graph"}`)}
		case 3:
			if slices.Contains(req.toolNames(), "mcp_everything_read_graph") {
				return fakeTurn{ToolCalls: calls("mcp_everything_read_graph", `{}`)}
			}
			return fakeTurn{ToolCalls: calls("mcp_everything_echo", `{"message":"global"}`)}
		}
		res := req.toolResults()
		return fakeTurn{Text: strings.Join(req.toolNames(), ",") + "\n" + res[0].Content}
	}}
	f := newFakeModel(t, providerOpenAI, turn, turn, turn, turn, turn, turn)
	m := newRunsOver(t, reg, f, home, nil)
	withProfile := startRun(t, m, runRequest{Prompt: "read the graph", Profile: "graph"})
	without := startRun(t, m, runRequest{Prompt: "echo"})

	v := waitRun(t, withProfile)
	requireCompleted(t, v)
	if want := "find_tool,mcp_everything_read_graph\n{\n  \"entities\": [],\n  \"relations\": []\n}"; v.Output != want {
		t.Errorf("profile run output = %q, want %q", v.Output, want)
	}
	if v.ProfileFound == nil || !*v.ProfileFound {
		t.Errorf("profile run profile_found = %v, want true", v.ProfileFound)
	}
	connected := eventData(withProfile, "mcp.server.connected")
	if len(connected) != 1 || connected[0]["server"] != "everything" || connected[0]["source"] != "profile graph" {
		t.Errorf("profile run mcp.server.connected = %v, want everything from profile graph", connected)
	}
	if len(v.Servers) != 1 || v.Servers[0].Status != statusClosed {
		t.Errorf("profile run servers = %+v, want its everything closed", v.Servers)
	}

	v = waitRun(t, without)
	requireCompleted(t, v)
	if want := "find_tool,mcp_everything_echo\nEcho: global"; v.Output != want {
		t.Errorf("run without profile output = %q, want %q", v.Output, want)
	}
	if st := reg.server("everything").snapshot(); st.Status != statusReady {
		t.Errorf("global everything after the profile run = %s, want ready", st.Status)
	}
}
