package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// This file tests the audit trail (audit.go): records chained across
// days, every kind of tampering found and named, retention, and
// harnessd audit verify.

// auditClock is a settable clock for an auditLog. Safe for concurrent use.
type auditClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *auditClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *auditClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// writeTrail writes n tool-call records into a fresh trail in dir, the
// first half on one day and the rest on the next, and closes it.
func writeTrail(t *testing.T, dir string, n int) {
	t.Helper()
	clock := &auditClock{t: time.Date(2026, 12, 4, 23, 59, 0, 0, time.UTC)}
	l, err := openAuditLogClock(dir, auditSettings{}, nil, clock.now)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if i == n/2 {
			clock.add(2 * time.Minute) // the next day
		}
		l.record(auditRecord{Type: auditToolCall, Key: "ci", Run: "run_1", Server: "github", Tool: "mcp_github_search", ArgsSHA256: strings.Repeat("a", 64), ArgsBytes: i, Outcome: "ok"})
	}
	l.close()
}

// editTrail applies edit to the lines of file name in dir.
func editTrail(t *testing.T, dir, name string, edit func([][]byte) [][]byte) {
	t.Helper()
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	lines = edit(lines)
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestAuditTrailVerify(t *testing.T) {
	t.Parallel()
	const day1, day2 = "audit-2026-12-04.jsonl", "audit-2026-12-05.jsonl"
	tests := []struct {
		name     string
		file     string
		edit     func([][]byte) [][]byte
		wantFile string
		wantLine int // -1: the head
	}{
		{"untouched", "", nil, "", 0},
		{"a line edited", day1, func(l [][]byte) [][]byte {
			l[1] = bytes.Replace(l[1], []byte(`"key":"ci"`), []byte(`"key":"ops"`), 1)
			return l
		}, day1, 3},
		{"a line removed", day1, func(l [][]byte) [][]byte { return append(l[:1], l[2:]...) }, day1, 2},
		{"the first line of the next day removed", day2, func(l [][]byte) [][]byte { return l[1:] }, day2, 1},
		{"the last line edited", day2, func(l [][]byte) [][]byte {
			l[len(l)-1] = bytes.Replace(l[len(l)-1], []byte(`"outcome":"ok"`), []byte(`"outcome":"error"`), 1)
			return l
		}, day2, -1},
		{"the last line removed", day2, func(l [][]byte) [][]byte { return l[:len(l)-1] }, day2, -1},
		{"two lines swapped", day1, func(l [][]byte) [][]byte { l[0], l[1] = l[1], l[0]; return l }, day1, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeTrail(t, dir, 8)
			if tt.edit != nil {
				editTrail(t, dir, tt.file, tt.edit)
			}
			sum, err := verifyAudit(dir)
			if tt.wantFile == "" {
				if err != nil || sum.Records != 8 || sum.Files != 2 {
					t.Fatalf("verify = %+v, %v; want 8 records in 2 files", sum, err)
				}
				return
			}
			var b *auditBreak
			if !errors.As(err, &b) || b.File != tt.wantFile || b.Line != tt.wantLine {
				t.Fatalf("verify = %v, want a break at %s line %d", err, tt.wantFile, tt.wantLine)
			}
		})
	}
}

func TestAuditTrailContinuesAfterReopen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeTrail(t, dir, 4)
	l, err := openAuditLog(dir, auditSettings{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	l.record(auditRecord{Type: auditAdmin, Key: "ops", Action: "POST /v1/schedules/{name}/run", Status: 202})
	l.close()
	if sum, err := verifyAudit(dir); err != nil || sum.Records != 5 {
		t.Fatalf("verify after a reopen = %+v, %v; want 5 records chained", sum, err)
	}
}

func TestAuditTrailRetention(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		settings auditSettings
		want     []string
	}{
		{"no bounds keep every day", auditSettings{}, []string{"audit-2026-09-01.jsonl", "audit-2026-12-01.jsonl", "audit-2026-12-05.jsonl"}},
		{"age drops the old days", auditSettings{MaxAge: 30 * 24 * time.Hour}, []string{"audit-2026-12-01.jsonl", "audit-2026-12-05.jsonl"}},
		{"size drops the oldest first, never today", auditSettings{MaxBytes: 1}, []string{"audit-2026-12-05.jsonl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, day := range []string{"2026-09-01", "2026-12-01", "2026-12-05"} {
				if err := os.WriteFile(filepath.Join(dir, "audit-"+day+".jsonl"), []byte(`{"seq":1,"prev":"x"}`+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			l := &auditLog{dir: dir, settings: tt.settings, logger: orDiscard(nil), now: func() time.Time { return now }}
			l.prune()
			got, err := auditFiles(dir)
			if err != nil || strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("kept %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestAuditVerifyCommand(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeTrail(t, filepath.Join(home, "audit"), 6)
	run := func() (string, error) {
		var out, errOut bytes.Buffer
		a := &app{stdout: &out, stderr: &errOut, getenv: fakeEnv(map[string]string{"HARNESS_HOME": home})}
		err := a.run(context.Background(), []string{"audit", "verify"})
		return out.String(), err
	}
	if out, err := run(); err != nil || !strings.Contains(out, "audit trail ok: 6 records in 2 files") {
		t.Fatalf("verify = %q, %v; want ok with 6 records in 2 files", out, err)
	}
	editTrail(t, filepath.Join(home, "audit"), "audit-2026-12-04.jsonl", func(l [][]byte) [][]byte { return append(l[:1], l[2:]...) })
	_, err := run()
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != 1 || !strings.Contains(err.Error(), "audit-2026-12-04.jsonl line 2") {
		t.Fatalf("verify of a trail with a line removed = %v, want exit 1 naming audit-2026-12-04.jsonl line 2", err)
	}
}

// A refusingFile is a day's file of the trail whose writes fail while
// refuse is set, as a full disk's do; the first one writes cut bytes of
// what it is given before it fails. Written under the log's ioMu.
type refusingFile struct {
	*os.File
	cut    int
	refuse atomic.Bool
}

func (f *refusingFile) Write(p []byte) (int, error) {
	if f.refuse.Load() {
		n, _ := f.File.Write(p[:min(f.cut, len(p))])
		f.cut -= n
		return n, syscall.ENOSPC
	}
	return f.File.Write(p)
}

// TestAuditWritesRefused refuses the trail's writes for a while: the
// records made meanwhile wait, the failure is logged, and once writes
// succeed they are written whole and in order, the chain unbroken; past
// the bound on what may wait, new records are dropped and left out of the
// chain.
func TestAuditWritesRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cut       int // bytes the first refused write still writes
		maxQueued int // 0: the default
		want      int // records in the trail: 2 before, 6 during
	}{
		{name: "nothing written", want: 8},
		{name: "half a line written", cut: 40, want: 8},
		{name: "too many waiting", maxQueued: 2, want: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			logs := newLogRecorder()
			l, err := openAuditLog(dir, auditSettings{}, logs.logger())
			if err != nil {
				t.Fatal(err)
			}
			defer l.close()
			rec := auditRecord{Type: auditToolCall, Key: "ci", Run: "run_1", Server: "github", Tool: "mcp_github_search", Outcome: "ok"}
			for range 2 {
				l.record(rec)
			}
			l.flush(false)
			l.ioMu.Lock() // the writer waits: the six records are queued together
			path := l.f.Name()
			before, err := os.ReadFile(path)
			if err != nil || bytes.Count(before, []byte("\n")) != 2 {
				t.Fatalf("the trail before the refusals = %q, %v; want 2 lines", before, err)
			}
			refusing := &refusingFile{File: l.f.(*os.File), cut: tt.cut}
			refusing.refuse.Store(true)
			l.f = refusing
			if tt.maxQueued > 0 {
				l.mu.Lock()
				l.maxQueued = tt.maxQueued
				l.mu.Unlock()
			}
			for range 6 {
				l.record(rec)
			}
			l.ioMu.Unlock()
			l.flush(true)
			logs.waitFor(t, "the refused write logged", func(rs []loggedRecord) bool {
				return slices.ContainsFunc(rs, func(r loggedRecord) bool { return strings.Contains(r.Message, "cannot be written") })
			})
			if during, _ := os.ReadFile(path); len(during) != len(before)+tt.cut {
				t.Fatalf("the trail while writes are refused has %d bytes, want %d", len(during), len(before)+tt.cut)
			}
			refusing.refuse.Store(false)
			l.close()
			if sum, err := verifyAudit(dir); err != nil || sum.Records != tt.want {
				t.Fatalf("verify once writes succeed = %+v, %v; want %d records chained", sum, err, tt.want)
			}
		})
	}
}
