package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// This file holds the tool catalog: mcp_ naming, tiers, tags, find_tool
// search and activation, the built-in MCP tools, and the conversion of tool
// and resource results to the text the model reads.

// Names of the built-in tools. find_tool is the only core tool; the others
// are deferred like every MCP tool.
const (
	toolFindTool         = "find_tool"
	toolConnectMCP       = "connect_mcp"
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
}

// A serverTools is an immutable snapshot of one server's tools with their
// search index. A server that re-lists its tools gets a new snapshot; every
// catalog holding the old one keeps a consistent view. Safe for concurrent
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
}

// A posting says which fields of one entry contain a token.
type posting struct {
	entry  int32
	fields uint8
}

// Fields a search token can come from, with their exact and prefix weights.
const (
	fieldName uint8 = 1 << iota
	fieldServer
	fieldTag
	fieldDescription
)

var fieldWeights = []struct {
	field         uint8
	exact, prefix float32
}{
	{fieldName, 10, 6},
	{fieldServer, 5, 3},
	{fieldTag, 3, 1},
	{fieldDescription, 2, 1},
}

// mcpToolName returns the name the agent sees for a server's tool:
// mcp_<server>_<tool>, each part sanitized. A name longer than 64
// characters is cut and ends in "_" and 8 hex digits of the SHA-256 of the
// whole name, so it stays stable and distinct.
func mcpToolName(server, tool string) string {
	name := "mcp_" + sanitizeName(server) + "_" + sanitizeName(tool)
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
		if tool.Name == "" || !matchesAny(include, tool.Name, true) || matchesAny(exclude, tool.Name, false) {
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
			Description: description, InputSchema: schema, Tags: tags,
		})
	}
	st.buildIndex()
	return st, nil
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

// buildIndex fills the search index from st.entries.
func (st *serverTools) buildIndex() {
	// Entries are added in order, so an entry's posting is the list's last.
	postingsByToken := map[string][]posting{}
	add := func(entry int, field uint8, text string, splitCase bool) int {
		n := 0
		for _, tok := range searchTokens(text, splitCase) {
			list := postingsByToken[tok]
			if last := len(list) - 1; last >= 0 && list[last].entry == int32(entry) {
				if list[last].fields&field == 0 {
					n++
				}
				list[last].fields |= field
				continue
			}
			n++
			postingsByToken[tok] = append(list, posting{entry: int32(entry), fields: field})
		}
		return n
	}
	st.nameTokens = make([]int, len(st.entries))
	for i, e := range st.entries {
		st.nameTokens[i] = add(i, fieldName, e.ServerTool, true)
		if e.Server == "" {
			st.nameTokens[i] += add(i, fieldName, e.Name, true)
		}
		add(i, fieldServer, e.Server, true)
		for _, tag := range e.Tags {
			// "mcp_server:<name>" would make "mcp" and "server" match every tool.
			_, value, found := strings.Cut(tag, ":")
			if !found {
				value = tag
			}
			add(i, fieldTag, value, true)
		}
		add(i, fieldDescription, e.Description, false)
	}
	st.vocab = make([]string, 0, len(postingsByToken))
	for tok := range postingsByToken {
		st.vocab = append(st.vocab, tok)
	}
	sort.Strings(st.vocab)
	st.postings = make([][]posting, len(st.vocab))
	for i, tok := range st.vocab {
		st.postings[i] = slices.Clip(postingsByToken[tok])
	}
}

// stopWords are dropped from queries and descriptions: they match nearly
// every tool and say nothing about what it does.
var stopWords = map[string]bool{
	"a": true, "an": true, "the": true, "of": true, "to": true, "in": true, "on": true,
	"for": true, "and": true, "or": true, "with": true, "from": true, "by": true,
	"is": true, "it": true, "this": true, "that": true, "be": true, "as": true,
	"at": true, "me": true, "my": true, "i": true, "you": true, "your": true,
	"can": true, "please": true, "tool": true, "some": true, "into": true,
}

// searchTokens splits text into distinct lowercase stemmed tokens: at every
// character that is not a letter or digit (so at "_" too) and, when
// splitCase is true, at camelCase boundaries. Stop words and one-letter
// tokens are dropped.
func searchTokens(text string, splitCase bool) []string {
	var out []string
	start := -1
	var prev rune
	flush := func(end int) {
		if start < 0 {
			return
		}
		tok := stem(strings.ToLower(text[start:end]))
		start = -1
		if len(tok) > 1 && !stopWords[tok] && !slices.Contains(out, tok) {
			out = append(out, tok)
		}
	}
	for i, r := range text {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush(i)
			prev = r
			continue
		}
		if start >= 0 && splitCase && unicode.IsUpper(r) {
			next, _ := utf8.DecodeRuneInString(text[i+utf8.RuneLen(r):])
			if unicode.IsLower(prev) || unicode.IsUpper(prev) && unicode.IsLower(next) {
				flush(i)
			}
		}
		if start < 0 {
			start = i
		}
		prev = r
	}
	flush(len(text))
	return out
}

// stem strips common English endings so "files", "reading" and "echoes"
// meet "file", "read" and "echo". Queries and the index share it, so it
// only has to be consistent, not correct.
func stem(w string) string {
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		w = w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "shes") ||
		strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "xes") || strings.HasSuffix(w, "oes")):
		w = w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") &&
		!strings.HasSuffix(w, "us") && !strings.HasSuffix(w, "is"):
		w = w[:len(w)-1]
	case len(w) > 5 && strings.HasSuffix(w, "ing"):
		w = w[:len(w)-3]
	case len(w) > 4 && strings.HasSuffix(w, "ed"):
		w = w[:len(w)-2]
	}
	if len(w) > 3 && strings.HasSuffix(w, "e") {
		w = w[:len(w)-1]
	}
	return w
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
			`"server_name":{"type":"string","pattern":"^[A-Za-z0-9_-]+$","description":"Name for the server (default: from the URL host)"}},` +
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

// A catalog is the set of tools one run can reach and the subset it has
// activated. The servers' snapshots come from a function the run's scope
// supplies (the global servers it does not shadow, then its own), called on
// every use, so a re-listed or restarted server shows up at once without
// copying entries. A catalog is safe for concurrent use; no method blocks.
type catalog struct {
	// sources returns the current snapshots of the run's servers. It must
	// be cheap and non-blocking; it may be nil.
	sources func() []*serverTools

	mu sync.Mutex
	// guards activated and isActivated
	activated   []string // in activation order
	isActivated map[string]bool
}

// newCatalog returns a catalog with nothing activated over the servers
// sources returns (nil for none).
func newCatalog(sources func() []*serverTools) *catalog {
	return &catalog{sources: sources, isActivated: map[string]bool{}}
}

// view returns the snapshots the run reaches now: the deferred built-ins,
// then the servers' tools.
func (c *catalog) view() []*serverTools {
	var sets []*serverTools
	if c.sources != nil {
		sets = c.sources()
	}
	out := make([]*serverTools, 0, 1+len(sets))
	out = append(out, deferredBuiltins)
	return append(out, sets...)
}

// lookup returns the tool the run reaches under name, built-ins included,
// and false when there is none.
func (c *catalog) lookup(name string) (toolEntry, bool) {
	if name == toolFindTool {
		return c.findToolEntry(nil), true
	}
	return lookupIn(c.view(), name)
}

func lookupIn(view []*serverTools, name string) (toolEntry, bool) {
	for _, st := range view {
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
	view := c.view()
	c.mu.Lock()
	names := slices.Clone(c.activated)
	c.mu.Unlock()
	out := make([]toolEntry, 0, 1+len(names))
	out = append(out, c.findToolEntry(view))
	for _, name := range names {
		if e, ok := lookupIn(view, name); ok {
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

// findToolEntry returns find_tool with a description that counts the
// deferred tools per server; the list of servers is capped so the first
// request stays small however many tools there are. A nil view is fetched.
func (c *catalog) findToolEntry(view []*serverTools) toolEntry {
	if view == nil {
		view = c.view()
	}
	servers := make([]*serverTools, 0, len(view))
	total := 0
	for _, st := range view[1:] {
		if len(st.entries) > 0 {
			servers = append(servers, st)
			total += len(st.entries)
		}
	}
	slices.SortFunc(servers, func(a, b *serverTools) int {
		if d := len(b.entries) - len(a.entries); d != 0 {
			return d
		}
		return strings.Compare(a.server, b.server)
	})
	var b strings.Builder
	b.WriteString("Search for and activate more tools; only tools listed to you can be called. ")
	fmt.Fprintf(&b, "%d MCP tools from %d servers", total, len(servers))
	for i, st := range servers {
		if i == maxDescribedServers {
			fmt.Fprintf(&b, ", and %d more servers", len(servers)-i)
			break
		}
		sep := ", "
		if i == 0 {
			sep = ": "
		}
		name := st.server
		if len(name) > maxDescribedServerLen {
			name = name[:maxDescribedServerLen] + "…"
		}
		fmt.Fprintf(&b, "%s%s (%d)", sep, name, len(st.entries))
	}
	b.WriteString("; built-in: connect_mcp, list_mcp_resources, read_mcp_resource. ")
	b.WriteString(`Query with words for the task ("read a file") to activate the best matches, or "select:name1,name2" for exact names.`)
	e := coreFindTool
	e.Description = b.String()
	return e
}

// findToolArgs are find_tool's arguments.
type findToolArgs struct {
	Query      string `json:"query"`
	MaxResults *int   `json:"max_results"`
}

// findTool runs find_tool: "select:a,b" activates exactly those names, any
// other query activates the best-ranked deferred tools. It returns the
// text for the model listing what was activated; bad arguments, or a
// select naming only unknown tools, give an error whose text is meant for
// the model.
func (c *catalog) findTool(args json.RawMessage) (string, error) {
	var a findToolArgs
	if err := json.Unmarshal(args, &a); err != nil {
		return "", fmt.Errorf("find_tool: arguments: %v; send {\"query\": \"words\", \"max_results\": 5}", err)
	}
	query := strings.TrimSpace(a.Query)
	if query == "" {
		return "", errors.New(`find_tool: query is empty; describe the task in a few words or use "select:name1,name2"`)
	}
	limit := defaultFindResults
	if a.MaxResults != nil {
		limit = min(*a.MaxResults, maxFindResults)
		if limit < 1 {
			return "", fmt.Errorf("find_tool: max_results %d: must be between 1 and %d", *a.MaxResults, maxFindResults)
		}
	}
	view := c.view()
	if rest, ok := cutPrefixFold(query, "select:"); ok {
		return c.selectTools(view, rest)
	}
	found := search(view, query, limit)
	if len(found) == 0 {
		return fmt.Sprintf("No tools match %q. Try other words, or select:name for an exact name.", query), nil
	}
	return c.activateFound(found, nil), nil
}

// selectTools activates the comma-separated names in list, at most
// maxFindResults of them.
func (c *catalog) selectTools(view []*serverTools, list string) (string, error) {
	var found []toolEntry
	var unknown []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		e, ok := lookupIn(view, name)
		if !ok {
			e, ok = lookupIn(view, strings.ToLower(name))
		}
		switch {
		case !ok && name != toolFindTool:
			unknown = append(unknown, name)
		case ok && !slices.ContainsFunc(found, func(f toolEntry) bool { return f.Name == e.Name }):
			found = append(found, e)
		}
	}
	if len(found) > maxFindResults {
		unknown = append(unknown, fmt.Sprintf("(%d more names: select at most %d at once)", len(found)-maxFindResults, maxFindResults))
		found = found[:maxFindResults]
	}
	if len(found) == 0 {
		if len(unknown) == 0 {
			return "", errors.New("find_tool: select: no tool names given; use select:name1,name2")
		}
		return "", fmt.Errorf("find_tool: select: unknown tools %s; search with words to find the right names", strings.Join(unknown, ", "))
	}
	return c.activateFound(found, unknown), nil
}

// activateFound activates found and describes it for the model.
func (c *catalog) activateFound(found []toolEntry, unknown []string) string {
	names := make([]string, len(found))
	for i, e := range found {
		names[i] = e.Name
	}
	c.activate(names...)
	var b strings.Builder
	if len(found) == 1 {
		b.WriteString("Activated 1 tool; it is now callable:\n")
	} else {
		fmt.Fprintf(&b, "Activated %d tools; they are now callable:\n", len(found))
	}
	for _, e := range found {
		fmt.Fprintf(&b, "- %s: %s\n", e.Name, oneLine(e.Description, findLineLen))
	}
	if len(unknown) > 0 {
		fmt.Fprintf(&b, "Unknown tools, not activated: %s\n", strings.Join(unknown, ", "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// oneLine returns the first line of s, cut to at most n bytes on a rune
// boundary.
func oneLine(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}

// A searchCell accumulates one entry's score during a search.
type searchCell struct {
	total     float32
	best      float32 // best weight for the current query token
	cover     uint8   // query tokens matched (at most maxQueryTokens)
	nameHits  uint8   // query tokens matched in the tool name
	bestName  bool
	seenQuery bool // touched by the current query token
}

// searchScratch is reused across searches. Between searches every cell is
// zero: a search resets only the cells it touched, never the whole slice.
type searchScratch struct {
	cells   []searchCell
	touched []int32 // cells touched by the current query token
	hits    []int32 // cells touched by any query token
}

var scratchPool = sync.Pool{New: func() any { return new(searchScratch) }}

// search returns the best `limit` entries of view for query, best first.
// A tool ranks by how many query tokens it matches, then by where they
// match (tool name over server name over tags over description; exact
// over prefix), then by how much of its own name the query covers, then
// by name.
func search(view []*serverTools, query string, limit int) []toolEntry {
	tokens := searchTokens(query, false)
	if len(tokens) > maxQueryTokens {
		tokens = tokens[:maxQueryTokens]
	}
	if len(tokens) == 0 {
		return nil
	}
	base := make([]int32, len(view)+1)
	for i, st := range view {
		base[i+1] = base[i] + int32(len(st.entries))
	}
	s := scratchPool.Get().(*searchScratch)
	defer scratchPool.Put(s)
	s.cells = slices.Grow(s.cells[:0], int(base[len(view)]))[:base[len(view)]]
	s.hits = s.hits[:0]
	defer func() {
		for _, ci := range s.hits {
			s.cells[ci] = searchCell{}
		}
	}()

	for _, q := range tokens {
		s.touched = s.touched[:0]
		for vi, st := range view {
			i := sort.SearchStrings(st.vocab, q)
			for ; i < len(st.vocab) && strings.HasPrefix(st.vocab[i], q); i++ {
				exact := len(st.vocab[i]) == len(q)
				if !exact && len(q) < 3 {
					break
				}
				for _, p := range st.postings[i] {
					s.score(base[vi]+p.entry, p.fields, exact)
				}
			}
		}
		for _, ci := range s.touched {
			cell := &s.cells[ci]
			if cell.cover == 0 {
				s.hits = append(s.hits, ci)
			}
			cell.total += cell.best
			cell.cover++
			if cell.bestName {
				cell.nameHits++
			}
			cell.best, cell.bestName, cell.seenQuery = 0, false, false
		}
	}

	type ranked struct {
		score float32
		entry *toolEntry
	}
	top := make([]ranked, 0, limit+1)
	for _, ci := range s.hits {
		vi := sort.Search(len(view), func(k int) bool { return base[k+1] > ci })
		st, ei := view[vi], ci-base[vi]
		cell := &s.cells[ci]
		score := float32(cell.cover)*1000 + cell.total
		if n := st.nameTokens[ei]; n > 0 {
			score += 5 * float32(min(int(cell.nameHits), n)) / float32(n)
		}
		r := ranked{score, &st.entries[ei]}
		at := sort.Search(len(top), func(k int) bool {
			return top[k].score < r.score || top[k].score == r.score && top[k].entry.Name > r.entry.Name
		})
		if at < limit {
			top = slices.Insert(top, at, r)
			if len(top) > limit {
				top = top[:limit]
			}
		}
	}
	out := make([]toolEntry, len(top))
	for i, r := range top {
		out[i] = *r.entry
	}
	return out
}

// score records that cell ci matches the current query token in fields.
func (s *searchScratch) score(ci int32, fields uint8, exact bool) {
	cell := &s.cells[ci]
	if !cell.seenQuery {
		cell.seenQuery = true
		s.touched = append(s.touched, ci)
	}
	for _, fw := range fieldWeights {
		if fields&fw.field == 0 {
			continue
		}
		w := fw.prefix
		if exact {
			w = fw.exact
		}
		if w > cell.best {
			cell.best = w
			cell.bestName = fw.field == fieldName
		}
	}
}

// resultToText converts a tools/call result to the text the model reads:
// text blocks as they are, embedded text resources' text, and a short
// placeholder for images, audio, blobs, resource links and unknown blocks,
// one per line; structuredContent as compact JSON when no block is text.
// It returns "" for a result without content.
func resultToText(r *callResult) string {
	parts := make([]string, 0, len(r.Content)+1)
	hasText := false
	for _, block := range r.Content {
		switch block.Type {
		case "text":
			hasText = true
			parts = append(parts, block.Text)
		case "image", "audio":
			parts = append(parts, fmt.Sprintf("[%s: %s, %d bytes]", block.Type, block.MIMEType, base64Size(block.Data)))
		case "resource":
			if block.Resource == nil {
				parts = append(parts, "[resource content]")
				break
			}
			if block.Resource.Text != "" {
				hasText = true
			}
			parts = append(parts, resourceBodyText(block.Resource))
		case "resource_link":
			parts = append(parts, strings.TrimSuffix("[resource link: "+block.URI+" "+block.Name, " ")+"]")
		default:
			parts = append(parts, "["+cmp.Or(block.Type, "unknown")+" content]")
		}
	}
	if !hasText && len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		parts = append(parts, compactJSON(r.StructuredContent))
	}
	return strings.Join(parts, "\n")
}

// resourceContentsToText converts a resources/read result to text: the
// text of each content, blobs as placeholders, each under a "--- <uri>"
// header when there are several. It returns "" when there are none.
func resourceContentsToText(r *readResourceResult) string {
	if len(r.Contents) == 1 {
		return resourceBodyText(&r.Contents[0])
	}
	parts := make([]string, len(r.Contents))
	for i := range r.Contents {
		parts[i] = "--- " + r.Contents[i].URI + "\n" + resourceBodyText(&r.Contents[i])
	}
	return strings.Join(parts, "\n")
}

// resourceBodyText returns a resource's text, or a placeholder for a blob.
func resourceBodyText(body *resourceBody) string {
	if body.Blob == "" {
		return body.Text
	}
	return fmt.Sprintf("[resource %s: %s, %d bytes]", body.URI, cmp.Or(body.MIMEType, "unknown type"), base64Size(body.Blob))
}

// base64Size returns the decoded size of base64 data, padded or not,
// without decoding it; characters outside the alphabet are ignored.
func base64Size(data string) int {
	n := 0
	for i := 0; i < len(data); i++ {
		c := data[i]
		if c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_' {
			n++
		}
	}
	return n * 6 / 8
}

// compactJSON returns raw without insignificant space, or raw trimmed
// when it is not valid JSON.
func compactJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return strings.TrimSpace(string(raw))
	}
	return buf.String()
}
