package main

import (
	"fmt"
	"slices"
	"strings"
)

// This file holds what find_tool says of the servers a run reaches that
// are not ready: one still connecting has listed no tools, so a select of
// its tools or a query meant for them finds nothing, and the model is told
// which server that is and what to do, instead of "unknown tools".

// unreadyServers returns the servers of the run that are not ready now,
// from the catalog's unready source (none without one).
func (c *catalog) unreadyServers() []serverStatus {
	if c.unready == nil {
		return nil
	}
	servers := c.unready()
	if len(c.limits.Servers) > 0 {
		servers = slices.DeleteFunc(servers, func(st serverStatus) bool { return !c.limits.allowsServer(st.Name) })
	}
	return servers
}

// unreadyReason says, for the model, why the server st cannot be used now
// and what to do.
func unreadyReason(st serverStatus) string {
	switch st.Status {
	case statusConnecting:
		return fmt.Sprintf("server %q is still connecting and has not listed its tools yet; call find_tool again in a few seconds", st.Name)
	case statusDisabled:
		return fmt.Sprintf("server %q is disabled in the configuration", st.Name)
	}
	reason := fmt.Sprintf("server %q is %s", st.Name, st.Status)
	if cause := strings.TrimPrefix(st.Error, fmt.Sprintf("server %q: ", st.Name)); cause != "" {
		reason += ": " + cause
	}
	return reason
}

// unreadyServerOf returns the server of unready whose tools' names begin
// like name (mcp_<server>_), the longest such prefix winning, and false
// when there is none.
func unreadyServerOf(unready []serverStatus, name string) (serverStatus, bool) {
	var best serverStatus
	found := false
	for _, st := range unready {
		prefix := mcpToolPrefix(st.Name)
		if strings.HasPrefix(strings.ToLower(name), prefix) && (!found || len(prefix) > len(mcpToolPrefix(best.Name))) {
			best, found = st, true
		}
	}
	return best, found
}

// unlistedNote returns the line that tells the model which servers' tools
// a query could not search, because they have listed none yet; "" when
// every server has listed its tools.
func unlistedNote(unready []serverStatus) string {
	var reasons []string
	for _, st := range unready {
		if len(st.Tools) == 0 && st.Status != statusDisabled {
			reasons = append(reasons, unreadyReason(st))
		}
	}
	if len(reasons) == 0 {
		return ""
	}
	return "Not searched, no tools listed yet: " + strings.Join(reasons, "; ")
}

// unreadyNotes returns, for each tool of found whose server is not ready,
// the reason to show beside it, by tool name.
func unreadyNotes(found []toolEntry, unready []serverStatus) map[string]string {
	notes := map[string]string{}
	for _, e := range found {
		for _, st := range unready {
			if e.Server == st.Name {
				notes[e.Name] = unreadyReason(st)
			}
		}
	}
	return notes
}
