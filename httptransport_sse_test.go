package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// This file tests the SSE parser: line endings, multi-line data, event
// names, ids and retry, oversized events, read through buffers of every
// size and byte by byte; FuzzSSEParser fuzzes it.

// parseAll returns every event of stream, read through a buffer of bufSize
// bytes (0: the pooled one) from a reader giving one byte at a time if slow.
func parseAll(stream []byte, maxData, bufSize int, slow bool) []sseEvent {
	var p *sseParser
	if bufSize > 0 {
		p = newSSEParserSize(iotestReader(stream, slow), maxData, bufSize)
	} else {
		p = newSSEParser(iotestReader(stream, slow), maxData)
	}
	defer p.release()
	var events []sseEvent
	for {
		ev, err := p.next()
		if err != nil {
			return events
		}
		events = append(events, ev)
	}
}

func formatEvents(events []sseEvent) string {
	var b strings.Builder
	for _, ev := range events {
		fmt.Fprintf(&b, "[%s %q %v]", ev.name, ev.data, ev.tooLarge)
	}
	return b.String()
}

func TestSSEParser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		stream     string
		want       string
		wantLastID string
		wantRetry  time.Duration
	}{
		{name: "lf", stream: "data: a\n\n", want: `[message "a" false]`},
		{name: "crlf", stream: "data: a\r\n\r\n", want: `[message "a" false]`},
		{name: "cr", stream: "data: a\r\rdata: b\r\r", want: `[message "a" false][message "b" false]`},
		{name: "bom", stream: "\xEF\xBB\xBFdata: a\n\n", want: `[message "a" false]`},
		{name: "multi-line data", stream: "data: a\ndata:b\ndata:  c\n\n", want: `[message "a\nb\n c" false]`},
		{name: "empty data line", stream: "data\n\n", want: `[message "" false]`},
		{name: "event name", stream: "event: endpoint\ndata: /m\n\ndata: x\n\n", want: `[endpoint "/m" false][message "x" false]`},
		{name: "comments and unknown fields", stream: ": c\nfoo: bar\ndata: a\n\n", want: `[message "a" false]`},
		{name: "no data no event", stream: "event: x\nid: 5\n\n", wantLastID: "5"},
		{name: "unfinished event discarded", stream: "data: a\n\ndata: b\n", want: `[message "a" false]`},
		{name: "id with nul ignored", stream: "id: 1\nid: a\x00b\ndata: x\n\n", want: `[message "x" false]`, wantLastID: "1"},
		{name: "retry", stream: "retry: 250\nretry: x1\ndata: x\n\n", want: `[message "x" false]`, wantRetry: 250 * time.Millisecond},
		{name: "data over limit", stream: "data: 0123456789abcdefg\n\ndata: ok\n\n", want: `[message "" true][message "ok" false]`},
		{name: "joined data over limit", stream: "data: 01234567\ndata: 01234567\n\ndata: ok\n\n", want: `[message "" true][message "ok" false]`},
		{name: "line over limit", stream: "data: " + strings.Repeat("z", 200) + "\n\ndata: ok\n\n", want: `[message "" true][message "ok" false]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, slow := range []bool{false, true} {
				p := newSSEParserSize(iotestReader([]byte(tt.stream), slow), 16, 16)
				var events []sseEvent
				for {
					ev, err := p.next()
					if err != nil {
						break
					}
					events = append(events, ev)
				}
				if got := formatEvents(events); got != tt.want {
					t.Errorf("parse(%q, slow=%v) = %s, want %s", tt.stream, slow, got, tt.want)
				}
				if p.lastID != tt.wantLastID || p.retry != tt.wantRetry {
					t.Errorf("parse(%q, slow=%v) lastID, retry = %q, %v, want %q, %v", tt.stream, slow, p.lastID, p.retry, tt.wantLastID, tt.wantRetry)
				}
			}
		})
	}
}

func iotestReader(b []byte, slow bool) io.Reader {
	if slow {
		return iotest.OneByteReader(bytes.NewReader(b))
	}
	return bytes.NewReader(b)
}

func FuzzSSEParser(f *testing.F) {
	f.Add([]byte("data: a\r\n\r\n"), []byte("event: x\rdata: b\r\r"))
	f.Add([]byte("\xEF\xBB\xBFid: 1\nretry: 10\ndata:\n\n"), []byte(": c\ndata: 1\ndata: 2\n\n"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		const limit = 64
		events := parseAll(a, limit, 0, false)
		if slow := parseAll(a, limit, 16, true); formatEvents(slow) != formatEvents(events) {
			t.Fatalf("parse(%q) byte by byte = %s, want %s", a, formatEvents(slow), formatEvents(events))
		}
		for _, ev := range events {
			if bytes.ContainsRune(ev.data, '\r') || strings.ContainsAny(ev.name, "\r\n") {
				t.Fatalf("parse(%q) gave event %q %q, want no CR in data and no line break in name", a, ev.name, ev.data)
			}
			if len(ev.data) > limit || (ev.tooLarge && len(ev.data) > 0) {
				t.Fatalf("parse(%q) gave %d bytes of data (tooLarge %v), want at most %d", a, len(ev.data), ev.tooLarge, limit)
			}
		}
		if bytes.HasPrefix(b, utf8BOM) {
			return
		}
		first := append(slices.Clip(a), "\n\n"...)
		whole := parseAll(append(slices.Clip(first), b...), limit, 0, false)
		separate := append(parseAll(first, limit, 0, false), parseAll(b, limit, 0, false)...)
		if formatEvents(whole) != formatEvents(separate) {
			t.Fatalf("parse(%q + %q) = %s, want the events parsed separately %s", first, b, formatEvents(whole), formatEvents(separate))
		}
	})
}
