package main

// This file holds the matcher behind the redactor: an Aho–Corasick
// automaton over a set of secrets, built once per set, that finds every
// secret in a text in one pass whatever their number and lengths.

// acRoot is the automaton's start state.
const acRoot = 0

// An acMatcher finds the secrets of one set in a text. Its trie keeps
// each state's children as a sibling list (the root's, and those of any
// state with many children, in a table), with
// failure links and, for each state, the nearest state along its failure
// chain where a secret ends. Read-only once built, so safe for concurrent
// use.
type acMatcher struct {
	rootNext [256]int32
	// wide is, per state, its index in tables (-1: its children are only
	// in the sibling list).
	wide   []int32
	tables [][256]int32
	// Per state (index): its first child, its next sibling, the byte that
	// leads to it, its depth (the length of the text it stands for),
	// whether a secret ends there, its failure link and its output link
	// (the nearest proper suffix state where a secret ends, -1 for none).
	child, sibling []int32
	label          []byte
	depth          []int32
	terminal       []bool
	fail, out      []int32
}

// newACMatcher builds the automaton of secrets (none empty). It takes
// time and memory linear in their total length.
func newACMatcher(secrets []string) *acMatcher {
	m := &acMatcher{
		child: make([]int32, 1), sibling: make([]int32, 1), label: make([]byte, 1),
		depth: make([]int32, 1), terminal: make([]bool, 1),
	}
	m.child[0], m.sibling[0] = -1, -1
	for i := range m.rootNext {
		m.rootNext[i] = -1
	}
	for _, s := range secrets {
		state := int32(acRoot)
		for i := 0; i < len(s); i++ {
			next := m.next(state, s[i])
			if next < 0 {
				next = m.addState(state, s[i])
			}
			state = next
		}
		m.terminal[state] = true
	}
	m.widen()
	m.link()
	return m
}

// wideChildren is the number of children from which a state's are also
// kept in a table: a sibling list that long costs more to scan than the
// table's memory.
const wideChildren = 6

// widen gives every state with wideChildren children or more a table.
func (m *acMatcher) widen() {
	m.wide = make([]int32, len(m.child))
	for state := range m.wide {
		m.wide[state] = -1
		n := 0
		for ch := m.child[state]; ch >= 0 && n < wideChildren; ch = m.sibling[ch] {
			n++
		}
		if state == acRoot || n < wideChildren {
			continue
		}
		var table [256]int32
		for i := range table {
			table[i] = -1
		}
		for ch := m.child[state]; ch >= 0; ch = m.sibling[ch] {
			table[m.label[ch]] = ch
		}
		m.wide[state] = int32(len(m.tables))
		m.tables = append(m.tables, table)
	}
}

// addState adds a child of state reached by c and returns it.
func (m *acMatcher) addState(state int32, c byte) int32 {
	id := int32(len(m.child))
	m.child = append(m.child, -1)
	m.label = append(m.label, c)
	m.depth = append(m.depth, m.depth[state]+1)
	m.terminal = append(m.terminal, false)
	if state == acRoot {
		m.sibling = append(m.sibling, -1)
		m.rootNext[c] = id
	} else {
		m.sibling = append(m.sibling, m.child[state])
		m.child[state] = id
	}
	return id
}

// next returns the child of state reached by c, -1 for none.
func (m *acMatcher) next(state int32, c byte) int32 {
	if state == acRoot {
		return m.rootNext[c]
	}
	if m.wide != nil && m.wide[state] >= 0 {
		return m.tables[m.wide[state]][c]
	}
	for ch := m.child[state]; ch >= 0; ch = m.sibling[ch] {
		if m.label[ch] == c {
			return ch
		}
	}
	return -1
}

// children calls fn with each child of state.
func (m *acMatcher) children(state int32, fn func(int32)) {
	if state == acRoot {
		for _, ch := range m.rootNext {
			if ch >= 0 {
				fn(ch)
			}
		}
		return
	}
	for ch := m.child[state]; ch >= 0; ch = m.sibling[ch] {
		fn(ch)
	}
}

// link computes the failure and output links, breadth first.
func (m *acMatcher) link() {
	n := len(m.child)
	m.fail = make([]int32, n)
	m.out = make([]int32, n)
	m.out[acRoot] = -1
	queue := make([]int32, 0, n)
	m.children(acRoot, func(ch int32) {
		m.fail[ch], m.out[ch] = acRoot, -1
		queue = append(queue, ch)
	})
	for head := 0; head < len(queue); head++ {
		state := queue[head]
		m.children(state, func(ch int32) {
			f := m.step(m.fail[state], m.label[ch])
			m.fail[ch] = f
			if m.terminal[f] {
				m.out[ch] = f
			} else {
				m.out[ch] = m.out[f]
			}
			queue = append(queue, ch)
		})
	}
}

// step returns the state after reading c in state.
func (m *acMatcher) step(state int32, c byte) int32 {
	for {
		if next := m.next(state, c); next >= 0 {
			return next
		}
		if state == acRoot {
			return acRoot
		}
		state = m.fail[state]
	}
}

// firstEnd returns the state's own secret if one ends there, else its
// output link: the first of the secrets ending at this point, -1 for none.
func (m *acMatcher) firstEnd(state int32) int32 {
	if m.terminal[state] {
		return state
	}
	return m.out[state]
}

// occurs reports whether any secret appears in s, anywhere.
func (m *acMatcher) occurs(s []byte) bool {
	state := int32(acRoot)
	for _, c := range s {
		state = m.step(state, c)
		if m.firstEnd(state) >= 0 {
			return true
		}
	}
	return false
}

// wholeMatches returns, for each offset of s where a secret standing as a
// whole token starts (not continuing a word on either side), the length of
// the longest such secret there; nil when there is none. One pass over s;
// the work per word boundary is bounded by the secrets that end there.
func (m *acMatcher) wholeMatches(s string) map[int]int {
	var best map[int]int
	state := int32(acRoot)
	for j := 0; j < len(s); j++ {
		state = m.step(state, s[j])
		end := j + 1
		if end < len(s) && isWordByte(s[end-1]) && isWordByte(s[end]) {
			continue // inside a word: no secret ends here
		}
		for st := m.firstEnd(state); st >= 0; st = m.out[st] {
			start := end - int(m.depth[st])
			if start > 0 && isWordByte(s[start-1]) && isWordByte(s[start]) {
				continue
			}
			if best == nil {
				best = map[int]int{}
			}
			if int(m.depth[st]) > best[start] {
				best[start] = int(m.depth[st])
			}
		}
	}
	return best
}
