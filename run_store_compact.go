package main

import (
	"cmp"
	"fmt"
	"os"
	"slices"
)

// This file holds how runs leave the run store's log (run_store_log.go):
// removal, which writes a removed line for each run, and compaction,
// which empties the segments holding little that is live by moving their
// runs to the last segment, then removes them.
//
// A removed line must outlive the run's lines: while a segment holding
// them exists, the segment holding the removed line is not removed
// without writing the line again to the last segment. The log keeps a
// tombstone for each removed run whose lines may still be on disk. A
// moved run's lines left behind (stale) are remembered the same way, so
// that deleting a conversation removes every segment any copy of its
// runs is in.

// A tombstone is a removed run whose lines may still be in segs; its
// removed line is in marker.
type tombstone struct {
	marker *segment
	segs   []*segment
}

// segsOf returns the segments that may hold lines of r: its extents' and
// its stale copies', those not dropped.
func segsOf(r *loggedRun) []*segment {
	var out []*segment
	for _, e := range r.extents {
		out = append(out, e.seg)
	}
	out = append(out, r.stale...)
	out = slices.DeleteFunc(out, func(s *segment) bool { return s.dropped })
	slices.SortFunc(out, func(a, b *segment) int { return a.num - b.num })
	return slices.Compact(out)
}

// removeRuns drops runs ids from the log, writing a removed line for each
// (not durably: a crash may bring a removed run back, to be removed
// again). With purge, the segments holding any copy of them are
// compacted at once, durably, so that nothing of them is left.
func (g *runsLog) removeRuns(ids []string, purge bool) error {
	var purgeErr error
	g.mu.Lock()
	force := map[*segment]bool{}
	if purge {
		for _, id := range ids {
			if r := g.runs[id]; r != nil {
				for _, s := range segsOf(r) {
					force[s] = true
				}
			}
			if t, ok := g.tombs[id]; ok {
				for _, s := range t.segs {
					force[s] = !s.dropped
				}
			}
		}
		if force[g.current()] && g.broken == nil {
			g.rotateLocked()
		}
		if force[g.current()] {
			// Its copies stay in the last segment until one can be begun.
			purgeErr = fmt.Errorf("remove runs: %w", cmp.Or(g.broken, g.failure))
		}
	}
	buf := g.buf[:0]
	for _, id := range ids {
		if r := g.forget(id); r != nil {
			buf = withID(buf, id, removedMarker)
			g.tombs[id] = tombstone{segs: segsOf(r)}
		}
	}
	g.buf = buf
	var err error
	if len(buf) > 0 {
		var e extent
		e, err = g.writeLocked(buf)
		for _, id := range ids {
			if t, ok := g.tombs[id]; ok && t.marker == nil {
				t.marker = e.seg
				g.tombs[id] = t
			}
		}
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	return cmp.Or(g.compact(force), purgeErr)
}

// compact empties the segments other than the last that are in force,
// hold nothing live, hold less live than dead, or are small, and removes
// them once what was moved out of them is durable. The last segment is
// spared while it takes writes; when moving runs out of the victims
// seals it and it qualifies, a second pass empties it too.
func (g *runsLog) compact(force map[*segment]bool) error {
	g.cmu.Lock()
	defer g.cmu.Unlock()
	last, err := g.compactPass(force)
	if err != nil {
		return err
	}
	g.mu.Lock()
	sealed := last != g.current() && !last.dropped && g.wasteful(last)
	g.mu.Unlock()
	if !sealed {
		return nil
	}
	_, err = g.compactPass(nil)
	return err
}

// wasteful reports whether segment s holds less live than dead, or is
// small. Called with mu held.
func (g *runsLog) wasteful(s *segment) bool {
	return s.live*2 < s.size || s.size < g.segBytes/16
}

// compactPass is one pass of compact; it returns the segment that was
// last when the victims were chosen. Called with cmu held.
func (g *runsLog) compactPass(force map[*segment]bool) (*segment, error) {
	g.mu.Lock()
	last := g.current()
	victims := map[*segment]bool{}
	for _, s := range g.segs[:len(g.segs)-1] {
		if force[s] || g.wasteful(s) {
			victims[s] = true
		}
	}
	var moving []string
	for id, r := range g.runs {
		if slices.ContainsFunc(r.extents, func(e extent) bool { return victims[e.seg] }) {
			moving = append(moving, id)
		}
	}
	g.mu.Unlock()
	if len(victims) == 0 {
		return last, nil
	}
	for _, id := range moving {
		if err := g.move(id, victims); err != nil {
			return last, err
		}
	}
	if err := g.keepTombstones(victims); err != nil {
		return last, err
	}
	if err := g.syncAll(); err != nil {
		return last, err
	}
	g.drop(victims)
	return last, g.costs.syncDir(g.dir)
}

// move copies run id's lines to the last segment after a moved line,
// when the run is still in the log and has lines in victims.
func (g *runsLog) move(id string, victims map[*segment]bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	r := g.runs[id]
	if r == nil || !slices.ContainsFunc(r.extents, func(e extent) bool { return victims[e.seg] }) {
		return nil
	}
	var copied []byte
	for _, e := range r.extents {
		copied = slices.Grow(copied, int(e.n))[:len(copied)+int(e.n)]
		if _, err := e.seg.f.ReadAt(copied[len(copied)-int(e.n):], e.off); err != nil {
			return fmt.Errorf("compact the runs log: read run %s from %s: %w", id, e.seg.path, err)
		}
	}
	if err := g.moveLocked(id, copied); err != nil {
		return fmt.Errorf("compact the runs log: %w", err)
	}
	return nil
}

// keepTombstones writes again, to the last segment, the removed lines in
// victims whose runs may still have lines in a segment before them, and
// forgets the tombstones that no segment needs any more.
func (g *runsLog) keepTombstones(victims map[*segment]bool) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	buf := g.buf[:0]
	var again []string
	for id, t := range g.tombs {
		t.segs = slices.DeleteFunc(t.segs, func(s *segment) bool { return s.dropped || victims[s] })
		if len(t.segs) == 0 {
			delete(g.tombs, id)
			continue
		}
		g.tombs[id] = t
		if victims[t.marker] {
			buf = withID(buf, id, removedMarker)
			again = append(again, id)
		}
	}
	g.buf = buf
	if len(buf) == 0 {
		return nil
	}
	e, err := g.writeLocked(buf)
	if err != nil {
		return fmt.Errorf("compact the runs log: %w", err)
	}
	for _, id := range again {
		t := g.tombs[id]
		t.marker = e.seg
		g.tombs[id] = t
	}
	return nil
}

// drop removes the files of victims, closing each once no reader holds
// it, and forgets them as places of the runs' stale copies.
func (g *runsLog) drop(victims map[*segment]bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.segs = slices.DeleteFunc(g.segs, func(s *segment) bool { return victims[s] })
	for s := range victims {
		s.dropped = true
		os.Remove(s.path)
		if s.refs == 0 {
			s.f.Close()
		}
	}
	for _, r := range g.runs {
		if len(r.stale) > 0 {
			r.stale = slices.DeleteFunc(r.stale, func(s *segment) bool { return s.dropped })
		}
	}
}
