package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// This file tests runs' and conversations' titles over the API: given,
// taken from the prompt, cut, redacted, kept across a restart, and
// searched by q.

// apiOver serves the API over the run manager m.
func apiOver(t *testing.T, m *runManager) *apiTest {
	t.Helper()
	a := newAPI(m, m.opts.Registry, nil, m.opts.Metrics, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &apiTest{url: srv.URL, client: srv.Client(), api: a, runs: m}
}

// titled is what the title tests read of a run or a conversation.
type titled struct {
	ID    string `json:"id"`
	Title string `json:"title"`
}

// getTitled returns the object GET path answers, or under field its items.
func getTitled(t *testing.T, at *apiTest, path, field string) []titled {
	t.Helper()
	resp, data := at.do(t, http.MethodGet, path, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, data)
	}
	if field == "" {
		var one titled
		if err := json.Unmarshal(data, &one); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return []titled{one}
	}
	var page map[string][]titled
	if err := json.Unmarshal(data, &page); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return page[field]
}

func TestRunTitles(t *testing.T) {
	t.Parallel()
	const secret = "tok-title-secret-0123456789"
	long := strings.Repeat("é", 60) // 120 bytes
	tests := []struct {
		name    string
		body    string
		want    string
		wantCut bool
	}{
		{"given", `{"prompt":"do the thing","title":"  Weekly   report "}`, "Weekly report", false},
		{"first line of the prompt", `{"prompt":"Summarise the logs\nthen mail them"}`, "Summarise the logs", false},
		{"first line that is not blank", `{"prompt":"\n  \n\t Fix   the build \n more"}`, "Fix the build", false},
		{"cut on a character", `{"prompt":"` + long + `"}`, strings.Repeat("é", derivedTitleBytes/2) + "…", true},
		{"a secret in the prompt", `{"prompt":"use ` + secret + ` please"}`, "use [redacted] please", false},
		{"a secret across the cut", `{"prompt":"` + strings.Repeat("a", 75) + " " + secret + `"}`, strings.Repeat("a", 75) + " [red…", true},
		{"a secret in the title", `{"prompt":"x","title":"key ` + secret + `"}`, "key [redacted]", false},
	}
	turns := make([]fakeTurn, len(tests))
	for i := range turns {
		turns[i] = fakeTurn{Text: "ok"}
	}
	at := newAPITest(t, newFakeModel(t, providerOpenAI, turns...), nil)
	at.runs.env.secrets.add(secret)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := at.postRun(t, "", tt.body)
			v := waitRunID(t, at, id)
			got := getTitled(t, at, "/v1/runs/"+id, "")[0].Title
			if got != tt.want || v.Title != tt.want {
				t.Errorf("title of %s = %q (view %q), want %q", tt.body, got, v.Title, tt.want)
			}
			if !utf8.ValidString(got) || len(got) > derivedTitleBytes+len("…") && tt.wantCut || strings.Contains(got, secret[:6]) {
				t.Errorf("title %q: want valid UTF-8, at most %d bytes and the ellipsis, no part of the secret", got, derivedTitleBytes)
			}
			var listed string
			for _, r := range getTitled(t, at, "/v1/runs", "runs") {
				if r.ID == id {
					listed = r.Title
				}
			}
			if listed != tt.want {
				t.Errorf("GET /v1/runs: title of %s = %q, want %q", id, listed, tt.want)
			}
			conv := getTitled(t, at, "/v1/conversations/"+v.ConversationID, "")[0].Title
			if conv != tt.want {
				t.Errorf("GET /v1/conversations/%s: title %q, want its run's %q", v.ConversationID, conv, tt.want)
			}
		})
	}
}

func TestRunTitleRefused(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	for _, tt := range []struct {
		name, body, want string
	}{
		{"too long", `{"prompt":"x","title":"` + strings.Repeat("t", maxTitleBytes+1) + `"}`, "title: 201 bytes, over 200"},
		{"two lines", `{"prompt":"x","title":"one\ntwo"}`, "title: holds a line break"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := at.do(t, http.MethodPost, "/v1/runs", "", tt.body)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), tt.want) {
				t.Errorf("POST /v1/runs %.60s = %d %s, want 400 with %q", tt.body, resp.StatusCode, data, tt.want)
			}
		})
	}
}

// TestTitlesAfterReopen keeps titled runs of two conversations on disk,
// then reads them from a second manager on the same directory: the titles
// are listed, shown and searched as before.
func TestTitlesAfterReopen(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "a"}, fakeTurn{Text: "b"}, fakeTurn{Text: "c"})
	dir := filepath.Join(t.TempDir(), "runs")
	first := newStoredRuns(t, f, dir, nil)
	at := apiOver(t, first)
	budget := at.postRun(t, "", `{"prompt":"draft the budget","title":"Quarterly Budget"}`)
	conv := waitRunID(t, at, budget).ConversationID
	followUp := at.postRun(t, "", `{"prompt":"and the travel costs?","title":"Follow-up","conversation_id":"`+conv+`"}`)
	waitRunID(t, at, followUp)
	other := at.postRun(t, "", `{"prompt":"Plan the offsite\nin May"}`)
	otherConv := waitRunID(t, at, other).ConversationID
	stopRuns(t, first)

	second := newStoredRuns(t, newFakeModel(t, providerOpenAI), dir, nil)
	at = apiOver(t, second)
	want := map[string]string{budget: "Quarterly Budget", followUp: "Follow-up", other: "Plan the offsite", conv: "Quarterly Budget", otherConv: "Plan the offsite"}
	for id, title := range want {
		path := "/v1/runs/" + id
		if strings.HasPrefix(id, "conv_") {
			path = "/v1/conversations/" + id
		}
		if got := getTitled(t, at, path, "")[0].Title; got != title {
			t.Errorf("after reopening, GET %s: title %q, want %q", path, got, title)
		}
	}
	for _, field := range []string{"runs", "conversations"} {
		for _, item := range getTitled(t, at, "/v1/"+field, field) {
			if item.Title != want[item.ID] {
				t.Errorf("after reopening, GET /v1/%s: %s has title %q, want %q", field, item.ID, item.Title, want[item.ID])
			}
		}
	}

	for _, tt := range []struct {
		q           string
		runs, convs []string
	}{
		{"quarterly", []string{budget}, []string{conv}},
		{"FOLLOW-UP", []string{followUp}, []string{conv}},
		{"travel", []string{followUp}, []string{conv}},
		{"in may", []string{other}, []string{otherConv}},
		{"offsite", []string{other}, []string{otherConv}},
		{"nowhere", nil, nil},
	} {
		t.Run("q="+tt.q, func(t *testing.T) {
			for _, list := range []struct {
				field string
				want  []string
			}{{"runs", tt.runs}, {"conversations", tt.convs}} {
				var got []string
				for _, item := range getTitled(t, at, "/v1/"+list.field+"?q="+url.QueryEscape(tt.q), list.field) {
					got = append(got, item.ID)
				}
				if !slices.Equal(got, list.want) {
					t.Errorf("GET /v1/%s?q=%s = %v, want %v", list.field, tt.q, got, list.want)
				}
			}
		})
	}
}
