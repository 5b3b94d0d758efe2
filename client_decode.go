package main

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// This file decodes a tools/call result without reflection. Every tool call
// decodes one, and encoding/json spends most of a call's decoding time
// checking the whole answer and then walking the callResult type by
// reflection. decodeCallResult reads the common shape in one pass that
// also validates what it skips (structuredContent, _meta, fields harnessd
// does not read), and hands anything it is not certain about to
// encoding/json: a type it does not expect, a key that is escaped, not
// ASCII, repeated or a case variant of a field's name, deep nesting, or
// any syntax error. So it gives encoding/json's result for every input it
// accepts and encoding/json's error for every input it does not
// (FuzzCallResultDecode checks both).

// decodeCallResult decodes raw, a tools/call result, as json.Unmarshal
// into a callResult would; Raw is raw.
func decodeCallResult(raw []byte) (callResult, error) {
	r := jsonReader{b: raw}
	res := callResult{Raw: raw}
	if r.callResult(&res) {
		return res, nil
	}
	res = callResult{Raw: raw}
	err := json.Unmarshal(raw, &res)
	return res, err
}

// A jsonReader reads one JSON value from b. Its methods return false at
// anything they do not decode exactly as encoding/json would, leaving the
// value to it.
type jsonReader struct {
	b []byte
	i int
	// spaced is set once space has skipped any.
	spaced bool
}

// maxFastDepth bounds the nesting the reader validates itself; deeper
// values go to encoding/json, which has its own limit.
const maxFastDepth = 256

// callResult decodes the whole of r.b, which must hold one object, into
// res (zero but for Raw).
func (r *jsonReader) callResult(res *callResult) bool {
	ok := r.object(0, []string{"content", "structuredContent", "isError"}, func(field int) bool {
		switch field {
		case 0:
			return r.contentBlocks(&res.Content)
		case 1:
			r.space()
			start := r.i
			ok := r.skip(0)
			res.StructuredContent = r.b[start:r.i:r.i]
			return ok
		default:
			return r.boolean(&res.IsError)
		}
	})
	r.space()
	return ok && r.i == len(r.b)
}

// object decodes one object, at depth, whose fields are named by keys:
// value(i) decodes the value of keys[i]. The value of any other key is
// validated and skipped; a key that only a case-insensitive match would
// take for one of keys (which encoding/json decodes into the field), or
// that comes twice, fails.
func (r *jsonReader) object(depth int, keys []string, value func(field int) bool) bool {
	if !r.open('{') {
		return false
	}
	seen := 0
	for first := true; ; first = false {
		key, done, ok := r.member(first)
		if !ok {
			return false
		}
		if done {
			return true
		}
		field := -1
		for i, k := range keys {
			if string(key) == k {
				field = i
				break
			}
		}
		switch {
		case field < 0:
			ok = !foldsTo(key, keys...) && r.skip(depth)
		case seen&(1<<field) != 0:
			return false
		default:
			seen |= 1 << field
			ok = value(field)
		}
		if !ok {
			return false
		}
	}
}

// contentBlocks decodes a result's content: null or an array of blocks.
func (r *jsonReader) contentBlocks(dst *[]contentBlock) bool {
	if r.null() {
		return true
	}
	if !r.open('[') {
		return false
	}
	blocks := make([]contentBlock, 0, 1)
	for first := true; ; first = false {
		done, ok := r.element(first)
		if !ok {
			return false
		}
		if done {
			break
		}
		blocks = append(blocks, contentBlock{})
		if !r.null() && !r.contentBlock(&blocks[len(blocks)-1]) {
			return false
		}
	}
	*dst = blocks
	return true
}

// contentBlock decodes one object of a result's content.
func (r *jsonReader) contentBlock(b *contentBlock) bool {
	strs := [...]*string{&b.Type, &b.Text, &b.Data, &b.MIMEType, &b.URI, &b.Name}
	return r.object(1, []string{"type", "text", "data", "mimeType", "uri", "name", "resource"}, func(field int) bool {
		if field < len(strs) {
			return r.str(strs[field])
		}
		if r.null() {
			return true
		}
		b.Resource = new(resourceBody)
		return r.resourceBody(b.Resource)
	})
}

// resourceBody decodes the resource of an embedded resource block.
func (r *jsonReader) resourceBody(b *resourceBody) bool {
	strs := [...]*string{&b.URI, &b.MIMEType, &b.Text, &b.Blob}
	return r.object(2, []string{"uri", "mimeType", "text", "blob"}, func(field int) bool { return r.str(strs[field]) })
}

// foldsTo reports whether key (ASCII, unescaped) matches one of names
// only as encoding/json's case-insensitive match does: such a key sets the
// field, which the reader leaves to encoding/json.
func foldsTo(key []byte, names ...string) bool {
	for _, name := range names {
		if len(key) != len(name) {
			continue
		}
		same := true
		for i := 0; i < len(key) && same; i++ {
			same = lowerASCII(key[i]) == lowerASCII(name[i])
		}
		if same {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// str decodes a string into dst; null leaves dst as it is, as
// encoding/json does. A string with escapes or bytes that are not UTF-8 is
// decoded by encoding/json, which unescapes and replaces them.
func (r *jsonReader) str(dst *string) bool {
	if r.null() {
		return true
	}
	start := r.i
	escaped, ok := r.stringToken()
	if !ok {
		return false
	}
	body := r.b[start+1 : r.i-1]
	if !escaped && utf8.Valid(body) {
		*dst = string(body)
		return true
	}
	return json.Unmarshal(r.b[start:r.i], dst) == nil
}

// boolean decodes true or false into dst; null leaves dst as it is.
func (r *jsonReader) boolean(dst *bool) bool {
	switch {
	case r.literal("true"):
		*dst = true
	case r.literal("false"):
		*dst = false
	default:
		return r.null()
	}
	return true
}

// null reads a null, if that is what comes next.
func (r *jsonReader) null() bool { return r.literal("null") }

// literal reads word, after any space, if that is what comes next.
func (r *jsonReader) literal(word string) bool {
	r.space()
	if len(r.b)-r.i < len(word) || string(r.b[r.i:r.i+len(word)]) != word {
		return false
	}
	r.i += len(word)
	return true
}

// open reads the opening bracket c, after any space.
func (r *jsonReader) open(c byte) bool {
	r.space()
	if r.i >= len(r.b) || r.b[r.i] != c {
		return false
	}
	r.i++
	return true
}

// space skips JSON whitespace.
func (r *jsonReader) space() {
	start := r.i
	for r.i < len(r.b) && (r.b[r.i] == ' ' || r.b[r.i] == '\t' || r.b[r.i] == '\n' || r.b[r.i] == '\r') {
		r.i++
	}
	r.spaced = r.spaced || r.i > start
}

// member reads up to the value of an object's next member, after its '{'
// (first) or a previous member, and returns its key; done is true at the
// object's end. A key with escapes or bytes that are not ASCII is not
// read: encoding/json may match it to a field.
func (r *jsonReader) member(first bool) (key []byte, done, ok bool) {
	if done, ok = r.next(first, '}'); done || !ok {
		return nil, done, ok
	}
	start := r.i
	escaped, ok := r.stringToken()
	if !ok || escaped {
		return nil, false, false
	}
	key = r.b[start+1 : r.i-1]
	for _, c := range key {
		if c >= utf8.RuneSelf {
			return nil, false, false
		}
	}
	r.space()
	if r.i >= len(r.b) || r.b[r.i] != ':' {
		return nil, false, false
	}
	r.i++
	return key, false, true
}

// element reads up to an array's next element, after its '[' (first) or a
// previous element; done is true at the array's end.
func (r *jsonReader) element(first bool) (done, ok bool) {
	return r.next(first, ']')
}

// next reads what separates a container's items: at the first, its end or
// nothing; after one, its end or a comma. It reads the space after either.
func (r *jsonReader) next(first bool, end byte) (done, ok bool) {
	r.space()
	if r.i >= len(r.b) {
		return false, false
	}
	switch c := r.b[r.i]; {
	case c == end:
		r.i++
		return true, true
	case first:
		return false, true
	case c != ',':
		return false, false
	}
	r.i++
	r.space()
	return false, true
}

// stringToken reads a string, its quote at r.i, checking its escapes and
// that it holds no control characters; escaped reports a backslash.
func (r *jsonReader) stringToken() (escaped, ok bool) {
	b := r.b
	if r.i >= len(b) || b[r.i] != '"' {
		return false, false
	}
	for i := r.i + 1; i < len(b); i++ {
		switch c := b[i]; {
		case c == '"':
			r.i = i + 1
			return escaped, true
		case c < ' ':
			return false, false
		case c == '\\':
			escaped = true
			if i+1 >= len(b) {
				return false, false
			}
			i++
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(b) || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return false, false
				}
				i += 4
			default:
				return false, false
			}
		}
	}
	return false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// skip reads and checks any value, after any space; depth is how deep
// it is nested.
func (r *jsonReader) skip(depth int) bool {
	r.space()
	if r.i >= len(r.b) {
		return false
	}
	switch c := r.b[r.i]; {
	case c == '"':
		_, ok := r.stringToken()
		return ok
	case c == '{' || c == '[':
		if depth >= maxFastDepth {
			return false
		}
		r.i++
		return r.skipItems(depth+1, c == '{')
	case c == '-' || '0' <= c && c <= '9':
		return r.number()
	case c == 't':
		return r.literal("true")
	case c == 'f':
		return r.literal("false")
	}
	return r.null()
}

// delimit moves past the value at r.i, after any space, without checking
// it: it finds only where the value ends (its strings' closing quotes and
// its brackets), for a value a reader of its own checks later (a
// response's result, which its call decodes). It returns false when the
// value does not end.
func (r *jsonReader) delimit() bool {
	r.space()
	b := r.b
	if r.i >= len(b) {
		return false
	}
	switch b[r.i] {
	case '"':
		return r.delimitString()
	case '{', '[':
		for depth := 0; r.i < len(b); {
			switch b[r.i] {
			case '"':
				if !r.delimitString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					r.i++
					return true
				}
			}
			r.i++
		}
		return false
	}
	start := r.i
	for r.i < len(b) {
		if c := b[r.i]; c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			break
		}
		r.i++
	}
	return r.i > start
}

// delimitString moves past the string whose quote is at r.i, reading only
// as far as its closing quote.
func (r *jsonReader) delimitString() bool {
	b := r.b
	for j := r.i + 1; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return false
		}
		j += k
		backslashes := 0
		for p := j - 1; p > r.i && b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			r.i = j + 1
			return true
		}
		j++
	}
}

// skipItems reads and checks the members of an object or the elements of
// an array, after its opening bracket, and its end.
func (r *jsonReader) skipItems(depth int, object bool) bool {
	end := byte(']')
	if object {
		end = '}'
	}
	for first := true; ; first = false {
		done, ok := r.next(first, end)
		if !ok {
			return false
		}
		if done {
			return true
		}
		if object {
			if _, ok := r.stringToken(); !ok {
				return false
			}
			r.space()
			if r.i >= len(r.b) || r.b[r.i] != ':' {
				return false
			}
			r.i++
		}
		if !r.skip(depth) {
			return false
		}
	}
}

// number reads a number as JSON writes one: an optional minus, an integer
// without leading zeros, then an optional fraction and exponent.
func (r *jsonReader) number() bool {
	b, i := r.b, r.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || b[i+1] < '0' || b[i+1] > '9' {
			return false
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		i = digits(b, i)
	}
	r.i = i
	return true
}

// digits returns the index after the digits of b from i.
func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}
