package main

import (
	"strings"
	"testing"
	"time"
)

// This file tests the cron expressions of schedules: every field form,
// the shorthands, the errors, and next fire times across daylight saving
// changes and February 29.

// bitsOf returns the set with the given values.
func bitsOf(values ...int) uint64 {
	var set uint64
	for _, v := range values {
		set |= 1 << v
	}
	return set
}

// span returns the values lo to hi by step.
func span(lo, hi, step int) []int {
	var out []int
	for v := lo; v <= hi; v += step {
		out = append(out, v)
	}
	return out
}

func TestParseCronFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr                          string
		minute, hour, dom, month, dow uint64
		domAny, dowAny                bool
	}{
		{"* * * * *", bitsOf(span(0, 59, 1)...), bitsOf(span(0, 23, 1)...), bitsOf(span(1, 31, 1)...), bitsOf(span(1, 12, 1)...), bitsOf(span(0, 6, 1)...), true, true},
		{"5 3 * * *", bitsOf(5), bitsOf(3), bitsOf(span(1, 31, 1)...), bitsOf(span(1, 12, 1)...), bitsOf(span(0, 6, 1)...), true, true},
		{"*/15 9-17 1,15 * mon-fri", bitsOf(0, 15, 30, 45), bitsOf(span(9, 17, 1)...), bitsOf(1, 15), bitsOf(span(1, 12, 1)...), bitsOf(1, 2, 3, 4, 5), false, false},
		{"10-50/20 0-23/6 */10 jan-mar,DEC sun", bitsOf(10, 30, 50), bitsOf(0, 6, 12, 18), bitsOf(1, 11, 21, 31), bitsOf(1, 2, 3, 12), bitsOf(0), true, false},
		{"5/20 * * * 7", bitsOf(5, 25, 45), bitsOf(span(0, 23, 1)...), bitsOf(span(1, 31, 1)...), bitsOf(span(1, 12, 1)...), bitsOf(0), true, false},
		{"0 0 * * 5-7", bitsOf(0), bitsOf(0), bitsOf(span(1, 31, 1)...), bitsOf(span(1, 12, 1)...), bitsOf(0, 5, 6), true, false},
		{"@hourly", bitsOf(0), bitsOf(span(0, 23, 1)...), bitsOf(span(1, 31, 1)...), bitsOf(span(1, 12, 1)...), bitsOf(span(0, 6, 1)...), true, true},
		{"@daily", bitsOf(0), bitsOf(0), bitsOf(span(1, 31, 1)...), bitsOf(span(1, 12, 1)...), bitsOf(span(0, 6, 1)...), true, true},
		{"@weekly", bitsOf(0), bitsOf(0), bitsOf(span(1, 31, 1)...), bitsOf(span(1, 12, 1)...), bitsOf(0), true, false},
		{"@MONTHLY", bitsOf(0), bitsOf(0), bitsOf(1), bitsOf(span(1, 12, 1)...), bitsOf(span(0, 6, 1)...), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			c, err := parseCron(tt.expr)
			if err != nil {
				t.Fatalf("parseCron(%q): %v", tt.expr, err)
			}
			want := cronSpec{minute: tt.minute, hour: tt.hour, dom: tt.dom, month: tt.month, dow: tt.dow, domAny: tt.domAny, dowAny: tt.dowAny}
			if *c != want {
				t.Errorf("parseCron(%q) = %+v, want %+v", tt.expr, *c, want)
			}
		})
	}
}

func TestParseCronErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		expr string
		want []string // substrings of the error
	}{
		{"* * * *", []string{"4 fields", "five"}},
		{"60 * * * *", []string{"field 1 (minute)", "60 is out of range 0-59"}},
		{"* 24 * * *", []string{"field 2 (hour)", "out of range 0-23"}},
		{"* * 0 * *", []string{"field 3 (day of month)", "out of range 1-31"}},
		{"* * * 13 *", []string{"field 4 (month)", "out of range 1-12"}},
		{"* * * foo *", []string{"field 4 (month)", `"foo" is neither a number nor a name (jan-dec)`}},
		{"* * * * 8", []string{"field 5 (day of week)", "out of range 0-7"}},
		{"* * * * mon-fry", []string{"field 5 (day of week)", "sun-sat"}},
		{"*/0 * * * *", []string{"field 1 (minute)", "step"}},
		{"5-1 * * * *", []string{"field 1 (minute)", "backwards"}},
		{"1,,2 * * * *", []string{"field 1 (minute)", "empty list item"}},
		{"0 0 30 feb *", []string{"never fires"}},
		{"@often", []string{"unknown shorthand", "@daily"}},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			_, err := parseCron(tt.expr)
			if err == nil {
				t.Fatalf("parseCron(%q) = nil error, want one with %q", tt.expr, tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("parseCron(%q) = %v, want it to say %q", tt.expr, err, w)
				}
			}
		})
	}
}

// mustZone loads an IANA zone or fails the test.
func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatalf("load zone %s: %v", name, err)
	}
	return loc
}

func TestCronNext(t *testing.T) {
	t.Parallel()
	berlin := mustZone(t, "Europe/Berlin")
	newYork := mustZone(t, "America/New_York")
	at := func(loc *time.Location, s string) time.Time {
		tm, err := time.ParseInLocation("2006-01-02 15:04 -0700", s, loc)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	utc := func(s string) time.Time { return at(time.UTC, s+" +0000") }
	tests := []struct {
		name  string
		expr  string
		loc   *time.Location
		after time.Time
		want  []time.Time // the next fire times, in order
	}{
		{"daily in UTC", "@daily", time.UTC, utc("2026-12-01 15:36"),
			[]time.Time{utc("2026-12-02 00:00"), utc("2026-12-03 00:00")}},
		{"strictly after a fire time", "30 * * * *", time.UTC, utc("2026-12-01 15:30"),
			[]time.Time{utc("2026-12-01 16:30"), utc("2026-12-01 17:30")}},
		{"weekdays only", "0 9 * * mon-fri", time.UTC, utc("2026-12-04 10:00"), // a Friday
			[]time.Time{utc("2026-12-07 09:00"), utc("2026-12-08 09:00")}},
		{"day of month or day of week", "0 0 13 * fri", time.UTC, utc("2026-11-01 00:00"),
			[]time.Time{utc("2026-11-06 00:00"), utc("2026-11-13 00:00"), utc("2026-11-20 00:00")}},
		{"day of month and any weekday step", "0 0 13 * */1", time.UTC, utc("2026-11-01 00:00"),
			[]time.Time{utc("2026-11-13 00:00"), utc("2026-12-13 00:00")}},
		{"February 29 skips to the next leap year", "0 12 29 2 *", time.UTC, utc("2024-03-01 00:00"),
			[]time.Time{utc("2028-02-29 12:00"), utc("2032-02-29 12:00")}},
		{"February 29 across 2100", "0 0 29 feb *", time.UTC, utc("2097-01-01 00:00"),
			[]time.Time{utc("2104-02-29 00:00")}},
		{"last day candidates of short months", "0 0 31 * *", time.UTC, utc("2026-04-01 00:00"),
			[]time.Time{utc("2026-05-31 00:00"), utc("2026-07-31 00:00")}},
		{"time zone", "0 9 * * *", berlin, utc("2026-12-01 09:00"),
			[]time.Time{at(berlin, "2026-12-02 09:00 +0100")}},
		// Berlin springs forward on 2026-03-29 from 02:00 to 03:00.
		{"spring forward: the skipped time fires once at the jump", "30 2 * * *", berlin, at(berlin, "2026-03-28 12:00 +0100"),
			[]time.Time{at(berlin, "2026-03-29 03:00 +0200"), at(berlin, "2026-03-30 02:30 +0200")}},
		{"spring forward: a skipped hour of fires fires once", "*/20 2-3 * * *", berlin, at(berlin, "2026-03-29 01:59 +0100"),
			[]time.Time{at(berlin, "2026-03-29 03:00 +0200"), at(berlin, "2026-03-29 03:20 +0200"), at(berlin, "2026-03-29 03:40 +0200"), at(berlin, "2026-03-30 02:00 +0200")}},
		// Berlin falls back on 2026-10-25 from 03:00 to 02:00.
		{"fall back: the repeated time fires once", "30 2 * * *", berlin, at(berlin, "2026-10-24 12:00 +0200"),
			[]time.Time{at(berlin, "2026-10-25 02:30 +0200"), at(berlin, "2026-10-26 02:30 +0100")}},
		{"fall back: hourly fires each wall hour once", "0 * * * *", berlin, at(berlin, "2026-10-25 01:30 +0200"),
			[]time.Time{at(berlin, "2026-10-25 02:00 +0200"), at(berlin, "2026-10-25 03:00 +0100"), at(berlin, "2026-10-25 04:00 +0100")}},
		// New York springs forward on 2026-03-08 and falls back on 2026-11-01.
		{"New York spring forward", "15 2 * * *", newYork, at(newYork, "2026-03-07 12:00 -0500"),
			[]time.Time{at(newYork, "2026-03-08 03:00 -0400"), at(newYork, "2026-03-09 02:15 -0400")}},
		{"New York fall back", "45 1 * * *", newYork, at(newYork, "2026-10-31 12:00 -0400"),
			[]time.Time{at(newYork, "2026-11-01 01:45 -0400"), at(newYork, "2026-11-02 01:45 -0500")}},
		{"daily through a spring forward", "@daily", newYork, at(newYork, "2026-03-07 12:00 -0500"),
			[]time.Time{at(newYork, "2026-03-08 00:00 -0500"), at(newYork, "2026-03-09 00:00 -0400")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parseCron(tt.expr)
			if err != nil {
				t.Fatalf("parseCron(%q): %v", tt.expr, err)
			}
			after := tt.after
			for i, want := range tt.want {
				got, ok := c.next(after, tt.loc)
				if !ok || !got.Equal(want) {
					t.Fatalf("fire %d of %q after %s = %s (%v), want %s", i+1, tt.expr, after.In(tt.loc), got.In(tt.loc), ok, want.In(tt.loc))
				}
				after = got
			}
		})
	}
}

func TestWallInstant(t *testing.T) {
	t.Parallel()
	berlin := mustZone(t, "Europe/Berlin")
	tests := []struct {
		name string
		wall [5]int // y m d h mi
		want string // RFC 3339 in UTC
	}{
		{"ordinary winter time", [5]int{2026, 1, 15, 12, 0}, "2026-01-15T11:00:00Z"},
		{"ordinary summer time", [5]int{2026, 7, 15, 12, 0}, "2026-07-15T10:00:00Z"},
		{"in the spring gap", [5]int{2026, 3, 29, 2, 30}, "2026-03-29T01:00:00Z"},
		{"start of the spring gap", [5]int{2026, 3, 29, 2, 0}, "2026-03-29T01:00:00Z"},
		{"end of the spring gap", [5]int{2026, 3, 29, 3, 0}, "2026-03-29T01:00:00Z"},
		{"repeated in the fall", [5]int{2026, 10, 25, 2, 30}, "2026-10-25T00:30:00Z"},
		{"after the fall repeat", [5]int{2026, 10, 25, 3, 0}, "2026-10-25T02:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.wall
			got := wallInstant(w[0], time.Month(w[1]), w[2], w[3], w[4], berlin).UTC().Format(time.RFC3339)
			if got != tt.want {
				t.Errorf("wallInstant(%v, Europe/Berlin) = %s, want %s", w, got, tt.want)
			}
		})
	}
}
