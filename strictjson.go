package main

import (
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
