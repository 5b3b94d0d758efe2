package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// This file holds the audit trail: one JSON line for each tool call, each
// admin action and, per minute, the requests refused, appended under
// $HARNESS_HOME/audit/ in one file per UTC day. Each line carries the
// SHA-256 of the line before it (prev), so a line edited or removed is
// found by harnessd audit verify; audit/head holds the last line's hash,
// so an edit of the last line is found too. The trail is kept apart from
// the runs: run retention never touches it; its own retention drops whole
// days by age and size.

// Kinds of audit records.
const (
	auditToolCall = "tool_call"
	auditAdmin    = "admin"
	auditRefused  = "refused"
	// A tool's definition listed differently from its pin (pin_tools hold
	// or warn): a server changed a tool under harnessd.
	auditToolChanged = "tool_changed"
)

// zeroHash is the prev of the first line of a new trail.
var zeroHash = strings.Repeat("0", 64)

// An auditRecord is one line of the trail. Seq, Time and Prev are set by
// the log; the rest by who records.
type auditRecord struct {
	Seq  int64     `json:"seq"`
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	// Key and Tenant are who: the API key's name ("" with auth off, or
	// schedule:<name> for a scheduled run's calls).
	Key    string `json:"key,omitempty"`
	Tenant string `json:"tenant,omitempty"`
	// A tool call's run, server ("" for built-ins) and tool (as the model
	// named it), its arguments' SHA-256 and size, the approval that gated
	// it and who decided that, its start, duration and outcome ("ok",
	// "error", "denied").
	Run        string         `json:"run,omitempty"`
	Server     string         `json:"server,omitempty"`
	Tool       string         `json:"tool,omitempty"`
	ArgsSHA256 string         `json:"args_sha256,omitempty"`
	ArgsBytes  int            `json:"args_bytes,omitempty"`
	ApprovalID string         `json:"approval_id,omitempty"`
	DecidedBy  string         `json:"decided_by,omitempty"`
	Start      *time.Time     `json:"start,omitempty"`
	DurationMS float64        `json:"duration_ms,omitempty"`
	Outcome    string         `json:"outcome,omitempty"`
	Action     string         `json:"action,omitempty"`  // an admin action: "POST /v1/schedules/{name}/run"
	Target     string         `json:"target,omitempty"`  // what it acted on: the request's path
	Status     int            `json:"status,omitempty"`  // the answer's HTTP status
	Refused    map[string]int `json:"refused,omitempty"` // requests refused in the minute, by reason
	// A tool definition changed: the fields that differ and the digests
	// of the pinned and the listed definitions; its outcome is "held" or
	// "warned" (pin_tools).
	Changed   []string `json:"changed,omitempty"`
	OldDigest string   `json:"old_digest,omitempty"`
	NewDigest string   `json:"new_digest,omitempty"`
	Prev      string   `json:"prev"`
}

// auditSettings bound the trail ([audit] in TOML).
type auditSettings struct {
	Off      bool
	MaxAge   time.Duration // 0: no bound
	MaxBytes int64         // 0: no bound
}

// openAuditLog opens the trail in dir, creating it, and picks up the
// chain where the newest file ends. Its writer runs until close.
func openAuditLog(dir string, s auditSettings, logger *slog.Logger) (*auditLog, error) {
	return openAuditLogClock(dir, s, logger, time.Now)
}

// openAuditLogClock is openAuditLog with the clock now (tests set it).
func openAuditLogClock(dir string, s auditSettings, logger *slog.Logger, now func() time.Time) (*auditLog, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	l := &auditLog{dir: dir, settings: s, logger: orDiscard(logger), now: now, prev: zeroHash,
		refused: map[string]int{}, maxQueued: auditMaxQueued, writeSoon: time.NewTimer(time.Hour), stop: make(chan struct{}), done: make(chan struct{})}
	files, err := auditFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		last, n, err := lastLine(filepath.Join(dir, files[len(files)-1]))
		if err != nil {
			return nil, fmt.Errorf("audit: %w", err)
		}
		if n > 0 {
			var rec auditRecord
			if err := json.Unmarshal(last, &rec); err != nil {
				return nil, fmt.Errorf("audit: the last line of %s does not parse (%v): check it with harnessd audit verify", files[len(files)-1], err)
			}
			l.seq, l.prev = rec.Seq, lineHash(last)
		}
	}
	l.writeSoon.Stop() // armed by the first record
	l.prune()
	// Owned by the log; exits at close, after the last sync.
	go l.writeLoop()
	return l, nil
}

// lineHash is the SHA-256 of a line, without its newline, in hex.
func lineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// auditFiles returns the trail's files in dir, oldest first.
func auditFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	var names []string
	for _, e := range entries {
		if n := e.Name(); strings.HasPrefix(n, "audit-") && strings.HasSuffix(n, ".jsonl") && e.Type().IsRegular() {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names, nil
}

// lastLine returns the last line of path (without its newline) and the
// number of bytes in the file.
func lastLine(path string) ([]byte, int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	data = bytes.TrimRight(data, "\n")
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		return data[i+1:], int64(len(data)), nil
	}
	return data, int64(len(data)), nil
}

// auditHead is audit/head: the sequence number and hash of the last line
// synced.
type auditHead struct {
	Seq    int64  `json:"seq"`
	SHA256 string `json:"sha256"`
}

// prune removes the oldest days past the settings' age and size, never
// today's file.
func (l *auditLog) prune() {
	files, err := auditFiles(l.dir)
	if err != nil || len(files) < 2 {
		return
	}
	today := "audit-" + l.now().UTC().Format(time.DateOnly) + ".jsonl"
	var total int64
	sizes := make([]int64, len(files))
	for i, f := range files {
		if st, err := os.Stat(filepath.Join(l.dir, f)); err == nil {
			sizes[i] = st.Size()
			total += sizes[i]
		}
	}
	for i, f := range files[:len(files)-1] {
		if f == today {
			break
		}
		day, err := time.Parse(time.DateOnly, strings.TrimSuffix(strings.TrimPrefix(f, "audit-"), ".jsonl"))
		old := err == nil && l.settings.MaxAge > 0 && l.now().Sub(day.Add(24*time.Hour)) > l.settings.MaxAge
		big := l.settings.MaxBytes > 0 && total > l.settings.MaxBytes
		if !old && !big {
			break
		}
		if os.Remove(filepath.Join(l.dir, f)) == nil {
			total -= sizes[i]
			l.logger.Info("audit: removed a day past retention", "file", f)
		}
	}
}

// An auditBreak is where verification found the chain broken.
type auditBreak struct {
	File string
	Line int
	Why  string
}

func (b *auditBreak) Error() string {
	return fmt.Sprintf("audit: %s line %d: %s", b.File, b.Line, b.Why)
}

// auditSummary is what verification read.
type auditSummary struct {
	Files, Records int
	First, Last    time.Time
}

// verifyAudit checks the chain of every file in dir, oldest first: each
// line's prev is the hash of the line before it (the oldest kept line's
// is trusted: older days may have been pruned), sequence numbers follow
// each other, and the head names the last line. It returns the first
// break as an *auditBreak.
func verifyAudit(dir string) (auditSummary, error) {
	var sum auditSummary
	files, err := auditFiles(dir)
	if err != nil {
		return sum, err
	}
	prev, seq := "", int64(0)
	for _, name := range files {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return sum, fmt.Errorf("audit: %w", err)
		}
		err = verifyFile(f, name, &prev, &seq, &sum)
		f.Close()
		if err != nil {
			return sum, err
		}
		sum.Files++
	}
	if sum.Records == 0 {
		return sum, nil
	}
	data, err := os.ReadFile(filepath.Join(dir, "head"))
	if err != nil {
		return sum, nil // not yet synced: nothing to compare
	}
	var head auditHead
	if json.Unmarshal(data, &head) != nil || head.Seq > seq || (head.Seq == seq && head.SHA256 != prev) {
		return sum, &auditBreak{File: files[len(files)-1], Line: -1,
			Why: fmt.Sprintf("the last record (seq %d) is not the one audit/head names (seq %d): the end of the trail was edited or removed", seq, head.Seq)}
	}
	return sum, nil
}

// verifyFile checks one file's lines against the chain so far.
func verifyFile(r io.Reader, name string, prev *string, seq *int64, sum *auditSummary) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		var rec auditRecord
		if err := json.Unmarshal(line, &rec); err != nil {
			return &auditBreak{File: name, Line: n, Why: fmt.Sprintf("not a record (%v): the line was edited", err)}
		}
		switch {
		case *prev != "" && rec.Prev != *prev:
			return &auditBreak{File: name, Line: n, Why: fmt.Sprintf("it does not follow the line before it (seq %d): that line was edited, or lines between them were removed", *seq)}
		case *seq != 0 && rec.Seq != *seq+1:
			return &auditBreak{File: name, Line: n, Why: fmt.Sprintf("seq %d follows %d: records were removed or reordered", rec.Seq, *seq)}
		}
		*prev, *seq = lineHash(line), rec.Seq
		if sum.Records == 0 {
			sum.First = rec.Time
		}
		sum.Last = rec.Time
		sum.Records++
	}
	if err := sc.Err(); err != nil {
		return errors.Join(&auditBreak{File: name, Line: -1, Why: "unreadable"}, err)
	}
	return nil
}
