package main

import (
	"encoding/json"
	"fmt"
	"math"
	"net/mail"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"
)

// This file holds the requested schema of a form-mode elicitation: parsing
// it (the flat object of primitive properties the specification allows)
// and validating an answer's content against it, defaults applied.

// An elicitSchema is a parsed requestedSchema: a flat object whose
// properties are strings (with an optional format or enum), numbers,
// integers, booleans, or arrays of enumerated strings (multi-select).
type elicitSchema struct {
	Properties map[string]*elicitField
	Required   []string
	order      []string // property names, sorted, for stable prompts and errors
}

// An elicitField is one property of a requested schema.
type elicitField struct {
	Type        string          `json:"type"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	Format      string          `json:"format,omitempty"`
	MinLength   *int            `json:"minLength,omitempty"`
	MaxLength   *int            `json:"maxLength,omitempty"`
	Minimum     *float64        `json:"minimum,omitempty"`
	Maximum     *float64        `json:"maximum,omitempty"`
	MinItems    *int            `json:"minItems,omitempty"`
	MaxItems    *int            `json:"maxItems,omitempty"`
	Enum        []string        `json:"enum,omitempty"`
	OneOf       []enumOption    `json:"oneOf,omitempty"`
	AnyOf       []enumOption    `json:"anyOf,omitempty"`
	Items       *elicitField    `json:"items,omitempty"`
	Default     json.RawMessage `json:"default,omitempty"`
}

// An enumOption is one titled choice of an enum (oneOf / anyOf of consts).
type enumOption struct {
	Const string `json:"const"`
	Title string `json:"title,omitempty"`
}

// choices returns the values a string field (or an array's items) may
// take, nil when any string is allowed.
func (f *elicitField) choices() []string {
	if len(f.Enum) > 0 {
		return f.Enum
	}
	opts := f.OneOf
	if len(opts) == 0 {
		opts = f.AnyOf
	}
	if len(opts) == 0 {
		return nil
	}
	out := make([]string, len(opts))
	for i, o := range opts {
		out[i] = o.Const
	}
	return out
}

// Formats a string property may name (specification 2025-11-25).
var elicitFormats = []string{"email", "uri", "date", "date-time"}

// parseElicitSchema parses and checks a requestedSchema. An empty schema is
// an object without properties. Errors name the property.
func parseElicitSchema(raw json.RawMessage) (*elicitSchema, error) {
	var s struct {
		Type       string                  `json:"type"`
		Properties map[string]*elicitField `json:"properties"`
		Required   []string                `json:"required"`
	}
	if len(raw) > 0 && string(raw) != "null" {
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("requestedSchema: %v", err)
		}
	}
	if s.Type != "" && s.Type != "object" {
		return nil, fmt.Errorf("requestedSchema: type is %q, want object", s.Type)
	}
	schema := &elicitSchema{Properties: s.Properties, Required: s.Required}
	if schema.Properties == nil {
		schema.Properties = map[string]*elicitField{}
	}
	for name, f := range schema.Properties {
		if f == nil {
			return nil, fmt.Errorf("requestedSchema: property %q is null", name)
		}
		if err := f.check(); err != nil {
			return nil, fmt.Errorf("requestedSchema: property %q: %v", name, err)
		}
		schema.order = append(schema.order, name)
	}
	sort.Strings(schema.order)
	for _, name := range schema.Required {
		if schema.Properties[name] == nil {
			return nil, fmt.Errorf("requestedSchema: required property %q is not defined", name)
		}
	}
	return schema, nil
}

// check reports a property outside the primitive subset.
func (f *elicitField) check() error {
	switch f.Type {
	case "string":
		if f.Format != "" && !slices.Contains(elicitFormats, f.Format) {
			return fmt.Errorf("format %q is not one of %s", f.Format, strings.Join(elicitFormats, ", "))
		}
	case "number", "integer", "boolean":
	case "array":
		if f.Items == nil || (f.Items.choices() == nil) {
			return fmt.Errorf("an array property must list its choices (items.enum or items.anyOf)")
		}
	default:
		return fmt.Errorf("type %q is not a primitive (string, number, integer, boolean, or array of enumerated strings)", f.Type)
	}
	return nil
}

// A fieldError is an answer's content failing its schema; the API answers
// it with a 400 naming the field.
type fieldError struct {
	Field string
	Msg   string
}

func (e *fieldError) Error() string { return fmt.Sprintf("content.%s: %s", e.Field, e.Msg) }

// validate checks content against the schema and returns it with the
// defaults of absent properties applied. Unknown properties, absent
// required ones and values of the wrong type, format, range or choice are
// *fieldError.
func (s *elicitSchema) validate(content map[string]json.RawMessage) (map[string]any, error) {
	out := make(map[string]any, len(s.Properties))
	unknown := make([]string, 0)
	for name := range content {
		if s.Properties[name] == nil {
			unknown = append(unknown, name)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, &fieldError{Field: unknown[0], Msg: fmt.Sprintf("is not in the requested schema (fields: %s)", strings.Join(s.order, ", "))}
	}
	for _, name := range s.order {
		f := s.Properties[name]
		raw, ok := content[name]
		if !ok || string(raw) == "null" {
			if len(f.Default) > 0 {
				raw, ok = f.Default, true
			}
		}
		if !ok {
			if slices.Contains(s.Required, name) {
				return nil, &fieldError{Field: name, Msg: "is required"}
			}
			continue
		}
		v, err := f.value(raw)
		if err != nil {
			return nil, &fieldError{Field: name, Msg: err.Error()}
		}
		out[name] = v
	}
	return out, nil
}

// value decodes and checks one property's value.
func (f *elicitField) value(raw json.RawMessage) (any, error) {
	switch f.Type {
	case "string":
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("want a string, got %s", truncate(string(raw), 40))
		}
		return v, f.checkString(v)
	case "number", "integer":
		var v float64
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("want a %s, got %s", f.Type, truncate(string(raw), 40))
		}
		if f.Type == "integer" && v != math.Trunc(v) {
			return nil, fmt.Errorf("want an integer, got %v", v)
		}
		if f.Minimum != nil && v < *f.Minimum {
			return nil, fmt.Errorf("%v is below the minimum %v", v, *f.Minimum)
		}
		if f.Maximum != nil && v > *f.Maximum {
			return nil, fmt.Errorf("%v is above the maximum %v", v, *f.Maximum)
		}
		if f.Type == "integer" {
			return int64(v), nil
		}
		return v, nil
	case "boolean":
		var v bool
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("want true or false, got %s", truncate(string(raw), 40))
		}
		return v, nil
	case "array":
		var v []string
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("want an array of strings, got %s", truncate(string(raw), 40))
		}
		choices := f.Items.choices()
		for i, item := range v {
			if !slices.Contains(choices, item) {
				return nil, fmt.Errorf("item %q is not one of %s", item, strings.Join(choices, ", "))
			}
			if slices.Contains(v[:i], item) {
				return nil, fmt.Errorf("item %q is chosen twice", item)
			}
		}
		if f.MinItems != nil && len(v) < *f.MinItems {
			return nil, fmt.Errorf("choose at least %d", *f.MinItems)
		}
		if f.MaxItems != nil && len(v) > *f.MaxItems {
			return nil, fmt.Errorf("choose at most %d", *f.MaxItems)
		}
		if v == nil {
			v = []string{}
		}
		return v, nil
	}
	return nil, fmt.Errorf("unsupported type %q", f.Type)
}

// checkString checks a string's length, choices and format.
func (f *elicitField) checkString(v string) error {
	n := len([]rune(v))
	if f.MinLength != nil && n < *f.MinLength {
		return fmt.Errorf("is shorter than %d characters", *f.MinLength)
	}
	if f.MaxLength != nil && n > *f.MaxLength {
		return fmt.Errorf("is longer than %d characters", *f.MaxLength)
	}
	if choices := f.choices(); choices != nil && !slices.Contains(choices, v) {
		return fmt.Errorf("%q is not one of %s", v, strings.Join(choices, ", "))
	}
	switch f.Format {
	case "email":
		if a, err := mail.ParseAddress(v); err != nil || a.Address != v {
			return fmt.Errorf("%q is not an email address", v)
		}
	case "uri":
		if u, err := url.Parse(v); err != nil || u.Scheme == "" {
			return fmt.Errorf("%q is not an absolute URI", v)
		}
	case "date":
		if _, err := time.Parse(time.DateOnly, v); err != nil {
			return fmt.Errorf("%q is not a date (YYYY-MM-DD)", v)
		}
	case "date-time":
		if _, err := time.Parse(time.RFC3339, v); err != nil {
			return fmt.Errorf("%q is not a date-time (RFC 3339)", v)
		}
	}
	return nil
}
