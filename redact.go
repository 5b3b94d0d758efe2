package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// This file holds the redaction of secrets: server env and header values
// and model keys cut out of what harnessd logs, stores and answers.

// redactSecrets returns s with every one of secrets replaced by
// "[redacted]": what a server prints or answers may quote the values it
// was configured with.
func redactSecrets(s string, secrets []string) string {
	for _, secret := range secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}

// A redactor hides server secrets (env and header values) from API
// answers: status errors and stderr tails may quote them. A zero
// redactor hides nothing. Safe for concurrent use (never modified).
type redactor struct {
	secrets []string // distinct values, at least minSecretLength long
}

// newRedactor returns a redactor for the env and header values of servers.
func newRedactor(servers ...[]serverConfig) redactor {
	return redactor{}.with(servers...)
}

// with returns a redactor that also hides the values of servers.
func (rd redactor) with(servers ...[]serverConfig) redactor {
	out := redactor{secrets: slices.Clone(rd.secrets)}
	for _, list := range servers {
		for _, s := range list {
			for _, v := range s.secretValues() {
				if !slices.Contains(out.secrets, v) {
					out.secrets = append(out.secrets, v)
				}
			}
		}
	}
	// Longest first, so a secret that contains another goes whole.
	slices.SortFunc(out.secrets, func(a, b string) int { return len(b) - len(a) })
	return out
}

// marshal encodes v as JSON (indented or compact) with every secret
// inside a string replaced by "[redacted]". The JSON is only rebuilt when
// a secret occurs, so ordinary answers keep their field order.
func (rd redactor) marshal(v any, indent bool) []byte {
	b := encodeCompact(v)
	if rd.occurs(b) {
		var tree any
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		if dec.Decode(&tree) == nil {
			b = encodeCompact(rd.walk(tree))
		}
	}
	if !indent {
		return b
	}
	var out bytes.Buffer
	if json.Indent(&out, b, "", "  ") != nil {
		return append(b, '\n')
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// encodeCompact encodes v on one line, leaving <, > and & as they are
// (answers are read with curl, not embedded in HTML). Our answer types
// always encode.
func encodeCompact(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte(`{"error":{"code":"internal","message":"encode answer failed"}}`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// occurs reports whether a secret appears in encoded JSON, in the escaped
// form encodeCompact gives it inside a string.
func (rd redactor) occurs(encoded []byte) bool {
	for _, s := range rd.secrets {
		esc := encodeCompact(s)
		if bytes.Contains(encoded, esc[1:len(esc)-1]) {
			return true
		}
	}
	return false
}

// walk returns tree with the secrets replaced in every string and key.
func (rd redactor) walk(tree any) any {
	switch t := tree.(type) {
	case string:
		return redactSecrets(t, rd.secrets)
	case []any:
		for i := range t {
			t[i] = rd.walk(t[i])
		}
		return t
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, v := range t {
			out[rd.walk(k).(string)] = rd.walk(v)
		}
		return out
	}
	return tree
}
