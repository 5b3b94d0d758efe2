package main

import (
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file holds the line editor of harnessd run's chat: on a terminal
// in raw mode (term_raw_linux.go) it reads keys and edits the line
// itself, with the arrows moving along it and through the earlier lines,
// backspace, delete, Home/End, Ctrl-A/E/U/K, Enter and Ctrl-D; where raw
// mode cannot be had it reads whole lines as the terminal gives them.

// A lineEditor reads the lines a person types at a terminal. It is a
// lineReader; one line is read at a time (the chat asks between turns,
// its terminalPrompter during one), so it is not safe for concurrent use.
type lineEditor struct {
	tty  *os.File  // stdin, in raw mode while a line is read
	out  io.Writer // the terminal as is: the editor writes escape sequences
	keys chan []byte
	// pending are the bytes read and not yet taken as keys (a key may
	// come in two reads).
	pending []byte
	// history are the lines remembered, oldest first.
	history []string
	// prompt is shown before the line read next, then cleared.
	prompt string
}

// newLineEditor returns an editor of the lines typed on tty, echoed to
// out. It starts the goroutine that reads tty; it ends at tty's end or
// error (Ctrl-D is a key in raw mode, not an end), or with the process.
func newLineEditor(tty *os.File, out io.Writer) *lineEditor {
	e := &lineEditor{tty: tty, out: out, keys: make(chan []byte, 16)}
	// Owned by the editor; ends when tty ends or fails, closing keys.
	go func() {
		defer close(e.keys)
		for {
			buf := make([]byte, 256)
			n, err := tty.Read(buf)
			if n > 0 {
				e.keys <- buf[:n]
			}
			if err != nil {
				return
			}
		}
	}()
	return e
}

// remember adds line to the history the up arrow goes through, unless it
// is empty or the last one again.
func (e *lineEditor) remember(line string) {
	if line != "" && (len(e.history) == 0 || e.history[len(e.history)-1] != line) {
		e.history = append(e.history, line)
	}
}

// fill waits for more bytes in pending. It returns io.EOF when the
// terminal ended, or ctx's error.
func (e *lineEditor) fill(ctx context.Context) error {
	select {
	case b, ok := <-e.keys:
		if !ok {
			return io.EOF
		}
		e.pending = append(e.pending, b...)
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readLine shows the prompt and reads one line, edited in raw mode, or as
// the terminal gives it when raw mode fails. Ctrl-D on an empty line, or
// the terminal's end, is io.EOF. Raw mode begins before the prompt shows:
// what is typed once it shows (a Ctrl-D, say) is never taken by the
// terminal's own line editing.
func (e *lineEditor) readLine(ctx context.Context) (string, error) {
	prompt := e.prompt
	e.prompt = ""
	restore, err := makeRaw(e.tty)
	io.WriteString(e.out, prompt)
	if err != nil {
		return e.readWhole(ctx)
	}
	defer restore()
	ed := editState{e: e, hist: len(e.history)}
	for {
		for len(e.pending) > 0 {
			k, n := decodeKey(e.pending)
			if n == 0 {
				break
			}
			e.pending = e.pending[n:]
			if line, done, err := ed.apply(k); done {
				io.WriteString(e.out, "\n")
				return line, err
			}
		}
		if err := e.fill(ctx); err != nil {
			if err == io.EOF && len(ed.buf) > 0 {
				io.WriteString(e.out, "\n")
				return string(ed.buf), nil
			}
			return "", err
		}
	}
}

// readWhole reads a line the terminal edited and echoed itself.
func (e *lineEditor) readWhole(ctx context.Context) (string, error) {
	for {
		if i := strings.IndexByte(string(e.pending), '\n'); i >= 0 {
			line := string(e.pending[:i])
			e.pending = e.pending[i+1:]
			return strings.TrimRight(line, "\r"), nil
		}
		if err := e.fill(ctx); err != nil {
			if err == io.EOF && len(e.pending) > 0 {
				line := string(e.pending)
				e.pending = nil
				return line, nil
			}
			return "", err
		}
	}
}

// A keyPress is one key press as decodeKey reads it.
type keyPress struct {
	kind keyKind
	r    rune // the character, for keyRune
}

// keyKind says what a key does.
type keyKind int

// The keys the editor acts on; keyNone is every other.
const (
	keyNone keyKind = iota
	keyRune
	keyEnter
	keyBackspace
	keyDelete
	keyLeft
	keyRight
	keyUp
	keyDown
	keyHome
	keyEnd
	keyKillStart
	keyKillEnd
	keyEOF
)

// controlKeys are the keys of the control characters the editor knows:
// Enter, Backspace, and Emacs's Ctrl-A, E, B, F, U, K and D.
var controlKeys = map[byte]keyKind{
	'\r': keyEnter, '\n': keyEnter, 0x7f: keyBackspace, 0x08: keyBackspace,
	0x01: keyHome, 0x05: keyEnd, 0x02: keyLeft, 0x06: keyRight,
	0x15: keyKillStart, 0x0b: keyKillEnd, 0x04: keyEOF,
}

// decodeKey returns the key at the start of b and its length in bytes, 0
// when b holds only its beginning.
func decodeKey(b []byte) (keyPress, int) {
	switch c := b[0]; {
	case c == 0x1b:
		return decodeEscape(b)
	case c < 0x20 || c == 0x7f:
		return keyPress{kind: controlKeys[c]}, 1 // keyNone for the others
	}
	if !utf8.FullRune(b) {
		return keyPress{}, 0
	}
	r, n := utf8.DecodeRune(b)
	if r == utf8.RuneError || actsOnTerminal(r) {
		return keyPress{}, n
	}
	return keyPress{kind: keyRune, r: r}, n
}

// escapeKeys are the keys of the escape sequences the editor knows,
// after ESC [ (CSI) or ESC O (SS3).
var escapeKeys = map[string]keyKind{
	"A": keyUp, "B": keyDown, "C": keyRight, "D": keyLeft, "H": keyHome, "F": keyEnd,
	"1~": keyHome, "7~": keyHome, "4~": keyEnd, "8~": keyEnd, "3~": keyDelete,
}

// decodeEscape reads the escape sequence at the start of b: ESC [ params
// final, or ESC O final. An ESC before anything else is a key of its own
// that does nothing.
func decodeEscape(b []byte) (keyPress, int) {
	if len(b) < 2 {
		return keyPress{}, 0
	}
	switch b[1] {
	case 'O':
		if len(b) < 3 {
			return keyPress{}, 0
		}
		return keyPress{kind: escapeKeys[string(b[2])]}, 3
	case '[':
		for i := 2; i < len(b); i++ {
			if c := b[i]; c >= 0x40 && c <= 0x7e {
				return keyPress{kind: escapeKeys[string(b[2:i+1])]}, i + 1
			}
		}
		return keyPress{}, 0
	}
	return keyPress{}, 1
}

// An editState is the line being edited: its characters, the cursor
// among them, and where in the history it stands.
type editState struct {
	e     *lineEditor
	buf   []rune
	pos   int    // the cursor, 0..len(buf)
	hist  int    // the history line shown; len(history) for the draft
	draft []rune // the line typed before going up the history
}

// apply acts on k; done reports a line ended (Enter, or Ctrl-D on an
// empty line with io.EOF).
func (s *editState) apply(k keyPress) (line string, done bool, err error) {
	old := s.pos
	switch k.kind {
	case keyEnter:
		return string(s.buf), true, nil
	case keyEOF:
		if len(s.buf) == 0 {
			return "", true, io.EOF
		}
		fallthrough
	case keyDelete:
		if s.pos < len(s.buf) {
			s.buf = append(s.buf[:s.pos], s.buf[s.pos+1:]...)
		}
	case keyRune:
		s.buf = append(s.buf[:s.pos], append([]rune{k.r}, s.buf[s.pos:]...)...)
		s.pos++
		if s.pos == len(s.buf) {
			// Typing at the end, the common case, shows just the character.
			io.WriteString(s.e.out, string(k.r))
			return "", false, nil
		}
	case keyBackspace:
		if s.pos > 0 {
			s.buf = append(s.buf[:s.pos-1], s.buf[s.pos:]...)
			s.pos--
		}
	case keyLeft:
		s.pos = max(s.pos-1, 0)
	case keyRight:
		s.pos = min(s.pos+1, len(s.buf))
	case keyHome:
		s.pos = 0
	case keyEnd:
		s.pos = len(s.buf)
	case keyKillStart:
		s.buf, s.pos = s.buf[s.pos:], 0
	case keyKillEnd:
		s.buf = s.buf[:s.pos]
	case keyUp, keyDown:
		s.moveInHistory(k.kind == keyUp)
	default:
		return "", false, nil
	}
	s.redraw(old)
	return "", false, nil
}

// moveInHistory shows the line before (up) or after the one shown, the
// draft below the last.
func (s *editState) moveInHistory(up bool) {
	h := s.e.history
	switch {
	case up && s.hist > 0:
		if s.hist == len(h) {
			s.draft = s.buf
		}
		s.hist--
	case !up && s.hist < len(h):
		s.hist++
	default:
		return
	}
	if s.hist == len(h) {
		s.buf = s.draft
	} else {
		s.buf = []rune(h[s.hist])
	}
	s.pos = len(s.buf)
}

// redraw writes the line again from where it starts, the cursor having
// been at column from of it: back to its start, the line, clear what is
// left of the old one, back to the cursor. It takes every character for
// one column and the line for shorter than the terminal is wide.
func (s *editState) redraw(from int) {
	var b strings.Builder
	if from > 0 {
		b.WriteString("\x1b[" + strconv.Itoa(from) + "D")
	}
	b.WriteString(string(s.buf))
	b.WriteString("\x1b[K")
	if back := len(s.buf) - s.pos; back > 0 {
		b.WriteString("\x1b[" + strconv.Itoa(back) + "D")
	}
	io.WriteString(s.e.out, b.String())
}
