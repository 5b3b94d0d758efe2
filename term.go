package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// This file holds the escaping of the characters a terminal acts on
// instead of showing them (escape sequences that set the window title,
// clear the screen or hide text; bidirectional overrides that reorder
// what is shown), so that a server's text reaches an operator's terminal
// and a model's prompt as text. It is a leaf: every output of the command
// line passes terminalWriter, and the skills' names and descriptions pass
// escapeControls before a model sees them.

// escapeControls returns s with each character a terminal would act on
// written as a JSON-style \uXXXX escape: the C0 controls except tab and
// line feed (and a carriage return just before a line feed), DEL, the C1
// controls, and the bidirectional overrides and isolates (U+202A–U+202E,
// U+2066–U+2069). A byte that is not UTF-8 becomes U+FFFD. Because the
// escape is JSON's and JSON text holds these characters only inside
// strings, escaped JSON stays valid and means the same. It returns s
// itself when nothing needs escaping; escaping twice changes nothing more.
func escapeControls(s string) string {
	i := firstSuspect(s)
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteRune(utf8.RuneError)
		case actsOnTerminal(r) && !(r == '\r' && strings.HasPrefix(s[i+size:], "\n")):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// actsOnTerminal reports whether a terminal may act on r rather than show
// it (see escapeControls); tab and line feed are ordinary layout.
func actsOnTerminal(r rune) bool {
	switch {
	case r == '\t' || r == '\n':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	}
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
}

// firstSuspect returns the index of the first byte of s that is neither
// printable ASCII nor a tab or line feed, or -1: text without one needs
// no escaping.
func firstSuspect[T string | []byte](s T) int {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t' && c != '\n') || c >= 0x7f {
			return i
		}
	}
	return -1
}

// A terminalWriter is an io.Writer that writes what it is given through
// escapeControls to w. Each Write must hold whole characters, as fmt,
// encoding/json and log/slog write them; a character split between two
// writes would show as U+FFFD. It is safe for concurrent use when w is.
type terminalWriter struct{ w io.Writer }

// newTerminalWriter returns w wrapped in a terminalWriter, or w itself
// when it is one already.
func newTerminalWriter(w io.Writer) io.Writer {
	if _, ok := w.(terminalWriter); ok {
		return w
	}
	return terminalWriter{w: w}
}

// Write writes p escaped and returns len(p) when all of it was written.
func (t terminalWriter) Write(p []byte) (int, error) {
	if firstSuspect(p) < 0 {
		return t.w.Write(p)
	}
	if _, err := io.WriteString(t.w, escapeControls(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// plainWriter returns the writer a terminalWriter wraps, or w itself: for
// output that is a protocol, which must reach its reader byte for byte.
func plainWriter(w io.Writer) io.Writer {
	if t, ok := w.(terminalWriter); ok {
		return t.w
	}
	return w
}
