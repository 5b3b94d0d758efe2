package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
)

// This file holds how the run store finds damage on disk that no crash
// makes, and names it. A crash only tears the end of the last segment
// (cut off at start-up) and, after a power cut, may leave zeros where
// lines were not yet written; every segment but the last was fsynced
// whole before the next was begun. So start-up reports:
//   - a segment other than the last that is empty, or whose end is not a
//     whole line (it was cut short, or emptied);
//   - a line that is not a run's id followed by one JSON value, and does
//     not begin with a zero byte (junk written over or into the log);
//
// and then, when the log has any damage, reads every run whole and marks
// those it touched: a run whose events' sequence numbers have a gap (or
// do not begin at 1), one whose record says it ended but whose terminal
// event is missing, or one that has lines but no record. Each damaged
// segment and run is logged (WARN, with offsets); each run's record is
// written again with its damage (the run view's "damaged"), so that later
// start-ups, and whoever reads the run, see it even once compaction has
// removed the damaged segment. harnessd check --store reports the same
// without starting (cmd_check.go).

// A segmentDamage is damage found in one segment of the runs log.
type segmentDamage struct {
	segment string // the segment's file name
	offset  int64  // where the damage begins
	bytes   int64  // how many bytes it spans (0: to the segment's end)
	reason  string
	run     string // the run a junk line names, when it names one
}

// A runDamage says what a run lost to damage of the runs log; it is the
// run view's "damaged".
type runDamage struct {
	// Segment is the file name of the damaged segment nearest the run's
	// lines (log-00000003).
	Segment string `json:"segment"`
	// Offset is where in Segment the damage begins.
	Offset int64 `json:"offset"`
	// Reason says what is missing or wrong, in words.
	Reason string `json:"reason"`
	// EventsMissing is set when some of the run's events are gone: its
	// event history is not whole.
	EventsMissing bool `json:"events_missing"`
}

// noteJunk notes line, at off in seg, which is not a run's line; a line
// that begins with a zero byte is what a power cut leaves, not damage.
// idValid says the line begins with a run's id (its JSON is broken).
// Before the log is shared.
func (g *runsLog) noteJunk(seg *segment, line []byte, off int, id []byte, idValid bool) {
	if len(line) > 0 && line[0] == 0 {
		return
	}
	d := segmentDamage{segment: filepath.Base(seg.path), offset: int64(off), bytes: int64(len(line)),
		reason: fmt.Sprintf("%d bytes that are not a run's line", len(line))}
	if idValid {
		d.run = string(id)
		d.reason = fmt.Sprintf("a line of run %s of %d bytes that is not JSON", id, len(line))
	}
	g.damage = append(g.damage, d)
}

// findCutSegments notes the segments other than the last that are empty
// or do not end with a whole line. Before the log is shared.
func (g *runsLog) findCutSegments() {
	for i, seg := range g.segs {
		if i == len(g.segs)-1 {
			break
		}
		name := filepath.Base(seg.path)
		switch {
		case seg.torn > 0:
			g.damage = append(g.damage, segmentDamage{segment: name, offset: seg.size, bytes: seg.torn,
				reason: fmt.Sprintf("cut short: it ends with %d bytes of a line, and a later segment exists", seg.torn)})
		case seg.size == 0:
			g.damage = append(g.damage, segmentDamage{segment: name,
				reason: "empty, and a later segment exists: its runs' lines are gone"})
		}
	}
}

// logDamage logs each damaged segment (WARN).
func logDamage(logger *slog.Logger, dir string, damage []segmentDamage) {
	for _, d := range damage {
		logger.Warn("the runs log is damaged", "dir", dir, "segment", d.segment, "offset", d.offset, "bytes", d.bytes, "reason", d.reason)
	}
}

// runDamageOf returns what run id lost, found in f, its lines, and
// recorded, whether its record says it ended; nil when nothing is
// missing.
func (g *runsLog) runDamageOf(id string, f runFile, ended bool) *runDamage {
	var reason string
	missing := true
	switch next := 1; {
	case f.record == nil:
		reason = "its record is missing"
	default:
		for _, ev := range f.events {
			if ev.Seq != next {
				if ev.Seq-1 == next {
					reason = fmt.Sprintf("event %d is missing", next)
				} else {
					reason = fmt.Sprintf("events %d to %d are missing", next, ev.Seq-1)
				}
				break
			}
			next++
		}
		if reason == "" && ended && (len(f.events) == 0 || !isTerminalEvent(f.events[len(f.events)-1].Type)) {
			reason = fmt.Sprintf("its events after %d, the terminal one among them, are missing", len(f.events))
		}
		if reason == "" && f.bad > 0 {
			reason, missing = fmt.Sprintf("%d of its lines are not JSON", f.bad), false
		}
	}
	for _, d := range g.damage {
		if d.run == id && reason == "" {
			reason, missing = d.reason, false
		}
	}
	if reason == "" {
		return nil
	}
	d := g.nearestDamage(id)
	return &runDamage{Segment: d.segment, Offset: d.offset, Reason: reason, EventsMissing: missing}
}

// nearestDamage returns the damage that names run id, else the one in
// the segment nearest (by number) to those holding the run's lines.
func (g *runsLog) nearestDamage(id string) segmentDamage {
	var nums []int
	g.mu.Lock()
	if r := g.runs[id]; r != nil {
		for _, e := range r.extents {
			nums = append(nums, e.seg.num)
		}
	}
	g.mu.Unlock()
	best, bestDist := g.damage[0], -1
	for _, d := range g.damage {
		if d.run == id {
			return d
		}
		var num int
		fmt.Sscanf(d.segment, logFilePrefix+"%d", &num)
		for _, n := range nums {
			if dist := max(n-num, num-n); bestDist < 0 || dist < bestDist {
				best, bestDist = d, dist
			}
		}
	}
	return best
}

// A damagedRun is a run found damaged, for the log and check --store.
type damagedRun struct {
	id     string
	damage runDamage
}

// logDamagedRun logs a damaged run (WARN).
func logDamagedRun(logger *slog.Logger, d damagedRun) {
	logger.Warn("a run is damaged in the runs log", "run", d.id, "segment", d.damage.Segment, "offset", d.damage.Offset,
		"reason", d.damage.Reason, "events_missing", d.damage.EventsMissing)
}

// checkRun reads run id whole and returns what it lost, or nil, when the
// log has damage; nil at once otherwise. ended says the run's record
// says it ended.
func (s *runStore) checkRun(id string, ended bool) *runDamage {
	if len(s.log.damage) == 0 {
		return nil
	}
	b, err := s.log.read(id)
	if err != nil {
		return &runDamage{Segment: s.log.nearestDamage(id).segment, Reason: err.Error(), EventsMissing: true}
	}
	return s.log.runDamageOf(id, parseRunFile(b), ended)
}

// String returns the line check --store prints for a damaged run.
func (d damagedRun) String() string {
	var b bytes.Buffer
	fmt.Fprintf(&b, "run %s: damaged in %s at offset %d: %s", d.id, d.damage.Segment, d.damage.Offset, d.damage.Reason)
	if d.damage.EventsMissing {
		b.WriteString(" (its events are not whole)")
	}
	return b.String()
}

// sortDamagedRuns orders runs by id, for stable output.
func sortDamagedRuns(runs []damagedRun) {
	slices.SortFunc(runs, func(a, b damagedRun) int { return bytes.Compare([]byte(a.id), []byte(b.id)) })
}

// A storeReport is what check --store found in a runs directory.
type storeReport struct {
	segments int
	runs     int
	damage   []segmentDamage
	damaged  []damagedRun
}

// checkRunsStore reads the runs log in dir without writing anything,
// taking no lock (harnessd may be running), and returns the damage it
// finds as start-up would, with the runs a start-up marked damaged
// before.
func checkRunsStore(dir string) (storeReport, error) {
	g, err := loadRunsLog(dir, true)
	if err != nil {
		return storeReport{}, fmt.Errorf("runs store %s: %w", dir, err)
	}
	defer g.closeFiles()
	s := &runStore{dir: dir, logger: slog.New(slog.DiscardHandler), log: g}
	rep := storeReport{segments: len(g.segs), damage: g.damage}
	for _, id := range g.ids() {
		rep.runs++
		b, err := g.read(id)
		if err != nil {
			return rep, fmt.Errorf("runs store %s: %w", dir, err)
		}
		f := parseRunFile(b)
		var v runView
		ended := f.record != nil && json.Unmarshal(f.record, &v) == nil && isTerminal(v.Status)
		if v.Damaged != nil {
			rep.damaged = append(rep.damaged, damagedRun{id, *v.Damaged})
		} else if d := s.checkRun(id, ended); d != nil {
			rep.damaged = append(rep.damaged, damagedRun{id, *d})
		}
	}
	sortDamagedRuns(rep.damaged)
	return rep, nil
}
