package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// This file tests the audit trail through the API: a run's tool call and
// an approval denied by its timeout are recorded with the key, the
// arguments' hash and the outcome; an admin action is recorded; refused
// requests are counted; GET /v1/audit filters and pages, for admins only.

// newAuditAPI returns an API over tenantKeys whose runs and API record
// into an audit trail under a temporary home, and the trail's directory.
func newAuditAPI(t *testing.T, f *fakeModel) (*apiTest, *auditLog, string) {
	t.Helper()
	keys, _, err := parseAuthKeysJSON([]byte(tenantKeys))
	if err != nil {
		t.Fatal(err)
	}
	at := newAPITest(t, f, keys, fakeServerConfig(t, "normal"))
	dir := filepath.Join(t.TempDir(), "audit")
	l, err := openAuditLog(dir, defaultAudit(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	at.api.audit, at.runs.env.audit = l, l
	return at, l, dir
}

// auditRecords returns the records GET path lists for auth.
func auditRecords(t *testing.T, at *apiTest, path, auth string) ([]auditRecord, string) {
	t.Helper()
	resp, data := at.do(t, http.MethodGet, path, auth, "")
	var page struct {
		Records    []auditRecord `json:"records"`
		NextCursor string        `json:"next_cursor"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &page) != nil {
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, data)
	}
	return page.Records, page.NextCursor
}

func TestAuditThroughTheAPI(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"audited"}`)}},
		fakeTurn{Text: "done"},
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"held"}`)}},
		fakeTurn{Text: "denied"},
	)
	at, l, dir := newAuditAPI(t, f)
	id, _ := postInConversation(t, at, teamWrite, `{"prompt":"echo it"}`)
	waitRunID(t, at, id)
	held, _ := postInConversation(t, at, otherKey, `{"prompt":"echo it","approval":"always","input_timeout":"1ms"}`)
	waitRunID(t, at, held)
	// An admin action, a refused request and another tenant's run.
	at.do(t, http.MethodPost, "/v1/schedules/nightly/run", adminKey, "")
	at.do(t, http.MethodGet, "/v1/runs", "Bearer wrong-token-0123456789", "")
	at.do(t, http.MethodGet, "/v1/runs/"+id, otherKey, "")

	recs, _ := auditRecords(t, at, "/v1/audit?type=tool_call&tool=mcp_fake_echo", adminKey)
	if len(recs) != 2 {
		t.Fatalf("tool_call records of mcp_fake_echo = %+v, want 2", recs)
	}
	sum := sha256.Sum256([]byte(`{"message":"audited"}`))
	tests := []struct {
		name string
		rec  auditRecord
		want auditRecord
	}{
		{"the call", recs[1], auditRecord{Key: "team-ci", Tenant: "team", Run: id, Server: "fake", ArgsSHA256: hex.EncodeToString(sum[:]), ArgsBytes: 21, Outcome: "ok"}},
		{"the call denied by its approval's timeout", recs[0], auditRecord{Key: "other", Tenant: "other", Run: held, Server: "fake", ArgsBytes: 18, Outcome: "denied", DecidedBy: resolvedByTimeout}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w := tt.rec, tt.want
			if r.Key != w.Key || r.Tenant != w.Tenant || r.Run != w.Run || r.Server != w.Server || r.ArgsBytes != w.ArgsBytes || r.Outcome != w.Outcome ||
				r.DecidedBy != w.DecidedBy || (w.ArgsSHA256 != "" && r.ArgsSHA256 != w.ArgsSHA256) || r.Start == nil {
				t.Errorf("record = %+v, want %+v", r, w)
			}
			if w.Outcome == "denied" && !strings.HasPrefix(r.ApprovalID, "approval_") {
				t.Errorf("denied call's approval = %q, want its id", r.ApprovalID)
			}
		})
	}
	admin, _ := auditRecords(t, at, "/v1/audit?type=admin&key=ops", adminKey)
	if len(admin) != 1 || admin[0].Action != "POST /v1/schedules/{name}/run" || admin[0].Target != "/v1/schedules/nightly/run" || admin[0].Status != http.StatusNotFound {
		t.Errorf("admin records = %+v, want the schedule run, 404", admin)
	}
	// Paging: one record a page, newest first, until the cursor runs out.
	var seqs []int64
	for cursor, pages := "", 0; pages < 20; pages++ {
		page, next := auditRecords(t, at, "/v1/audit?limit=1&type=tool_call&cursor="+cursor, adminKey)
		for _, r := range page {
			seqs = append(seqs, r.Seq)
		}
		if cursor = next; cursor == "" {
			break
		}
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] >= seqs[i-1] {
			t.Errorf("paged seqs %v are not newest first", seqs)
		}
	}
	if resp, _ := at.do(t, http.MethodGet, "/v1/audit", teamWrite, ""); resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /v1/audit with a runs:write key = %d, want 403", resp.StatusCode)
	}
	l.close() // writes the refused counts
	out, err := verifyAudit(dir)
	if err != nil {
		t.Fatal(err)
	}
	var refused auditRecord
	recsAll, _ := (&auditLog{dir: dir}).page(auditFilter{typ: auditRefused, limit: 10})
	if len(recsAll.Records) != 1 || json.Unmarshal(recsAll.Records[0], &refused) != nil ||
		refused.Refused["unauthorized"] != 1 || refused.Refused["not_owner"] != 1 || refused.Refused["forbidden"] != 1 {
		t.Errorf("refused = %s (of %d records), want one unauthorized, one forbidden and one not_owner", recsAll.Records, out.Records)
	}
}
