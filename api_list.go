package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// This file holds how the list routes answer: GET /v1/runs and GET
// /v1/conversations page newest first (cursor, limit) and filter (q, and
// for runs status, owner, schedule, since, until), so that no answer holds
// every kept run at once.

// List page sizes.
const (
	defaultPageLimit = 100
	maxPageLimit     = 1000
)

// A listKey is where an item stands in a list: lists run newest first by
// compareAge, and a cursor is the key of the last item a page gave.
type listKey struct {
	at time.Time
	id string
}

// cursor returns k as an opaque cursor: base64url of "<unix ns>.<id>".
func (k listKey) cursor() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.at.UnixNano(), 10) + "." + k.id))
}

// parseCursor returns the key a cursor made by listKey.cursor stands for.
func parseCursor(s string) (listKey, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return listKey{}, false
	}
	ns, id, ok := strings.Cut(string(b), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return listKey{}, false
	}
	return listKey{at: time.Unix(0, n).UTC(), id: id}, true
}

// A listQuery is what a list request asks for: the page (after, limit)
// and the text q its items must contain (lowercased; "" matches all).
type listQuery struct {
	after *listKey // nil for the first page
	limit int
	q     string
}

// parseListQuery reads cursor, limit and q from a list request; its error
// names the parameter and says what to send.
func parseListQuery(v url.Values) (listQuery, error) {
	lq := listQuery{limit: defaultPageLimit, q: strings.ToLower(strings.TrimSpace(v.Get("q")))}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxPageLimit {
			return lq, fmt.Errorf("limit %q: want a whole number from 1 to %d (default %d)", s, maxPageLimit, defaultPageLimit)
		}
		lq.limit = n
	}
	if s := v.Get("cursor"); s != "" {
		k, ok := parseCursor(s)
		if !ok {
			return lq, fmt.Errorf("cursor %q: not a cursor of this list; pass the next_cursor of the previous page as it is, or leave cursor out for the first page", s)
		}
		lq.after = &k
	}
	return lq, nil
}

// matches reports whether text contains the query's q, in any case.
func (lq listQuery) matches(text string) bool {
	return lq.q == "" || strings.Contains(strings.ToLower(text), lq.q)
}

// matchesRun reports whether the title or the prompt of r contains the
// query's q, in any case.
func (lq listQuery) matchesRun(r *run) bool {
	if lq.q == "" {
		return true
	}
	title, prompt := r.searchText()
	return lq.matches(title) || lq.matches(prompt)
}

// listPage returns the items of lq's page: of items (newest first by key),
// those after lq's cursor that keep lets through, at most lq.limit of
// them, and the cursor of the next page, "" when no item is left. An item
// added or removed between two pages moves no other: a walk through the
// pages gives every item kept throughout exactly once.
func listPage[T any](items []T, key func(T) listKey, keep func(T) bool, lq listQuery) ([]T, string) {
	start := 0
	if lq.after != nil {
		start = sort.Search(len(items), func(i int) bool {
			k := key(items[i])
			return compareAge(k.at, k.id, lq.after.at, lq.after.id) < 0
		})
	}
	out := []T{}
	for _, it := range items[start:] {
		if !keep(it) {
			continue
		}
		if len(out) == lq.limit {
			last := key(out[len(out)-1])
			return out, last.cursor()
		}
		out = append(out, it)
	}
	return out, ""
}

// A runFilter is what GET /v1/runs keeps besides the text: a status, an
// owner (schedule=NAME is owner schedule:NAME) and a creation time range
// [since, until).
type runFilter struct {
	status, owner string
	since, until  time.Time
}

// parseRunFilter reads status, owner, schedule, since and until; its error
// names the parameter and says what to send.
func parseRunFilter(v url.Values) (runFilter, error) {
	f := runFilter{status: v.Get("status"), owner: v.Get("owner")}
	if f.status != "" && !slices.Contains(runStatuses, f.status) {
		return f, fmt.Errorf("status %q: want one of %s", f.status, strings.Join(runStatuses, ", "))
	}
	if name := v.Get("schedule"); name != "" {
		if f.owner != "" {
			return f, fmt.Errorf("schedule %q: give owner or schedule, not both (schedule=NAME is owner=%s)", name, scheduleOwner(name))
		}
		f.owner = scheduleOwner(name)
	}
	for _, p := range []struct {
		name string
		t    *time.Time
	}{{"since", &f.since}, {"until", &f.until}} {
		s := v.Get(p.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return f, fmt.Errorf("%s %q: not an RFC 3339 time; write one like 2026-12-01T09:00:00Z", p.name, s)
		}
		*p.t = t
	}
	return f, nil
}

// keeps reports whether f lets a run of view v through.
func (f runFilter) keeps(v runView) bool {
	return (f.status == "" || v.Status == f.status) && (f.owner == "" || v.Owner == f.owner) &&
		(f.since.IsZero() || !v.CreatedAt.Before(f.since)) && (f.until.IsZero() || v.CreatedAt.Before(f.until))
}

// runSummary is a run in GET /v1/runs.
type runSummary struct {
	ID        string     `json:"id"`
	Owner     string     `json:"owner"`
	Tenant    string     `json:"tenant"`
	Status    string     `json:"status"`
	Title     string     `json:"title"`
	Model     string     `json:"model"`
	Steps     int        `json:"steps"`
	Usage     modelUsage `json:"usage"`
	Error     string     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	StartedAt *time.Time `json:"started_at,omitempty"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

// runStatuses are the values GET /v1/runs?status= accepts.
var runStatuses = []string{runQueued, runRunning, runWaitingInput, runWaitingApproval, runCompleted, runFailed, runCancelled}

// runKey is where r stands in GET /v1/runs.
func runKey(r *run) listKey { return listKey{at: r.createdAt, id: r.id} }

// listRuns answers GET /v1/runs: {"runs": [...], "next_cursor"?}, a page
// of the kept runs the caller sees (authInfo.sees), newest first, that
// match the query (q in the title or the prompt) and the filters; 400 naming a bad
// parameter.
func (a *api) listRuns(w http.ResponseWriter, r *http.Request, info authInfo) {
	lq, err := parseListQuery(r.URL.Query())
	var filter runFilter
	if err == nil {
		filter, err = parseRunFilter(r.URL.Query())
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	out, next := a.runSummaries(info, lq, filter)
	writeBody(w, http.StatusOK, a.globalSecrets.load().marshal(pageBody("runs", out, next), true))
}

// runSummaries returns a page of the kept runs info sees, newest first,
// that match lq and filter, and the cursor of the next page ("" for the
// last).
func (a *api) runSummaries(info authInfo, lq listQuery, filter runFilter) ([]runSummary, string) {
	keep := func(run *run) bool {
		return info.sees(run.req.Tenant) && filter.keeps(run.summary()) && lq.matchesRun(run)
	}
	runs, next := listPage(a.runs.list(), runKey, keep, lq)
	out := make([]runSummary, 0, len(runs))
	for _, run := range runs {
		v := run.summary()
		// The error is the one field that may quote a secret.
		out = append(out, runSummary{ID: v.ID, Owner: v.Owner, Tenant: v.Tenant, Status: v.Status, Title: v.Title, Model: v.Model, Steps: v.Steps, Usage: v.Usage,
			Error: run.redactor().redact(v.Error), CreatedAt: v.CreatedAt, StartedAt: v.StartedAt, EndedAt: v.EndedAt})
	}
	return out, next
}

// pageBody is the answer of a list route: {field: items} with
// next_cursor when another page follows.
func pageBody(field string, items any, next string) map[string]any {
	body := map[string]any{field: items}
	if next != "" {
		body["next_cursor"] = next
	}
	return body
}

// conversationKey is where c stands in GET /v1/conversations.
func conversationKey(c *conversation) listKey { return listKey{at: c.createdAt, id: c.id} }

// listConversations answers GET /v1/conversations: {"conversations":
// [...], "next_cursor"?}, a page of the conversations the caller sees,
// newest first, without their messages; q keeps those with a run the
// caller sees whose title or prompt holds it. 400 names a bad parameter.
func (a *api) listConversations(w http.ResponseWriter, r *http.Request, info authInfo) {
	lq, err := parseListQuery(r.URL.Query())
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	keep := func(c *conversation) bool {
		if !info.sees(a.runs.tenantOf(c)) {
			return false
		}
		if lq.q == "" {
			return true
		}
		return slices.ContainsFunc(a.runs.conversationRuns(c, info.sees), lq.matchesRun)
	}
	convs, next := listPage(a.runs.listConversations(), conversationKey, keep, lq)
	out := make([]conversationView, 0, len(convs))
	for _, c := range convs {
		out = append(out, a.runs.conversationView(c, info.sees))
	}
	writeBody(w, http.StatusOK, a.globalSecrets.load().marshal(pageBody("conversations", out, next), true))
}
