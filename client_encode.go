package main

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// This file writes a tools/call request without reflection. Every tool call
// sends one, and encoding it through encoding/json (the params struct by
// reflection, the model's arguments checked and compacted by its scanner,
// then the _meta spliced in and the envelope around it) cost a call more
// than the rest of its encoding. appendToolCall writes the same bytes in
// one buffer when the request is the common one; anything else (a name to
// escape, arguments that are not valid JSON, arguments naming the
// revision's _meta fields) takes the general path, which gives the same
// bytes or the same error (FuzzToolCallEncode checks it).

// appendToolCall returns the wire form of tools/call with id calling the
// tool name with args (not empty), the id as progress token, and meta's
// fields when meta is not nil; ok is false when the general encoding must
// write it.
func appendToolCall(id int64, name string, args json.RawMessage, meta *requestMeta) (msg []byte, ok bool) {
	if !plainJSONString(name) {
		return nil, false
	}
	r := jsonReader{b: args}
	if !r.skip(0) {
		return nil, false
	}
	if r.space(); r.i != len(args) {
		return nil, false
	}
	if r.spaced {
		var compact bytes.Buffer
		if json.Compact(&compact, args) != nil {
			return nil, false
		}
		args = compact.Bytes()
	}
	const (
		method    = "tools/call"
		params    = `","params":{"_meta":{`
		token     = `"progressToken":`
		nameKey   = `},"name":"`
		argsKey   = `","arguments":`
		tail      = `}}`
		metaNames = `"io.modelcontextprotocol/`
	)
	var fields []byte
	if meta != nil {
		// attach merges params that name its fields by decoding them.
		if bytes.Contains(args, []byte(metaNames)) || strings.HasPrefix(name, metaNames[1:]) || len(meta.encoded) < 2 {
			return nil, false
		}
		fields = meta.encoded[1 : len(meta.encoded)-1]
	}
	n := requestStartBytes + len(method) + len(params) + len(fields) + 1 + len(token) + 20 + len(nameKey) + len(name) + len(argsKey) + len(args) + len(tail)
	msg = appendRequestStart(make([]byte, 0, n), id, method)
	msg = append(msg, params...)
	if len(fields) > 0 {
		msg = append(append(msg, fields...), ',')
	}
	msg = strconv.AppendInt(append(msg, token...), id, 10)
	msg = append(append(msg, nameKey...), name...)
	msg = append(append(msg, argsKey...), args...)
	return append(msg, tail...), true
}

// plainJSONString reports whether s is written in JSON as it is, between
// quotes: printable ASCII without quotes or backslashes.
func plainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}
