package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"slices"
	"sync"
)

// This file holds the tool catalog: mcp_ naming, tiers and tags, and the
// per-run catalog of reachable and activated tools.

// Names of the built-in tools (toolFindTool and toolConnectMCP are in
// config.go). find_tool is the only core tool; the others are deferred
// like every MCP tool.
const (
	toolListMCPResources = "list_mcp_resources"
	toolReadMCPResource  = "read_mcp_resource"
)

// Limits of find_tool and of the names it produces.
const (
	maxToolNameLen        = 64 // what every model provider accepts
	defaultFindResults    = 5
	maxFindResults        = 20
	maxQueryTokens        = 32
	maxDescribedServers   = 8  // servers named in find_tool's description
	maxDescribedServerLen = 32 // characters of a server name shown there
	findLineLen           = 160
)

// A toolEntry is one tool the agent can reach: an MCP tool under its mcp_
// name, or a built-in tool (Server "", tag "builtin"). It is a value; its
// slices and schema are shared and never modified.
type toolEntry struct {
	Name        string // mcp_<server>_<tool>, or the built-in's name
	Server      string // the server's configured name; "" for built-ins
	ServerTool  string // the tool's name on its server, as listed
	Description string
	InputSchema json.RawMessage // always a JSON Schema object
	Tags        []string
	// Annotations are the server's tool annotations as listed; nil when
	// it gave none (and for built-ins).
	Annotations json.RawMessage
}

// A serverTools is an immutable snapshot of one server's tools with their
// search index. A server that re-lists its tools gets a new snapshot; every
// catalog holding the old one still sees it whole. Safe for concurrent
// use; its fields are read-only after construction.
type serverTools struct {
	server  string
	entries []toolEntry
	byName  map[string]int // mcp_ name → index in entries
	// nameTokens[i] is the number of distinct search tokens in the tool
	// name of entries[i]; find_tool prefers tools whose name the query covers.
	nameTokens []int
	// vocab is sorted; postings[i] lists the entries containing vocab[i].
	vocab    []string
	postings [][]posting
	// held are the server's tools left out because their definition
	// changed since it was pinned (tools_pins.go), by mcp_ name; nil for
	// none.
	held map[string]toolChange
	// warned are the server's tools whose changed definition the listing
	// of this snapshot took in (pin_tools = "warn"), by mcp_ name; nil
	// for none.
	warned map[string]toolChange
}

// mcpToolName returns the name the agent sees for a server's tool:
// mcpToolPrefix(server) and the sanitized tool name. A name longer than 64
// characters is cut and ends in "_" and 8 hex digits of the SHA-256 of the
// whole name, so it stays stable and distinct.
func mcpToolName(server, tool string) string {
	name := mcpToolPrefix(server) + sanitizeName(tool)
	if len(name) <= maxToolNameLen {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return name[:maxToolNameLen-9] + "_" + hex.EncodeToString(sum[:4])
}

// emptyObjectSchema is the input schema of a tool listed without one.
var emptyObjectSchema = json.RawMessage(`{"type":"object","properties":{}}`)

// newServerTools builds the snapshot of a server's tools. include and
// exclude are path.Match globs over the server's own tool names (include
// empty means all; exclude wins). dynamic marks tools of per-run and
// connect_mcp servers. Tools without a name are skipped. It fails, naming
// the server, on a malformed glob or on two tools whose mcp_ names collide.
func newServerTools(server string, tools []toolInfo, include, exclude []string, dynamic bool) (*serverTools, error) {
	for _, pattern := range slices.Concat(include, exclude) {
		if _, err := path.Match(pattern, ""); err != nil {
			return nil, fmt.Errorf("server %q: tool filter %q: %v; fix include_tools or exclude_tools", server, pattern, err)
		}
	}
	tags := []string{"mcp", "integration", "external", "mcp_server:" + server}
	if dynamic {
		tags = append(tags, "dynamic")
	}
	st := &serverTools{server: server, byName: make(map[string]int, len(tools))}
	for _, tool := range tools {
		if !keepsTool(include, exclude, tool.Name) {
			continue
		}
		name := mcpToolName(server, tool.Name)
		if i, dup := st.byName[name]; dup {
			return nil, fmt.Errorf("server %q: tools %q and %q both become %q; exclude one with exclude_tools",
				server, st.entries[i].ServerTool, tool.Name, name)
		}
		schema := tool.InputSchema
		if !isJSONObject(schema) {
			schema = emptyObjectSchema
		}
		description := tool.Description
		if description == "" {
			description = tool.Title
		}
		st.byName[name] = len(st.entries)
		st.entries = append(st.entries, toolEntry{
			Name: name, Server: server, ServerTool: tool.Name,
			Description: description, InputSchema: schema, Tags: tags, Annotations: tool.Annotations,
		})
	}
	st.buildIndex()
	return st, nil
}

// keepsTool reports whether a server's tool name passes its
// include_tools and exclude_tools globs (already validated).
func keepsTool(include, exclude []string, name string) bool {
	return name != "" && matchesAny(include, name, true) && !matchesAny(exclude, name, false)
}

// matchesAny reports whether name matches one of the globs, or whether the
// list is empty and ifEmpty is true. The globs are already validated.
func matchesAny(globs []string, name string, ifEmpty bool) bool {
	if len(globs) == 0 {
		return ifEmpty
	}
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

func isJSONObject(raw json.RawMessage) bool {
	for _, c := range raw {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		return c == '{' && json.Valid(raw)
	}
	return false
}

// A catalog is the set of tools one run can reach and the subset it has
// activated. The servers' snapshots come from a function the run's scope
// supplies (the global servers it does not shadow, then its own), called on
// every use, so a re-listed or restarted server shows up at once without
// copying entries. A catalog is safe for concurrent use; no method blocks.
type catalog struct {
	// sources returns the current snapshots of the run's servers. It must
	// be cheap and non-blocking; it may be nil.
	sources func() []*serverTools
	// unready returns the run's servers that are not ready, for what
	// find_tool says of them (tools_unready.go); nil for none.
	unready func() []serverStatus

	// limits bound the tools the run reaches (the starting key's); the
	// zero value bounds nothing.
	limits toolLimits

	mu sync.Mutex
	// guards activated and isActivated
	activated   []string // in activation order
	isActivated map[string]bool

	boundMu sync.Mutex
	// guards bounded: the view within limits of each snapshot reached,
	// by the snapshot it was made of
	bounded map[*serverTools]*serverTools
}

// newCatalog returns a catalog with nothing activated over the servers
// sources returns (nil for none).
func newCatalog(sources func() []*serverTools) *catalog {
	return &catalog{sources: sources, isActivated: map[string]bool{}}
}

// reachable returns the snapshots the run reaches now: the deferred built-ins,
// then the servers' tools.
func (c *catalog) reachable() []*serverTools {
	var sets []*serverTools
	if c.sources != nil {
		sets = c.sources()
	}
	out := make([]*serverTools, 0, 1+len(sets))
	out = append(out, deferredBuiltins)
	out = append(out, sets...)
	if !c.limits.bounded() {
		return out
	}
	c.boundMu.Lock()
	defer c.boundMu.Unlock()
	next := make(map[*serverTools]*serverTools, len(out))
	for i, st := range out {
		view, ok := c.bounded[st]
		if !ok {
			view = st.within(c.limits)
		}
		next[st], out[i] = view, view
	}
	c.bounded = next
	return out
}

// within returns the snapshot of st's tools that l leaves.
func (st *serverTools) within(l toolLimits) *serverTools {
	view := &serverTools{server: st.server, byName: map[string]int{}}
	for _, e := range st.entries {
		if l.allowsTool(e.Server, e.Name) {
			view.byName[e.Name] = len(view.entries)
			view.entries = append(view.entries, e)
		}
	}
	view.held, view.warned = changesWithin(st.server, st.held, l), changesWithin(st.server, st.warned, l)
	view.buildIndex()
	return view
}

// lookup returns the tool the run reaches under name, built-ins included,
// and false when there is none.
func (c *catalog) lookup(name string) (toolEntry, bool) {
	if name == toolFindTool {
		return c.findToolEntry(nil), true
	}
	return lookupIn(c.reachable(), name)
}

func lookupIn(sets []*serverTools, name string) (toolEntry, bool) {
	for _, st := range sets {
		if i, ok := st.byName[name]; ok {
			return st.entries[i], true
		}
	}
	return toolEntry{}, false
}

// offered returns the tools to send to the model now: find_tool, then the
// activated tools in activation order, leaving out those no server lists
// any more. The caller owns the slice.
func (c *catalog) offered() []toolEntry {
	sets := c.reachable()
	c.mu.Lock()
	names := slices.Clone(c.activated)
	c.mu.Unlock()
	out := make([]toolEntry, 0, 1+len(names))
	out = append(out, c.findToolEntry(sets))
	for _, name := range names {
		if e, ok := lookupIn(sets, name); ok {
			out = append(out, e)
		}
	}
	return out
}

// activate marks the named tools as activated; unknown names are kept and
// offered once a server lists them.
func (c *catalog) activate(names ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, name := range names {
		if !c.isActivated[name] {
			c.isActivated[name] = true
			c.activated = append(c.activated, name)
		}
	}
}

// activatedNames returns the names activated so far, in order. The caller
// owns the slice.
func (c *catalog) activatedNames() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.activated)
}
