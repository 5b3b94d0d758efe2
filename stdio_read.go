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

// This file holds the reading of a stdio server's stdout: the framing of
// lines with their size limit, and who reads. One goroutine reads at a
// time, the holder of the turn. A call waiting for its answer takes the
// turn and reads the answer itself, routing whatever else arrives first,
// as a client of its own would: the answer reaches it without a hand-off
// between goroutines, each of which costs a wake-up. When no call has
// waited for idleReadDelay, the transport's reader goroutine takes the
// turn, so that notifications, server requests and the end of stdout are
// read between calls too; it gives the turn back as soon as a call wants
// it.

// idleReadDelay is how long stdout may go unread, with no call waiting,
// before the reader goroutine reads it: calls back to back keep the turn
// among themselves.
const idleReadDelay = time.Millisecond

// stdoutBufSize is the size of the stdout reader's buffer.
const stdoutBufSize = 64 << 10

// listen starts the reader goroutine, which reads stdout while no call
// does, and ends the transport (calling ended) once stdout has ended or
// close runs; every message, whoever reads it, goes to deliver (see
// transport). It is called once, before close.
func (t *stdioTransport) listen(deliver func([]byte), ended func()) {
	t.onMessage, t.onEnd = deliver, ended
	t.framer = newLineFramer(t.stdout, stdoutBufSize, t.maxMessage)
	t.turn = make(chan struct{}, 1)
	t.turn <- struct{}{}
	t.idle = time.NewTimer(time.Hour)
	t.idle.Stop()
	t.stdoutDone = make(chan struct{})
	t.readers.Add(1)
	// Owned by the transport; exits once stdout has ended (the process and
	// its group are gone, or close closed the pipe).
	go t.readStdout()
}

// readStdout reads stdout while it holds the turn and no call wants it,
// and waits for the connection to go idle while a call holds it. At the
// end of stdout it records why and ends the transport.
func (t *stdioTransport) readStdout() {
	defer t.readers.Done()
	defer t.onEnd()
	defer t.recordEnd()
	for {
		select {
		case <-t.turn:
		case <-t.stdoutDone:
			return
		case <-t.quit:
			// A reader holding the turn stops when close closes stdout.
			select {
			case <-t.turn:
			case <-t.stdoutDone:
			}
			return
		}
		t.bgReading.Store(true)
		err := t.readWhile(func() bool { return t.wanted.Load() == 0 })
		t.bgReading.Store(false)
		if err != nil {
			t.stdoutEnded()
			return
		}
		t.turn <- struct{}{}
		select {
		case <-t.idle.C:
		case <-t.stdoutDone:
			return
		case <-t.quit:
		}
	}
}

// wantTurn registers a call that waits for its answer and returns the
// channel that yields it the turn; readFor uses the turn. It interrupts
// the reader goroutine's read, if it holds the turn. The call calls
// unwantTurn once it stops waiting.
func (t *stdioTransport) wantTurn() <-chan struct{} {
	// Ordered with readStdout's bgReading before its check of wanted:
	// either it sees this call, or this call sees it reading.
	t.wanted.Add(1)
	if t.bgReading.Load() {
		t.stdout.SetReadDeadline(time.Unix(1, 0))
	}
	return t.turn
}

// unwantTurn ends what wantTurn began; the last call to stop waiting
// lets the reader goroutine read again after idleReadDelay.
func (t *stdioTransport) unwantTurn() {
	if t.wanted.Add(-1) == 0 {
		t.idle.Reset(idleReadDelay)
	}
}

// readFor reads stdout, holding the turn taken from wantTurn's channel,
// until call's answer has arrived or ctx is done, then gives the turn
// back. It blocks while the server says nothing, at most until ctx is
// done.
func (t *stdioTransport) readFor(ctx context.Context, call answerWaiter) {
	if call.answered() {
		t.turn <- struct{}{}
		return
	}
	stop := context.AfterFunc(ctx, func() { t.stdout.SetReadDeadline(time.Unix(1, 0)) })
	err := t.readWhile(func() bool { return !call.answered() && ctx.Err() == nil })
	stop()
	if err != nil {
		t.stdoutEnded() // the turn is kept: nobody reads after the end
		return
	}
	t.turn <- struct{}{}
}

// readWhile reads and delivers messages while more reports true. It
// returns nil once more is false, or the error that ended stdout (io.EOF
// at its end). Its caller holds the turn. Whoever wants a reader to stop
// makes more false, then sets a past read deadline; a reader clears the
// deadline before it asks more, so neither order loses the wake-up.
func (t *stdioTransport) readWhile(more func() bool) error {
	deliver := func(line []byte, owned bool) bool { return t.deliver(line, owned) && more() }
	reject := func(head, tail []byte, size int) bool { return t.rejectOversized(head, tail, size) && more() }
	for {
		t.stdout.SetReadDeadline(time.Time{})
		select {
		case <-t.quit:
			return errTransportClosed
		default:
		}
		if !more() {
			return nil
		}
		err := t.framer.run(deliver, reject)
		if err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
	}
}

// stdoutEnded tells the reader goroutine that stdout has ended; safe to
// call more than once.
func (t *stdioTransport) stdoutEnded() {
	t.stdoutDoneOnce.Do(func() { close(t.stdoutDone) })
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

// newLineFramer returns a framer of r with a read buffer of bufSize.
func newLineFramer(r io.Reader, bufSize, maxMessage int) *lineFramer {
	return &lineFramer{br: bufio.NewReaderSize(r, bufSize), maxMessage: maxMessage}
}

// run hands each line to deliver, whose owned argument says whether the
// line may be kept as is (a reader's buffer must be copied), and an
// oversized line's first and last bytes (for its id) and size to reject.
// It returns nil as soon as deliver or reject returns false, and otherwise the error
// that stopped the reading: io.EOF at the end (after the last line, with
// or without its newline), or a deadline's, after which run may be called
// again.
func (f *lineFramer) run(deliver func(line []byte, owned bool) bool, reject func(head, tail []byte, size int) bool) error {
	for {
		chunk, err := f.br.ReadSlice('\n')
		interrupted := errors.Is(err, os.ErrDeadlineExceeded)
		complete := err == nil
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) && !interrupted {
			if len(chunk) == 0 && len(f.long) == 0 && !f.oversized {
				return err
			}
			complete = true // the last line without a newline
		}
		f.take(chunk, complete)
		if complete && !f.deliverLine(chunk, deliver, reject) {
			return nil
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return err
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

// deliverLine passes on the line that chunk completes, or rejects it if
// it is oversized, and returns false if deliver or reject did.
func (f *lineFramer) deliverLine(chunk []byte, deliver func([]byte, bool) bool, reject func(head, tail []byte, size int) bool) bool {
	switch {
	case f.oversized:
		head, tail, dropped := f.head, f.tail, f.dropped
		f.oversized, f.head, f.tail, f.dropped = false, f.head[:0], f.tail[:0], 0
		return reject(head, tail, dropped)
	case len(f.long) > 0:
		line := append(f.long, chunk...)
		f.long = nil
		return deliver(line, true)
	default:
		return deliver(chunk, false)
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
