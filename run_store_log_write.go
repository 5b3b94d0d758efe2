package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sync/atomic"
	"time"
)

// This file holds how the run store's log (run_store_log.go) is written
// and made durable, and how a run's lines are read back.

// appendLines appends lines (whole lines of run id) to the log in one
// write(2), each after the run's id, and returns the write's sequence
// number, which sync takes. A write that fails is
// undone (zeroed), so that no torn line is left before the next; when it
// cannot be, the log takes nothing more.
func (g *runsLog) appendLines(id string, lines []byte) (int64, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	buf := withID(g.buf[:0], id, lines)
	g.buf = buf
	e, err := g.writeLocked(buf)
	if err != nil {
		return 0, err
	}
	g.addLines(id, e)
	return g.written, nil
}

// withID appends lines to b, each after run id and a space, and each
// ending with a newline.
func withID(b []byte, id string, lines []byte) []byte {
	for line := range bytes.Lines(lines) {
		b = append(append(append(b, id...), ' '), line...)
		if line[len(line)-1] != '\n' {
			b = append(b, '\n')
		}
	}
	return b
}

// writeLocked writes buf after the last whole line of the last segment
// and returns where it went, then begins a new segment when the last is
// full. The bytes are not counted live: the caller adds them to a run.
// A failed write, or a segment that cannot be begun, is the store's
// failure (run_store_health.go) until a write finds room again. Called
// with mu held.
func (g *runsLog) writeLocked(buf []byte) (extent, error) {
	if g.broken != nil {
		return extent{}, g.broken
	}
	if g.current().size >= g.segBytes {
		// A new segment could not be begun before: try again rather
		// than write past the space the last was given.
		g.rotateLocked()
	}
	seg := g.current()
	n, err := g.writeAt(seg, buf)
	if err != nil {
		if zerr := g.costs.zeroRange(seg.f, seg.size, int64(n)); zerr != nil {
			g.broken = fmt.Errorf("%s could not be repaired after a failed write (%v); restart harnessd", seg.path, zerr)
		}
		g.failLocked(err) // an *os.PathError, naming the segment
		return extent{}, err
	}
	e := extent{seg, seg.size, int64(n)}
	seg.size += int64(n)
	g.written++
	if cap(g.buf) > 1<<20 {
		g.buf = nil // a large write's buffer is not kept
	}
	if seg.size >= g.segBytes {
		g.rotateLocked()
	}
	g.succeededLocked()
	return e, nil
}

// rotateLocked begins a new segment after the full last one. When the
// full segment's fsync failed, the log takes nothing more: what it held
// may be lost, and no later sync can say otherwise. When the new segment
// cannot be begun, the store fails, and the next write tries again.
// Called with mu held.
func (g *runsLog) rotateLocked() {
	seg := g.current()
	err := g.rotate()
	switch {
	case err == nil:
	case errors.Is(err, errSegmentSync):
		g.broken = fmt.Errorf("begin a new segment after %s: %w; restart harnessd", seg.path, err)
		g.failLocked(g.broken)
		g.smu.Lock()
		g.syncErr = cmp.Or(g.syncErr, g.broken)
		g.smu.Unlock()
	default:
		g.failLocked(fmt.Errorf("begin a new segment after %s: %w", seg.path, err))
	}
}

// sync returns once the write with sequence number seq, and every write
// before it, is durable. The first caller to find no sync under way leads
// one, for everything written up to then; the others wait for it, and
// lead the next if it did not cover them. After a failed fsync nothing is
// durable any more: what was written may be lost.
func (g *runsLog) sync(seq int64) error {
	g.smu.Lock()
	for g.syncing && g.synced < seq && g.syncErr == nil {
		g.waiting++
		if g.gathering != nil && g.waiting >= g.want {
			close(g.gathering)
			g.gathering = nil
		}
		g.scond.Wait()
		g.waiting--
	}
	if g.synced >= seq || g.syncErr != nil {
		err := g.syncErr
		g.smu.Unlock()
		return err
	}
	g.syncing = true
	g.smu.Unlock()
	g.gather()

	g.mu.Lock()
	target, seg := g.written, g.current()
	seg.refs++
	g.mu.Unlock()
	if g.onSync != nil {
		g.onSync()
	}
	err := g.costs.syncFile(seg.f)
	g.release(seg)

	g.smu.Lock()
	g.syncing = false
	if err != nil {
		g.syncErr = fmt.Errorf("fsync %s: %w; restart harnessd", seg.path, err)
		err = g.syncErr
	} else {
		g.synced = max(g.synced, target)
	}
	g.scond.Broadcast()
	g.smu.Unlock()
	return err
}

// gather holds the leader of a sync while other runs are being written,
// until all of them wait for the sync or the window has passed.
func (g *runsLog) gather() {
	others := int(g.open.Load()) - 1
	if others <= 0 || g.window <= 0 {
		return
	}
	g.smu.Lock()
	if g.waiting >= others {
		g.smu.Unlock()
		return
	}
	done := make(chan struct{})
	g.gathering, g.want = done, others
	g.smu.Unlock()
	timer := time.NewTimer(g.window)
	select {
	case <-done:
	case <-timer.C:
	}
	timer.Stop()
	g.smu.Lock()
	g.gathering = nil
	g.smu.Unlock()
}

// syncAll makes every write so far durable.
func (g *runsLog) syncAll() error {
	g.mu.Lock()
	seq := g.written
	g.mu.Unlock()
	return g.sync(seq)
}

// release lets go of seg, taken with refs under mu, closing it when it
// was dropped meanwhile.
func (g *runsLog) release(seg *segment) {
	g.mu.Lock()
	defer g.mu.Unlock()
	seg.refs--
	if seg.dropped && seg.refs == 0 {
		seg.f.Close()
	}
}

// readWindow is how much of the log a reader of a run's lines holds at a
// time: reading a run of any size takes this much memory, more only for
// a line longer than it.
const readWindow = 64 << 10

// read returns run id's lines, without its id, in order. The error wraps
// fs.ErrNotExist when the log does not hold the run.
func (g *runsLog) read(id string) ([]byte, error) {
	var out []byte
	err := g.eachLine(id, func(line []byte) error {
		out = append(append(out, line...), '\n')
		return nil
	})
	return out, err
}

// eachLine calls fn with each of run id's lines, in order, without the
// id and the newline; line is valid only until fn returns. It reads the
// log readWindow at a time, so that its memory does not grow with the
// run, and it may block as long as fn does. It stops at fn's first error
// and returns it. The error wraps fs.ErrNotExist when the log does not
// hold the run.
func (g *runsLog) eachLine(id string, fn func(line []byte) error) error {
	g.mu.Lock()
	r := g.runs[id]
	if r == nil {
		g.mu.Unlock()
		return fmt.Errorf("run %s: %w", id, fs.ErrNotExist)
	}
	extents := slices.Clone(r.extents)
	for _, e := range extents {
		e.seg.refs++
	}
	g.mu.Unlock()
	if g.onRead != nil {
		g.onRead()
	}
	buf := make([]byte, readWindow)
	var err error
	for _, e := range extents {
		// Each segment is let go once read, not after the last.
		if err == nil {
			buf, err = eachExtentLine(e, id, buf, fn, &g.readBytes)
		}
		g.release(e.seg)
	}
	return err
}

// eachExtentLine calls fn with each line of e that is run id's, without
// the id and the newline, reading e into buf a window at a time; buf
// doubles while one line does not fit. It returns buf, for the next
// extent, and fn's first error. It adds the bytes it reads to read.
func eachExtentLine(e extent, id string, buf []byte, fn func(line []byte) error, read *atomic.Int64) ([]byte, error) {
	pending := 0 // the start of a line at the head of buf, not yet whole
	for off, end := e.off, e.off+e.n; off < end; {
		if pending == len(buf) {
			buf = append(buf, make([]byte, len(buf))...)
		}
		n := min(int64(len(buf)-pending), end-off)
		b := buf[:pending+int(n)]
		if _, err := e.seg.f.ReadAt(b[pending:], off); err != nil {
			return buf, fmt.Errorf("read run %s from %s: %w", id, e.seg.path, err)
		}
		read.Add(n)
		off += n
		for {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				break
			}
			if rest, ok := bytes.CutPrefix(b[:i], []byte(id)); ok && len(rest) > 0 && rest[0] == ' ' {
				if err := fn(rest[1:]); err != nil {
					return buf, err
				}
			}
			b = b[i+1:]
		}
		pending = copy(buf, b)
	}
	return buf, nil
}

// lastLine returns run id's last line without its id and newline,
// reading only the end of the run's lines.
func (g *runsLog) lastLine(id string) ([]byte, error) {
	g.mu.Lock()
	r := g.runs[id]
	if r == nil || len(r.extents) == 0 {
		g.mu.Unlock()
		return nil, fmt.Errorf("run %s: %w", id, fs.ErrNotExist)
	}
	e := r.extents[len(r.extents)-1]
	e.seg.refs++
	g.mu.Unlock()
	defer g.release(e.seg)
	return lastLineOf(e, id, &g.readBytes)
}

// lastLineOf returns the last line of e, run id's, without the id and the
// newline. It reads e backwards from its end, a window at first, twice as
// much each time the line does not start within it. It adds the bytes it
// reads to read.
func lastLineOf(e extent, id string, read *atomic.Int64) ([]byte, error) {
	for size := min(int64(4<<10), e.n); ; size = min(2*size, e.n) {
		b := make([]byte, size)
		if _, err := e.seg.f.ReadAt(b, e.off+e.n-size); err != nil {
			return nil, fmt.Errorf("read run %s from %s: %w", id, e.seg.path, err)
		}
		read.Add(size)
		b = bytes.TrimSuffix(b, []byte("\n"))
		start := bytes.LastIndexByte(b, '\n') + 1
		if start == 0 && size < e.n {
			continue
		}
		rest, ok := bytes.CutPrefix(b[start:], []byte(id))
		if !ok || len(rest) == 0 || rest[0] != ' ' {
			return nil, fmt.Errorf("run %s: the last line of its lines in %s is another run's", id, e.seg.path)
		}
		return rest[1:], nil
	}
}

// put writes lines (whole lines of run id) as a moved copy, so that
// they replace whatever the log held of the run.
func (g *runsLog) put(id string, lines []byte) error {
	copied := withID(nil, id, lines)
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.moveLocked(id, copied)
}

// moveLocked writes copied (lines of run id, each with its id) after a
// moved line announcing them, in one write(2), and makes them the run's
// only lines. Called with mu held.
func (g *runsLog) moveLocked(id string, copied []byte) error {
	buf := withID(g.buf[:0], id, movedLine(len(copied)))
	head := len(buf)
	buf = append(buf, copied...)
	g.buf = buf
	e, err := g.writeLocked(buf)
	if err != nil {
		return err
	}
	g.replaceRun(id, extent{e.seg, e.off + int64(head), e.n - int64(head)})
	return nil
}
