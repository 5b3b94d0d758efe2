package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
)

// This file holds the HTTP headers that mirror a request of the current
// revision: Mcp-Method and Mcp-Name, and the Mcp-Param-* headers of tool
// parameters whose schema marks them with x-mcp-header, with the
// revision's value encoding and its rules for valid annotations.

// Canonical names of the request metadata headers.
const (
	headerMethod      = "Mcp-Method"
	headerName        = "Mcp-Name"
	headerParamPrefix = "Mcp-Param-"
)

// The sentinel around a base64-encoded header value.
const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// maxSafeInteger is the largest integer JavaScript represents exactly: the
// bound of integer values sent in headers.
const maxSafeInteger = 1<<53 - 1

// encodeHeaderValue returns s as a header value: as is when it is plain
// visible ASCII (spaces and tabs inside allowed), else base64 of its UTF-8
// between the sentinel, as is a plain value that looks like the sentinel.
func encodeHeaderValue(s string) string {
	if headerSafe(s) && !(strings.HasPrefix(s, base64Prefix) && strings.HasSuffix(s, base64Suffix)) {
		return s
	}
	return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
}

// headerSafe reports whether s can be sent as a header value unchanged:
// visible ASCII, space and tab, with no leading or trailing whitespace.
func headerSafe(s string) bool {
	if s != strings.Trim(s, " \t") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 || c > 0x7e) && c != '\t' {
			return false
		}
	}
	return true
}

// A headerBinding ties a tool parameter, by its path of property names, to
// the Mcp-Param-* header that mirrors it.
type headerBinding struct {
	path   []string
	header string // the x-mcp-header value, without the Mcp-Param- prefix
}

// Schema keywords whose values are data, not schemas: an x-mcp-header key
// inside them is not an annotation.
var schemaDataKeywords = map[string]bool{"default": true, "examples": true, "const": true, "enum": true}

// headerBindings returns the x-mcp-header annotations of a tool's input
// schema. It returns an error naming the property when an annotation is
// invalid: not a non-empty HTTP token, repeated (case-insensitively), on a
// type other than string, integer or boolean, or on a property not reached
// from the root through properties alone.
func headerBindings(schema json.RawMessage) ([]headerBinding, error) {
	if !bytes.Contains(schema, []byte("x-mcp-header")) {
		return nil, nil
	}
	var root any
	if err := json.Unmarshal(schema, &root); err != nil {
		return nil, nil // not a schema harnessd can read; sent as is
	}
	var (
		out  []headerBinding
		seen = map[string]bool{}
		walk func(node any, path []string, reachable bool) error
	)
	walk = func(node any, path []string, reachable bool) error {
		switch n := node.(type) {
		case []any:
			for _, item := range n {
				if err := walk(item, path, false); err != nil {
					return err
				}
			}
		case map[string]any:
			if raw, ok := n["x-mcp-header"]; ok {
				where := strings.Join(path, ".")
				if !reachable || len(path) == 0 {
					if where == "" {
						where = "(root)"
					}
					return fmt.Errorf("schema at %q: x-mcp-header is allowed only on properties reached through properties", where)
				}
				name, _ := raw.(string)
				if err := checkHeaderToken(name); err != nil {
					return fmt.Errorf("property %q: %w", where, err)
				}
				if typ, _ := n["type"].(string); typ != "string" && typ != "integer" && typ != "boolean" {
					return fmt.Errorf("property %q: x-mcp-header is allowed only on string, integer and boolean parameters, not %v", where, n["type"])
				}
				if seen[strings.ToLower(name)] {
					return fmt.Errorf("property %q: x-mcp-header %q is used twice", where, name)
				}
				seen[strings.ToLower(name)] = true
				out = append(out, headerBinding{path: append([]string(nil), path...), header: name})
			}
			for key, v := range n {
				switch {
				case key == "x-mcp-header" || schemaDataKeywords[key]:
				case key == "properties":
					props, ok := v.(map[string]any)
					if !ok {
						continue
					}
					for name, prop := range props {
						if err := walk(prop, append(path[:len(path):len(path)], name), reachable); err != nil {
							return err
						}
					}
				default:
					if err := walk(v, path, false); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := walk(root, nil, true); err != nil {
		return nil, err
	}
	return out, nil
}

// checkHeaderToken returns an error unless name is a non-empty HTTP token
// (RFC 9110 tchar).
func checkHeaderToken(name string) error {
	if name == "" {
		return fmt.Errorf("x-mcp-header must be a non-empty string")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return fmt.Errorf("x-mcp-header %q has %q, which an HTTP header name cannot", name, string(rune(c)))
		}
	}
	return nil
}

// paramHeaders returns the Mcp-Param-* headers of a call with args (a
// JSON object) to a tool with bindings: one per parameter present and not
// null, whose value is a string, a boolean or an integer within the safe
// range. It returns nil when there are none.
func paramHeaders(bindings []headerBinding, args json.RawMessage) http.Header {
	if len(bindings) == 0 {
		return nil
	}
	var h http.Header
	for _, b := range bindings {
		value, ok := lookupArgument(args, b.path)
		if !ok {
			continue
		}
		text, ok := headerText(value)
		if !ok {
			continue
		}
		if h == nil {
			h = make(http.Header, len(bindings))
		}
		h[http.CanonicalHeaderKey(headerParamPrefix+b.header)] = []string{encodeHeaderValue(text)}
	}
	return h
}

// lookupArgument returns the value at path in the JSON object args.
func lookupArgument(args json.RawMessage, path []string) (json.RawMessage, bool) {
	cur := args
	for _, name := range path {
		var obj map[string]json.RawMessage
		if json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		next, ok := obj[name]
		if !ok {
			return nil, false
		}
		cur = next
	}
	return cur, true
}

// headerText converts a parameter's JSON value to its header text: a
// string as is, a boolean as true or false, an integer in decimal. Null,
// fractions, out-of-range integers and other types give false.
func headerText(value json.RawMessage) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(value))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		if i, err := v.Int64(); err == nil && i >= -maxSafeInteger && i <= maxSafeInteger {
			return strconv.FormatInt(i, 10), true
		}
		if f, err := v.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) <= maxSafeInteger {
			return strconv.FormatInt(int64(f), 10), true
		}
	}
	return "", false
}

// keepHeaderTools returns the tools whose x-mcp-header annotations are
// valid, logging a warning for each one left out, and keeps their bindings
// for their calls (toolParamHeaders). It reuses tools' backing array.
func (c *mcpClient) keepHeaderTools(tools []toolInfo) []toolInfo {
	bindings := make(map[string][]headerBinding)
	kept := tools[:0]
	for _, tool := range tools {
		b, err := headerBindings(tool.InputSchema)
		if err != nil {
			c.logger.Warn("leaving out a tool with invalid x-mcp-header annotations", "tool", tool.Name, "err", err)
			continue
		}
		if len(b) > 0 {
			bindings[tool.Name] = b
		}
		kept = append(kept, tool)
	}
	c.stateMu.Lock()
	c.toolHeaders = bindings
	c.stateMu.Unlock()
	return kept
}

// toolParamHeaders returns the Mcp-Param-* headers of a call to the tool
// name with args, from its listed schema; nil when it has none.
func (c *mcpClient) toolParamHeaders(name string, args json.RawMessage) http.Header {
	c.stateMu.RLock()
	bindings := c.toolHeaders[name]
	c.stateMu.RUnlock()
	return paramHeaders(bindings, args)
}
