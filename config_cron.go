package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// This file holds the cron expressions of [[schedules]]: the five fields
// (minute, hour, day of month, month, day of week) with ranges, steps,
// lists and names, the @hourly, @daily, @weekly, @monthly and @yearly
// shorthands, and the next fire time in a time zone, daylight saving time
// included: a wall-clock time that does not exist (skipped by a
// spring-forward jump) fires once at the first instant after the jump, and
// one that occurs twice (a fall-back) fires once, at its first occurrence.

// cronSearchYears bounds the search for the next fire time: long enough
// for February 29 across a century year that is not a leap year.
const cronSearchYears = 9

// A cronField is one field's rule: its name and bounds for errors, and
// the names its values may take (nil for none).
type cronField struct {
	name     string
	min, max int
	names    []string // names[i] is the value min+i
}

// cronFields are the five fields in the order they are written.
var cronFields = [5]cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	// 7 is Sunday too, as in every cron.
	{name: "day of week", min: 0, max: 7, names: []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}},
}

// cronShorthands are the @ forms and the fields they stand for.
var cronShorthands = map[string]string{
	"@hourly":   "0 * * * *",
	"@daily":    "0 0 * * *",
	"@midnight": "0 0 * * *",
	"@weekly":   "0 0 * * 0",
	"@monthly":  "0 0 1 * *",
	"@yearly":   "0 0 1 1 *",
	"@annually": "0 0 1 1 *",
}

// A cronSpec is a parsed cron expression: one bit per allowed value of
// each field. Read-only once parsed; safe for concurrent use.
type cronSpec struct {
	minute, hour, dom, month, dow uint64
	// domAny and dowAny are set when the field starts with "*": with both
	// restricted, a day matches when either matches (the cron rule).
	domAny, dowAny bool
}

// parseCron parses a five-field cron expression or a shorthand. Its
// errors name the field and the part at fault, and say what to write.
func parseCron(expr string) (*cronSpec, error) {
	expr = strings.TrimSpace(expr)
	if strings.HasPrefix(expr, "@") {
		fields, ok := cronShorthands[strings.ToLower(expr)]
		if !ok {
			return nil, fmt.Errorf("cron %q: unknown shorthand; use @hourly, @daily, @weekly, @monthly or @yearly, or five fields", expr)
		}
		expr = fields
	}
	parts := strings.Fields(expr)
	if len(parts) != len(cronFields) {
		return nil, fmt.Errorf("cron %q: %d fields; write five: minute hour day-of-month month day-of-week (like \"0 3 * * mon-fri\")", expr, len(parts))
	}
	var sets [5]uint64
	for i, part := range parts {
		set, err := cronFields[i].parse(part)
		if err != nil {
			return nil, fmt.Errorf("cron %q: field %d (%s) %q: %v", expr, i+1, cronFields[i].name, part, err)
		}
		sets[i] = set
	}
	// Sunday is 0 and 7.
	if sets[4]&(1<<7) != 0 {
		sets[4] = sets[4]&^(1<<7) | 1
	}
	spec := &cronSpec{minute: sets[0], hour: sets[1], dom: sets[2], month: sets[3], dow: sets[4],
		domAny: strings.HasPrefix(parts[2], "*"), dowAny: strings.HasPrefix(parts[4], "*")}
	if _, ok := spec.next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.UTC); !ok {
		return nil, fmt.Errorf("cron %q: never fires: no month given has the day of month given; fix the day of month or the month", expr)
	}
	return spec, nil
}

// parse returns the set of values of one field: a comma-separated list of
// "*", a value, a range a-b, each with an optional step /n ("5/15" is
// 5-max/15).
func (f cronField) parse(field string) (uint64, error) {
	var set uint64
	for item := range strings.SplitSeq(field, ",") {
		if item == "" {
			return 0, errors.New("empty list item; separate values with single commas")
		}
		base, stepText, hasStep := strings.Cut(item, "/")
		step := 1
		if hasStep {
			n, err := strconv.Atoi(stepText)
			if err != nil || n < 1 {
				return 0, fmt.Errorf("step %q is not a positive number", stepText)
			}
			step = n
		}
		lo, hi := f.min, f.max
		switch {
		case base == "*":
		case strings.Contains(base, "-"):
			a, b, _ := strings.Cut(base, "-")
			var err error
			if lo, err = f.value(a); err != nil {
				return 0, err
			}
			if hi, err = f.value(b); err != nil {
				return 0, err
			}
			if lo > hi {
				return 0, fmt.Errorf("range %s runs backwards; write the smaller value first", base)
			}
		default:
			v, err := f.value(base)
			if err != nil {
				return 0, err
			}
			lo = v
			if !hasStep {
				hi = v
			}
		}
		for v := lo; v <= hi; v += step {
			set |= 1 << v
		}
	}
	return set, nil
}

// value parses one value of the field: a number within its bounds or one
// of its names (three letters, any case).
func (f cronField) value(s string) (int, error) {
	for i, name := range f.names {
		if strings.EqualFold(s, name) {
			return f.min + i, nil
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		if f.names != nil {
			return 0, fmt.Errorf("%q is neither a number nor a name (%s-%s)", s, f.names[0], f.names[len(f.names)-1])
		}
		return 0, fmt.Errorf("%q is not a number", s)
	}
	if n < f.min || n > f.max {
		return 0, fmt.Errorf("%d is out of range %d-%d", n, f.min, f.max)
	}
	return n, nil
}

// cronSetHas reports whether bit v of set is set.
func cronSetHas(set uint64, v int) bool { return set&(1<<v) != 0 }

// dayMatches reports whether the civil date y-m-d (its weekday wd)
// matches the day of month, month and day of week fields.
func (c *cronSpec) dayMatches(m time.Month, d int, wd time.Weekday) bool {
	if !cronSetHas(c.month, int(m)) {
		return false
	}
	domOK, dowOK := cronSetHas(c.dom, d), cronSetHas(c.dow, int(wd))
	if !c.domAny && !c.dowAny {
		return domOK || dowOK
	}
	return domOK && dowOK
}

// next returns the first fire time strictly after after, in loc, and
// false when there is none within cronSearchYears. Wall-clock times are
// matched in loc: one skipped by a daylight saving jump fires at the
// first instant after the jump (once, however many fire times the jump
// skipped), one that occurs twice fires at its first occurrence only.
func (c *cronSpec) next(after time.Time, loc *time.Location) (time.Time, bool) {
	local := after.In(loc)
	y, m, d := local.Date()
	startH, startMin := local.Hour(), local.Minute()
	for day := 0; day <= cronSearchYears*366; day++ {
		date := time.Date(y, m, d+day, 0, 0, 0, 0, time.UTC)
		if !c.dayMatches(date.Month(), date.Day(), date.Weekday()) {
			continue
		}
		for h := range 24 {
			if !cronSetHas(c.hour, h) || (day == 0 && h < startH) {
				continue
			}
			for mi := range 60 {
				if !cronSetHas(c.minute, mi) || (day == 0 && h == startH && mi < startMin) {
					continue
				}
				if t := wallInstant(date.Year(), date.Month(), date.Day(), h, mi, loc); t.After(after) {
					return t, true
				}
			}
		}
	}
	return time.Time{}, false
}

// wallInstant returns the instant the wall-clock time y-m-d h:mi shows in
// loc: its first occurrence when a fall-back repeats it, and the end of
// the jump when a spring-forward skips it.
func wallInstant(y int, m time.Month, d, h, mi int, loc *time.Location) time.Time {
	wall := time.Date(y, m, d, h, mi, 0, 0, time.UTC)
	// Offsets lie within -12h and +14h: the instant is at most 14 hours
	// before the wall time read as UTC. Walk the zone's periods from there.
	at := wall.Add(-14 * time.Hour)
	for range 8 {
		start, end := at.In(loc).ZoneBounds()
		_, offset := at.In(loc).Zone()
		candidate := wall.Add(-time.Duration(offset) * time.Second)
		switch {
		case !start.IsZero() && candidate.Before(start):
			// This period's clock starts past the wall time: a jump
			// skipped it.
			return start
		case end.IsZero() || candidate.Before(end):
			return candidate
		}
		at = end
	}
	// Unreachable for real zones (a day spans few transitions).
	return time.Date(y, m, d, h, mi, 0, 0, loc)
}
