package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// This file holds the server lists other MCP clients write: the object
// shape {"mcpServers": {...}} (Claude Desktop, Claude Code, Cursor) or
// {"servers": {...}} (VS Code) and the "type" key, accepted in
// HARNESS_MCP_SERVERS, and "harnessd mcp import", which converts those
// files and Codex's config.toml into [mcp_servers] tables.

// A serverEntry is one undecoded server object of a JSON server list.
// name is the object's key in the object shape, "" in an array.
type serverEntry struct {
	label string
	name  string
	raw   json.RawMessage
}

// serverListKeys are the keys under which clients' files hold servers.
var serverListKeys = []string{"mcpServers", "servers"}

// serverEntries splits a JSON server list into its entries: an array of
// objects with "name", or (when objects) an object holding one of
// serverListKeys whose keys are the names. label names data in errors.
func serverEntries(label string, data []byte, objects bool) ([]serverEntry, error) {
	data = bytes.TrimSpace(data)
	if objects && len(data) > 0 && data[0] == '{' {
		names, values, err := orderedObject(data)
		if err != nil {
			return nil, fmt.Errorf("%s: invalid JSON: %v", label, err)
		}
		if len(names) != 1 || !slices.Contains(serverListKeys, names[0]) {
			return nil, fmt.Errorf(`%s: a JSON object must hold only "mcpServers" or "servers"; write {"mcpServers": {"NAME": {"command": ...}}} or an array [{"name": ..., "command": ...}]`, label)
		}
		key := names[0]
		names, values, err = orderedObject(values[key])
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %v; write {\"NAME\": {\"command\": ...}, ...}", label, key, err)
		}
		entries := make([]serverEntry, len(names))
		for i, n := range names {
			entries[i] = serverEntry{label: label, name: n, raw: values[n]}
		}
		return entries, nil
	}
	example := `[{"name": ..., "command": ...}, ...]`
	if objects {
		example += ` or {"mcpServers": {"NAME": {"command": ...}}}`
	}
	raws, err := decodeJSONArray(label, example, data)
	if err != nil {
		return nil, err
	}
	entries := make([]serverEntry, len(raws))
	for i, r := range raws {
		entries[i] = serverEntry{label: fmt.Sprintf("%s[%d]", label, i), raw: r}
	}
	return entries, nil
}

// decode decodes the entry into raw strictly, takes the name from the
// object's key in the object shape, and maps "type" onto the transport.
func (e serverEntry) decode(raw *rawServer) error {
	if err := decodeEntry(e.raw, raw); err != nil {
		if e.name != "" {
			return fmt.Errorf("%s: server %q: %v", e.label, e.name, err)
		}
		return fmt.Errorf("%s: %v", e.label, err)
	}
	if e.name != "" {
		if raw.Name != "" && raw.Name != e.name {
			return fmt.Errorf("%s: server %q: name: %q differs from the key; remove it", e.label, e.name, raw.Name)
		}
		raw.Name = e.name
	}
	if raw.Type == nil {
		return nil
	}
	t, ok := typeTransport(*raw.Type)
	switch {
	case !ok:
		return fmt.Errorf("%s: server %q: type: %q is not supported; use stdio, http, streamable-http or sse", e.label, raw.Name, *raw.Type)
	case raw.Transport != nil && *raw.Transport != t:
		return fmt.Errorf("%s: server %q: type/transport: they disagree; keep one", e.label, raw.Name)
	}
	raw.Transport = &t
	return nil
}

// typeTransport maps the "type" of other clients' files to a transport.
func typeTransport(t string) (string, bool) {
	switch t {
	case "stdio":
		return transportStdio, true
	case "http", "streamable-http", "streamableHttp":
		return transportHTTP, true
	case "sse":
		return transportSSE, true
	}
	return "", false
}

// orderedObject decodes a JSON object into its values, with its keys in
// the order written.
func orderedObject(data []byte) ([]string, map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, errors.New("not a JSON object")
	}
	var names []string
	values := make(map[string]json.RawMessage)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, err
		}
		name := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, err
		}
		if _, dup := values[name]; !dup {
			names = append(names, name)
		}
		values[name] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, err
	}
	return names, values, nil
}

// An importedServer is one server of a foreign file, converted.
type importedServer struct {
	name string
	raw  rawServer
	// notes say which settings could not be converted.
	notes []string
	// err says why the server could not be converted at all.
	err error
}

// importServers reads the servers of a foreign client's file: JSON
// (mcpServers or servers) or Codex's TOML.
func importServers(file string, data []byte) ([]importedServer, error) {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return importJSON(file, trimmed)
	}
	return importCodex(file, data)
}

// importJSON converts a Claude Desktop, Claude Code, Cursor or VS Code
// file.
func importJSON(file string, data []byte) ([]importedServer, error) {
	names, values, err := orderedObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %v", file, err)
	}
	key := ""
	for _, k := range serverListKeys {
		if slices.Contains(names, k) {
			key = k
		}
	}
	if key == "" {
		return nil, fmt.Errorf(`%s: no "mcpServers" or "servers" object; give a Claude, Cursor or VS Code mcp.json or a Codex config.toml`, file)
	}
	names, values, err = orderedObject(values[key])
	if err != nil {
		return nil, fmt.Errorf("%s: %q: %v", file, key, err)
	}
	var out []importedServer
	for _, n := range names {
		var fields map[string]any
		if err := json.Unmarshal(values[n], &fields); err != nil || fields == nil {
			out = append(out, importedServer{name: n, err: errors.New("not a JSON object")})
			continue
		}
		out = append(out, convertServer(file, n, fields, jsonKeys))
	}
	return out, nil
}

// importCodex converts the [mcp_servers] tables of a Codex config.toml.
func importCodex(file string, data []byte) ([]importedServer, error) {
	var doc struct {
		MCPServers map[string]map[string]any `toml:"mcp_servers"`
	}
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return nil, fmt.Errorf("%s: neither JSON nor valid TOML: %v", file, err)
	}
	if len(doc.MCPServers) == 0 {
		return nil, fmt.Errorf("%s: no [mcp_servers] tables; give a Claude, Cursor or VS Code mcp.json or a Codex config.toml", file)
	}
	var names []string
	for _, k := range md.Keys() {
		if len(k) >= 2 && k[0] == "mcp_servers" && !slices.Contains(names, k[1]) {
			names = append(names, k[1])
		}
	}
	var out []importedServer
	for _, n := range names {
		out = append(out, convertServer(file, n, doc.MCPServers[n], codexKeys))
	}
	return out, nil
}

// A keyConverter sets what one foreign key means on raw; it returns a
// note when part of the value could not be kept.
type keyConverter func(raw *rawServer, v any) (note string, err error)

// Keys shared by every format.
var commonKeys = map[string]keyConverter{
	"command": stringInto(func(r *rawServer) *string { return &r.Command }),
	"url":     stringInto(func(r *rawServer) *string { return &r.URL }),
	"cwd":     stringInto(func(r *rawServer) *string { return &r.Cwd }),
	"args":    listInto(func(r *rawServer) *[]string { return &r.Args }),
	"env":     mapInto(func(r *rawServer) *map[string]string { return &r.Env }, func(k, v string) (string, string) { return k, v }),
}

// jsonKeys are the keys of Claude, Cursor and VS Code entries.
var jsonKeys = withCommon(map[string]keyConverter{
	"headers": mapInto(func(r *rawServer) *map[string]string { return &r.Headers }, func(k, v string) (string, string) { return k, v }),
	"type": func(r *rawServer, v any) (string, error) {
		s, ok := v.(string)
		t, known := typeTransport(s)
		if !ok || !known {
			return "", fmt.Errorf("type: %v is not one of stdio, http, streamable-http or sse", v)
		}
		r.Transport = &t
		return "", nil
	},
	"disabled": func(r *rawServer, v any) (string, error) {
		b, ok := v.(bool)
		if !ok {
			return "", errors.New("disabled: not true or false")
		}
		enabled := !b
		r.Enabled = &enabled
		return "", nil
	},
	"envFile": func(*rawServer, any) (string, error) {
		return "envFile: harnessd reads no env files; put the variables in env or in harnessd's environment", nil
	},
})

// codexKeys are the keys of Codex's [mcp_servers.<name>] tables.
var codexKeys = withCommon(map[string]keyConverter{
	"http_headers": mapInto(func(r *rawServer) *map[string]string { return &r.Headers }, func(k, v string) (string, string) { return k, v }),
	"env_http_headers": mapInto(func(r *rawServer) *map[string]string { return &r.Headers }, func(k, v string) (string, string) {
		return k, "${" + v + "}"
	}),
	"bearer_token_env_var": func(r *rawServer, v any) (string, error) {
		s, ok := v.(string)
		if !ok || !isVarName(s) {
			return "", errors.New("bearer_token_env_var: not a variable name")
		}
		setKey(&r.Headers, "Authorization", "Bearer ${"+s+"}")
		return "", nil
	},
	"env_vars": func(r *rawServer, v any) (string, error) {
		list, ok := stringList(v)
		if !ok {
			return "", errors.New("env_vars: not a list of variable names")
		}
		for _, name := range list {
			setKey(&r.Env, name, "${"+name+"}")
		}
		return "", nil
	},
	"enabled": func(r *rawServer, v any) (string, error) {
		b, ok := v.(bool)
		if !ok {
			return "", errors.New("enabled: not true or false")
		}
		r.Enabled = &b
		return "", nil
	},
	"startup_timeout_sec": secondsInto(func(r *rawServer) **string { return &r.StartupTimeout }, time.Second),
	"startup_timeout_ms":  secondsInto(func(r *rawServer) **string { return &r.StartupTimeout }, time.Millisecond),
	"tool_timeout_sec":    secondsInto(func(r *rawServer) **string { return &r.Timeout }, time.Second),
	"enabled_tools":       listInto(func(r *rawServer) *[]string { return &r.IncludeTools }),
	"disabled_tools":      listInto(func(r *rawServer) *[]string { return &r.ExcludeTools }),
})

// withCommon returns keys with commonKeys added.
func withCommon(keys map[string]keyConverter) map[string]keyConverter {
	maps.Copy(keys, commonKeys)
	return keys
}

func stringInto(field func(*rawServer) *string) keyConverter {
	return func(r *rawServer, v any) (string, error) {
		s, ok := v.(string)
		if !ok {
			return "", errors.New("not a string")
		}
		*field(r) = s
		return "", nil
	}
}

func listInto(field func(*rawServer) *[]string) keyConverter {
	return func(r *rawServer, v any) (string, error) {
		list, ok := stringList(v)
		if !ok {
			return "", errors.New("not a list of strings")
		}
		*field(r) = list
		return "", nil
	}
}

func mapInto(field func(*rawServer) *map[string]string, entry func(k, v string) (string, string)) keyConverter {
	return func(r *rawServer, v any) (string, error) {
		m, ok := v.(map[string]any)
		if !ok {
			return "", errors.New("not a table of strings")
		}
		for k, val := range m {
			s, ok := val.(string)
			if !ok {
				return "", fmt.Errorf("%s: not a string", k)
			}
			k, s = entry(k, s)
			setKey(field(r), k, s)
		}
		return "", nil
	}
}

func secondsInto(field func(*rawServer) **string, unit time.Duration) keyConverter {
	return func(r *rawServer, v any) (string, error) {
		var n float64
		switch x := v.(type) {
		case int64:
			n = float64(x)
		case float64:
			n = x
		default:
			return "", errors.New("not a number")
		}
		if n <= 0 {
			return "", errors.New("not positive")
		}
		d := time.Duration(n * float64(unit)).String()
		*field(r) = &d
		return "", nil
	}
}

// setKey sets (*m)[k] = v, making the map if needed.
func setKey(m *map[string]string, k, v string) {
	if *m == nil {
		*m = make(map[string]string)
	}
	(*m)[k] = v
}

// stringList returns v as a list of strings if it is one.
func stringList(v any) ([]string, bool) {
	items, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	for _, item := range items {
		s, ok := item.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// convertServer converts one foreign entry by keys, then rewrites its
// values into harnessd's ${VAR} syntax and checks the result.
func convertServer(file, name string, fields map[string]any, keys map[string]keyConverter) importedServer {
	imp := importedServer{name: name, raw: rawServer{Name: name}}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		convert, ok := keys[k]
		if !ok {
			imp.notes = append(imp.notes, fmt.Sprintf("%s: harnessd has no such setting", k))
			continue
		}
		note, err := convert(&imp.raw, fields[k])
		if err != nil {
			imp.err = fmt.Errorf("%s: %v", k, err)
			return imp
		}
		if note != "" {
			imp.notes = append(imp.notes, note)
		}
	}
	if err := imp.rewriteVars(); err != nil {
		imp.err = err
		return imp
	}
	if _, err := buildServer(file, originGlobal, file, imp.raw, anyVarSet); err != nil {
		imp.err = err
	}
	return imp
}

// rewriteVars rewrites every value of the server: ${env:NAME} (Cursor, VS
// Code) becomes ${NAME}, ${NAME} and ${NAME:-default} stay, and any other
// "$" becomes "$$", a literal "$". ${input:...} (a VS Code prompt) is an
// error; other editor variables are noted.
func (imp *importedServer) rewriteVars() error {
	var err error
	noted := make(map[string]bool)
	rewrite := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			if s[i] != '$' {
				b.WriteByte(s[i])
				continue
			}
			end := strings.IndexByte(s[i:], '}')
			if !strings.HasPrefix(s[i:], "${") || end < 0 {
				b.WriteString("$$")
				continue
			}
			ref := s[i+2 : i+end]
			switch name, def, _ := strings.Cut(ref, ":-"); {
			case strings.HasPrefix(ref, "env:"):
				b.WriteString("${" + strings.TrimPrefix(ref, "env:") + "}")
			case strings.HasPrefix(ref, "input:"):
				err = fmt.Errorf("${%s} asks the user for a value, which harnessd cannot; put the value or a ${VAR} in its place", ref)
				b.WriteString(s[i : i+end+1])
			case isVarName(name):
				if !noted[name] && def == "" && slices.Contains([]string{"workspaceFolder", "userHome", "pathSeparator", "CLAUDE_PROJECT_DIR"}, name) {
					noted[name] = true
					imp.notes = append(imp.notes, fmt.Sprintf("${%s} is an editor variable; harnessd reads it from its environment: set it there or write the path instead", name))
				}
				b.WriteString(s[i : i+end+1])
			default:
				b.WriteString("$$")
				continue
			}
			i += end
		}
		return b.String()
	}
	r := &imp.raw
	r.Command, r.URL, r.Cwd = rewrite(r.Command), rewrite(r.URL), rewrite(r.Cwd)
	for i := range r.Args {
		r.Args[i] = rewrite(r.Args[i])
	}
	for _, m := range []map[string]string{r.Env, r.Headers} {
		for k, v := range m {
			m[k] = rewrite(v)
		}
	}
	return err
}

const mcpImportUsage = `Usage: harnessd mcp import [flags] FILE

Converts the MCP servers of another client's file into [mcp_servers]
tables of $HARNESS_HOME/config.toml (or the workspace's with --scope
workspace): a Claude Desktop or Claude Code .mcp.json, a Cursor or VS Code
mcp.json ({"mcpServers": ...} or {"servers": ...}), or a Codex config.toml.
Prints what it converted and what it could not, and warns (on stderr) of
each ${VAR} it writes that is not set in this environment: such a server
fails to start until the variable is set where harnessd runs. A server
that the file already defines is not overwritten unless --replace is
given; --dry-run prints the tables and refuses what the write would.
After writing, it tells the daemon at HARNESS_ADDR as mcp add does.

`

// plural returns word, with an "s" unless n is 1.
func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
