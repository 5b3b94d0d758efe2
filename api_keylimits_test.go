package main

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file tests keys limited to their tools, servers and rate through
// the API: a run finds and calls only what its key may reach, a run's
// own server outside the key's servers is refused, and a key past its
// rate gets 429 with Retry-After.

// limitedKeys are the keys of these tests: one limited to the fake
// server's echo, one without limits, one with a rate of 2 runs a minute.
const limitedKeys = `[
	{"name": "narrow", "token": "narrow-token-0123456", "scopes": ["runs:write"], "servers": ["fake"], "tools": ["mcp_fake_echo"]},
	{"name": "wide", "token": "wide-token-012345678", "scopes": ["runs:write"]},
	{"name": "slow", "token": "slow-token-012345678", "scopes": ["runs:write"], "rate": 2}
]`

// newLimitedAPI returns an API over limitedKeys with two fake servers,
// fake and other, that offer the same tools.
func newLimitedAPI(t *testing.T, f *fakeModel) *apiTest {
	t.Helper()
	keys, _, err := parseAuthKeysJSON([]byte(limitedKeys))
	if err != nil {
		t.Fatal(err)
	}
	other := fakeServerConfig(t, "normal")
	other.Name = "other"
	return newAPITest(t, f, keys, fakeServerConfig(t, "normal"), other)
}

// reachScript is a model that finds echo tools, then calls the echo of
// both servers and fail of fake, and answers with what it was offered
// and what each call gave.
func reachScript(t *testing.T) *fakeModel {
	report := func(req fakeRequest) fakeTurn {
		var parts []string
		for _, res := range req.toolResults() {
			parts = append(parts, fmt.Sprintf("%s=%v:%s", res.ToolCallID, res.IsError, res.Content))
		}
		offered := slices.Sorted(slices.Values(req.toolNames()))
		return fakeTurn{Text: strings.Join(offered, ",") + " | " + strings.Join(parts, " | ")}
	}
	return newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: []toolCall{call("find_tool", `{"query":"echo fail"}`)}},
		fakeTurn{ToolCalls: []toolCall{
			call("mcp_fake_echo", `{"message":"hi"}`),
			call("mcp_other_echo", `{"message":"hi"}`),
			call("mcp_fake_fail", `{}`),
		}},
		fakeTurn{Reply: report},
	)
}

func TestKeyLimitedToItsTools(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		auth        string
		wantOffered []string // among the tools offered after find_tool
		notOffered  []string
		wantResults []string
	}{
		{"a key limited to fake's echo", "Bearer narrow-token-0123456",
			[]string{"mcp_fake_echo"}, []string{"mcp_other_echo", "mcp_fake_fail"},
			[]string{"call_mcp_fake_echo=false:hi", `call_mcp_other_echo=true:unknown tool "mcp_other_echo"`, `call_mcp_fake_fail=true:unknown tool "mcp_fake_fail"`}},
		{"a key without limits", "Bearer wide-token-012345678",
			[]string{"mcp_fake_echo", "mcp_other_echo", "mcp_fake_fail"}, nil,
			[]string{"call_mcp_fake_echo=false:hi", "call_mcp_other_echo=false:hi", "call_mcp_fake_fail=true:it failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			at := newLimitedAPI(t, reachScript(t))
			id, _ := postInConversation(t, at, tt.auth, `{"prompt":"echo everywhere"}`)
			v := waitRunID(t, at, id)
			if v.Status != runCompleted {
				t.Fatalf("run = %s %q, want completed", v.Status, v.Error)
			}
			offered, results, _ := strings.Cut(v.Output, " | ")
			names := strings.Split(offered, ",")
			for _, want := range tt.wantOffered {
				if !slices.Contains(names, want) {
					t.Errorf("offered %v, want %s among them", names, want)
				}
			}
			for _, not := range tt.notOffered {
				if slices.Contains(names, not) {
					t.Errorf("offered %v, want no %s", names, not)
				}
			}
			for _, want := range tt.wantResults {
				if !strings.Contains(results, want) {
					t.Errorf("results %q, want %q", results, want)
				}
			}
		})
	}
}

func TestKeyLimitedToItsServers(t *testing.T) {
	t.Parallel()
	at := newLimitedAPI(t, newFakeModel(t, providerOpenAI))
	body := `{"prompt":"x","mcp_servers":[{"name":"jira","url":"https://jira.example.com/mcp"}]}`
	resp, data := at.do(t, http.MethodPost, "/v1/runs", "Bearer narrow-token-0123456", body)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(data), `server \"jira\": this key may use only the servers`) {
		t.Errorf("a run's own server outside the key's servers: %d %s, want 403 naming it", resp.StatusCode, data)
	}
}

func TestKeyRate(t *testing.T) {
	t.Parallel()
	at := newLimitedAPI(t, newFakeModel(t, providerOpenAI, fakeTurn{Text: "one"}, fakeTurn{Text: "two"}, fakeTurn{Text: "three"}))
	for range 2 {
		id, _ := postInConversation(t, at, "Bearer slow-token-012345678", `{"prompt":"go"}`)
		waitRunID(t, at, id)
	}
	resp, data := at.do(t, http.MethodPost, "/v1/runs", "Bearer slow-token-012345678", `{"prompt":"go"}`)
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != http.StatusTooManyRequests || err != nil || retry < 1 || retry > 60 || !strings.Contains(string(data), `"rate_limited"`) {
		t.Errorf("third run in a minute: %d Retry-After %q %s, want 429 rate_limited with Retry-After 1-60", resp.StatusCode, resp.Header.Get("Retry-After"), data)
	}
	// Another key is not held back by it.
	id, _ := postInConversation(t, at, "Bearer wide-token-012345678", `{"prompt":"go"}`)
	if v := waitRunID(t, at, id); v.Status != runCompleted {
		t.Errorf("another key's run = %s %q, want completed", v.Status, v.Error)
	}
}
