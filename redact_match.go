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
	states []acState
}

// An acState is one state of the automaton: its first child, its next
// sibling, its depth (the length of the text it stands for), its failure
// link and its output link (the nearest proper suffix state where a
// secret ends, -1 for none), the byte that leads to it, and whether a
// secret ends there.
type acState struct {
	child, sibling, depth, fail, out int32
	label                            byte
	terminal                         bool
}

// newACMatcher builds the automaton of secrets (none empty). It takes
// time and memory linear in their total length.
func newACMatcher(secrets []string) *acMatcher {
	total := 1
	for _, s := range secrets {
		total += len(s)
	}
	m := &acMatcher{states: make([]acState, 1, total)}
	m.states[acRoot] = acState{child: -1, sibling: -1, out: -1}
	for i := range m.rootNext {
		m.rootNext[i] = -1
	}
	// The trie is built a level at a time, so that states are numbered
	// breadth first: link then walks them in order, and the shallow
	// states every failure link leads to stay together.
	cur := make([]int32, len(secrets))
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	for d := range longest {
		for i, s := range secrets {
			if d >= len(s) {
				continue
			}
			next := m.next(cur[i], s[d])
			if next < 0 {
				next = m.addState(cur[i], s[d])
			}
			cur[i] = next
			if d == len(s)-1 {
				m.states[next].terminal = true
			}
		}
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
	m.wide = make([]int32, len(m.states))
	for state := range m.wide {
		m.wide[state] = -1
		n := 0
		for ch := m.states[state].child; ch >= 0 && n < wideChildren; ch = m.states[ch].sibling {
			n++
		}
		if state == acRoot || n < wideChildren {
			continue
		}
		var table [256]int32
		for i := range table {
			table[i] = -1
		}
		for ch := m.states[state].child; ch >= 0; ch = m.states[ch].sibling {
			table[m.states[ch].label] = ch
		}
		m.wide[state] = int32(len(m.tables))
		m.tables = append(m.tables, table)
	}
}

// addState adds a child of state reached by c and returns it.
func (m *acMatcher) addState(state int32, c byte) int32 {
	id := int32(len(m.states))
	m.states = append(m.states, acState{child: -1, sibling: -1, depth: m.states[state].depth + 1, label: c})
	if state == acRoot {
		m.rootNext[c] = id
	} else {
		m.states[id].sibling = m.states[state].child
		m.states[state].child = id
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
	for ch := m.states[state].child; ch >= 0; ch = m.states[ch].sibling {
		if m.states[ch].label == c {
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
	for ch := m.states[state].child; ch >= 0; ch = m.states[ch].sibling {
		fn(ch)
	}
}

// link computes the failure and output links, breadth first: the states
// are numbered so.
func (m *acMatcher) link() {
	m.children(acRoot, func(ch int32) {
		m.states[ch].fail, m.states[ch].out = acRoot, -1
	})
	for state := int32(1); state < int32(len(m.states)); state++ {
		m.children(state, func(ch int32) {
			f := m.step(m.states[state].fail, m.states[ch].label)
			m.states[ch].fail = f
			if m.states[f].terminal {
				m.states[ch].out = f
			} else {
				m.states[ch].out = m.states[f].out
			}
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
		state = m.states[state].fail
	}
}

// firstEnd returns the state's own secret if one ends there, else its
// output link: the first of the secrets ending at this point, -1 for none.
func (m *acMatcher) firstEnd(state int32) int32 {
	if m.states[state].terminal {
		return state
	}
	return m.states[state].out
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
		for st := m.firstEnd(state); st >= 0; st = m.states[st].out {
			depth := int(m.states[st].depth)
			start := end - depth
			if start > 0 && isWordByte(s[start-1]) && isWordByte(s[start]) {
				continue
			}
			if best == nil {
				best = map[int]int{}
			}
			if depth > best[start] {
				best[start] = depth
			}
		}
	}
	return best
}
