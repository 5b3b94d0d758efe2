package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// This file holds the editing of a config.toml by the mcp add, remove and
// import commands: a minimal splice that finds, removes and appends whole
// [mcp_servers.<name>] tables and leaves every other byte of the file as it
// was, the TOML text of one server, and the validated atomic write.

// A tomlBlock is one table of a TOML file: its header's key path and the
// byte range it spans. start includes the comment lines directly above the
// header (they describe the table); end is where the next block (or its
// comments) begins, or the end of the file.
type tomlBlock struct {
	path       []string
	start, end int
}

// tomlBlocks splits data into its tables. Bytes before the first header
// (top-level keys) are in no block. It follows multi-line strings and
// arrays, so a line starting with "[" inside them is not a header.
func tomlBlocks(data []byte) []tomlBlock {
	var blocks []tomlBlock
	depth := 0       // open [ of arrays across lines
	inString := ""   // the delimiter of an open multi-line string
	commentRun := -1 // start of the comment lines just above, or -1
	for off := 0; off < len(data); {
		end := bytes.IndexByte(data[off:], '\n')
		next := len(data)
		if end >= 0 {
			next = off + end + 1
		}
		line := string(data[off:next])
		trimmed := strings.TrimSpace(line)
		switch {
		case inString != "" || depth > 0:
			inString, depth = scanTOMLLine(line, inString, depth)
		case strings.HasPrefix(trimmed, "#"):
			if commentRun < 0 {
				commentRun = off
			}
		case strings.HasPrefix(trimmed, "["):
			start := off
			if commentRun >= 0 {
				start = commentRun
			}
			if n := len(blocks); n > 0 {
				blocks[n-1].end = start
			}
			blocks = append(blocks, tomlBlock{path: parseTOMLHeader(trimmed), start: start, end: len(data)})
			commentRun = -1
		default:
			commentRun = -1
			inString, depth = scanTOMLLine(line, inString, depth)
		}
		off = next
	}
	return blocks
}

// scanTOMLLine follows one line of TOML outside a header and returns the
// multi-line string still open at its end ("" if none) and the depth of
// arrays still open.
func scanTOMLLine(line, inString string, depth int) (string, int) {
	for i := 0; i < len(line); i++ {
		if inString != "" {
			if inString == `"""` && line[i] == '\\' {
				i++
				continue
			}
			if strings.HasPrefix(line[i:], inString) {
				i += len(inString) - 1
				inString = ""
			}
			continue
		}
		switch c := line[i]; {
		case c == '#':
			return "", depth
		case strings.HasPrefix(line[i:], `"""`), strings.HasPrefix(line[i:], `'''`):
			inString = line[i : i+3]
			i += 2
		case c == '"' || c == '\'':
			for i++; i < len(line) && line[i] != c; i++ {
				if c == '"' && line[i] == '\\' {
					i++
				}
			}
		case c == '[':
			depth++
		case c == ']':
			depth = max(depth-1, 0)
		}
	}
	return inString, depth
}

// parseTOMLHeader returns the key path of a table header line such as
// `[mcp_servers."my.server".env]  # comment`, or nil if it cannot read it.
func parseTOMLHeader(line string) []string {
	s := strings.TrimPrefix(strings.TrimPrefix(line, "["), "[")
	var path []string
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			return nil
		}
		var key string
		switch s[0] {
		case '"', '\'':
			end := 1
			for ; end < len(s) && s[end] != s[0]; end++ {
				if s[0] == '"' && s[end] == '\\' {
					end++
				}
			}
			if end >= len(s) {
				return nil
			}
			key = s[1:end]
			if s[0] == '"' {
				key = unescapeTOMLBasic(key)
			}
			s = s[end+1:]
		default:
			end := strings.IndexAny(s, ". \t]")
			if end <= 0 {
				return nil
			}
			key, s = s[:end], s[end:]
		}
		path = append(path, key)
		s = strings.TrimLeft(s, " \t")
		switch {
		case strings.HasPrefix(s, "."):
			s = s[1:]
		case strings.HasPrefix(s, "]"):
			return path
		default:
			return nil
		}
	}
}

// unescapeTOMLBasic undoes the simple escapes of a TOML basic string; keys
// rarely hold more, and a key it reads wrongly only fails to match.
func unescapeTOMLBasic(s string) string {
	return strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\t`, "\t", `\n`, "\n").Replace(s)
}

// removeServerTables returns data without the tables of server name
// ([mcp_servers.<name>] and its sub-tables), and whether there were any.
func removeServerTables(data []byte, name string) ([]byte, bool) {
	return removeBlocks(data, func(b tomlBlock) bool {
		return len(b.path) >= 2 && b.path[0] == "mcp_servers" && b.path[1] == name
	})
}

// removeBlocks returns data without the blocks that match, and whether
// there were any. A block at the end of the file takes the blank lines
// above it along, so that appending a table and removing it again gives
// back the same bytes.
func removeBlocks(data []byte, match func(tomlBlock) bool) ([]byte, bool) {
	blocks := tomlBlocks(data)
	var out []byte
	prev := 0
	found := false
	for _, b := range blocks {
		if !match(b) {
			continue
		}
		found = true
		start := b.start
		if b.end == len(data) {
			for start > prev && start >= 2 && data[start-1] == '\n' && data[start-2] == '\n' {
				start--
			}
		}
		out = append(out, data[prev:start]...)
		prev = b.end
	}
	if !found {
		return data, false
	}
	return append(out, data[prev:]...), true
}

// appendServerTable returns data with table (the text of one or more
// tables) appended after a blank line.
func appendServerTable(data []byte, table string) []byte {
	out := slices.Clone(data)
	if len(out) > 0 {
		if out[len(out)-1] != '\n' {
			out = append(out, '\n')
		}
		out = append(out, '\n')
	}
	return append(out, table...)
}

// serverTOML returns the [mcp_servers.<name>] table of raw: its set
// fields in the order of rawServer's (tomlFields). Values are written as
// given: ${VAR} stays a reference.
func serverTOML(name string, raw rawServer) string {
	return fmt.Sprintf("[mcp_servers.%s]\n", tomlKey(name)) + tomlFields(reflect.ValueOf(raw))
}

// scheduleTOML returns the [[schedules]] table of raw, its set fields in
// the order of rawSchedule's.
func scheduleTOML(raw rawSchedule) string {
	return "[[schedules]]\n" + tomlFields(reflect.ValueOf(raw))
}

// tomlFields returns the fields of the struct v that are set as
// "key = value" lines, in field order, under their toml tags (fields
// tagged "-" are left out). Unset is the zero value of a string, number
// or bool and nil for a pointer, list or map; an empty list or map that is
// not nil is written ([] means none). Maps and structs are inline tables,
// maps with their keys sorted.
func tomlFields(v reflect.Value) string {
	var b strings.Builder
	for i := range v.NumField() {
		key, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("toml"), ",")
		if key == "" || key == "-" {
			continue
		}
		if text, set := tomlValue(v.Field(i)); set {
			fmt.Fprintf(&b, "%s = %s\n", key, text)
		}
	}
	return b.String()
}

// tomlValue returns v as a TOML value and whether it is set (see
// tomlFields). It knows the kinds the config's tables use.
func tomlValue(v reflect.Value) (string, bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "", false
		}
		text, _ := tomlValue(v.Elem())
		if v.Elem().Kind() == reflect.Struct {
			return text, true
		}
		return tomlSetValue(v.Elem()), true
	case reflect.Slice, reflect.Map:
		if v.IsNil() {
			return "", false
		}
	case reflect.Struct:
		var parts []string
		for _, line := range strings.Split(strings.TrimSuffix(tomlFields(v), "\n"), "\n") {
			if line != "" {
				parts = append(parts, line)
			}
		}
		return "{ " + strings.Join(parts, ", ") + " }", true
	}
	if v.IsZero() {
		return "", false
	}
	return tomlSetValue(v), true
}

// tomlSetValue returns v, a set value, as TOML: strings quoted, floats with
// a fraction (so TOML reads a float), lists in brackets, maps as inline
// tables with their keys sorted.
func tomlSetValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.String:
		return tomlString(v.String())
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case reflect.Float64:
		text := strconv.FormatFloat(v.Float(), 'f', -1, 64)
		if !strings.Contains(text, ".") {
			text += ".0"
		}
		return text
	case reflect.Slice:
		quoted := make([]string, v.Len())
		for i := range v.Len() {
			quoted[i] = tomlSetValue(v.Index(i))
		}
		return "[" + strings.Join(quoted, ", ") + "]"
	case reflect.Map:
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, tomlKey(k)+" = "+tomlSetValue(v.MapIndex(reflect.ValueOf(k))))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	}
	// A kind no table has yet: written as a string, which the check of
	// the edited file refuses, naming the field.
	return tomlString(fmt.Sprint(v.Interface()))
}

// tomlKey returns k as a TOML key: bare when it can be, quoted otherwise.
func tomlKey(k string) string {
	if k != "" && strings.Trim(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") == "" {
		return k
	}
	return tomlString(k)
}

// tomlString returns s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteRune(c)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, c)
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// configFileForScope returns the config.toml an editing command writes:
// scope "home" (the default) is $HARNESS_HOME/config.toml, "workspace"
// is <workspace>/.harness/config.toml.
func configFileForScope(scope, workspace string, getenv func(string) (string, bool)) (string, error) {
	switch scope {
	case "", "home":
		home, err := defaultHome(getenv)
		if err != nil {
			return "", err
		}
		return filepath.Join(home, "config.toml"), nil
	case "workspace":
		return filepath.Join(workspace, ".harness", "config.toml"), nil
	}
	return "", fmt.Errorf("--scope %q: want home or workspace", scope)
}

// readConfigFile returns the contents of file, or nil if it does not exist.
func readConfigFile(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %v", file, err)
	}
	return data, nil
}

// fileServers returns the servers file defines (data its contents), by
// the same rules as loadConfig but with every ${VAR} taken as set, so that
// a variable missing from this shell is not an error. The error joins
// every problem of the file.
func fileServers(file string, data []byte) ([]serverConfig, error) {
	layer, err := parseConfigTOML(file, data, anyVarSet)
	return layer.servers, err
}

// checkConfigData returns an error unless data would be a valid config
// file at file (see fileServers): the one a write of it would fail with.
func checkConfigData(file string, data []byte) error {
	if _, err := fileServers(file, data); err != nil {
		return fmt.Errorf("%s would not be valid, so it was not changed:\n%v", file, err)
	}
	return nil
}

// writeConfigFile checks that data is a valid config file and then
// replaces file with it atomically (a temporary file in the same
// directory, renamed over it), keeping file's permissions (0600 for a new
// file) and creating its directory if needed.
func writeConfigFile(file string, data []byte) error {
	if err := checkConfigData(file, data); err != nil {
		return err
	}
	mode := fs.FileMode(0o600)
	if info, err := os.Stat(file); err == nil {
		mode = info.Mode().Perm()
	}
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %v", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".config.toml.*")
	if err != nil {
		return fmt.Errorf("write %s: %v", file, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %v", file, err)
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %v", file, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %v", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %v", file, err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write %s: %v", file, err)
	}
	return nil
}
