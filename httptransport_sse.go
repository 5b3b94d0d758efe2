package main

import (
	"bufio"
	"bytes"
	"io"
	"strconv"
	"sync"
	"time"
)

// This file holds the parser of server-sent event streams that both HTTP
// transports read: the WHATWG event-stream rules, with a size limit per
// event and pooled read buffers.

// An sseEvent is one dispatched server-sent event.
type sseEvent struct {
	name     string // "message" when the stream named none
	data     []byte // the data lines joined with \n; owned by the receiver
	tooLarge bool   // the data exceeded the limit and was discarded
}

// An sseParser reads server-sent events as the WHATWG event-stream rules
// interpret them: CRLF, CR or LF line endings, a leading BOM, comments,
// multi-line data, id (without NUL) and retry fields. An event whose data
// exceeds the limit is discarded without being buffered whole. It is not
// safe for concurrent use.
type sseParser struct {
	r         *bufio.Reader
	pooled    bool // r comes from sseReaders
	maxData   int
	lineLimit int
	line      []byte // a line split across buffer fills
	pending   int    // bytes of the last returned line still to discard
	skipLF    bool   // the last line ended with CR: a following LF belongs to it
	started   bool   // the first line (and its BOM) has been read
	data      []byte // nil until a data line arrives
	name      string
	oversize  bool // the current event is over the limit
	lastID    string
	retry     time.Duration
}

// sseReaders recycles the 32 KiB read buffers of SSE parsers: a Streamable
// HTTP answer stream lives for one call, and allocating the buffer each time
// would dominate the call's garbage.
var sseReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}

// newSSEParser returns a parser of r whose events carry at most maxData
// bytes of data, reading through a pooled 32 KiB buffer that release gives
// back.
func newSSEParser(r io.Reader, maxData int) *sseParser {
	br := sseReaders.Get().(*bufio.Reader)
	br.Reset(r)
	return &sseParser{r: br, pooled: true, maxData: maxData, lineLimit: maxData + 64}
}

// newSSEParserSize is newSSEParser with a read buffer of its own, of
// bufSize bytes (tests use small ones to split lines across reads);
// release does nothing.
func newSSEParserSize(r io.Reader, maxData, bufSize int) *sseParser {
	return &sseParser{r: bufio.NewReaderSize(r, bufSize), maxData: maxData, lineLimit: maxData + 64}
}

// release gives the read buffer back; the parser must not be used after.
func (p *sseParser) release() {
	if p.pooled {
		p.r.Reset(nil)
		sseReaders.Put(p.r)
		p.r, p.pooled = nil, false
	}
}

// next returns the next event, io.EOF at the end of the stream (an
// unfinished event is discarded, as the standard says), or the read error.
// It blocks until an event is complete.
func (p *sseParser) next() (sseEvent, error) {
	for {
		line, tooLong, err := p.readLine()
		if err != nil {
			return sseEvent{}, err
		}
		if !p.started {
			p.started = true
			line = bytes.TrimPrefix(line, utf8BOM)
		}
		if tooLong {
			p.oversize, p.data = true, nil
			continue
		}
		if len(line) == 0 {
			if ev, ok := p.dispatch(); ok {
				return ev, nil
			}
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if p.oversize {
				continue
			}
			if len(p.data)+len(value) >= p.maxData+1 {
				p.oversize, p.data = true, nil
				continue
			}
			if p.data == nil {
				p.data = make([]byte, 0, len(value)+1)
			}
			p.data = append(p.data, value...)
			p.data = append(p.data, '\n')
		case "event":
			if string(value) == "message" {
				p.name = "message" // the common name, without allocating
			} else {
				p.name = string(value)
			}
		case "id":
			if bytes.IndexByte(value, 0) < 0 && string(value) != p.lastID {
				p.lastID = string(value)
			}
		case "retry":
			if ms, err := strconv.ParseUint(string(value), 10, 31); err == nil {
				p.retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// dispatch ends the current event at a blank line; ok is false when it
// had no data.
func (p *sseParser) dispatch() (ev sseEvent, ok bool) {
	name := p.name
	if name == "" {
		name = "message"
	}
	switch {
	case p.oversize:
		ev, ok = sseEvent{name: name, tooLarge: true}, true
	case p.data != nil:
		ev, ok = sseEvent{name: name, data: p.data[:len(p.data)-1]}, true
	}
	p.name, p.data, p.oversize = "", nil, false
	return ev, ok
}

// readLine returns the next line without its terminator, valid until the
// next call. tooLong reports a line over lineLimit, whose content is dropped.
func (p *sseParser) readLine() (line []byte, tooLong bool, err error) {
	if p.pending > 0 {
		p.r.Discard(p.pending)
		p.pending = 0
	}
	p.line = p.line[:0]
	for {
		if _, err := p.r.Peek(1); err != nil {
			return nil, false, err
		}
		buf, _ := p.r.Peek(p.r.Buffered())
		if p.skipLF {
			p.skipLF = false
			if buf[0] == '\n' {
				p.r.Discard(1)
				continue
			}
		}
		end := bytes.IndexByte(buf, '\n')
		seg := buf
		if end >= 0 {
			seg = buf[:end]
		}
		if cr := bytes.IndexByte(seg, '\r'); cr >= 0 {
			end = cr
			p.skipLF = true
		}
		if end < 0 {
			if tooLong || len(p.line)+len(buf) > p.lineLimit {
				tooLong, p.line = true, p.line[:0]
			} else {
				p.line = append(p.line, buf...)
			}
			p.r.Discard(len(buf))
			continue
		}
		p.pending = end + 1
		if tooLong || len(p.line)+end > p.lineLimit {
			return nil, true, nil
		}
		if len(p.line) > 0 {
			p.line = append(p.line, buf[:end]...)
			return p.line, false, nil
		}
		return buf[:end], false, nil
	}
}
