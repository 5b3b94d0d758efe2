package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the run store's log: the files every run's lines go
// to, $HARNESS_HOME/runs/log-<n> (the segments, numbered in the order
// they were begun). Each line is a run's id, a space, and one line of the
// run (run_store.go). Lines are appended to the last segment, whatever
// the run, each write(2) whole lines of one run; a segment past
// segmentBytes is fsynced and the next begun. No run has a file of its
// own, so a run creates none: on a filesystem whose inode allocator is
// slow after many deletions (ext4 without a journal), creating a file was
// most of what the store cost.
//
// Appends are not durable by themselves. A run that needs its lines on
// disk (its first record, its end) waits for a sync of the segment (group
// commit): the first to wait leads, fsyncing everything written up to
// then, and those who wrote meanwhile wait for the next sync, which the
// first of them leads. While other runs are being written, the leader
// first waits for their syncs, until every one of them waits or
// syncWindow has passed: a commit then waits at most for the sync under
// way and its own, each held up to syncWindow. A lone run waits for
// nothing but its fsync. (On an ext4 with a journal, where an fsync
// commits the filesystem's journal, the wait raised the runs per second
// at 8 clients by a fifth; without a journal it changed nothing.)
//
// The log keeps in memory where each run's lines are (its extents: one
// per write). Two kinds of line are the log's own. A removed line
// (removedMarker) says the run's earlier lines are gone: retention and
// deletion write one. A moved line says the run's earlier lines are
// superseded by the copy that follows, whose length it gives: compaction
// writes one before copying a run whose lines are in a segment it
// empties, in the same write(2). A move cut short by a crash is ignored,
// and the run's lines are where they were: the segment they are in is
// removed only once the copy is durable. A segment other than the last
// whose live lines are less than half of it (none at all, say), or that
// is small, is emptied by moving its runs to the last segment, and
// removed once that is fsynced. At start-up the segments are read in
// order; a torn last line, or a move cut short, is cut off.
//
// A segment is given segmentBytes of disk space when it is begun
// (preallocate), reading as zeros. Lines are written into that space at
// the end of the last whole line, not appended to the file: a write then
// changes neither the file's size nor its blocks, and the fsync that
// makes it durable has only the data to write. A segment's lines end
// where its zeros begin; cutting off a torn end zeroes it.

const (
	logFilePrefix = "log-"
	// segmentBytes is the size past which the log begins a new segment.
	segmentBytes = 8 << 20
	// syncWindow bounds how long a sync's leader waits for the syncs of
	// other runs being written before it fsyncs.
	syncWindow = time.Millisecond
)

// The log's own lines, after the run's id and a space: removedMarker,
// and movedPrefix followed by the length of the copy and a }.
var (
	removedMarker = []byte(`{"removed":true}`)
	movedPrefix   = []byte(`{"moved":`)
)

// movedLine returns the moved line announcing a copy n bytes long.
func movedLine(n int) []byte {
	return fmt.Appendf(slices.Clip(movedPrefix), "%d}", n)
}

// movedSize returns the length of the copy a moved line (rest, after the
// id) announces.
func movedSize(rest []byte) (int, bool) {
	digits, ok := bytes.CutPrefix(rest, movedPrefix)
	if !ok {
		return 0, false
	}
	if digits, ok = bytes.CutSuffix(digits, []byte("}")); !ok || len(digits) == 0 || len(digits) > 12 {
		return 0, false
	}
	n := 0
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

// A segment is one file of the log.
type segment struct {
	num  int
	path string
	f    *os.File
	size int64 // bytes of whole lines
	live int64 // bytes of lines of runs not removed
	// refs counts readers and syncs using f outside the log's mu; a
	// segment dropped (its file removed) is closed when the last is done.
	refs    int
	dropped bool
	// torn is how many bytes followed the segment's whole lines when it
	// was read at start-up.
	torn int64
}

// An extent is where one write of a run's lines is: the bytes [off,
// off+n) of seg, whole lines, each with the run's id.
type extent struct {
	seg *segment
	off int64
	n   int64
}

// A loggedRun is where a run's lines are, in order, and the segments
// that may hold copies of them a move left behind.
type loggedRun struct {
	extents []extent
	stale   []*segment
}

// A runsLog is the run store's log. Safe for concurrent use.
type runsLog struct {
	dir string
	// segBytes is segmentBytes (tests lower it).
	segBytes int64
	// onSync, when set, is called by each sync's leader before it
	// fsyncs (tests pace the syncs with it).
	onSync func()
	// onRead, when set, is called by each read once it holds the
	// segments it reads, before it reads them (tests).
	onRead func()
	// window is syncWindow (tests raise it).
	window time.Duration
	// fault, when set (tests), is asked before each write, space
	// allocation and creation of a segment file (op "write", "allocate",
	// "create"); an error it returns is the operation's, as if the disk
	// had answered it (run_store_health.go).
	fault func(op string) error
	// probeEvery is storeProbeEvery (tests lower it).
	probeEvery time.Duration
	// errorCount counts the store's failed writes, allocations and
	// segment creations (/metrics).
	errorCount atomic.Int64
	// costs counts its fsyncs, the bytes it writes and the runs' waits.
	costs storeCosts
	// open counts the runs being written (create to close): the runs
	// that may ask for a sync soon.
	open atomic.Int64
	// readBytes counts the bytes read back from the segments of runs'
	// lines (eachLine, lastLine), so that what a request costs in reads
	// can be measured.
	readBytes atomic.Int64

	mu sync.Mutex
	// guards what follows, and the segments' fields
	segs    []*segment // oldest first; the last is appended to
	runs    map[string]*loggedRun
	tombs   map[string]tombstone // removed runs whose lines may be on disk
	written int64                // writes so far: the sequence number of the last
	broken  error                // set when a failed write could not be undone
	buf     []byte
	// failure is the store's last failed write, allocation or segment
	// creation, nil once a write succeeds with room ahead or a probe
	// finds room again (run_store_health.go).
	failure error
	// short is set while the last segment could not be given its space
	// ahead for lack of room: it grows as it is written, where it can.
	short     bool
	lastProbe time.Time

	cmu sync.Mutex // held by compaction

	// readOnly is set for a log opened to be checked (harnessd check
	// --store): nothing is written, cut off or begun.
	readOnly bool
	// damage is what start-up found wrong in the segments, which no crash
	// makes (run_store_damage.go). Set before the log is shared.
	damage []segmentDamage

	// smu is never held while mu is taken (writeLocked takes smu under
	// mu).
	smu     sync.Mutex
	scond   *sync.Cond
	synced  int64 // the sequence number up to which writes are durable
	syncing bool
	waiting int   // syncs waiting for the one under way
	syncErr error // a failed fsync: what was written may be lost
	// gathering, while a leader waits for more syncs, is closed by the
	// waiter that makes them want.
	gathering chan struct{}
	want      int
}

// openRunsLog reads the segments of dir, oldest first, and indexes the
// runs they hold, and opens the last (or a new one) for appending.
func openRunsLog(dir string) (*runsLog, error) {
	return loadRunsLog(dir, false)
}

// loadRunsLog is openRunsLog; with readOnly, the log is only read (to be
// checked), never written.
func loadRunsLog(dir string, readOnly bool) (*runsLog, error) {
	g := newRunsLog(dir)
	g.readOnly = readOnly
	g.scond = sync.NewCond(&g.smu)
	nums, err := segmentNumbers(dir)
	if err != nil {
		return nil, err
	}
	for _, num := range nums {
		if err := g.scan(num); err != nil {
			g.closeFiles()
			return nil, err
		}
	}
	g.findCutSegments()
	if readOnly {
		return g, nil
	}
	if len(g.segs) == 0 {
		if err := g.begin(1); err != nil {
			return nil, err
		}
	} else {
		// A segment an older harnessd began has no space given ahead.
		g.giveSpace(g.current())
	}
	return g, nil
}

// newRunsLog returns an empty log of dir, before its segments are read.
func newRunsLog(dir string) *runsLog {
	return &runsLog{dir: dir, segBytes: segmentBytes, window: syncWindow, probeEvery: storeProbeEvery,
		runs: map[string]*loggedRun{}, tombs: map[string]tombstone{}}
}

// segmentNumbers returns the numbers of the segments in dir, in order.
func segmentNumbers(dir string) ([]int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var nums []int
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), logFilePrefix)
		if num, err := strconv.Atoi(rest); ok && err == nil && num > 0 && !e.IsDir() {
			nums = append(nums, num)
		}
	}
	slices.Sort(nums)
	return nums, nil
}

func (g *runsLog) segmentPath(num int) string {
	return filepath.Join(g.dir, fmt.Sprintf("%s%08d", logFilePrefix, num))
}

// scan reads segment num and indexes its lines. A torn last line, or a
// move cut short, is cut off (the segment may be appended to); a line
// without a run's id, which only outside damage makes, is skipped.
func (g *runsLog) scan(num int) error {
	path := g.segmentPath(num)
	mode := os.O_RDWR
	if g.readOnly {
		mode = os.O_RDONLY
	}
	f, err := os.OpenFile(path, mode, 0o600)
	if err != nil {
		return fmt.Errorf("open %s: %w", path, err)
	}
	b, err := readWritten(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("read %s: %w", path, err)
	}
	seg := &segment{num: num, path: path, f: f}
	g.segs = append(g.segs, seg)
	written := b[:writtenLen(b)]
	whole := g.indexLines(seg, written)
	seg.size = int64(whole)
	seg.torn = int64(len(written) - whole)
	if g.readOnly {
		return nil
	}
	// What follows the whole lines is zeros (space given ahead), a torn
	// line, or both: the torn line is zeroed, so that no later write
	// shorter than it leaves a piece of it after its own lines.
	if err := g.costs.zeroRange(f, seg.size, int64(len(written)-whole)); err != nil {
		return fmt.Errorf("cut the torn end off %s: %w", path, err)
	}
	return nil
}

// writtenLen returns the length of b without the zeros it ends with: a
// segment's space given ahead and not yet written (the whole segment,
// when it was just begun).
func writtenLen(b []byte) int {
	n := len(b)
	for n >= len(zeros) && bytes.Equal(b[n-len(zeros):n], zeros) {
		n -= len(zeros)
	}
	for n > 0 && b[n-1] == 0 {
		n--
	}
	return n
}

// readWritten returns what f holds up to the end of its data: the space
// given ahead after it, never written, reads as zeros and is left out.
func readWritten(f *os.File) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, writtenEnd(f, fi.Size()))
	n, err := f.ReadAt(b, 0)
	if err == io.EOF {
		err = nil
	}
	return b[:n], err
}

// indexLines indexes b, the lines of seg, and returns the length of what
// is whole of it: up to its last newline, or to the start of a move cut
// short (the copy it announces does not follow whole).
func (g *runsLog) indexLines(seg *segment, b []byte) int {
	whole := bytes.LastIndexByte(b, '\n') + 1
	for off := 0; off < whole; {
		n := bytes.IndexByte(b[off:whole], '\n') + 1
		id, rest, ok := bytes.Cut(b[off:off+n], []byte(" "))
		rest = bytes.TrimSuffix(rest, []byte("\n"))
		if !ok || !validRunID(id) || !json.Valid(rest) {
			g.noteJunk(seg, b[off:off+n], off, id, ok && validRunID(id))
			off += n
			continue
		}
		if size, ok := movedSize(rest); ok {
			end := off + n + size
			if end > whole || (size > 0 && b[end-1] != '\n') {
				return off
			}
			g.replaceRun(string(id), extent{seg, int64(off + n), int64(size)})
			off = end
			continue
		}
		g.index(string(id), rest, extent{seg, int64(off), int64(n)})
		off += n
	}
	return whole
}

// validRunID reports whether id can be a run's id in the log: letters,
// digits, _ and -, as newID makes them. A line torn or zeroed by a power
// cut does not pass for a run's.
func validRunID(id []byte) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// index takes one line of run id as read back, not a moved line (rest is
// what follows the id, without the newline).
func (g *runsLog) index(id string, rest []byte, e extent) {
	switch {
	case bytes.Equal(rest, removedMarker):
		if r := g.forget(id); r != nil {
			g.tombs[id] = tombstone{marker: e.seg, segs: segsOf(r)}
		} else if t, ok := g.tombs[id]; ok {
			t.marker = e.seg
			g.tombs[id] = t
		}
	default:
		g.addLines(id, e)
	}
}

// addLines adds e to the lines of run id. Called with mu held, or before
// the log is shared.
func (g *runsLog) addLines(id string, e extent) {
	r := g.runs[id]
	if r == nil {
		r = &loggedRun{}
		g.runs[id] = r
	}
	r.add(e)
}

// add appends e to r's extents, joining it to the last when it follows.
func (r *loggedRun) add(e extent) {
	e.seg.live += e.n
	if n := len(r.extents); n > 0 {
		if last := &r.extents[n-1]; last.seg == e.seg && last.off+last.n == e.off {
			last.n += e.n
			return
		}
	}
	r.extents = append(r.extents, e)
}

// forget drops run id's lines from the index, and their bytes from the
// live bytes of their segments. Called with mu held.
func (g *runsLog) forget(id string) *loggedRun {
	r := g.runs[id]
	if r == nil {
		return nil
	}
	for _, e := range r.extents {
		e.seg.live -= e.n
	}
	delete(g.runs, id)
	return r
}

// begin creates segment num, durably, with its space given ahead, and
// writes to it from then on. Called with mu held, or before the log is
// shared.
func (g *runsLog) begin(num int) error {
	path := g.segmentPath(num)
	err := g.injected("create")
	var f *os.File
	if err == nil {
		f, err = os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := g.costs.syncDir(g.dir); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("create %s: %w", path, err)
	}
	seg := &segment{num: num, path: path, f: f}
	g.segs = append(g.segs, seg)
	g.giveSpace(seg)
	return nil
}

func (g *runsLog) current() *segment { return g.segs[len(g.segs)-1] }

// rotate fsyncs the last segment and begins the next. An error wraps
// errSegmentSync when the fsync failed (what the segment held may be
// lost); else the segment could not be begun, and the last stays the one
// written to. Called with mu held.
func (g *runsLog) rotate() error {
	if err := g.costs.syncFile(g.current().f); err != nil {
		return fmt.Errorf("%w: %w", errSegmentSync, err)
	}
	return g.begin(g.current().num + 1)
}

// errSegmentSync marks rotate's error when a full segment's fsync failed.
var errSegmentSync = errors.New("fsync the full segment")

// ids returns the ids of the runs the log holds.
func (g *runsLog) ids() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]string, 0, len(g.runs))
	for id := range g.runs {
		out = append(out, id)
	}
	return out
}

// holds reports whether the log holds lines of run id.
func (g *runsLog) holds(id string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs[id] != nil
}

// size returns the bytes run id's lines take in the log.
func (g *runsLog) size(id string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	var n int64
	if r := g.runs[id]; r != nil {
		for _, e := range r.extents {
			n += e.n
		}
	}
	return n
}

// closeFiles closes every segment.
func (g *runsLog) closeFiles() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, seg := range g.segs {
		seg.f.Close()
	}
	if g.broken == nil {
		g.broken = errStoreClosed
	}
}

// errStoreClosed is the error of a write after the store was closed.
var errStoreClosed = errors.New("the runs store is closed")

// replaceRun makes e the only lines of run id; those it had before are
// stale. Called with mu held, or before the log is shared.
func (g *runsLog) replaceRun(id string, e extent) {
	var stale []*segment
	if r := g.forget(id); r != nil {
		stale = segsOf(r)
	}
	r := &loggedRun{stale: stale}
	if e.n > 0 {
		r.add(e)
	}
	g.runs[id] = r
}
