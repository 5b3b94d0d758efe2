package main

import (
	"path"
	"slices"
)

// This file holds what an API key's runs may reach: the tools and the
// servers of [[auth.keys]] and HARNESS_API_KEYS entries. A run started
// with a key offers, finds and calls only those; connect_mcp and a run's
// own servers stay within them.

// toolLimits bound what a run reaches. Tools are globs (path.Match) over
// the names the model sees: mcp_<server>_<tool> and the built-in tools;
// servers are globs over server names. Empty means no bound of that kind.
// find_tool is always offered: it finds only what the limits leave.
type toolLimits struct {
	Tools   []string `json:"tools,omitempty"`
	Servers []string `json:"servers,omitempty"`
}

// bounded reports whether l bounds anything.
func (l toolLimits) bounded() bool { return len(l.Tools) > 0 || len(l.Servers) > 0 }

// allowsServer reports whether the server named name is within l.
func (l toolLimits) allowsServer(name string) bool {
	return len(l.Servers) == 0 || globsMatch(l.Servers, name)
}

// allowsTool reports whether the tool the model sees as name, of server
// ("" for a built-in), is within l.
func (l toolLimits) allowsTool(server, name string) bool {
	if name == toolFindTool {
		return true
	}
	if server != "" && !l.allowsServer(server) {
		return false
	}
	return len(l.Tools) == 0 || globsMatch(l.Tools, name)
}

// globsMatch reports whether any of globs matches name; bad globs were
// refused when the key was read.
func globsMatch(globs []string, name string) bool {
	return slices.ContainsFunc(globs, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	})
}
