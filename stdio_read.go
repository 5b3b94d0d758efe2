package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
)

// This file holds the reading of a stdio server's stdout: one reader
// goroutine per server, as the Go SDK's ioConn has, framing lines with
// their size limit and delivering each message in order.

// stdoutBufSize is the size of the stdout reader's buffer.
const stdoutBufSize = 64 << 10

// listen starts the reader goroutine, which delivers every message on
// stdout to deliver and ends the transport (calling ended) once stdout has
// ended or close has begun. It is called once, before close.
func (t *stdioTransport) listen(deliver func([]byte), ended func()) {
	t.onMessage, t.onEnd = deliver, ended
	t.readers.Add(1)
	// Owned by the transport; exits once stdout has ended (the process and
	// its group are gone, or close closed the pipe) or close has begun.
	go t.readStdout()
}

// readStdout reads stdout to its end, then records why the transport
// ended (unless close ended it) and ends it.
func (t *stdioTransport) readStdout() {
	defer t.readers.Done()
	framer := newLineFramer(t.stdout, stdoutBufSize, t.maxMessage)
	for {
		fr, err := framer.next()
		if err != nil || !t.handle(fr) {
			break
		}
	}
	if !t.closing.Load() {
		t.recordEnd()
	}
	t.onEnd()
}

// idPattern finds a JSON-RPC id in the head or tail of an oversized line.
var idPattern = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")`)

// A lineFramer splits a reader into newline-delimited lines of at most
// maxMessage bytes (plus the newline). A longer line is discarded without
// being buffered whole. It is not safe for concurrent use: the reader
// goroutine owns it.
type lineFramer struct {
	br         *bufio.Reader
	maxMessage int
	long       []byte // a line longer than the reader's buffer, so far
	oversized  bool   // discarding the rest of the current line
	head       []byte // of a discarded line, for its id
	tail       []byte
	dropped    int
}

// A frame is one line of a lineFramer: the line, or, for a line over
// maxMessage, its first and last bytes (for its id) and its size.
type frame struct {
	line []byte
	// owned says whether line may be kept as is: otherwise it is the
	// reader's buffer, good until the next read.
	owned      bool
	rejected   bool
	head, tail []byte
	size       int
}

// newLineFramer returns a framer of r with a read buffer of bufSize.
func newLineFramer(r io.Reader, bufSize, maxMessage int) *lineFramer {
	return &lineFramer{br: bufio.NewReaderSize(r, bufSize), maxMessage: maxMessage}
}

// next returns the next line. Its error is io.EOF at the end of the reader
// (after the last line, with or without its newline), or the error that
// stopped a read.
func (f *lineFramer) next() (frame, error) {
	for {
		chunk, err := f.br.ReadSlice('\n')
		complete := err == nil
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if len(chunk) == 0 && len(f.long) == 0 && !f.oversized {
				return frame{}, err
			}
			complete = true // the last line without a newline
		}
		f.take(chunk, complete)
		if complete {
			return f.frame(chunk), nil
		}
	}
}

// take records a chunk of the current line: the line's start while it
// may still fit, only its ends once it is too long.
func (f *lineFramer) take(chunk []byte, complete bool) {
	switch {
	case f.oversized:
		f.dropped += len(chunk)
		f.tail = keepTail(f.tail, chunk, 512)
	case len(f.long)+len(chunk) > f.maxMessage+1:
		f.oversized = true
		f.head = append(f.head[:0], f.long...)
		if len(f.head) == 0 {
			f.head = append(f.head, chunk...)
		}
		if len(f.head) > 1024 {
			f.head = f.head[:1024]
		}
		f.dropped = len(f.long) + len(chunk)
		f.tail = keepTail(f.tail[:0], append(f.long, chunk...), 512)
		f.long = f.long[:0]
	case !complete:
		f.long = append(f.long, chunk...)
	}
}

// frame returns the line that chunk completes, or its ends if it is
// oversized, and starts the next line.
func (f *lineFramer) frame(chunk []byte) frame {
	switch {
	case f.oversized:
		fr := frame{rejected: true, head: f.head, tail: f.tail, size: f.dropped}
		f.oversized, f.head, f.tail, f.dropped = false, nil, nil, 0
		return fr
	case len(f.long) > 0:
		line := append(f.long, chunk...)
		f.long = nil
		return frame{line: line, owned: true}
	default:
		return frame{line: chunk}
	}
}

// keepTail appends b to tail, keeping only its last n bytes.
func keepTail(tail, b []byte, n int) []byte {
	if len(b) >= n {
		return append(tail[:0], b[len(b)-n:]...)
	}
	tail = append(tail, b...)
	if len(tail) > n {
		tail = append(tail[:0], tail[len(tail)-n:]...)
	}
	return tail
}

// handle passes a frame on: its line, or the rejection of an oversized
// line. It returns false when the transport is closing.
func (t *stdioTransport) handle(fr frame) bool {
	if fr.rejected {
		return t.rejectOversized(fr.head, fr.tail, fr.size)
	}
	return t.deliver(fr.line, fr.owned)
}

// deliver passes one line on, unless it is blank or not JSON. owned says
// whether line may be kept as is (ReadSlice's buffer must be copied).
// It returns false when the transport is closing.
func (t *stdioTransport) deliver(line []byte, owned bool) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return true
	}
	if line[0] != '{' && line[0] != '[' {
		t.logger.Warn("ignoring non-JSON line on server stdout", "line", t.secrets.cut(string(line), 200))
		return true
	}
	if !owned {
		line = bytes.Clone(line)
	}
	if line[0] != '[' {
		return t.put(line)
	}
	batch, _, err := splitBatch(line)
	if err != nil {
		t.logger.Warn("ignoring malformed batch on server stdout", "err", err)
		return true
	}
	for _, m := range batch {
		if !t.put(m) {
			return false
		}
	}
	return true
}

// put hands one message to listen's deliver; it returns false when the
// transport is closing.
func (t *stdioTransport) put(msg []byte) bool {
	select {
	case <-t.quit:
		return false
	default:
	}
	t.onMessage(msg)
	return true
}

// rejectOversized answers the call an oversized line was meant for with an
// error, so it fails at once instead of timing out. It returns false when
// the transport is closing.
func (t *stdioTransport) rejectOversized(head, tail []byte, size int) bool {
	t.logger.Warn("discarded oversized message from server", "bytes", size, "max_message_bytes", t.maxMessage)
	m := idPattern.FindSubmatch(head)
	if m == nil {
		m = idPattern.FindSubmatch(tail)
	}
	if m == nil {
		return true
	}
	msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"response too large: over %d bytes (raise the server's max_message_bytes)"}}`,
		m[1], codeInternalError, t.maxMessage)
	return t.put([]byte(msg))
}
