package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"
)

// This file holds the API's side of the audit trail (audit.go): the
// record of each admin action, and GET /v1/audit, which lists records
// newest first, filtered by key, server, tool, type and time, a page at a
// time.

// Bounds of a page of GET /v1/audit.
const (
	defaultAuditPage = 100
	maxAuditPage     = 1000
)

// auditAdmin records the admin request r, answered on w, as an action of
// info's key. pattern is the route's, so the action names no id.
func (a *api) auditAdmin(w http.ResponseWriter, r *http.Request, pattern string, info authInfo) {
	if a.audit == nil {
		return
	}
	status := http.StatusOK
	if rec, ok := w.(*statusRecorder); ok {
		status = rec.status
	}
	a.audit.record(auditRecord{Type: auditAdmin, Key: info.key, Tenant: info.tenant,
		Action: r.Method + " " + pattern, Target: r.URL.Path, Status: status})
}

// auditPage is the answer of GET /v1/audit.
type auditPage struct {
	Records    []json.RawMessage `json:"records"`
	NextCursor string            `json:"next_cursor,omitempty"`
}

// auditFilter is what GET /v1/audit's query asks for.
type auditFilter struct {
	key, server, tool, typ string
	since, until           time.Time
	before                 int64 // records with a smaller seq; 0 for none
	limit                  int
}

// parseAuditFilter reads the query of GET /v1/audit; errors name the
// parameter.
func parseAuditFilter(r *http.Request) (auditFilter, error) {
	q := r.URL.Query()
	f := auditFilter{key: q.Get("key"), server: q.Get("server"), tool: q.Get("tool"), typ: q.Get("type"), limit: defaultAuditPage}
	for name, dst := range map[string]*time.Time{"since": &f.since, "until": &f.until} {
		if v := q.Get(name); v != "" {
			t, err := time.Parse(time.RFC3339, v)
			if err != nil {
				return f, fmt.Errorf("%s: %q is not an RFC 3339 time; write one like 2026-12-05T10:00:00Z", name, v)
			}
			*dst = t
		}
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditPage {
			return f, fmt.Errorf("limit: %q: want 1 to %d (default %d)", v, maxAuditPage, defaultAuditPage)
		}
		f.limit = n
	}
	if v := q.Get("cursor"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			return f, fmt.Errorf("cursor: %q is not a cursor: pass the next_cursor of the page before", v)
		}
		f.before = n
	}
	return f, nil
}

// matches reports whether rec is asked for.
func (f auditFilter) matches(rec auditRecord) bool {
	switch {
	case f.before != 0 && rec.Seq >= f.before,
		f.key != "" && rec.Key != f.key,
		f.server != "" && rec.Server != f.server,
		f.tool != "" && rec.Tool != f.tool,
		f.typ != "" && rec.Type != f.typ,
		!f.since.IsZero() && rec.Time.Before(f.since),
		!f.until.IsZero() && !rec.Time.Before(f.until):
		return false
	}
	return true
}

// listAudit answers GET /v1/audit (admin): records newest first.
func (a *api) listAudit(w http.ResponseWriter, r *http.Request, _ authInfo) {
	if a.audit == nil {
		writeError(w, http.StatusNotFound, "audit_off", "the audit trail is off: set [audit] enabled = true (the default) and restart harnessd")
		return
	}
	f, err := parseAuditFilter(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	page, err := a.audit.page(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// page returns the records f asks for, newest first, reading the days
// newest first and stopping once the page is full.
func (l *auditLog) page(f auditFilter) (auditPage, error) {
	l.flush(false) // what was recorded before the request is read
	files, err := auditFiles(l.dir)
	if err != nil {
		return auditPage{}, err
	}
	out := auditPage{Records: []json.RawMessage{}}
	for _, name := range slices.Backward(files) {
		if day, err := time.Parse(time.DateOnly, name[len("audit-"):len(name)-len(".jsonl")]); err == nil && !f.since.IsZero() && day.Add(24*time.Hour).Before(f.since) {
			break
		}
		data, err := os.ReadFile(filepath.Join(l.dir, name))
		if err != nil {
			return auditPage{}, fmt.Errorf("audit: %w", err)
		}
		var lines [][]byte
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			lines = append(lines, slices.Clone(sc.Bytes()))
		}
		for _, line := range slices.Backward(lines) {
			var rec auditRecord
			if json.Unmarshal(line, &rec) != nil || !f.matches(rec) {
				continue
			}
			if len(out.Records) == f.limit {
				out.NextCursor = strconv.FormatInt(rec.Seq+1, 10)
				return out, nil
			}
			out.Records = append(out.Records, line)
		}
	}
	return out, nil
}
