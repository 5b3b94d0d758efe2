package main

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// This file tests the chat's line editor on the keys a terminal sends,
// without a terminal: what line each sequence of keys gives, and what it
// writes back.

func TestLineEditorKeys(t *testing.T) {
	t.Parallel()
	history := []string{"first", "second"}
	tests := []struct {
		name  string
		keys  string
		line  string
		err   error
		shown string // what the editor wrote; "" to skip the check
	}{
		{"typed", "hello\r", "hello", nil, "hello"},
		{"newline ends too", "hi\n", "hi", nil, "hi"},
		{"backspace", "helpp\x7f\x7flo\r", "hello", nil, ""},
		{"left and insert", "hllo\x1b[D\x1b[D\x1b[De\r", "hello", nil, ""},
		{"home and end", "ello\x1b[Hh\x1b[F!\r", "hello!", nil, ""},
		{"ctrl-a and ctrl-e", "ello\x01h\x05!\r", "hello!", nil, ""},
		{"ss3 arrows", "ab\x1bOD\x1bODx\r", "xab", nil, ""},
		{"delete under the cursor", "abc\x1b[H\x1b[3~\r", "bc", nil, ""},
		{"ctrl-u kills to the start", "abc\x1b[Dx\x15y\r", "yc", nil, ""},
		{"ctrl-k kills to the end", "abc\x1b[D\x1b[D\x0b\r", "a", nil, ""},
		{"up to the last line", "\x1b[A\r", "second", nil, ""},
		{"up twice, down once", "\x1b[A\x1b[A\x1b[B!\r", "second!", nil, ""},
		{"up past the first stays", "\x1b[A\x1b[A\x1b[A\r", "first", nil, ""},
		{"down back to the draft", "dra\x1b[A\x1b[Bft\r", "draft", nil, ""},
		{"ctrl-d on an empty line ends", "\x04", "", io.EOF, ""},
		{"ctrl-d deletes otherwise", "ab\x1b[D\x04\r", "a", nil, ""},
		{"controls and unknown escapes are not inserted", "a\x07\x1b[99~b\r", "ab", nil, "ab"},
		{"a lone escape does nothing", "\x1bxb\r", "xb", nil, ""},
		{"a character in two pieces", "caf\xc3\xa9\r", "café", nil, "café"},
		{"bidi override is not inserted", "a\u202eb\r", "ab", nil, "ab"},
		{"redraw after an insert in the middle", "ac\x1b[Db\r", "abc", nil, "ac\x1b[2Dac\x1b[K\x1b[1D\x1b[1Dabc\x1b[K\x1b[1D"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			e := &lineEditor{out: &out, history: history}
			s := editState{e: e, hist: len(history)}
			pending := []byte(tt.keys)
			var (
				line string
				err  error
				done bool
			)
			for len(pending) > 0 && !done {
				k, n := decodeKey(pending)
				if n == 0 {
					t.Fatalf("keys %q: %q left undecoded", tt.keys, pending)
				}
				pending = pending[n:]
				line, done, err = s.apply(k)
			}
			if !done || line != tt.line || !errors.Is(err, tt.err) {
				t.Errorf("keys %q = line %q, done %v, err %v; want %q, %v", tt.keys, line, done, err, tt.line, tt.err)
			}
			if tt.shown != "" && out.String() != tt.shown {
				t.Errorf("keys %q wrote %q, want %q", tt.keys, out.String(), tt.shown)
			}
		})
	}
}

// TestDecodeKeyWaitsForWholeKeys checks that a key cut between two reads
// is taken only once whole.
func TestDecodeKeyWaitsForWholeKeys(t *testing.T) {
	t.Parallel()
	for _, partial := range []string{"\x1b", "\x1b[", "\x1b[1", "\x1bO", "\xc3"} {
		if _, n := decodeKey([]byte(partial)); n != 0 {
			t.Errorf("decodeKey(%q) took %d bytes, want 0 until the rest comes", partial, n)
		}
	}
}
