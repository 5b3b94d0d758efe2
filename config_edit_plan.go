package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/BurntSushi/toml"
)

// This file holds the edits of a config file planned before anything is
// written: servers added or replaced (mcp add and import, the API), a
// server removed, a server's table read back, and a [[schedules]] table
// added, changed or removed. Each returns the file's new contents, or an
// editRefusal naming the file and the server or schedule. The commands and
// the API say what to do in their own terms (a flag, a route).

// A refusalKind says why an edit was refused.
type refusalKind int

const (
	// refusedTaken: the file already defines the name.
	refusedTaken refusalKind = iota
	// refusedUnknown: the file does not define the name.
	refusedUnknown
	// refusedHandWritten: the file defines the name, but not in tables
	// the editor can find (an inline table, a dotted key).
	refusedHandWritten
	// refusedInvalid: the file has problems already, or would have them
	// after the edit.
	refusedInvalid
)

// An editRefusal is why a planned edit of a config file was refused;
// nothing was written.
type editRefusal struct {
	kind refusalKind
	msg  string
}

func (e *editRefusal) Error() string { return e.msg }

// refuse returns an editRefusal of kind with a formatted message.
func refuse(kind refusalKind, format string, args ...any) error {
	return &editRefusal{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// spliceServers writes the servers (in the order of names) to file as
// [mcp_servers.<name>] tables appended at its end. A server of the same
// name already in the file is refused (refusedTaken) unless replace, in
// which case its tables are removed first; replaced[i] says whether
// names[i] was. Nothing is written unless every server can be and the
// result is valid.
func spliceServers(file string, servers map[string]rawServer, names []string, replace bool) (replaced []bool, err error) {
	data, replaced, err := planSplice(file, servers, names, replace)
	if err != nil {
		return nil, err
	}
	if err := writeConfigFile(file, data); err != nil {
		return nil, err
	}
	return replaced, nil
}

// planSplice is spliceServers without the write: it returns what file
// would hold, or the error spliceServers would refuse with (a dry run
// reports it).
func planSplice(file string, servers map[string]rawServer, names []string, replace bool) (data []byte, replaced []bool, err error) {
	data, existing, err := readCheckedConfig(file)
	if err != nil {
		return nil, nil, err
	}
	var exists []string
	replaced = make([]bool, len(names))
	for i, name := range names {
		if !slices.ContainsFunc(existing, func(s serverConfig) bool { return s.Name == name }) {
			continue
		}
		if !replace {
			exists = append(exists, fmt.Sprintf("%q", name))
			continue
		}
		var found bool
		data, found = removeServerTables(data, name)
		if !found {
			return nil, nil, refuse(refusedHandWritten, "server %q in %s is not written as [mcp_servers.%s] tables, so it cannot be replaced; edit the file by hand", name, file, tomlKey(name))
		}
		replaced[i] = true
	}
	if len(exists) > 0 {
		return nil, nil, refuse(refusedTaken, "%s already defines server %s", file, strings.Join(exists, ", "))
	}
	var tables []string
	for _, name := range names {
		tables = append(tables, serverTOML(name, servers[name]))
	}
	data = appendServerTable(data, strings.Join(tables, "\n"))
	if err := checkConfigData(file, data); err != nil {
		return nil, nil, refuse(refusedInvalid, "%v", err)
	}
	return data, replaced, nil
}

// readCheckedConfig returns the contents of file (nil when it does not
// exist) and its servers, or a refusal when the file has problems: an
// edit never builds on a file that would not load.
func readCheckedConfig(file string) ([]byte, []serverConfig, error) {
	data, err := readConfigFile(file)
	if err != nil {
		return nil, nil, err
	}
	servers, err := fileServers(file, data)
	if err != nil {
		return nil, nil, refuse(refusedInvalid, "%s has problems; fix them first, nothing was changed:\n%v", file, err)
	}
	return data, servers, nil
}

// planRemoveServer returns what file would hold without the tables of
// server name: refusedUnknown when the file does not define it,
// refusedHandWritten when it does but not as [mcp_servers.<name>] tables.
func planRemoveServer(file, name string) ([]byte, error) {
	data, existing, err := readCheckedConfig(file)
	if err != nil {
		return nil, err
	}
	out, found := removeServerTables(data, name)
	if !found {
		if slices.ContainsFunc(existing, func(s serverConfig) bool { return s.Name == name }) {
			return nil, refuse(refusedHandWritten, "server %q in %s is not written as [mcp_servers.%s] tables", name, file, tomlKey(name))
		}
		return nil, refuse(refusedUnknown, "%s defines no server %q", file, name)
	}
	return out, nil
}

// fileServerTable returns the [mcp_servers.<name>] table of file as
// written (${VAR} unexpanded), its Name set; refusedUnknown when the file
// has none.
func fileServerTable(file, name string) (rawServer, error) {
	data, _, err := readCheckedConfig(file)
	if err != nil {
		return rawServer{}, err
	}
	var doc struct {
		MCPServers map[string]rawServer `toml:"mcp_servers"`
	}
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return rawServer{}, refuse(refusedInvalid, "%s: %v", file, err)
	}
	raw, ok := doc.MCPServers[name]
	if !ok {
		return rawServer{}, refuse(refusedUnknown, "%s defines no server %q", file, name)
	}
	raw.Name = name
	return raw, nil
}

// planScheduleEdit returns what file would hold once change has decided
// the [[schedules]] table of name: change gets the table as the file has
// it (nil when there is none) and returns the table to write instead (nil
// removes it), or an error returned as is. A changed table moves to the
// end of the file. The result must be a valid file (refusedInvalid).
func planScheduleEdit(file, name string, change func(current *rawSchedule) (*rawSchedule, error)) ([]byte, error) {
	data, _, err := readCheckedConfig(file)
	if err != nil {
		return nil, err
	}
	var current *rawSchedule
	out, found := removeBlocks(data, func(b tomlBlock) bool {
		s, ok := scheduleBlock(data, b)
		if ok && s.Name == name {
			current = &s
		}
		return ok && s.Name == name
	})
	if !found && fileDefinesSchedule(data, name) {
		return nil, refuse(refusedHandWritten, "schedule %q in %s is not written as a [[schedules]] table of its own; edit the file by hand", name, file)
	}
	next, err := change(current)
	if err != nil {
		return nil, err
	}
	if next != nil {
		out = appendServerTable(out, scheduleTOML(*next))
	}
	if err := checkConfigData(file, out); err != nil {
		return nil, refuse(refusedInvalid, "%v", err)
	}
	return out, nil
}

// scheduleBlock returns the schedule the block b of data defines, if it
// is a [[schedules]] table.
func scheduleBlock(data []byte, b tomlBlock) (rawSchedule, bool) {
	if len(b.path) != 1 || b.path[0] != "schedules" {
		return rawSchedule{}, false
	}
	var doc struct {
		Schedules []rawSchedule `toml:"schedules"`
	}
	if _, err := toml.Decode(string(data[b.start:b.end]), &doc); err != nil || len(doc.Schedules) != 1 {
		return rawSchedule{}, false
	}
	return doc.Schedules[0], true
}

// fileDefinesSchedule reports whether data defines a schedule named name
// in any form.
func fileDefinesSchedule(data []byte, name string) bool {
	var doc struct {
		Schedules []rawSchedule `toml:"schedules"`
	}
	toml.Decode(string(data), &doc) // the file was checked
	return slices.ContainsFunc(doc.Schedules, func(s rawSchedule) bool { return s.Name == name })
}

// A configRefusal is a configuration that harnessd would not load.
type configRefusal struct{ err error }

func (e *configRefusal) Error() string { return e.err.Error() }
