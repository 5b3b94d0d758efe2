package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file tests the list routes' paging and filters.

// listBase is when the ended runs of addEndedRuns were created.
var listBase = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// addEndedRuns keeps n ended runs in m, as loaded from the store, run i
// created i seconds after listBase (two by two at the same time, so that
// the order falls back on ids) by owner(i), with prompt(i), each in a
// conversation of its own. It returns their ids, newest first.
func addEndedRuns(m *runManager, n int, owner, prompt func(int) string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range n {
		created := listBase.Add(time.Duration(i/2) * time.Second)
		v := runView{ID: fmt.Sprintf("run_%04d", i), ConversationID: fmt.Sprintf("conv_%04d", i), Owner: owner(i), Status: runCompleted,
			Prompt: prompt(i), Model: "openai/fake", Output: "done", Servers: []serverStatus{}, ActivatedTools: []string{}, CreatedAt: created, EndedAt: &created}
		r := historyRun(m.env, nil, storedRun{view: v})
		r.disk = nil
		m.runs[r.id] = r
		m.insertLocked(r)
		c := &conversation{id: v.ConversationID, owner: v.Owner, tenant: r.req.Tenant, createdAt: created, runs: []*run{r}, history: &conversationHistory{}}
		r.conv = &runConversation{id: c.id}
		m.conversations[c.id] = c
	}
	ids := slices.Clone(m.order)
	slices.Reverse(ids)
	return ids
}

// pageOf is one page of a list answer.
type pageOf struct {
	Runs []struct {
		ID string `json:"id"`
	} `json:"runs"`
	Conversations []struct {
		ID string `json:"id"`
	} `json:"conversations"`
	NextCursor string `json:"next_cursor"`
}

// getPage returns the page GET path answers, failing on anything but 200.
func getPage(t *testing.T, at *apiTest, auth, path string) (pageOf, int) {
	t.Helper()
	resp, data := at.do(t, http.MethodGet, path, auth, "")
	var p pageOf
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &p) != nil {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, data)
	}
	return p, len(data)
}

// walk follows a list's next_cursor from its first page of limit items
// and returns every id it gave, calling between(page) after each page.
func walk(t *testing.T, at *apiTest, path, extra string, limit int, between func(int)) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for n := 0; ; n++ {
		q := fmt.Sprintf("%s?limit=%d%s", path, limit, extra)
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		p, _ := getPage(t, at, "", q)
		got := len(p.Runs) + len(p.Conversations)
		if got > limit || (p.NextCursor != "" && got != limit) {
			t.Fatalf("page %d of %s: %d items, next %q, want at most %d, and %d when another follows", n, path, got, p.NextCursor, limit, limit)
		}
		for _, r := range p.Runs {
			ids = append(ids, r.ID)
		}
		for _, c := range p.Conversations {
			ids = append(ids, c.ID)
		}
		if between != nil {
			between(n)
		}
		if p.NextCursor == "" {
			return ids
		}
		cursor = p.NextCursor
	}
}

func TestListPagingWalk(t *testing.T) {
	t.Parallel()
	const added = 3 // runs started during each walk
	tests := []struct {
		name, path string
		limit      int
	}{
		{"runs by 7", "/v1/runs", 7},
		{"runs by 1000", "/v1/runs", 1000},
		{"runs by all", "/v1/runs", 251 + added},
		{"conversations by 10", "/v1/conversations", 10},
	}
	turns := make([]fakeTurn, added*len(tests))
	for i := range turns {
		turns[i] = fakeTurn{Text: "new"}
	}
	f := newFakeModel(t, providerOpenAI, turns...)
	at := newAPITest(t, f, nil)
	addEndedRuns(at.runs, 251, func(int) string { return "" }, func(i int) string { return fmt.Sprintf("prompt %d", i) })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			if strings.HasSuffix(tt.path, "/runs") {
				for _, r := range at.runs.list() {
					want = append(want, r.id)
				}
			} else {
				for _, c := range at.runs.listConversations() {
					want = append(want, c.id)
				}
			}
			// New runs come while the walk goes: newer than its cursor,
			// they move nothing it has still to give.
			var started []string
			start := func() { started = append(started, at.startRun(t, `{"prompt":"new"}`).id) }
			between := func(n int) {
				if n%5 == 0 && len(started) < added {
					start()
				}
			}
			got := walk(t, at, tt.path, "", tt.limit, between)
			for len(started) < added { // the fake model's script has added turns per walk
				start()
			}
			if !slices.Equal(got, want) {
				t.Errorf("walk gave %d ids, want the %d kept at its start, newest first, none lost or repeated (first difference at %d)", len(got), len(want), firstDiff(got, want))
			}
			at.waitAllRuns(t)
		})
		if t.Failed() {
			return
		}
	}
}

// firstDiff returns the first index where a and b differ.
func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI)
	at := newAPITest(t, f, nil)
	owners := []string{"alice", "bob", scheduleOwner("nightly")}
	big := strings.Repeat("x", 2*bodyInMemory)
	all := addEndedRuns(at.runs, 30, func(i int) string { return owners[i%3] }, func(i int) string {
		switch {
		case i == 7:
			return "Please DEPLOY the site"
		case i == 20:
			return "deploy again " + big // left on disk but its start (historyRun)
		case i == 21:
			return big + " deploy" // past the start kept in memory
		}
		return fmt.Sprintf("prompt %d", i)
	})
	byIndex := func(is ...int) []string {
		var out []string
		for _, id := range all {
			var i int
			fmt.Sscanf(id, "run_%d", &i)
			if slices.Contains(is, i) {
				out = append(out, id)
			}
		}
		return out
	}
	t0 := listBase.Format(time.RFC3339)
	t5 := listBase.Add(5 * time.Second).Format(time.RFC3339)

	tests := []struct {
		name, query string
		want        []string
	}{
		{"q in any case", "q=Deploy", byIndex(7, 20)},
		{"owner", "owner=bob&limit=3", byIndex(28, 25, 22)},
		{"schedule", "schedule=nightly&since=" + t5, byIndex(29, 26, 23, 20, 17, 14, 11)},
		{"since and until", "since=" + t0 + "&until=" + t5, byIndex(9, 8, 7, 6, 5, 4, 3, 2, 1, 0)},
		{"status", "status=completed&limit=2", byIndex(29, 28)},
		{"status none", "status=failed", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _ := getPage(t, at, "", "/v1/runs?"+tt.query)
			var got []string
			for _, r := range p.Runs {
				got = append(got, r.ID)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("GET /v1/runs?%s = %v, want %v", tt.query, got, tt.want)
			}
		})
	}
	p, _ := getPage(t, at, "", "/v1/conversations?q=deploy")
	if len(p.Conversations) != 2 || p.Conversations[0].ID != "conv_0020" || p.Conversations[1].ID != "conv_0007" {
		t.Errorf("GET /v1/conversations?q=deploy = %+v, want conv_0020, conv_0007", p.Conversations)
	}
}

func TestListBadParameters(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	tests := []struct {
		name, path, want string
	}{
		{"limit zero", "/v1/runs?limit=0", `limit "0": want a whole number from 1 to 1000`},
		{"limit too big", "/v1/runs?limit=1001", `limit "1001"`},
		{"limit not a number", "/v1/conversations?limit=ten", `limit "ten"`},
		{"cursor garbage", "/v1/runs?cursor=%21%21", `cursor "!!": not a cursor of this list`},
		{"cursor without id", "/v1/conversations?cursor=" + listKey{at: listBase}.cursor(), `cursor "`},
		{"status", "/v1/runs?status=done", `status "done": want one of`},
		{"since", "/v1/runs?since=yesterday", `since "yesterday": not an RFC 3339 time`},
		{"until", "/v1/runs?until=2026-13-01", `until "2026-13-01"`},
		{"owner and schedule", "/v1/runs?owner=a&schedule=b", `schedule "b": give owner or schedule, not both`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := at.do(t, http.MethodGet, tt.path, "", "")
			var e apiError
			if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(data, &e) != nil || !strings.Contains(e.Error.Message, tt.want) {
				t.Errorf("GET %s = %d %s, want 400 with %q", tt.path, resp.StatusCode, data, tt.want)
			}
		})
	}
}

// TestRunsFirstPageAt10000 checks the figure of issue 38: with 10,000
// runs kept, the default answer of GET /v1/runs holds 100 of them, not
// every one (3.9 MB before paging).
func TestRunsFirstPageAt10000(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	addEndedRuns(at.runs, 10000, func(int) string { return "ci" }, func(i int) string { return fmt.Sprintf("prompt %d", i) })
	p, size := getPage(t, at, "", "/v1/runs")
	if len(p.Runs) != defaultPageLimit || p.NextCursor == "" {
		t.Fatalf("GET /v1/runs at 10,000 runs: %d runs, next %q, want %d and a next cursor", len(p.Runs), p.NextCursor, defaultPageLimit)
	}
	if size > 64<<10 {
		t.Errorf("GET /v1/runs at 10,000 runs: %d bytes, want at most 64 KiB", size)
	}
	t.Logf("GET /v1/runs at 10,000 runs: first page %d bytes", size)
}

// BenchmarkRunsFirstPage measures GET /v1/runs's default page at 10,000
// kept runs, as an admin would list them, and reports its size.
func BenchmarkRunsFirstPage(b *testing.B) {
	f := newFakeModel(b, providerOpenAI)
	at := newAPITest(b, f, nil)
	addEndedRuns(at.runs, 10000, func(int) string { return "ci" }, func(i int) string { return fmt.Sprintf("prompt %d", i) })
	size := 0
	for b.Loop() {
		resp, data := at.do(b, http.MethodGet, "/v1/runs", "", "")
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("GET /v1/runs = %d", resp.StatusCode)
		}
		size = len(data)
	}
	b.ReportMetric(float64(size), "bytes/page")
}
