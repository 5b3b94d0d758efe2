package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file tests tenants: keys of one tenant share runs and
// conversations, other tenants get 404, admin keys see all; a
// conversation shows and deletes only its reader's runs; a schedule joins
// only a conversation of its own tenant.

// tenantKeys are the keys of the tenant tests, as HARNESS_API_KEYS gives
// them: team's write and read keys, another key without a tenant (its
// own name) and an admin key.
const tenantKeys = `[
	{"name": "team-ci", "token": "team-ci-token-0123", "scopes": ["runs:write"], "tenant": "team"},
	{"name": "team-dash", "token": "team-dash-token-01", "scopes": ["runs:read"], "tenant": "team"},
	{"name": "other", "token": "other-token-012345", "scopes": ["runs:write"]},
	{"name": "ops", "token": "ops-token-01234567", "scopes": ["admin"]}
]`

// Bearer headers of tenantKeys.
const (
	teamWrite = "Bearer team-ci-token-0123"
	teamRead  = "Bearer team-dash-token-01"
	otherKey  = "Bearer other-token-012345"
	adminKey  = "Bearer ops-token-01234567"
)

// newTenantAPI returns an API over tenantKeys.
func newTenantAPI(t *testing.T, f *fakeModel) *apiTest {
	t.Helper()
	keys, _, err := parseAuthKeysJSON([]byte(tenantKeys))
	if err != nil {
		t.Fatal(err)
	}
	return newAPITest(t, f, keys)
}

// listedIDs returns the ids GET path lists under field for auth.
func listedIDs(t *testing.T, at *apiTest, path, field, auth string) []string {
	t.Helper()
	resp, data := at.do(t, http.MethodGet, path, auth, "")
	var out map[string][]struct {
		ID string `json:"id"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &out) != nil {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, data)
	}
	var ids []string
	for _, x := range out[field] {
		ids = append(ids, x.ID)
	}
	return ids
}

func TestTenantsShareRuns(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"}, fakeTurn{Text: "helped"})
	at := newTenantAPI(t, f)
	id, conv := postInConversation(t, at, teamWrite, `{"prompt":"build"}`)
	waitRunID(t, at, id)

	tests := []struct {
		name    string
		auth    string
		wantGet int
	}{
		{"the tenant's write key", teamWrite, http.StatusOK},
		{"the tenant's read key", teamRead, http.StatusOK},
		{"another tenant", otherKey, http.StatusNotFound},
		{"admin", adminKey, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/v1/runs/" + id, "/v1/runs/" + id + "/messages", "/v1/runs/" + id + "/events", "/v1/conversations/" + conv} {
				resp, data := at.do(t, http.MethodGet, path, tt.auth, "")
				if resp.StatusCode != tt.wantGet {
					t.Errorf("GET %s = %d %s, want %d", path, resp.StatusCode, data, tt.wantGet)
				}
			}
			wantListed := tt.wantGet == http.StatusOK
			if got := slices.Contains(listedIDs(t, at, "/v1/runs", "runs", tt.auth), id); got != wantListed {
				t.Errorf("GET /v1/runs lists the run: %v, want %v", got, wantListed)
			}
			if got := slices.Contains(listedIDs(t, at, "/v1/conversations", "conversations", tt.auth), conv); got != wantListed {
				t.Errorf("GET /v1/conversations lists the conversation: %v, want %v", got, wantListed)
			}
			if !wantListed {
				return
			}
			_, data := at.do(t, http.MethodGet, "/v1/runs/"+id, tt.auth, "")
			var v runView
			if json.Unmarshal(data, &v) != nil || v.Owner != "team-ci" || v.Tenant != "team" {
				t.Errorf("GET run = %s, want owner team-ci, tenant team", data)
			}
		})
	}

	// The read key continues nothing; the other tenant may not join.
	if resp, data := at.do(t, http.MethodPost, "/v1/runs", otherKey, `{"prompt":"x","conversation_id":"`+conv+`"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("other tenant joins the conversation: %d %s, want 404", resp.StatusCode, data)
	}
	// An admin's run in the team's conversation is the team's.
	adminRun, _ := postInConversation(t, at, adminKey, `{"prompt":"help","conversation_id":"`+conv+`"}`)
	if v := waitRunID(t, at, adminRun); v.Owner != "ops" || v.Tenant != "team" {
		t.Errorf("admin's run in the team's conversation: owner %q tenant %q, want ops, team", v.Owner, v.Tenant)
	}
	if resp, data := at.do(t, http.MethodGet, "/v1/runs/"+adminRun, teamRead, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("team's read key on the admin's run in its conversation: %d %s, want 200", resp.StatusCode, data)
	}
}

func TestAuthKeyTenant(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		json       string
		wantTenant string
		wantErr    string
	}{
		{"defaults to the name", `[{"name":"ci","token":"0123456789abcdef","scopes":["runs:read"]}]`, "ci", ""},
		{"given", `[{"name":"ci","token":"0123456789abcdef","scopes":["runs:read"],"tenant":"team.a"}]`, "team.a", ""},
		{"bad", `[{"name":"ci","token":"0123456789abcdef","scopes":["runs:read"],"tenant":"team a"}]`, "",
			`HARNESS_API_KEYS[0]: key "ci": tenant: "team a" has invalid characters`},
		{"schedule-like", `[{"name":"ci","token":"0123456789abcdef","scopes":["runs:read"],"tenant":"schedule:x"}]`, "",
			`key "ci": tenant: "schedule:x" has invalid characters`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, _, err := parseAuthKeysJSON([]byte(tt.json))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseAuthKeysJSON() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(keys) != 1 || keys[0].Tenant != tt.wantTenant {
				t.Fatalf("parseAuthKeysJSON() = %+v, %v, want tenant %q", keys, err, tt.wantTenant)
			}
		})
	}
}

func TestAuthKeyTenantTOML(t *testing.T) {
	t.Parallel()
	key := func(name, hexByte, tenant string) string {
		return fmt.Sprintf("[[auth.keys]]\nname = %q\ntoken_sha256 = %q\nscopes = [\"runs:read\"]\ntenant = %q\n", name, strings.Repeat(hexByte, 32), tenant)
	}
	home := t.TempDir()
	writeFile(t, home, "config.toml", key("dash", "ab", "team")+key("bad", "cd", "no/slash"))
	_, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(nil)})
	if err == nil || !strings.Contains(err.Error(), `[[auth.keys]] #2: key "bad": tenant: "no/slash" has invalid characters`) {
		t.Fatalf("loadConfig() error = %v, want the bad tenant of key \"bad\"", err)
	}
	writeFile(t, home, "config.toml", key("dash", "ab", "team"))
	cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(nil)})
	if err != nil || len(cfg.AuthKeys) != 1 || cfg.AuthKeys[0].Tenant != "team" {
		t.Fatalf("loadConfig() = %+v, %v, want key dash of tenant team", cfg, err)
	}
}

// joinAsOlderHarnessd moves ended run r into conversation conv, as an
// older harnessd let a schedule's run join another tenant's conversation:
// the data a conversation of mixed tenants is made of.
func joinAsOlderHarnessd(m *runManager, r *run, conv string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.conversations, r.conversationID())
	c := m.conversations[conv]
	r.conv = &runConversation{id: conv, earlier: slices.Clone(c.runs)}
	c.runs = append(c.runs, r)
}

func TestConversationHidesOtherTenantsRuns(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "alice's answer"}, fakeTurn{Text: "nightly secret output"})
	keys := []authKey{testKey("alice", "alice-token-0123", scopeRunsWrite), testKey("ops", "ops-token-0123456", scopeAdmin)}
	at := newAPITest(t, f, keys)
	const alice, ops = "Bearer alice-token-0123", "Bearer ops-token-0123456"
	id, conv := postInConversation(t, at, alice, `{"prompt":"alice asks"}`)
	waitRunID(t, at, id)
	nightly, err := at.runs.start(runRequest{Prompt: "nightly prompt", Owner: scheduleOwner("nightly")}, true)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, nightly)
	joinAsOlderHarnessd(at.runs, nightly, conv)

	tests := []struct {
		name     string
		auth     string
		wantRuns []string
		hidden   bool
	}{
		{"alice", alice, []string{id}, true},
		{"admin", ops, []string{id, nightly.id}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, data := at.do(t, http.MethodGet, "/v1/conversations/"+conv, tt.auth, "")
			var v conversationView
			if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &v) != nil {
				t.Fatalf("GET conversation = %d %s", resp.StatusCode, data)
			}
			if !slices.Equal(v.Runs, tt.wantRuns) {
				t.Errorf("runs = %v, want %v", v.Runs, tt.wantRuns)
			}
			for _, s := range []string{"nightly prompt", "nightly secret output", nightly.id} {
				if shown := strings.Contains(string(data), s); shown == tt.hidden {
					t.Errorf("conversation shows %q: %v, want %v", s, shown, !tt.hidden)
				}
			}
		})
	}

	// alice's delete removes her run only; the schedule's stays, in a
	// conversation that is now the schedule's, which alice no longer sees.
	if resp, data := at.do(t, http.MethodDelete, "/v1/conversations/"+conv, alice, ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("alice's DELETE = %d %s, want 204", resp.StatusCode, data)
	}
	if at.runs.get(id) != nil || at.runs.get(nightly.id) == nil {
		t.Errorf("after alice's delete: her run kept %v, the schedule's kept %v; want only the schedule's", at.runs.get(id) != nil, at.runs.get(nightly.id) != nil)
	}
	if resp, _ := at.do(t, http.MethodGet, "/v1/conversations/"+conv, alice, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("alice: GET conversation after her delete = %d, want 404", resp.StatusCode)
	}
	resp, data := at.do(t, http.MethodGet, "/v1/conversations/"+conv, ops, "")
	var v conversationView
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &v) != nil || !slices.Equal(v.Runs, []string{nightly.id}) || v.Tenant != "schedule:nightly" {
		t.Errorf("admin: GET conversation after alice's delete = %d %s, want the schedule's run, tenant schedule:nightly", resp.StatusCode, data)
	}
}

func TestScheduleJoinsOnlyItsTenantsConversation(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "alice's answer"}, fakeTurn{Text: "team report"})
	keys := []authKey{testKey("alice", "alice-token-0123", scopeRunsWrite)}
	at := newAPITest(t, f, keys)
	id, conv := postInConversation(t, at, "Bearer alice-token-0123", `{"prompt":"alice asks"}`)
	waitRunID(t, at, id)

	tests := []struct {
		name    string
		tenant  string
		wantErr string
	}{
		{"default tenant", "", `conversation "` + conv + `": belongs to tenant "alice", not to this run's tenant "schedule:nightly"`},
		{"other tenant", "team", `not to this run's tenant "team"`},
		{"own tenant", "alice", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := testSchedule(t, rawSchedule{Name: "nightly", Cron: "@daily", Prompt: "report", ConversationID: conv, Tenant: tt.tenant})
			err := at.runs.checkScheduleConversations([]scheduleConfig{s})
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("checkScheduleConversations() = %v, want nil", err)
				}
			} else if err == nil || !strings.Contains(err.Error(), `[[schedules]] "nightly": conversation_id: `) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("checkScheduleConversations() = %v, want %q naming the schedule", err, tt.wantErr)
			}
			// At run time, when the load could not know.
			sched := newTestScheduler(t, at.runs, &fakeSchedClock{t: utcAt(12, 0, 0)}, s)
			r, _, err := sched.runNow("nightly")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("runNow() = %v, want %q", err, tt.wantErr)
				}
				if got := sched.list()[0].LastError; !strings.Contains(got, tt.wantErr) {
					t.Errorf("last_error = %q, want %q", got, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v := waitRun(t, r); v.ConversationID != conv || v.Tenant != "alice" || v.Owner != "schedule:nightly" {
				t.Errorf("scheduled run = conversation %q tenant %q owner %q, want %s, alice, schedule:nightly", v.ConversationID, v.Tenant, v.Owner, conv)
			}
		})
	}
}

func TestRunTenantSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "runs")
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	m := newStoredRuns(t, f, dir, nil)
	r, err := m.start(runRequest{Prompt: "build", Owner: "team-ci", Tenant: "team"}, false)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, r)
	stopRuns(t, m)
	// A run an older harnessd kept: its record has no tenant.
	s, err := openRunStoreOnceFree(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	created := time.Now().Add(-time.Hour)
	old := testRunView("run_older", created)
	old.Owner = "alice"
	l, err := s.create(old, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := lifecycle(created, runCompleted, "ok", "")
	endRun(t, s, l, ended(old, events), events...)
	if b := runLinesOnDisk(t, dir, old.ID); !bytes.Contains(b, []byte(`"tenant":""`)) {
		t.Fatalf("the older run's lines = %s, want a record without tenant", b)
	}
	s.close()

	m = newStoredRuns(t, f, dir, nil)
	tests := []struct {
		name, id, wantOwner, wantTenant string
	}{
		{"kept with its tenant", r.id, "team-ci", "team"},
		{"kept before tenants: its owner's", old.ID, "alice", "alice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := m.get(tt.id)
			if got == nil {
				t.Fatalf("run %s not loaded", tt.id)
			}
			if v := got.view(); v.Owner != tt.wantOwner || v.Tenant != tt.wantTenant || got.req.Tenant != tt.wantTenant {
				t.Errorf("after the restart: owner %q tenant %q (request's %q), want %q, %q", v.Owner, v.Tenant, got.req.Tenant, tt.wantOwner, tt.wantTenant)
			}
		})
	}
}
