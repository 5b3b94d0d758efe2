package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// This file tests that harnessd run decides approvals at the terminal and
// posts the decision.

func TestRunFollowerDecidesApprovals(t *testing.T) {
	const payload = `{"approval_id":"ap_1","tool":"mcp_everything_get_sum","server":"everything","server_tool":"get-sum","arguments":"{\"a\":1}"}`
	tests := []struct {
		name     string
		terminal string // what the person types; "" for no terminal
		want     string // the body posted; "" for none
		info     string // a line the follower shows
	}{
		{"approve", "y\n", `{"decision":"approve"}`, ""},
		{"deny with a reason", "n\nnot today\n", `{"decision":"deny","reason":"not today"}`, ""},
		{"no terminal", "", "", "waits for approval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				posted []string
			)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPost || r.URL.Path != "/v1/runs/run_x/approvals/ap_1" {
					t.Errorf("request %s %s, want POST /v1/runs/run_x/approvals/ap_1", r.Method, r.URL.Path)
				}
				body, _ := io.ReadAll(r.Body)
				mu.Lock()
				posted = append(posted, string(body))
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"run_id":"run_x","approval_id":"ap_1","decision":"approve"}`)
			}))
			t.Cleanup(srv.Close)
			var stdout, info bytes.Buffer
			c := &runClient{base: srv.URL, client: srv.Client(), out: &stdout, info: &info}
			if tt.terminal != "" {
				c.prompter = &terminalPrompter{in: bufio.NewReader(strings.NewReader(tt.terminal)), out: &info}
			}
			f := &runFollower{c: c, runID: "run_x", printed: map[int]string{}}
			if f.show(t.Context(), evApprovalRequested, json.RawMessage(payload)) {
				t.Fatal("show(approval.requested) ended the run")
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case tt.want == "" && len(posted) > 0:
				t.Errorf("posted %q, want nothing", posted)
			case tt.want != "" && (len(posted) != 1 || !jsonEqual(posted[0], tt.want)):
				t.Errorf("posted %q, want %s", posted, tt.want)
			}
			if !strings.Contains(info.String(), tt.info) {
				t.Errorf("shown %q, want it to contain %q", info.String(), tt.info)
			}
		})
	}
}

// jsonEqual reports whether two JSON texts hold the same value.
func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}
