package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestRunsOwnedByTheirKey starts a run as alice and checks what other
// keys may do with it: bob, with the same scopes, gets 404 on every route
// of it (as for no run at all) and does not see it listed; an admin key
// sees and may act on everything; alice herself does.
func TestRunsOwnedByTheirKey(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Hang: true})
	at := newAPITest(t, f, []authKey{
		testKey("alice", "alice-token-0123", scopeRunsWrite),
		testKey("bob", "bob-token-0123456", scopeRunsWrite),
		testKey("ops", "ops-token-0123456", scopeAdmin),
	})
	alice, bob, ops := "Bearer alice-token-0123", "Bearer bob-token-0123456", "Bearer ops-token-0123456"
	id := at.postRun(t, alice, `{"prompt":"wait","interactive":true}`)
	waitForModelRequests(t, f, 1)

	routes := []struct{ method, path, body string }{
		{http.MethodGet, "/v1/runs/" + id, ""},
		{http.MethodGet, "/v1/runs/" + id + "/events?after=1000", ""},
		{http.MethodGet, "/v1/runs/" + id + "/messages", ""},
		{http.MethodPost, "/v1/runs/" + id + "/input/req_1", `{"action":"decline"}`},
		{http.MethodPost, "/v1/runs/" + id + "/approvals/ap_1", `{"decision":"deny"}`},
		{http.MethodPost, "/v1/runs/" + id + "/cancel", ""},
	}
	for _, rt := range routes {
		resp, data := at.do(t, rt.method, rt.path, bob, rt.body)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(data), "not found (runs are listed") {
			t.Errorf("bob: %s %s = %d %s, want 404 as for no run", rt.method, rt.path, resp.StatusCode, data)
		}
	}
	listed := func(auth string) []string {
		t.Helper()
		_, data := at.do(t, http.MethodGet, "/v1/runs", auth, "")
		var out struct {
			Runs []struct {
				ID    string `json:"id"`
				Owner string `json:"owner"`
			} `json:"runs"`
		}
		if err := json.Unmarshal(data, &out); err != nil {
			t.Fatalf("GET /v1/runs = %s", data)
		}
		var ids []string
		for _, r := range out.Runs {
			ids = append(ids, r.ID+"@"+r.Owner)
		}
		return ids
	}
	if got := listed(bob); len(got) != 0 {
		t.Errorf("bob lists %v, want nothing", got)
	}
	for _, auth := range []string{alice, ops} {
		if got := listed(auth); len(got) != 1 || got[0] != id+"@alice" {
			t.Errorf("%s lists %v, want [%s@alice]", auth, got, id)
		}
		resp, data := at.do(t, http.MethodGet, "/v1/runs/"+id, auth, "")
		var v runView
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &v) != nil || v.Owner != "alice" {
			t.Errorf("%s: GET run = %d %s, want 200 with owner alice", auth, resp.StatusCode, data)
		}
		// The question is not open: a 404 about the question, not the run.
		resp, data = at.do(t, http.MethodPost, "/v1/runs/"+id+"/input/req_1", auth, `{"action":"decline"}`)
		if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(data), "input request") {
			t.Errorf("%s: answer = %d %s, want 404 about the question", auth, resp.StatusCode, data)
		}
	}
	if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+id+"/cancel", ops, ""); resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Errorf("admin cancel = %d %s, want 200 or 202", resp.StatusCode, data)
	}
}

// TestRunsOneOwnerWithoutAuth checks that with auth off every run has the
// one owner "" and everyone sees it.
func TestRunsOneOwnerWithoutAuth(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	at := newAPITest(t, f, nil)
	id := at.postRun(t, "", `{"prompt":"hi"}`)
	waitRun(t, at.runs.get(id))
	resp, data := at.do(t, http.MethodGet, "/v1/runs/"+id, "", "")
	var v map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &v) != nil || v["owner"] != "" {
		t.Errorf("GET run = %d %s, want 200 with owner \"\"", resp.StatusCode, data)
	}
}

// TestScheduledRunsSeenByAdminsOnly checks that a scheduled run (owner
// schedule:<name>) is shown to admin keys, owner included, and to no
// other key, listed or by id.
func TestScheduledRunsSeenByAdminsOnly(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	at := newAPITest(t, f, []authKey{
		testKey("alice", "alice-token-0123", scopeRunsWrite),
		testKey("ops", "ops-token-0123456", scopeAdmin),
	})
	r, err := at.runs.start(runRequest{Prompt: "nightly", Owner: scheduleOwner("nightly")}, false)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, r)
	cases := []struct {
		auth       string
		wantGet    int
		wantListed bool
	}{
		{"Bearer alice-token-0123", http.StatusNotFound, false},
		{"Bearer ops-token-0123456", http.StatusOK, true},
	}
	for _, c := range cases {
		resp, data := at.do(t, http.MethodGet, "/v1/runs/"+r.id, c.auth, "")
		if resp.StatusCode != c.wantGet {
			t.Errorf("%s: GET run = %d %s, want %d", c.auth, resp.StatusCode, data, c.wantGet)
		}
		var v runView
		if c.wantGet == http.StatusOK && (json.Unmarshal(data, &v) != nil || v.Owner != "schedule:nightly") {
			t.Errorf("%s: GET run = %s, want owner schedule:nightly", c.auth, data)
		}
		_, data = at.do(t, http.MethodGet, "/v1/runs", c.auth, "")
		if listed := strings.Contains(string(data), r.id); listed != c.wantListed {
			t.Errorf("%s: GET /v1/runs = %s, listed %v, want %v", c.auth, data, listed, c.wantListed)
		}
	}
}
