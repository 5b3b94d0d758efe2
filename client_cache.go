package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// This file holds the cache of server/discover, list and read results that
// their servers mark cacheable (ttlMs and cacheScope, revision 2026-07-28):
// a server whose discovery or list is still fresh is not asked again,
// whether by a new session to it (a restart, a run's own server started
// again) or a re-list. A list_changed
// notification drops the server's entries for that list. Entries of scope
// "private" serve only the authorization context (the server's credentials)
// that fetched them.

// maxCacheTTL bounds how long any entry is kept, whatever the server says.
const maxCacheTTL = time.Hour

// A responseCache holds cacheable results of every server of the process.
// The zero value is not ready: use newResponseCache. A nil *responseCache
// caches nothing. It is safe for concurrent use.
type responseCache struct {
	now func() time.Time

	mu sync.Mutex
	// guards entries
	entries map[cacheKey]cacheEntry
}

// A cacheKey names one cached result: a server (its identity, not its
// name alone), a method, and the cursor (lists) or URI (reads) asked for.
type cacheKey struct {
	server string
	method string
	arg    string
}

// A cacheEntry is one cached result. auth is the authorization context
// that fetched it, checked for private entries.
type cacheEntry struct {
	raw     json.RawMessage
	expires time.Time
	private bool
	auth    string
}

// newResponseCache returns an empty cache.
func newResponseCache() *responseCache {
	return &responseCache{now: time.Now, entries: map[cacheKey]cacheEntry{}}
}

// cacheIdentity returns the identity of cfg's server (what it runs or where
// it is) and of the authorization context requests to it carry (its
// credentials: env, headers, OAuth client), each as a digest.
func cacheIdentity(cfg serverConfig) (server, auth string) {
	digest := func(parts ...string) string {
		h := sha256.New()
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s;", len(p), p)
		}
		return hex.EncodeToString(h.Sum(nil)[:12])
	}
	server = digest(append([]string{cfg.Name, cfg.Transport, cfg.URL, cfg.Command, cfg.Cwd}, cfg.Args...)...)
	var creds []string
	for k, v := range cfg.Env {
		creds = append(creds, "env "+k+"="+v)
	}
	for k, v := range cfg.Headers {
		creds = append(creds, "header "+strings.ToLower(k)+"="+v)
	}
	if cfg.OAuth != nil {
		creds = append(creds, "oauth "+cfg.OAuth.ClientID)
	}
	sort.Strings(creds)
	return server, digest(creds...)
}

// get returns the fresh result cached for (method, arg) of cfg's server,
// if any, and if its scope lets cfg's authorization context see it.
func (rc *responseCache) get(cfg serverConfig, method, arg string) (json.RawMessage, bool) {
	if rc == nil {
		return nil, false
	}
	server, auth := cacheIdentity(cfg)
	key := cacheKey{server, method, arg}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	e, ok := rc.entries[key]
	switch {
	case !ok:
		return nil, false
	case !rc.now().Before(e.expires):
		delete(rc.entries, key)
		return nil, false
	case e.private && e.auth != auth:
		return nil, false
	}
	return e.raw, true
}

// put caches raw, the result of (method, arg) from cfg's server, for the
// ttlMs it carries; a result without a positive ttlMs drops what was
// cached for the key instead. A cacheScope other than "public" (including
// none, for safety) is private.
func (rc *responseCache) put(cfg serverConfig, method, arg string, raw json.RawMessage) {
	if rc == nil {
		return
	}
	var hints struct {
		TTLMs      int64  `json:"ttlMs"`
		CacheScope string `json:"cacheScope"`
	}
	json.Unmarshal(raw, &hints) // a result without hints is not cached
	server, auth := cacheIdentity(cfg)
	key := cacheKey{server, method, arg}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if hints.TTLMs <= 0 {
		delete(rc.entries, key)
		return
	}
	ttl := min(time.Duration(hints.TTLMs)*time.Millisecond, maxCacheTTL)
	rc.entries[key] = cacheEntry{raw: raw, expires: rc.now().Add(ttl), private: hints.CacheScope != "public", auth: auth}
}

// forget drops every cached result of method from cfg's server, whatever
// its authorization context: the server said the list changed.
func (rc *responseCache) forget(cfg serverConfig, method string) {
	if rc == nil {
		return
	}
	server, _ := cacheIdentity(cfg)
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for key := range rc.entries {
		if key.server == server && key.method == method {
			delete(rc.entries, key)
		}
	}
}

// requestCached returns the cached result of (req.method, arg) when it is
// fresh, and otherwise sends req with send and caches what comes back.
func (c *mcpClient) requestCached(ctx context.Context, req rpcRequest, arg string, send func(context.Context, rpcRequest) (json.RawMessage, error)) (json.RawMessage, error) {
	if raw, ok := c.opts.Cache.get(c.cfg, req.method, arg); ok {
		return raw, nil
	}
	raw, err := send(ctx, req)
	if err != nil {
		return nil, err
	}
	c.opts.Cache.put(c.cfg, req.method, arg, raw)
	return raw, nil
}

// sendRequest sends req and returns its raw result, for requestCached.
func (c *mcpClient) sendRequest(ctx context.Context, req rpcRequest) (json.RawMessage, error) {
	var raw json.RawMessage
	err := c.request(ctx, req, &raw)
	return raw, err
}

// listChanged drops the cached results a list_changed notification
// (method) makes stale.
func (c *conn) listChanged(method string) {
	switch method {
	case "notifications/tools/list_changed":
		c.opts.Cache.forget(c.cfg, "tools/list")
	case "notifications/resources/list_changed":
		c.opts.Cache.forget(c.cfg, "resources/list")
	case "notifications/prompts/list_changed":
		c.opts.Cache.forget(c.cfg, "prompts/list")
	}
}
