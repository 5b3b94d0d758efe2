package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// TestServerNameRule checks that every place that accepts a server name
// applies the one rule: the config sources (through buildServer),
// connect_mcp (its server) and the pattern in connect_mcp's schema.
func TestServerNameRule(t *testing.T) {
	var schema struct {
		Properties struct {
			ServerName struct {
				Pattern string `json:"pattern"`
			} `json:"server_name"`
		} `json:"properties"`
	}
	connect, ok := lookupIn([]*serverTools{deferredBuiltins}, toolConnectMCP)
	if !ok {
		t.Fatal("connect_mcp is not a deferred built-in")
	}
	if err := json.Unmarshal(connect.InputSchema, &schema); err != nil {
		t.Fatal(err)
	}
	if got := schema.Properties.ServerName.Pattern; got != serverNameSchema {
		t.Fatalf("connect_mcp server_name pattern = %q, want %q", got, serverNameSchema)
	}
	pattern := regexp.MustCompile(serverNameSchema)
	tests := []struct {
		name  string
		valid bool
	}{
		{"github", true},
		{"My-Server_2", true},
		{"api.example", true},
		{"a.b-c_d", true},
		{strings.Repeat("x", maxNameLength), true},
		{strings.Repeat("x", maxNameLength+1), false},
		{"", false},
		{"a b", false},
		{"a/b", false},
		{"a:b", false},
		{"café", false},
	}
	for _, tt := range tests {
		if got := checkServerName(tt.name) == nil; got != tt.valid {
			t.Errorf("checkServerName(%q) valid = %v, want %v", tt.name, got, tt.valid)
		}
		if got := pattern.MatchString(tt.name); got != tt.valid {
			t.Errorf("schema pattern matches %q = %v, want %v", tt.name, got, tt.valid)
		}
		if _, err := connectServer(tt.name, "http://127.0.0.1:1/mcp"); (err == nil) != tt.valid {
			t.Errorf("connectServer(%q) error = %v, want valid %v", tt.name, err, tt.valid)
		}
		entry, _ := json.Marshal([]map[string]string{{"name": tt.name, "command": "x"}})
		_, err := parseServerJSON("S", entry, func(string) (string, bool) { return "", false })
		if (err == nil) != tt.valid {
			t.Errorf("parseServerJSON(name %q) error = %v, want valid %v", tt.name, err, tt.valid)
		}
	}
}

// TestSameToolPrefix checks the one collision rule: names collide when
// their sanitized forms, and so their tool prefixes, are equal.
func TestSameToolPrefix(t *testing.T) {
	tests := []struct {
		a, b    string
		collide bool
		prefix  string
	}{
		{"a.b", "a_b", true, "mcp_a_b_"},
		{"a-b", "a.b", true, "mcp_a_b_"},
		{"GitHub", "github", true, "mcp_github_"},
		{"same", "same", true, "mcp_same_"},
		{"a", "a_b", false, "mcp_a_"},
		{"ab", "a_b", false, "mcp_ab_"},
	}
	for _, tt := range tests {
		if got := sameToolPrefix(tt.a, tt.b); got != tt.collide {
			t.Errorf("sameToolPrefix(%q, %q) = %v, want %v", tt.a, tt.b, got, tt.collide)
		}
		if got := mcpToolPrefix(tt.a); got != tt.prefix {
			t.Errorf("mcpToolPrefix(%q) = %q, want %q", tt.a, got, tt.prefix)
		}
		if got := strings.HasPrefix(mcpToolName(tt.b, "t"), mcpToolPrefix(tt.a)); tt.collide && !got {
			t.Errorf("mcpToolName(%q, \"t\") does not start with mcpToolPrefix(%q)", tt.b, tt.a)
		}
	}
}
