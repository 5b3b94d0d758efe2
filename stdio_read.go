package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"
)

// This file holds the reading of a stdio server's stdout: its framing into
// lines with their size limit, and who reads. One goroutine reads at a
// time, the holder of the turn. A call waiting for its answer takes the
// turn when it is free and reads the answer itself, delivering whatever
// else arrives first: the answer then reaches the call without a hand-over
// between goroutines, whose wake-up cost each call more than its decoding
// (README, "Against the floor"). The transport's reader goroutine reads
// between calls: once no call has wanted the turn for idleReadDelay, it
// waits for the turn and reads until a call wants it again, then gives it
// back after the next message. So notifications, server requests and the
// end of stdout are read at once while a call waits, and within about
// twice idleReadDelay when none does.

// idleReadDelay is how long no call may want the turn before the reader
// goroutine takes it: calls back to back keep it among themselves.
const idleReadDelay = 2 * time.Millisecond

// stdoutBufSize is the size of the stdout reader's buffer.
const stdoutBufSize = 64 << 10

// listen starts the reader goroutine, which reads stdout while no call
// does and ends the transport (calling ended) once stdout has ended or
// close has begun; every message, whoever reads it, goes to deliver (see
// transport). It is called once, before close.
func (t *stdioTransport) listen(deliver func([]byte), ended func()) {
	t.onMessage, t.onEnd = deliver, ended
	t.framer = newLineFramer(t.stdout, stdoutBufSize, t.maxMessage)
	t.turn = make(chan struct{}, 1)
	t.turn <- struct{}{}
	t.stdoutDone = make(chan struct{})
	t.interrupt = func() { t.stdout.SetReadDeadline(time.Unix(1, 0)) }
	// A read that no deadline can end could outlast its call's context:
	// where stdout takes none, the reader goroutine alone reads.
	t.callsRead = t.stdout.SetReadDeadline(time.Time{}) == nil
	t.readers.Add(1)
	// Owned by the transport; exits once stdout has ended (the process and
	// its group are gone, or close closed the pipe) or close has begun.
	go t.readStdout()
}

// readStdout reads stdout between calls, then records why the transport
// ended (unless close ended it) and ends it.
func (t *stdioTransport) readStdout() {
	defer t.readers.Done()
	idle := time.NewTimer(t.idleDelay)
	defer idle.Stop()
	for t.readWhileIdle(idle) {
	}
	if !errors.Is(t.readErr, errTransportClosed) {
		t.recordEnd()
	}
	t.onEnd()
}

// readWhileIdle waits until no call has wanted the turn for
// idleReadDelay, takes the turn and reads until a call wants it. It
// returns false, with readErr set, once stdout has ended or close has
// begun.
func (t *stdioTransport) readWhileIdle(idle *time.Timer) bool {
	if !t.waitIdle(idle) {
		return t.awaitEnd()
	}
	select {
	case <-t.turn:
	case <-t.stdoutDone:
		return false
	case <-t.quit:
		return t.awaitEnd()
	}
	if err := t.read(context.Background(), nil, t.wants.Load()); err != nil {
		t.stdoutEnded(err)
		return false
	}
	t.turn <- struct{}{}
	return true
}

// waitIdle waits until no call has wanted the turn for a whole
// idleReadDelay. It returns false once stdout has ended or close has
// begun.
func (t *stdioTransport) waitIdle(idle *time.Timer) bool {
	for seen := t.wants.Load(); ; {
		idle.Reset(t.idleDelay)
		select {
		case <-idle.C:
		case <-t.stdoutDone:
			return false
		case <-t.quit:
			return false
		}
		now := t.wants.Load()
		if now == seen {
			return true
		}
		seen = now
	}
}

// awaitEnd waits until no one reads any more: the turn is free, or its
// holder has seen stdout end. It returns false.
func (t *stdioTransport) awaitEnd() bool {
	select {
	case <-t.turn:
		t.stdoutEnded(errTransportClosed)
	case <-t.stdoutDone:
	}
	return false
}

// wantTurn records that a call waits for its answer, so that the reader
// goroutine gives the turn back after its next message, and returns the
// channel that yields the turn; readFor reads with it. Where calls may
// not read (callsRead), it returns nil: the call waits for its answer.
func (t *stdioTransport) wantTurn() <-chan struct{} {
	if !t.callsRead {
		return nil
	}
	t.wants.Add(1)
	return t.turn
}

// readFor reads stdout, holding the turn received from wantTurn's
// channel, until call's answer has arrived or ctx is done, then gives the
// turn back. At the end of stdout it keeps the turn: no one reads after
// the end.
func (t *stdioTransport) readFor(ctx context.Context, call answerWaiter) {
	if call.answered() {
		t.turn <- struct{}{}
		return
	}
	stop := context.AfterFunc(ctx, t.interrupt)
	err := t.read(ctx, call, 0)
	stop()
	if err != nil {
		t.stdoutEnded(err)
		return
	}
	t.turn <- struct{}{}
}

// read reads and delivers messages while it should: for call, until its
// answer has arrived or ctx is done; for the reader goroutine (call nil),
// until a call has wanted the turn since wants was since. It returns nil
// then, or the error that ended stdout: io.EOF at its end,
// errTransportClosed once close has begun. Its caller holds the turn.
//
// Whoever wants a reader to stop makes its condition false, then sets a
// past read deadline (interrupt); a reader clears the deadline before it
// first checks its condition and after each interrupted read, so neither
// order loses the wake-up. A deadline meant for an earlier reader only
// makes this one check again.
func (t *stdioTransport) read(ctx context.Context, call answerWaiter, since uint64) error {
	t.stdout.SetReadDeadline(time.Time{})
	for {
		select {
		case <-t.quit:
			return errTransportClosed
		default:
		}
		if call != nil && (call.answered() || ctx.Err() != nil) || call == nil && t.wants.Load() != since {
			return nil
		}
		fr, err := t.framer.next()
		if err == nil {
			if !t.handle(fr) {
				return errTransportClosed
			}
			continue
		}
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		t.stdout.SetReadDeadline(time.Time{})
	}
}

// stdoutEnded records why stdout ended for the reader goroutine, which
// ends the transport. Only the first call counts.
func (t *stdioTransport) stdoutEnded(err error) {
	t.stdoutDoneOnce.Do(func() {
		t.readErr = err
		close(t.stdoutDone)
	})
}

// idPattern finds a JSON-RPC id in the head or tail of an oversized line.
var idPattern = regexp.MustCompile(`"id"\s*:\s*(-?[0-9]+|"(?:[^"\\]|\\.)*")`)

// A lineFramer splits a reader into newline-delimited lines of at most
// maxMessage bytes (plus the newline). A longer line is discarded without
// being buffered whole. It keeps its place across reads that a deadline
// interrupts, so whoever reads next goes on where the last one stopped.
// It is not safe for concurrent use: the holder of the turn owns it.
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
// stopped a read; after a deadline's, next may be called again.
func (f *lineFramer) next() (frame, error) {
	for {
		chunk, err := f.br.ReadSlice('\n')
		complete := err == nil
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) && !errors.Is(err, os.ErrDeadlineExceeded) {
			if len(chunk) == 0 && len(f.long) == 0 && !f.oversized {
				return frame{}, err
			}
			complete = true // the last line without a newline
		}
		f.take(chunk, complete)
		if complete {
			return f.frame(chunk), nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return frame{}, err
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
