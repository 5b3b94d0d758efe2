package main

import (
	"encoding/json"
	"slices"
	"testing"
	"time"
)

// This file tests the cache of cacheable results: its rules on a fake clock,
// then with the Go SDK server, which counts the list and read requests it
// answers.

func TestResponseCacheRules(t *testing.T) {
	t.Parallel()
	now := time.Unix(1000, 0)
	rc := newResponseCache()
	rc.now = func() time.Time { return now }
	alice := serverConfig{Name: "s", Transport: transportHTTP, URL: "https://mcp.example/mcp", Headers: map[string]string{"Authorization": "Bearer alice"}}
	bob := alice
	bob.Headers = map[string]string{"Authorization": "Bearer bob"}
	other := alice
	other.URL = "https://other.example/mcp"

	public := json.RawMessage(`{"tools":[],"ttlMs":60000,"cacheScope":"public"}`)
	private := json.RawMessage(`{"contents":[],"ttlMs":60000,"cacheScope":"private"}`)
	noScope := json.RawMessage(`{"contents":[],"ttlMs":60000}`)
	rc.put(alice, "tools/list", "", public)
	rc.put(alice, "resources/read", "mem://a", private)
	rc.put(alice, "resources/read", "mem://b", noScope)
	rc.put(alice, "resources/list", "", json.RawMessage(`{"resources":[],"ttlMs":0}`))
	rc.put(alice, "prompts/list", "", json.RawMessage(`{"prompts":[]}`))

	tests := []struct {
		name        string
		cfg         serverConfig
		method, arg string
		want        bool
	}{
		{"public, same credentials", alice, "tools/list", "", true},
		{"public, other credentials", bob, "tools/list", "", true},
		{"public, other server", other, "tools/list", "", false},
		{"other cursor", alice, "tools/list", "next", false},
		{"private, same credentials", alice, "resources/read", "mem://a", true},
		{"private, other credentials", bob, "resources/read", "mem://a", false},
		{"no scope is private", bob, "resources/read", "mem://b", false},
		{"ttlMs 0 is not cached", alice, "resources/list", "", false},
		{"no ttlMs is not cached", alice, "prompts/list", "", false},
	}
	for _, tt := range tests {
		if _, got := rc.get(tt.cfg, tt.method, tt.arg); got != tt.want {
			t.Errorf("%s: get(%s, %q) found = %v, want %v", tt.name, tt.method, tt.arg, got, tt.want)
		}
	}

	rc.forget(bob, "tools/list") // a list change drops it for every context
	if _, ok := rc.get(alice, "tools/list", ""); ok {
		t.Error("get(tools/list) after forget: found, want dropped")
	}
	now = now.Add(time.Minute)
	if _, ok := rc.get(alice, "resources/read", "mem://a"); ok {
		t.Error("get(resources/read) after its ttlMs: found, want expired")
	}
	var none *responseCache
	none.put(alice, "tools/list", "", public)
	if _, ok := none.get(alice, "tools/list", ""); ok {
		t.Error("nil cache: found an entry, want none")
	}
}

// sdkStats returns the Go SDK server's counts of answered list and read
// requests, by method.
func sdkStats(t *testing.T, c *mcpClient) map[string]int {
	t.Helper()
	res, err := c.callTool(t.Context(), "stats", nil)
	if err != nil {
		t.Fatalf("callTool(stats) = %v", err)
	}
	var counts map[string]int
	if err := json.Unmarshal([]byte(resultToText(res)), &counts); err != nil {
		t.Fatalf("stats %q: %v", resultToText(res), err)
	}
	return counts
}

func TestResponseCacheWithSDKServer(t *testing.T) {
	t.Parallel()
	url := startEchoServerHTTP(t, "http", "-full", "-ttl", "1m")
	cache := newResponseCache()
	toolsChanged := make(chan struct{}, 1)
	opts := sdkInputOptions()
	opts.Cache = cache
	opts.OnToolsChanged = func() {
		select {
		case toolsChanged <- struct{}{}:
		default:
		}
	}
	alice := httpPeerConfig("sdk", transportHTTP, url)
	alice.Headers = map[string]string{"X-User": "alice"}
	bob := alice
	bob.Headers = map[string]string{"X-User": "bob"}
	ctx := t.Context()

	first := connectPeer(t, alice, opts)
	if _, err := first.listTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := first.readResource(ctx, "echo://greeting"); err != nil {
		t.Fatal(err)
	}
	// A second session (a restart, a run's own server) with the same
	// credentials, and one with others.
	again := connectPeer(t, alice, opts)
	if _, err := again.listTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := again.readResource(ctx, "echo://greeting"); err != nil {
		t.Fatal(err)
	}
	other := connectPeer(t, bob, opts)
	if _, err := other.listTools(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := other.readResource(ctx, "echo://greeting"); err != nil {
		t.Fatal(err)
	}
	got := sdkStats(t, first)
	// tools/list is public: listed once; resources/read is private: read
	// once per credentials.
	if got["tools/list"] != 1 || got["resources/read"] != 2 {
		t.Errorf("server answered %v, want tools/list 1 and resources/read 2", got)
	}

	// A list change drops the cached list: the next list asks the server.
	if _, err := first.callTool(ctx, "add_tool", json.RawMessage(`{"name":"shout"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-toolsChanged:
	case <-time.After(waitLimit):
		t.Fatal("no tools list_changed within the wait limit")
	}
	tools, err := again.listTools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(tools, func(tool toolInfo) bool { return tool.Name == "shout" }) {
		t.Errorf("listTools() after list_changed lacks %q", "shout")
	}
	if got := sdkStats(t, first); got["tools/list"] != 2 {
		t.Errorf("server answered tools/list %d times, want 2", got["tools/list"])
	}
}

// TestDiscoveryCachedWithSDKServer checks that a second session to a server
// whose server/discover answer is still fresh does not ask it again, and
// still speaks the revision discovered.
func TestDiscoveryCachedWithSDKServer(t *testing.T) {
	t.Parallel()
	cfg := httpPeerConfig("sdk", transportHTTP, startEchoServerHTTP(t, "http-stateless", "-full", "-ttl", "1m"))
	opts := sdkInputOptions()
	opts.Cache = newResponseCache()
	first := connectPeer(t, cfg, opts)
	again := connectPeer(t, cfg, opts)
	if got := again.protocolVersion(); got != sessionlessProtocolVersion {
		t.Errorf("second session's protocol version = %q, want %q", got, sessionlessProtocolVersion)
	}
	if got := sdkStats(t, first); got["server/discover"] != 1 {
		t.Errorf("server answered server/discover %d times, want 1", got["server/discover"])
	}
}
