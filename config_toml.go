package main

import (
	"bytes"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// This file holds the decoding of harnessd's TOML files (config.toml and
// profiles): unknown keys reported with hints, and values of the wrong
// type. The decoder stops at the first value of the wrong type and
// describes it in its own terms; tomlTypeErrors finds every one and says
// each as harnessd's JSON inputs do: the file, the table (the server's),
// the field, and what to write instead; the rest of the file is then
// decoded without them, so that every problem of a file is said at once.

// A tomlFile is the kind of TOML file decodeTOML reads, which decides the
// hints of its unknown keys.
type tomlFile int

const (
	configFile  tomlFile = iota // a config.toml
	profileFile                 // a profile: only [mcp_servers]
)

// decodeTOML decodes data, a file of the given kind, into v. It returns a
// syntax error as fatal. Otherwise it returns an error for each value of
// the wrong type (v then holds the rest of the file, so that its other
// problems are found too) and for each unknown key (only the outermost of
// nested unknown keys). md's Keys are in file order. label names the file
// in errors.
func decodeTOML(label string, data []byte, v any, kind tomlFile) (md toml.MetaData, problems []error, fatal error) {
	md, err := toml.Decode(string(data), v)
	if err != nil {
		rest, order, typeErrs := tomlTypeErrors(label, data, v)
		if len(typeErrs) == 0 {
			return md, nil, fmt.Errorf("parse %s: %v", label, err)
		}
		// The decoder stops at the first value of the wrong type: decode
		// the file without them. Should that fail, the type errors are
		// still the file's first problems.
		var buf bytes.Buffer
		if err := toml.NewEncoder(&buf).Encode(rest); err != nil {
			return order, typeErrs, nil
		}
		reflect.ValueOf(v).Elem().SetZero()
		if md, err = toml.Decode(buf.String(), v); err != nil {
			return order, typeErrs, nil
		}
		return order, append(typeErrs, unknownTOMLKeys(label, md, kind)...), nil
	}
	return md, unknownTOMLKeys(label, md, kind), nil
}

// renamedTOMLKeys are the keys of config.toml that were renamed, each with
// the hint that names its new key; the old key is refused.
var renamedTOMLKeys = map[string]string{
	"model.max_tokens": "renamed max_output_tokens (the output tokens of one model call; a run's max_tokens is its whole budget): write max_output_tokens instead",
}

// unknownTOMLKeys returns an error for each key of md that was not
// decoded (only the outermost of nested ones), with a hint by kind.
func unknownTOMLKeys(label string, md toml.MetaData, kind tomlFile) []error {
	var unknown []error
	undecoded := md.Undecoded()
	seen := make(map[string]bool, len(undecoded))
	for _, k := range undecoded {
		seen[k.String()] = true
		if len(k) > 1 && seen[k[:len(k)-1].String()] {
			continue
		}
		hint := "remove it or check its spelling"
		switch {
		case renamedTOMLKeys[k.String()] != "":
			hint = renamedTOMLKeys[k.String()]
		case len(k) == 2 && k[0] == "model":
			hint = "valid keys are " + strings.Join(taggedFields(reflect.TypeFor[tomlModel](), "toml"), ", ")
		case kind == profileFile && k[0] != "mcp_servers":
			hint = "a profile holds only [mcp_servers]; remove it"
		case len(k) == 3 && k[0] == "mcp_servers" && k[2] == "name":
			hint = "the table key [mcp_servers.<name>] is the server's name; remove this key"
		case len(k) == 3 && k[0] == "auth" && k[2] == "token":
			hint = "store the token's SHA-256 as token_sha256 (printf %s \"$TOKEN\" | sha256sum), never the token"
		case len(k) == 3 && k[0] == "mcp_servers":
			hint = "valid keys are " + strings.Join(taggedFields(reflect.TypeFor[rawServer](), "toml"), ", ")
		case len(k) == 2 && k[0] == "schedules":
			hint = "valid keys are " + scheduleFields
		}
		unknown = append(unknown, fmt.Errorf("%s: unknown key %q; %s", label, k.String(), hint))
	}
	return unknown
}

// tomlTypeErrors returns an error for every value of data (a TOML file
// that parses) whose type does not fit v's field, in file order, and the
// file decoded as a table without those values, with its metadata. label
// names the file. It returns no errors when data does not parse or every
// value fits.
func tomlTypeErrors(label string, data []byte, v any) (rest map[string]any, md toml.MetaData, errs []error) {
	md, err := toml.Decode(string(data), &rest)
	if err != nil {
		return nil, md, nil
	}
	order := map[string]int{}
	for i, k := range md.Keys() {
		// A table named only by its subtables' headers has no key of
		// its own: it takes its first subtable's place.
		for n := 1; n <= len(k); n++ {
			if _, ok := order[k[:n].String()]; !ok {
				order[k[:n].String()] = i
			}
		}
	}
	w := tomlTypeWalk{label: label, order: order}
	w.table("", nil, "", rest, reflect.TypeOf(v).Elem())
	return rest, md, w.errs
}

// A tomlTypeWalk collects the type errors of one file.
type tomlTypeWalk struct {
	label string
	order map[string]int // a key's first position in the file
	errs  []error
}

// tomlFieldsOf returns the fields of struct type t by TOML key, embedded
// structs' fields included, as the decoder sees them.
func tomlFieldsOf(t reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("toml")
		switch {
		case f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct:
			// Embedded structs count, exported or not (runLimits).
			maps.Copy(fields, tomlFieldsOf(f.Type))
		case tag == "-" || !f.IsExported():
		case tag != "":
			fields[tag] = f.Type
		default:
			fields[strings.ToLower(f.Name)] = f.Type
		}
	}
	return fields
}

// table checks the keys of the TOML table m, at key in the file, against
// struct or map type t, and removes from m each value of the wrong type.
// Errors name the section the table is in ([model], [mcp_servers.NAME],
// [[auth.keys]] #N; "" for the top level) and field, the table's dotted
// path inside it.
func (w *tomlTypeWalk) table(section string, key toml.Key, field string, m map[string]any, t reflect.Type) {
	switch {
	case len(key) == 1 && section == "", len(key) == 2 && key[0] == "mcp_servers":
		section, field = "["+key.String()+"]", ""
	}
	var fields map[string]reflect.Type
	if t.Kind() == reflect.Struct {
		fields = tomlFieldsOf(t)
	}
	names := slices.Collect(maps.Keys(m))
	pos := func(name string) int { return w.order[append(slices.Clone(key), name).String()] }
	slices.SortFunc(names, func(a, b string) int { return pos(a) - pos(b) })
	for _, name := range names {
		ft := t.Elem
		if fields != nil {
			known, ok := fields[name]
			if !ok {
				continue // an unknown key: decodeTOML reports it
			}
			ft = func() reflect.Type { return known }
		}
		if !w.value(section, append(slices.Clone(key), name), joinField(field, name), m[name], ft()) {
			delete(m, name)
		}
	}
}

// joinField appends name to the dotted field path.
func joinField(field, name string) string {
	if field == "" {
		return name
	}
	return field + "." + name
}

// value checks the value v at key (field in its section) against type t.
// It returns false when v must go: it or, in a list of values, one of its
// elements has the wrong type. The tables in v lose their wrong values
// themselves.
func (w *tomlTypeWalk) value(section string, key toml.Key, field string, v any, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	ok := false
	kind, isDuration := t.Kind(), t == reflect.TypeFor[time.Duration]()
	if isDuration {
		kind = reflect.String // decoded from a string like "15m"
	}
	switch kind {
	case reflect.String:
		_, ok = v.(string)
	case reflect.Bool:
		_, ok = v.(bool)
	case reflect.Int, reflect.Int64:
		_, ok = v.(int64)
	case reflect.Float64:
		switch v.(type) {
		case float64, int64:
			ok = true
		}
	case reflect.Slice:
		switch list := v.(type) {
		case []any:
			ok = true
			keep := true
			for i, e := range list {
				keep = w.value(section, key, fmt.Sprintf("%s[%d]", field, i), e, t.Elem()) && keep
			}
			if !keep {
				return false // its errors are said
			}
		case []map[string]any:
			if ok = t.Elem().Kind() == reflect.Struct; ok {
				for i, e := range list {
					w.table(fmt.Sprintf("[[%s]] #%d", key, i+1), key, "", e, t.Elem())
				}
			}
		}
	case reflect.Map, reflect.Struct:
		var m map[string]any
		if m, ok = v.(map[string]any); ok {
			w.table(section, key, field, m, t)
		}
	}
	if !ok {
		where := w.label + ":"
		if section != "" {
			where += " " + section
		}
		want := tomlKind(t)
		if name := key[len(key)-1]; isDuration || t.Kind() == reflect.String && (strings.HasSuffix(name, "timeout") || strings.HasSuffix(name, "_age") || strings.HasSuffix(name, "_duration")) {
			want = `a duration like "30s"`
		}
		w.errs = append(w.errs, fmt.Errorf("%s field %q: %s is not allowed here; write %s", where, field, tomlValueKind(v), want))
	}
	return ok
}

// tomlValueKind describes a decoded TOML value, never the value itself (it
// may be a secret).
func tomlValueKind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "a whole number"
	case float64:
		return "a decimal number"
	case bool:
		return "true or false"
	case time.Time:
		return "a date or time"
	case []any:
		return "a list"
	case []map[string]any:
		return "a list of tables"
	case map[string]any:
		return "a table"
	}
	return "a value"
}

// tomlKind describes the TOML value that decodes into t.
func tomlKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return tomlKind(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Float64:
		return "a number"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return "tables [[...]]"
		}
		return "a list of " + strings.TrimPrefix(tomlKind(t.Elem()), "a ") + "s"
	case reflect.Map:
		return "a table of " + strings.TrimPrefix(tomlKind(t.Elem()), "a ") + "s"
	}
	return "a table"
}
