package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// This file holds the tests of the space given ahead to the run store's
// log segments (run_store_alloc_linux.go, run_store_log.go).

// spaceAheadOrSkip skips the test where no space can be given ahead in
// dir (not Linux, or a filesystem without fallocate).
func spaceAheadOrSkip(t *testing.T, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, "probe")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := preallocate(f, 4096); err != nil {
		t.Skipf("no space can be given ahead here: %v", err)
	}
}

// TestRunsLogWritesIntoSpaceGivenAhead: a segment begins with its space
// given ahead, and lines are written into it, after the last whole line,
// across restarts. A torn line start-up cuts off is zeroed, so that the
// segment's lines end where its zeros begin, and the next start-up finds
// nothing to cut.
func TestRunsLogWritesIntoSpaceGivenAhead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spaceAheadOrSkip(t, dir)
	g, err := openRunsLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := g.current().path
	if _, err := g.appendLines("run_a", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	g.closeFiles()
	want := "run_a {\"a\":1}\n"
	checkSegment(t, path, want)

	// A crash while a line was written: two whole lines, and a torn one.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := `run_b {"b":1}` + "\n" + `run_b {"b":2,"long":"` + string(bytes.Repeat([]byte("x"), 500))
	if _, err := f.WriteAt([]byte(torn), int64(len(want))); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if g, err = openRunsLog(dir); err != nil {
		t.Fatal(err)
	}
	want += "run_b {\"b\":1}\n"
	checkSegment(t, path, want)
	if _, err := g.appendLines("run_c", []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	g.closeFiles()
	want += "run_c {}\n"
	checkSegment(t, path, want)

	if g, err = openRunsLog(dir); err != nil {
		t.Fatal(err)
	}
	defer g.closeFiles()
	if got := g.costs.written.Load(); got != 0 {
		t.Errorf("a start-up after a clean stop wrote %d bytes, want none", got)
	}
	for id, want := range map[string]string{"run_a": `{"a":1}` + "\n", "run_b": `{"b":1}` + "\n", "run_c": "{}\n"} {
		if got, err := g.read(id); err != nil || string(got) != want {
			t.Errorf("read %s = %q, %v; want %q", id, got, err, want)
		}
	}
}

// TestRunsLogGivesSpaceToAnOlderSegment: the last segment an older
// harnessd left, which grew as it was written, is given its space at
// start-up, and the next line goes after its own.
func TestRunsLogGivesSpaceToAnOlderSegment(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spaceAheadOrSkip(t, dir)
	path := filepath.Join(dir, logFilePrefix+"00000001")
	old := "run_a {\"a\":1}\n"
	if err := os.WriteFile(path, []byte(old), 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := openRunsLog(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.appendLines("run_b", []byte(`{"b":1}`)); err != nil {
		t.Fatal(err)
	}
	g.closeFiles()
	checkSegment(t, path, old+"run_b {\"b\":1}\n")
}

// checkSegment checks that the segment at path holds lines, then zeros
// to the end of a segment's space given ahead.
func checkSegment(t *testing.T, path, lines string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != segmentBytes {
		t.Fatalf("%s is %d bytes, want the %d of its space given ahead", path, len(b), segmentBytes)
	}
	if got := b[:len(lines)]; string(got) != lines {
		t.Fatalf("%s holds %q, want %q", path, got, lines)
	}
	if n := writtenLen(b); n != len(lines) {
		t.Fatalf("%s holds %q after its lines, want zeros", path, b[len(lines):n])
	}
}

// TestWrittenEnd: start-up reads a segment up to the end of its last
// data, never less, and nothing of the space given ahead after it where
// the filesystem tells the two apart.
func TestWrittenEnd(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	spaceAheadOrSkip(t, dir)
	f, err := os.Create(filepath.Join(dir, "segment"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const size = 8 << 20
	if err := preallocate(f, size); err != nil {
		t.Fatal(err)
	}
	_, err = f.Seek(0, seekData)
	tells := errors.Is(err, syscall.ENXIO) // none of it is data
	if got := writtenEnd(f, size); tells && got != 0 || !tells && got != size {
		t.Errorf("writtenEnd of a segment never written = %d, want %d (the filesystem tells space ahead from data: %v)", got, map[bool]int{true: 0, false: size}[tells], tells)
	}
	for _, off := range []int64{0, 1 << 20, size - 5} {
		if _, err := f.WriteAt([]byte("line\n"), off); err != nil {
			t.Fatal(err)
		}
		got := writtenEnd(f, size)
		if got < off+5 || got > size {
			t.Errorf("writtenEnd after a line at %d = %d, want from %d to %d", off, got, off+5, size)
		}
		if tells && off < 1<<20 && got > 1<<20 {
			t.Errorf("writtenEnd after a line at %d = %d: it reads the space given ahead", off, got)
		}
	}
}
