package main

import (
	"errors"
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
// the field, and what to write instead.

// A tomlFile is the kind of TOML file decodeTOML reads, which decides the
// hints of its unknown keys.
type tomlFile int

const (
	configFile  tomlFile = iota // a config.toml
	profileFile                 // a profile: only [mcp_servers]
)

// decodeTOML decodes data, a file of the given kind, into v. It returns a
// syntax error, or every value of the wrong type, as fatal, and otherwise an error for each unknown
// key (only the outermost of nested unknown keys). label names the file in
// errors.
func decodeTOML(label string, data []byte, v any, kind tomlFile) (md toml.MetaData, unknown []error, fatal error) {
	md, err := toml.Decode(string(data), v)
	if err != nil {
		if typeErrs := tomlTypeErrors(label, data, v); len(typeErrs) > 0 {
			return md, nil, errors.Join(typeErrs...)
		}
		return md, nil, fmt.Errorf("parse %s: %v", label, err)
	}
	undecoded := md.Undecoded()
	seen := make(map[string]bool, len(undecoded))
	for _, k := range undecoded {
		seen[k.String()] = true
		if len(k) > 1 && seen[k[:len(k)-1].String()] {
			continue
		}
		hint := "remove it or check its spelling"
		switch {
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
	return md, unknown, nil
}

// tomlTypeErrors returns an error for every value of data (a TOML file
// that parses) whose type does not fit v's field, in file order. label
// names the file. It returns nil when data does not parse or every value
// fits.
func tomlTypeErrors(label string, data []byte, v any) []error {
	var doc map[string]any
	md, err := toml.Decode(string(data), &doc)
	if err != nil {
		return nil
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
	w.table("", nil, "", doc, reflect.TypeOf(v).Elem())
	return w.errs
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
		case tag == "-":
		case f.Anonymous && tag == "": // exported fields of an unexported type too
			maps.Copy(fields, tomlFieldsOf(f.Type))
		case !f.IsExported():
		case tag != "":
			fields[tag] = f.Type
		default:
			fields[strings.ToLower(f.Name)] = f.Type
		}
	}
	return fields
}

// table checks the keys of the TOML table m, at key in the file, against
// struct or map type t. Errors name the section the table is in ([model],
// [mcp_servers.NAME], [[auth.keys]] #N; "" for the top level) and field,
// the table's dotted path inside it.
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
		w.value(section, append(slices.Clone(key), name), joinField(field, name), m[name], ft())
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
func (w *tomlTypeWalk) value(section string, key toml.Key, field string, v any, t reflect.Type) {
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
			for i, e := range list {
				w.value(section, key, fmt.Sprintf("%s[%d]", field, i), e, t.Elem())
			}
			ok = true
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
