package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// This file holds agent runs against the real reference MCP servers (see
// client_peers_test.go), scripted through the fake model in both wire formats:
// the shared helpers and the catalog, resource and result runs; connect_mcp,
// run limits and the runs' own servers are in run_real_*_test.go.

// wires are the model wire formats the scripted runs speak.
var wires = []string{providerOpenAI, providerAnthropic}

// newPeerRegistry connects the global servers and fails the test unless
// every one is ready. The registry is closed when the test ends.
func newPeerRegistry(t *testing.T, globals ...serverConfig) *registry {
	t.Helper()
	reg := newRegistry(globals, registryOptions{Logger: discardLogger()})
	t.Cleanup(reg.close)
	ctx, cancel := context.WithTimeout(t.Context(), 2*peerStartTimeout)
	defer cancel()
	if err := reg.waitReady(ctx); err != nil {
		t.Fatalf("global servers not ready: %v", err)
	}
	for _, st := range reg.statuses() {
		if st.Status != statusReady {
			t.Fatalf("server %q = %s (%s), want ready", st.Name, st.Status, st.Error)
		}
	}
	return reg
}

// startRun starts a run and fails the test if the request is refused.
func startRun(t *testing.T, m *runManager, req runRequest) *run {
	t.Helper()
	r, err := m.start(req, true)
	if err != nil {
		t.Fatalf("start(%+v) = %v", req, err)
	}
	return r
}

// waitEvent blocks until r emits an event of type typ and returns it. It
// fails the test if the run ends first.
func waitEvent(t *testing.T, r *run, typ string) runEvent {
	t.Helper()
	for {
		events, ended, changed := r.eventsAfter(0)
		for _, ev := range events {
			if ev.Type == typ {
				return ev
			}
		}
		if ended {
			t.Fatalf("run %s ended without a %s event; events: %v", r.id, typ, eventTypes(r))
		}
		select {
		case <-changed:
		case <-t.Context().Done():
			t.Fatalf("run %s: no %s event", r.id, typ)
		}
	}
}

// eventData returns the data of r's events of type typ, in order.
func eventData(r *run, typ string) []map[string]any {
	events, _, _ := r.eventsAfter(0)
	var out []map[string]any
	for _, ev := range events {
		if data, ok := ev.Data.(map[string]any); ok && ev.Type == typ {
			out = append(out, data)
		}
	}
	return out
}

// resultsByID returns the tool results at the end of req by call id.
func resultsByID(req fakeRequest) map[string]chatMessage {
	out := map[string]chatMessage{}
	for _, m := range req.toolResults() {
		out[m.ToolCallID] = m
	}
	return out
}

// calls returns tool calls with ids call_<name>; name "x#2" gets id
// call_x#2 and calls x, so one turn may call a tool twice.
func calls(nameArgs ...string) []toolCall {
	var out []toolCall
	for i := 0; i+1 < len(nameArgs); i += 2 {
		name, _, _ := strings.Cut(nameArgs[i], "#")
		out = append(out, toolCall{ID: "call_" + nameArgs[i], Name: name, Arguments: json.RawMessage(nameArgs[i+1])})
	}
	return out
}

// answerWithResults is a final turn that answers with the last tool
// results, one "ok: text" or "error: text" line each.
var answerWithResults = fakeTurn{Reply: func(req fakeRequest) fakeTurn {
	var lines []string
	for _, res := range req.toolResults() {
		outcome := "ok"
		if res.IsError {
			outcome = "error"
		}
		lines = append(lines, outcome+": "+res.Content)
	}
	return fakeTurn{Text: strings.Join(lines, "\n")}
}}

// offersIncluding checks the request offered at least the named tools.
func offersIncluding(names ...string) func(fakeRequest) error {
	return func(req fakeRequest) error {
		got := req.toolNames()
		for _, name := range names {
			if !slices.Contains(got, name) {
				return fmt.Errorf("offered tools = %v, want %s among them", got, name)
			}
		}
		return nil
	}
}

// requireCompleted fails the test unless the run completed.
func requireCompleted(t *testing.T, v runView) {
	t.Helper()
	if v.Status != runCompleted {
		t.Fatalf("run status = %s (error %q), want completed", v.Status, v.Error)
	}
}

func TestRealFindToolActivatesAndCalls(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, stdioPeerConfig("everything", everythingStdioCommand(t)))
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			message := "hello over " + wire
			f := newFakeModel(t, wire,
				fakeTurn{Check: offers("find_tool"), ToolCalls: calls("find_tool", `{"query":"echo"}`)},
				fakeTurn{
					Check: func(req fakeRequest) error {
						if err := offers("find_tool", "mcp_everything_echo")(req); err != nil {
							return err
						}
						if res := req.toolResults(); len(res) != 1 || res[0].IsError || !strings.Contains(res[0].Content, "- mcp_everything_echo: Echoes back the input string") {
							return fmt.Errorf("find_tool result = %+v, want mcp_everything_echo listed with its description", res)
						}
						return nil
					},
					ToolCalls: calls("mcp_everything_echo", fmt.Sprintf(`{"message":%q}`, message)),
				},
				answerWithResults,
			)
			m := newRunsOver(t, reg, f, "", nil)
			v := waitRun(t, startRun(t, m, runRequest{Prompt: "echo something"}))
			requireCompleted(t, v)
			if want := "ok: Echo: " + message; v.Output != want {
				t.Errorf("output = %q, want %q", v.Output, want)
			}
			if !slices.Equal(v.ActivatedTools, []string{"mcp_everything_echo"}) {
				t.Errorf("activated tools = %v, want [mcp_everything_echo]", v.ActivatedTools)
			}
		})
	}
}

func TestRealResources(t *testing.T) {
	t.Parallel()
	echoserver := peerCommand{Command: buildEchoServer(t), Args: []string{"stdio"}}
	reg := newPeerRegistry(t,
		stdioPeerConfig("everything", everythingStdioCommand(t)),
		stdioPeerConfig("memory", memoryStdioCommand(t)),
		stdioPeerConfig("echo", echoserver))
	doc, err := os.ReadFile(filepath.Join(requireNode(t), "@modelcontextprotocol", "server-everything", "dist", "docs", "features.md"))
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:list_mcp_resources,read_mcp_resource"}`)},
		fakeTurn{Check: offers("find_tool", "list_mcp_resources", "read_mcp_resource"), ToolCalls: calls(
			"list_mcp_resources#everything", `{"mcp_name":"everything"}`,
			"list_mcp_resources#memory", `{"mcp_name":"memory"}`,
			"list_mcp_resources#echo", `{"mcp_name":"echo"}`,
			"list_mcp_resources#missing", `{"mcp_name":"nope"}`,
			"read_mcp_resource#text", `{"mcp_name":"everything","uri":"demo://resource/dynamic/text/1"}`,
			"read_mcp_resource#blob", `{"mcp_name":"everything","uri":"demo://resource/dynamic/blob/2"}`,
			"read_mcp_resource#doc", `{"mcp_name":"everything","uri":"demo://resource/static/document/features.md"}`,
			"read_mcp_resource#graph", `{"mcp_name":"memory","uri":"memory://knowledge-graph"}`,
			"read_mcp_resource#echo", `{"mcp_name":"echo","uri":"file:///etc/hostname"}`,
			"read_mcp_resource#unknown", `{"mcp_name":"everything","uri":"demo://no/such/resource"}`,
		)},
		answerWithResults,
	)
	m := newRunsOver(t, reg, f, "", nil)
	requireCompleted(t, waitRun(t, startRun(t, m, runRequest{Prompt: "look at the resources"})))

	results := resultsByID(f.requests()[2])
	tests := []struct {
		callID  string
		isError bool
		want    string // a regular expression
	}{
		{"list_mcp_resources#everything", false, `^\[.*\{"uri":"demo://resource/static/document/features\.md","name":"features\.md","description":"Static document file exposed from /docs: features\.md","mimeType":"text/markdown"\}.*\]$`},
		{"list_mcp_resources#memory", false, `^\[\{"uri":"memory://knowledge-graph","name":"knowledge-graph","title":"Knowledge Graph",.*"mimeType":"application/json"\}\]$`},
		{"list_mcp_resources#echo", true, `^list_mcp_resources: server "echo" does not offer resources$`},
		{"list_mcp_resources#missing", true, `^list_mcp_resources: no server "nope" in this run; servers: echo, everything, memory$`},
		{"read_mcp_resource#text", false, `^Resource 1: This is a plaintext resource created at .+$`},
		{"read_mcp_resource#blob", false, `^\[resource demo://resource/dynamic/blob/2: text/plain, \d+ bytes\]$`},
		{"read_mcp_resource#doc", false, "^" + regexp.QuoteMeta(string(doc)) + "$"},
		{"read_mcp_resource#graph", false, `"entities": \[\]`},
		{"read_mcp_resource#echo", true, `^read_mcp_resource: server "echo" does not offer resources$`},
		{"read_mcp_resource#unknown", true, `^read_mcp_resource: server "everything": .*demo://no/such/resource`},
	}
	for _, tt := range tests {
		res, ok := results["call_"+tt.callID]
		if !ok || res.IsError != tt.isError || !regexp.MustCompile(tt.want).MatchString(res.Content) {
			t.Errorf("%s = %+v (found %v), want is_error %v matching %s", tt.callID, res, ok, tt.isError, tt.want)
		}
	}
}

func TestRealToolErrorGoesBackToTheModel(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	note := filepath.Join(dir, "note.txt")
	if err := os.WriteFile(note, []byte("hello file"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg := newPeerRegistry(t, stdioPeerConfig("filesystem", filesystemStdioCommand(t, dir)))
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire,
				fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:mcp_filesystem_read_text_file"}`)},
				fakeTurn{ToolCalls: calls(
					"mcp_filesystem_read_text_file#outside", `{"path":"/etc/hostname"}`,
					"mcp_filesystem_read_text_file#inside", fmt.Sprintf(`{"path":%q}`, note),
				)},
				fakeTurn{Reply: func(req fakeRequest) fakeTurn {
					results := resultsByID(req)
					outside := results["call_mcp_filesystem_read_text_file#outside"]
					inside := results["call_mcp_filesystem_read_text_file#inside"]
					if !outside.IsError || !strings.Contains(outside.Content, "Access denied - path outside allowed directories: /etc/hostname") {
						t.Errorf("outside read = %+v, want a tool error saying access denied", outside)
					}
					if inside.IsError || inside.Content != "hello file" {
						t.Errorf("inside read = %+v, want %q", inside, "hello file")
					}
					return fakeTurn{ToolCalls: calls("mcp_filesystem_read_text_file", fmt.Sprintf(`{"path":%q}`, note))}
				}},
				answerWithResults,
			)
			m := newRunsOver(t, reg, f, "", nil)
			r := startRun(t, m, runRequest{Prompt: "read files"})
			v := waitRun(t, r)
			requireCompleted(t, v)
			if v.Output != "ok: hello file" {
				t.Errorf("output = %q, want %q", v.Output, "ok: hello file")
			}
			errors := map[string]bool{}
			for _, data := range eventData(r, "tool.call.completed") {
				if data["step"] == 2 {
					errors[fmt.Sprint(data["call_id"])] = data["is_error"] == true
				}
			}
			want := map[string]bool{"call_mcp_filesystem_read_text_file#outside": true, "call_mcp_filesystem_read_text_file#inside": false}
			if !maps.Equal(errors, want) {
				t.Errorf("step 2 tool.call.completed is_error by call = %v, want %v", errors, want)
			}
		})
	}
}

func TestRealFindToolRanking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	reg := newPeerRegistry(t,
		stdioPeerConfig("everything", everythingStdioCommand(t)),
		stdioPeerConfig("filesystem", filesystemStdioCommand(t, dir)),
		stdioPeerConfig("memory", memoryStdioCommand(t)))
	tests := []struct {
		query   string
		first   string   // the best match
		include []string // more tools that must be activated
		prefix  string   // what every activated tool's name starts with
		count   int      // how many are activated
	}{
		{"echo", "mcp_everything_echo", nil, "mcp_everything_echo", 1},
		// read_file outranks read_text_file: the query covers all of its name.
		{"read a file", "mcp_filesystem_read_file", []string{"mcp_filesystem_read_text_file", "mcp_filesystem_read_multiple_files"}, "mcp_filesystem_", 5},
		{"knowledge graph", "mcp_memory_read_graph", nil, "mcp_memory_", 5},
		// trigger-url-elicitation "supports two mechanisms": it matches "two".
		{"add two numbers", "mcp_everything_get_sum", []string{"mcp_memory_add_observations"}, "mcp_", 3},
	}
	for _, tt := range tests {
		for _, wire := range wires {
			t.Run(tt.query+"/"+wire, func(t *testing.T) {
				f := newFakeModel(t, wire,
					fakeTurn{ToolCalls: calls("find_tool", fmt.Sprintf(`{"query":%q}`, tt.query))},
					fakeTurn{Check: func(req fakeRequest) error {
						got := req.toolNames()[1:]
						if len(got) != tt.count || got[0] != tt.first {
							return fmt.Errorf("find_tool(%q) then offered %v, want %d tools, %s first", tt.query, got, tt.count, tt.first)
						}
						listed := req.toolResults()[0].Content
						for _, name := range got {
							if !strings.HasPrefix(name, tt.prefix) || !strings.Contains(listed, "- "+name+": ") {
								return fmt.Errorf("find_tool(%q) then offered %s, listed in %q; want it to start with %s and be listed", tt.query, name, listed, tt.prefix)
							}
						}
						for _, name := range tt.include {
							if !slices.Contains(got, name) {
								return fmt.Errorf("find_tool(%q) then offered %v, want %s among them", tt.query, got, name)
							}
						}
						return nil
					}, Text: "done"},
				)
				m := newRunsOver(t, reg, f, "", nil)
				requireCompleted(t, waitRun(t, startRun(t, m, runRequest{Prompt: tt.query})))
			})
		}
	}
}

func TestRealResultContent(t *testing.T) {
	t.Parallel()
	reg := newPeerRegistry(t, stdioPeerConfig("everything", everythingStdioCommand(t)))
	source, err := os.ReadFile(filepath.Join(requireNode(t), "@modelcontextprotocol", "server-everything", "dist", "tools", "get-tiny-image.js"))
	if err != nil {
		t.Fatal(err)
	}
	image := regexp.MustCompile(`MCP_TINY_IMAGE\s*=\s*"([^"]+)"`).FindSubmatch(source)
	if image == nil {
		t.Fatal("get-tiny-image.js: no MCP_TINY_IMAGE")
	}
	png, err := base64.StdEncoding.DecodeString(string(image[1]))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		call, args string
		want       string // a regular expression for the text the model gets
	}{
		{"mcp_everything_get_tiny_image", `{}`,
			fmt.Sprintf(`^Here's the image you requested:\n\[image: image/png, %d bytes\]\nThe image above is the MCP logo\.$`, len(png))},
		{"mcp_everything_get_resource_reference#text", `{"resourceType":"Text","resourceId":1}`,
			`^Returning resource reference for Resource 1:\nResource 1: This is a plaintext resource created at .+\nYou can access this resource using the URI: demo://resource/dynamic/text/1$`},
		{"mcp_everything_get_resource_reference#blob", `{"resourceType":"Blob","resourceId":3}`,
			`^Returning resource reference for Resource 3:\n\[resource demo://resource/dynamic/blob/3: text/plain, \d+ bytes\]\nYou can access this resource using the URI: demo://resource/dynamic/blob/3$`},
		// The text block already carries the structured content: not twice.
		{"mcp_everything_get_structured_content", `{"location":"Chicago"}`,
			`^\{"temperature":36,"conditions":"Light rain / drizzle","humidity":82\}$`},
		{"mcp_everything_get_resource_links", `{"count":2}`,
			`^Here are 2 resource links to resources available in this server:\n\[resource link: demo://resource/dynamic/blob/1 Blob Resource 1\]\n\[resource link: demo://resource/dynamic/text/2 Text Resource 2\]$`},
	}
	var callArgs, names []string
	for _, tt := range tests {
		callArgs = append(callArgs, tt.call, tt.args)
		name, _, _ := strings.Cut(tt.call, "#")
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	for _, wire := range wires {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire,
				fakeTurn{ToolCalls: calls("find_tool", `{"query":"select:`+strings.Join(names, ",")+`"}`)},
				fakeTurn{Check: offers(append([]string{"find_tool"}, names...)...), ToolCalls: calls(callArgs...)},
				answerWithResults,
			)
			m := newRunsOver(t, reg, f, "", nil)
			requireCompleted(t, waitRun(t, startRun(t, m, runRequest{Prompt: "show me content"})))
			results := resultsByID(f.requests()[2])
			for _, tt := range tests {
				res, ok := results["call_"+tt.call]
				if !ok || res.IsError || !regexp.MustCompile(tt.want).MatchString(res.Content) {
					t.Errorf("%s(%s) gave the model %+v (found %v), want matching %s", tt.call, tt.args, res, ok, tt.want)
				}
			}
		})
	}
}
