package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// This file holds whether the run store can write, and how it finds out
// that it can again. A failed write of the log, a segment that cannot be
// created, or one that cannot be given its space ahead for lack of room
// (fallocate answering ENOSPC: the space ahead would otherwise hide a
// disk that is full but for it) makes the store fail: new runs are
// refused (503, naming the store and its free space), /readyz answers
// 503, and /metrics counts the failures. The failure lasts until a write
// succeeds with room ahead, or a probe finds room again: at most every
// probeEvery, whoever asks for the store's health (a POST /v1/runs, a
// /readyz) first tries again what failed (begin the next segment, give
// the last its space). A run whose lines could not be written keeps them
// and writes them before its next ones (runLog.write), so its lines on
// disk have no gap once space comes back.

// storeProbeEvery is the least time between two probes of a failing
// store.
const storeProbeEvery = time.Second

// injected returns the error the test seam fault gives op, nil without
// one.
func (g *runsLog) injected(op string) error {
	if g.fault == nil {
		return nil
	}
	return g.fault(op)
}

// writeAt writes buf to seg after its last whole line.
func (g *runsLog) writeAt(seg *segment, buf []byte) (int, error) {
	if err := g.injected("write"); err != nil {
		return 0, &os.PathError{Op: "write", Path: seg.path, Err: err}
	}
	n, err := seg.f.WriteAt(buf, seg.size)
	return g.costs.wrote(n), err
}

// giveSpace gives seg, the last segment, its space ahead. The space only
// makes writes cheaper, so where none can be given (no fallocate) the
// segment grows as it is written; but a disk too full for it fails the
// store until a probe can give it. Called with mu held, or before the
// log is shared.
func (g *runsLog) giveSpace(seg *segment) {
	err := g.injected("allocate")
	if err == nil {
		err = preallocate(seg.f, g.segBytes)
	}
	g.short = isNoSpace(err)
	if g.short {
		g.failLocked(fmt.Errorf("give %s its %d bytes of space ahead: %w", seg.path, g.segBytes, err))
	}
}

// isNoSpace reports whether err says the disk (or the user's quota) is
// full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// failLocked makes err the store's failure and counts it. Called with mu
// held.
func (g *runsLog) failLocked(err error) {
	g.errorCount.Add(1)
	g.failure = err
}

// succeededLocked ends the store's failure after a write that succeeded,
// unless the last segment still lacks its space or is full. Called with
// mu held.
func (g *runsLog) succeededLocked() {
	if g.failure != nil && g.broken == nil && g.hasRoomLocked() {
		g.failure = nil
	}
}

// hasRoomLocked reports whether the last segment has its space ahead
// and is not full. Called with mu held.
func (g *runsLog) hasRoomLocked() bool {
	return !g.short && g.current().size < g.segBytes
}

// probeLocked tries again what made the store fail: it begins the next
// segment when the last is full, gives the last its space, and writes
// zeros where the next lines go. Called with mu held, while the store
// fails.
func (g *runsLog) probeLocked(now time.Time) {
	g.lastProbe = now
	if g.broken != nil {
		return
	}
	if g.current().size >= g.segBytes {
		g.rotateLocked()
	} else {
		g.giveSpace(g.current())
	}
	if !g.hasRoomLocked() {
		return
	}
	// A write where the next lines go: zeros, as the space after them
	// reads anyway.
	if _, err := g.writeAt(g.current(), zeros[:probeBytes]); err != nil {
		g.failLocked(err)
		return
	}
	g.failure = nil
}

// probeBytes is the size of a probe's write.
const probeBytes = 4096

// A storeHealth is the run store's state, as /readyz, /metrics and
// POST /v1/runs show it.
type storeHealth struct {
	// err is why the store cannot write, nil when it can; a
	// *storeUnavailableError.
	err error
	// errors counts the store's failed writes since it was opened.
	errors int64
	// damaged counts the runs start-up found damaged.
	damaged int
	// syncs, written and wait are what the log cost the disk since it
	// was opened: fsyncs, bytes, and the nanoseconds runs waited.
	syncs, written, wait int64
}

// A storeUnavailableError says that the run store cannot write: new
// runs are refused with 503 until it can.
type storeUnavailableError struct {
	dir   string
	cause error
	free  string // the filesystem's free space, or why it is unknown
}

func (e *storeUnavailableError) Error() string {
	return fmt.Sprintf("store: the runs store in %s cannot write (%v); %s free; free some space (or remove old runs), runs are accepted again once a write succeeds",
		e.dir, e.cause, e.free)
}

func (e *storeUnavailableError) Unwrap() error { return e.cause }

// health returns the store's state, probing it first when it fails and
// was last probed probeEvery ago or more. Safe for concurrent use; it may
// block on the disk for the probe (a fallocate, or a file's creation).
func (s *runStore) health() storeHealth {
	g := s.log
	g.mu.Lock()
	if g.failure != nil && time.Since(g.lastProbe) >= g.probeEvery {
		g.probeLocked(time.Now())
	}
	err := cmp.Or(g.broken, g.failure)
	g.mu.Unlock()
	if err == nil {
		g.smu.Lock()
		err = g.syncErr
		g.smu.Unlock()
	}
	h := storeHealth{errors: g.errorCount.Load(), damaged: int(s.damaged.Load()),
		syncs: g.costs.syncs.Load(), written: g.costs.written.Load(), wait: g.costs.wait.Load()}
	if err != nil {
		h.err = &storeUnavailableError{dir: s.dir, cause: err, free: freeSpaceText(s.dir)}
	}
	return h
}

// freeSpaceText returns the free space of dir's filesystem for a
// message: "3.2 MiB of 12.0 MiB", or why it is unknown.
func freeSpaceText(dir string) string {
	free, total, err := freeSpace(dir)
	if err != nil {
		return fmt.Sprintf("unknown space (%v)", err)
	}
	return fmt.Sprintf("%s of %s", byteSize(free), byteSize(total))
}

// byteSize formats n bytes in KiB, MiB or GiB with one decimal.
func byteSize(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, suffix := float64(n)/unit, "KiB"
	for _, s := range []string{"MiB", "GiB", "TiB"} {
		if v < unit {
			break
		}
		v, suffix = v/unit, s
	}
	return fmt.Sprintf("%.1f %s", v, suffix)
}

// isBroken reports whether the log takes nothing more: a failed write
// could not be undone, or an fsync failed.
func (g *runsLog) isBroken() bool {
	g.mu.Lock()
	broken := g.broken != nil
	g.mu.Unlock()
	g.smu.Lock()
	defer g.smu.Unlock()
	return broken || g.syncErr != nil
}

// storeHealth returns the state of m's store (run_store_health.go); a
// healthy one without a store (or without a run manager).
func (m *runManager) storeHealth() storeHealth {
	if m == nil || m.opts.Store == nil {
		return storeHealth{}
	}
	return m.opts.Store.health()
}
