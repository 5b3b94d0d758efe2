package main

import (
	"strings"
	"testing"
	"time"
)

// This file tests what an API key's runs may reach (config_keylimits.go)
// and its rate (run_rate.go): the globs, the keys as read, and the slots
// of the last minute.

func TestToolLimits(t *testing.T) {
	t.Parallel()
	narrow := toolLimits{Tools: []string{"mcp_github_*", "connect_mcp"}, Servers: []string{"github", "docs-*"}}
	tests := []struct {
		name         string
		limits       toolLimits
		server, tool string
		want         bool
	}{
		{"no limits allow a tool", toolLimits{}, "github", "mcp_github_search", true},
		{"no limits allow a built-in", toolLimits{}, "", "connect_mcp", true},
		{"a tool matching both", narrow, "github", "mcp_github_search", true},
		{"a server outside", narrow, "jira", "mcp_jira_search", false},
		{"a server inside, its tool outside the tool globs", narrow, "docs-api", "mcp_docs-api_read", false},
		{"a built-in named", narrow, "", "connect_mcp", true},
		{"a built-in not named", narrow, "", "read_mcp_resource", false},
		{"find_tool always", narrow, "", "find_tool", true},
		{"servers alone leave every tool of the server", toolLimits{Servers: []string{"docs-*"}}, "docs-api", "mcp_docs-api_read", true},
		{"servers alone leave the built-ins", toolLimits{Servers: []string{"docs-*"}}, "", "list_mcp_resources", true},
		{"tools alone bound every server", toolLimits{Tools: []string{"mcp_*_read"}}, "jira", "mcp_jira_search", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.limits.allowsTool(tt.server, tt.tool); got != tt.want {
				t.Errorf("allowsTool(%q, %q) = %v, want %v", tt.server, tt.tool, got, tt.want)
			}
		})
	}
}

func TestKeyLimitsRead(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		keys    string
		wantErr string // "" for none
	}{
		{"tools, servers and rate", `[{"name":"ci","token":"ci-token-0123456789","scopes":["runs:write"],"tools":["mcp_github_*"],"servers":["github"],"rate":10}]`, ""},
		{"a bad tool glob", `[{"name":"ci","token":"ci-token-0123456789","scopes":["runs:write"],"tools":["mcp_[github"]}]`, `key "ci": tools[0]: "mcp_[github" is not a glob`},
		{"an empty server glob", `[{"name":"ci","token":"ci-token-0123456789","scopes":["runs:write"],"servers":[""]}]`, `key "ci": servers[0]: "" is not a glob`},
		{"a negative rate", `[{"name":"ci","token":"ci-token-0123456789","scopes":["runs:write"],"rate":-1}]`, `key "ci": rate: -1 is negative`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			keys, _, err := parseAuthKeysJSON([]byte(tt.keys))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			k := keys[0]
			if k.Rate != 10 || len(k.Limits.Tools) != 1 || len(k.Limits.Servers) != 1 {
				t.Errorf("key = %+v, want rate 10, one tool glob and one server glob", k)
			}
		})
	}
}

func TestKeyRates(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	type step struct {
		at        time.Duration // after t0
		key       string
		release   bool // give the slot back at once
		wantRetry time.Duration
	}
	tests := []struct {
		name  string
		rate  int
		steps []step
	}{
		{"under the rate", 2, []step{{0, "a", false, 0}, {time.Second, "a", false, 0}}},
		{"past the rate waits for the oldest to leave the minute", 2, []step{
			{0, "a", false, 0}, {10 * time.Second, "a", false, 0}, {20 * time.Second, "a", false, 40 * time.Second}}},
		{"a minute later there is room", 1, []step{{0, "a", false, 0}, {time.Minute, "a", false, 0}}},
		{"keys count apart", 1, []step{{0, "a", false, 0}, {0, "b", false, 0}, {time.Second, "a", false, 59 * time.Second}}},
		{"a released slot is free again", 1, []step{{0, "a", true, 0}, {time.Second, "a", false, 0}}},
		{"no rate bounds nothing", 0, []step{{0, "a", false, 0}, {0, "a", false, 0}, {0, "a", false, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var k keyRates
			for i, s := range tt.steps {
				release, err := k.reserve(s.key, tt.rate, t0.Add(s.at))
				if s.wantRetry == 0 {
					if err != nil {
						t.Fatalf("step %d: %v, want a slot", i, err)
					}
					if s.release {
						release()
					}
					continue
				}
				re, ok := err.(*rateError)
				if !ok || re.retryAfter != s.wantRetry {
					t.Fatalf("step %d: %v, want a rate error with retry after %s", i, err, s.wantRetry)
				}
			}
		})
	}
}
