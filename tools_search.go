package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// This file holds find_tool: the search index over tool names, tags and
// descriptions, its ranking, and select: activation.

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

// findToolEntry returns find_tool with a description that counts the
// deferred tools per server; the list of servers is capped so the first
// request stays small however many tools there are. Nil sets are fetched.
func (c *catalog) findToolEntry(sets []*serverTools) toolEntry {
	if sets == nil {
		sets = c.reachable()
	}
	servers := make([]*serverTools, 0, len(sets))
	total := 0
	for _, st := range sets[1:] {
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
	b.WriteString("; built-in: " + strings.Join(deferredBuiltinNames(), ", ") + ". ")
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
// text for the model listing what was activated, and naming the servers
// that are not ready whose tools a query could not search or a select
// named (tools_unready.go); bad arguments, or a select naming no tool it
// could activate, give an error whose text is meant for the model.
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
	sets := c.reachable()
	unready := c.unreadyServers()
	if rest, ok := cutPrefixFold(query, "select:"); ok {
		return c.selectTools(sets, unready, rest)
	}
	found := search(sets, query, limit)
	note, held := unlistedNote(unready), heldNote(sets)
	if len(found) == 0 {
		text := fmt.Sprintf("No tools match %q. Try other words, or select:name for an exact name.", query)
		for _, n := range []string{note, held} {
			if n != "" {
				text += "\n" + n
			}
		}
		return text, nil
	}
	return c.activateFound(found, unready, note, held), nil
}

// selectTools activates the comma-separated names in list, at most
// maxFindResults of them; a name of a server in unready that is not found
// is reported with why that server cannot be used.
func (c *catalog) selectTools(sets []*serverTools, unready []serverStatus, list string) (string, error) {
	var found []toolEntry
	var unknown, pending []string
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		e, ok := lookupIn(sets, name)
		if !ok {
			e, ok = lookupIn(sets, strings.ToLower(name))
		}
		st, isUnready := unreadyServerOf(unready, name)
		heldWhy, isHeld := heldReason(sets, name)
		switch {
		case !ok && isHeld:
			pending = append(pending, name+": "+heldWhy)
		case !ok && isUnready:
			pending = append(pending, name+": "+unreadyReason(st))
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
	var notes []string
	if len(unknown) > 0 {
		notes = append(notes, "Unknown tools, not activated: "+strings.Join(unknown, ", "))
	}
	if len(pending) > 0 {
		notes = append(notes, "Not available yet: "+strings.Join(pending, "; "))
	}
	if len(found) == 0 {
		switch {
		case len(unknown) == 0 && len(pending) == 0:
			return "", errors.New("find_tool: select: no tool names given; use select:name1,name2")
		case len(unknown) == 0:
			return "", fmt.Errorf("find_tool: select: %s", strings.Join(pending, "; "))
		}
		err := fmt.Sprintf("find_tool: select: unknown tools %s; search with words to find the right names", strings.Join(unknown, ", "))
		if len(pending) > 0 {
			err += "; not available yet: " + strings.Join(pending, "; ")
		}
		return "", errors.New(err)
	}
	return c.activateFound(found, unready, notes...), nil
}

// activateFound activates found and describes it for the model: each
// tool, with why its server cannot be used now when it is in unready,
// then the notes, one a line ("" skipped).
func (c *catalog) activateFound(found []toolEntry, unready []serverStatus, notes ...string) string {
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
	reasons := unreadyNotes(found, unready)
	for _, e := range found {
		fmt.Fprintf(&b, "- %s: %s\n", e.Name, oneLine(e.Description, findLineLen))
		if reason := reasons[e.Name]; reason != "" {
			fmt.Fprintf(&b, "  (not callable now: %s)\n", reason)
		}
	}
	for _, note := range notes {
		if note != "" {
			b.WriteString(note + "\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
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

// search returns the best `limit` entries of sets for query, best first.
// A tool ranks by how many query tokens it matches, then by where they
// match (tool name over server name over tags over description; exact
// over prefix), then by how much of its own name the query covers, then
// by name.
func search(sets []*serverTools, query string, limit int) []toolEntry {
	tokens := searchTokens(query, false)
	if len(tokens) > maxQueryTokens {
		tokens = tokens[:maxQueryTokens]
	}
	if len(tokens) == 0 {
		return nil
	}
	base := make([]int32, len(sets)+1)
	for i, st := range sets {
		base[i+1] = base[i] + int32(len(st.entries))
	}
	s := scratchPool.Get().(*searchScratch)
	defer scratchPool.Put(s)
	s.cells = slices.Grow(s.cells[:0], int(base[len(sets)]))[:base[len(sets)]]
	s.hits = s.hits[:0]
	defer func() {
		for _, ci := range s.hits {
			s.cells[ci] = searchCell{}
		}
	}()

	for _, q := range tokens {
		s.touched = s.touched[:0]
		for vi, st := range sets {
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
		vi := sort.Search(len(sets), func(k int) bool { return base[k+1] > ci })
		st, ei := sets[vi], ci-base[vi]
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
