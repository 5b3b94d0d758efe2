package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
)

// This file tests the conversation routes: who sees and acts on which
// conversation, and deletion from disk.

func TestConversationOwners(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "alice's answer"}, fakeTurn{Text: "bob's answer"}, fakeTurn{Text: "alice again"})
	dir := t.TempDir()
	m := newStoredRuns(t, f, dir, nil)
	keys := []authKey{
		testKey("alice", "tok-alice", scopeRunsWrite),
		testKey("bob", "tok-bob", scopeRunsWrite),
		testKey("reader", "tok-reader", scopeRunsRead),
		testKey("root", "tok-root", scopeAdmin),
	}
	srv := httptest.NewServer(newAPI(m, m.opts.Registry, keys, m.opts.Metrics, nil, nil))
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client(), runs: m}
	const alice, bob, reader, root = "Bearer tok-alice", "Bearer tok-bob", "Bearer tok-reader", "Bearer tok-root"

	r1, conv := postInConversation(t, at, alice, `{"prompt":"mine"}`)
	waitRunID(t, at, r1)
	rb, bobs := postInConversation(t, at, bob, `{"prompt":"his"}`)
	waitRunID(t, at, rb)

	for _, tc := range []struct {
		name, auth, method, path, body string
		want                           int
	}{
		{"bob reads alice's", bob, http.MethodGet, "/v1/conversations/" + conv, "", http.StatusNotFound},
		{"bob continues alice's", bob, http.MethodPost, "/v1/runs", `{"prompt":"x","conversation_id":"` + conv + `"}`, http.StatusNotFound},
		{"bob deletes alice's", bob, http.MethodDelete, "/v1/conversations/" + conv, "", http.StatusNotFound},
		{"a reader may not delete", reader, http.MethodDelete, "/v1/conversations/" + conv, "", http.StatusForbidden},
		{"no token", "", http.MethodGet, "/v1/conversations", "", http.StatusUnauthorized},
		{"alice reads hers", alice, http.MethodGet, "/v1/conversations/" + conv, "", http.StatusOK},
		{"admin reads alice's", root, http.MethodGet, "/v1/conversations/" + conv, "", http.StatusOK},
		{"admin reads bob's", root, http.MethodGet, "/v1/conversations/" + bobs, "", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if resp, data := at.do(t, tc.method, tc.path, tc.auth, tc.body); resp.StatusCode != tc.want {
				t.Errorf("%s %s as %q = %d %s, want %d", tc.method, tc.path, tc.auth, resp.StatusCode, data, tc.want)
			}
		})
	}
	listed := func(auth string) []string {
		resp, data := at.do(t, http.MethodGet, "/v1/conversations", auth, "")
		var out struct {
			Conversations []conversationView `json:"conversations"`
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil {
			t.Fatalf("GET /v1/conversations = %d %s", resp.StatusCode, data)
		}
		var ids []string
		for _, c := range out.Conversations {
			ids = append(ids, c.ID+"/"+c.Owner)
		}
		return ids
	}
	if got := listed(bob); len(got) != 1 || got[0] != bobs+"/bob" {
		t.Errorf("bob lists %v, want his own alone", got)
	}
	if got := listed(root); len(got) != 2 || got[0] != bobs+"/bob" || got[1] != conv+"/alice" {
		t.Errorf("admin lists %v, want both, newest first", got)
	}

	r2, _ := postInConversation(t, at, alice, `{"prompt":"more","conversation_id":"`+conv+`"}`)
	waitRunID(t, at, r2)
	if resp, data := at.do(t, http.MethodDelete, "/v1/conversations/"+conv, alice, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("alice deletes hers = %d %s, want 204", resp.StatusCode, data)
	}
	for _, path := range []string{"/v1/conversations/" + conv, "/v1/runs/" + r1, "/v1/runs/" + r2} {
		if resp, _ := at.do(t, http.MethodGet, path, root, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s after the delete = %d, want 404", path, resp.StatusCode)
		}
	}
	for _, id := range []string{r1, r2, conv} {
		matches, _ := filepath.Glob(filepath.Join(dir, id+".*"))
		if len(matches) != 0 {
			t.Errorf("files of %s left after the delete: %v", id, matches)
		}
	}
	for _, id := range []string{r1, r2} {
		if len(runLinesOnDisk(t, dir, id)) > 0 {
			t.Errorf("lines of %s left in the runs log after the delete", id)
		}
	}
	if len(runLinesOnDisk(t, dir, rb)) == 0 {
		t.Errorf("bob's run is gone from the runs log after alice's delete")
	}
}
