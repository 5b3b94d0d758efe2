package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// This file holds the strict decoding of harnessd's own JSON inputs (the
// entries of HARNESS_MCP_SERVERS, HARNESS_API_KEYS and a run's mcp_servers,
// and API request bodies): unknown fields, type errors and trailing data
// are refused with messages that say what to write instead.

// decodeStrict decodes exactly one JSON value from r into v, refusing
// unknown fields and trailing data. The hint of an unknown field lists
// v's JSON fields (jsonFields). A type error names the field and the kind of
// value it takes, never the value (it may be a secret). Other errors
// (an empty input wraps io.EOF; a read error such as *http.MaxBytesError)
// are returned unchanged for the caller to describe.
func decodeStrict(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	// Last-wins on a repeated key would let a proxy in front of harnessd
	// read another request than harnessd does.
	if key, ok := duplicateKey(data); ok {
		return fmt.Errorf("duplicate key %q: send each key once", key)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		// Whatever follows the value, even text that is not JSON, is
		// the same mistake: say that, not what the scanner met in it.
		if _, err := dec.Token(); err != io.EOF {
			return errors.New("data after the JSON object: send exactly one JSON object")
		}
		return nil
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		kind, _, _ := strings.Cut(typeErr.Value, " ") // the rest may be a secret
		return fmt.Errorf("field %q: a JSON %s is not allowed here; write %s", typeErr.Field, kind, jsonKind(typeErr.Type))
	}
	// encoding/json has no error type for an unknown field: its message is
	// the only way to tell one.
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s; valid fields are %s", field, jsonFields(v))
	}
	return err
}

// duplicateKey returns the first key that appears twice in one object of
// the JSON text data, at any depth; false when there is none or data is
// not JSON (decoding reports that).
func duplicateKey(data []byte) (string, bool) {
	type frame struct {
		keys    map[string]struct{} // nil for an array
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var stack []*frame
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].keys != nil {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n := len(stack); n > 0 && stack[n-1].wantKey {
			top := stack[n-1]
			key, isKey := tok.(string)
			if !isKey { // the closing brace
				stack = stack[:n-1]
				valueDone()
				continue
			}
			if _, dup := top.keys[key]; dup {
				return key, true
			}
			top.keys[key] = struct{}{}
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]struct{}{}, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
}

// decodeJSONArray splits the JSON array data into its elements, undecoded,
// so each can be checked on its own. label names the source in errors and
// example shows what to write instead of anything but an array.
func decodeJSONArray(label, example string, data []byte) ([]json.RawMessage, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '[' {
		return nil, fmt.Errorf("%s: not a JSON array; write %s", label, example)
	}
	var entries []json.RawMessage
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("%s: invalid JSON: %v", label, err)
	}
	return entries, nil
}

// decodeEntry decodes one JSON object of an array into v with
// decodeStrict.
func decodeEntry(data []byte, v any) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return errors.New("not a JSON object; each entry must be {...}")
	}
	return decodeStrict(bytes.NewReader(data), v)
}

// jsonFields lists the JSON fields of the struct v is or points to, in
// declaration order, for error hints: the names of their json tags (the
// field name without one), without those tagged "-".
func jsonFields(v any) string {
	return strings.Join(taggedFields(reflect.TypeOf(v), "json"), ", ")
}

// taggedFields returns the names the tag gives the exported fields of the
// struct t is or points to, in order; fields of embedded structs are
// inlined. A field tagged "-" is left out; an untagged one goes by its Go
// name. Any other type has no fields.
func taggedFields(t reflect.Type, tag string) []string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get(tag), ",")
		switch {
		case name == "-":
			continue
		case f.Anonymous && name == "":
			names = append(names, taggedFields(f.Type, tag)...)
			continue
		case !f.IsExported():
			continue
		case name == "":
			name = f.Name
		}
		names = append(names, name)
	}
	return names
}

// jsonKind describes the JSON value that decodes into t, for error messages.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonKind(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int:
		return "a whole number"
	case reflect.Slice:
		return "a list of strings"
	case reflect.Map:
		return "an object of strings"
	}
	return "a JSON object"
}
