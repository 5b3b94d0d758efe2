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
// unknown fields and trailing data. fields lists v's JSON fields for the
// hint of an unknown one. A type error names the field and the kind of
// value it takes, never the value (it may be a secret). Other errors
// (an empty input wraps io.EOF; a read error such as *http.MaxBytesError)
// are returned unchanged for the caller to describe.
func decodeStrict(r io.Reader, v any, fields string) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		_, err = dec.Token()
		switch {
		case err == io.EOF:
			return nil
		case err == nil:
			return errors.New("more than one JSON value: send one object")
		}
	}
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		kind, _, _ := strings.Cut(typeErr.Value, " ") // the rest may be a secret
		return fmt.Errorf("field %q: a JSON %s is not allowed here; write %s", typeErr.Field, kind, jsonKind(typeErr.Type))
	}
	// encoding/json has no error type for an unknown field: its message is
	// the only way to tell one.
	if field, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s; valid fields are %s", field, fields)
	}
	return err
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
// decodeStrict; fields lists v's fields for the hint of an unknown one.
func decodeEntry(data []byte, v any, fields string) error {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return errors.New("not a JSON object; each entry must be {...}")
	}
	return decodeStrict(bytes.NewReader(data), v, fields)
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
