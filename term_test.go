package main

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// This file tests the escaping of what a terminal acts on: the function,
// the writer, and log/slog's own quoting of such characters.

// hostileText holds what a server may send to take over a terminal: a
// window title, a screen clear, hidden text, a bidirectional override, a
// C1 CSI and DEL.
const hostileText = "\x1b]0;pwned\x07\x1b[2J\x1b[8mhidden\x1b[0m \u202eevil\u202c \u009b2J\x7f"

// hostileEscaped is hostileText as escapeControls writes it.
const hostileEscaped = `\u001b]0;pwned\u0007\u001b[2J\u001b[8mhidden\u001b[0m \u202eevil\u202c \u009b2J\u007f`

// rawControls lists the characters of hostileText that no output may
// hold raw.
var rawControls = []string{"\x1b", "\x07", "\u202e", "\u202c", "\u009b", "\x7f"}

// checkNoRawControls fails the test when out holds one of rawControls.
func checkNoRawControls(t *testing.T, what, out string) {
	t.Helper()
	for _, c := range rawControls {
		if strings.Contains(out, c) {
			t.Errorf("%s holds a raw %q:\n%q", what, c, out)
		}
	}
}

func TestEscapeControls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"plain", "Echo: deploy to production", "Echo: deploy to production"},
		{"other scripts", "Grüße, 日本語 … ✓ U+FFFD \uFFFD", "Grüße, 日本語 … ✓ U+FFFD \uFFFD"},
		{"tab and line breaks", "a\tb\nc\r\nd", "a\tb\nc\r\nd"},
		{"window title", "\x1b]0;pwned\x07ok", `\u001b]0;pwned\u0007ok`},
		{"screen clear", "\x1b[2J\x1b[H", `\u001b[2J\u001b[H`},
		{"hidden text", "\x1b[8mhidden\x1b[0m", `\u001b[8mhidden\u001b[0m`},
		{"lone carriage return", "50%\rdone", `50%\u000ddone`},
		{"NUL, backspace, DEL", "a\x00b\bc\x7f", `a\u0000b\u0008c\u007f`},
		{"C1 controls", "x\u009b2J\u0085y", `x\u009b2J\u0085y`},
		{"bidi overrides", "\u202a\u202b\u202c\u202d\u202e", `\u202a\u202b\u202c\u202d\u202e`},
		{"bidi isolates", "\u2066a\u2067b\u2068c\u2069", `\u2066a\u2067b\u2068c\u2069`},
		{"not UTF-8", "a\xffb\xc2", "a\uFFFDb\uFFFD"},
		{"all at once", hostileText, hostileEscaped},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := escapeControls(tt.in)
			if got != tt.want {
				t.Errorf("escapeControls(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if again := escapeControls(got); again != got {
				t.Errorf("escapeControls(%q) = %q, want it unchanged (escaping twice)", got, again)
			}
		})
	}
}

// TestTerminalWriterKeepsJSON writes JSON through a terminalWriter: the
// raw characters are gone, and the JSON decodes to the same text.
func TestTerminalWriterKeepsJSON(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := newTerminalWriter(&out)
	if newTerminalWriter(w) != w {
		t.Error("newTerminalWriter wrapped a terminalWriter again")
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(map[string]string{"text": hostileText + "\nline two"}); err != nil {
		t.Fatal(err)
	}
	checkNoRawControls(t, "the JSON", out.String())
	var back map[string]string
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back["text"] != hostileText+"\nline two" {
		t.Errorf("the JSON %s decodes to %q (%v), want the text as sent", out.String(), back["text"], err)
	}
}

// TestSlogQuotesControls checks what log/slog does itself with a
// server's text in a log line: the text format quotes (and so escapes)
// every string holding such a character, message and attributes alike;
// the JSON format escapes the C0 controls only, and the terminalWriter on
// stderr escapes the rest while the line stays JSON.
func TestSlogQuotesControls(t *testing.T) {
	t.Parallel()
	for _, format := range []string{"text", "json"} {
		t.Run(format, func(t *testing.T) {
			var raw, escaped bytes.Buffer
			// No time: the two lines are compared, and may be written in
			// different milliseconds.
			opts := &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey && len(groups) == 0 {
					return slog.Attr{}
				}
				return a
			}}
			for _, sink := range []io.Writer{&raw, newTerminalWriter(&escaped)} {
				var h slog.Handler = slog.NewTextHandler(sink, opts)
				if format == "json" {
					h = slog.NewJSONHandler(sink, opts)
				}
				slog.New(h).With("server", "evil"+hostileText).Warn("server said "+hostileText, "line", hostileText, slog.Group("g", "k", hostileText))
			}
			if format == "text" {
				checkNoRawControls(t, "slog's text line", raw.String())
				if raw.String() != escaped.String() {
					t.Errorf("the text line changed through the terminalWriter:\n%q\n%q", raw.String(), escaped.String())
				}
				return
			}
			if strings.Contains(raw.String(), "\x1b") {
				t.Errorf("slog's JSON line holds a raw ESC:\n%q", raw.String())
			}
			checkNoRawControls(t, "the JSON line through the terminalWriter", escaped.String())
			var a, b map[string]any
			if json.Unmarshal(raw.Bytes(), &a) != nil || json.Unmarshal(escaped.Bytes(), &b) != nil || a["line"] != b["line"] || b["line"] != hostileText {
				t.Errorf("the JSON lines do not decode to the same text:\n%q\n%q", raw.String(), escaped.String())
			}
		})
	}
}
