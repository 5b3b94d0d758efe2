package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// This file holds API authentication: the bearer-token check against the
// configured keys and the scopes a key grants.

// authInfo is who made a request.
type authInfo struct {
	key    string // the key's name; "" with auth off
	tenant string // the key's tenant (authKey.Tenant); "" with auth off
	scopes []string
	authOn bool
	// limits and rate are the key's bounds on its runs (authKey.Limits,
	// authKey.Rate); zero with auth off.
	limits toolLimits
	rate   int
}

// stamp writes into req who starts it, as every surface that starts runs
// (the API, the MCP server, A2A) must: its owner and tenant, whether it
// may join another tenant's conversation, and the key's bounds on its
// tools, servers and rate.
func (i authInfo) stamp(req *runRequest) {
	req.Owner, req.Tenant, req.AnyTenant = i.owner(), i.tenant, i.has(scopeAdmin)
	req.Limits, req.Rate = i.limits, i.rate
}

// has reports whether the caller holds scope (auth off holds everything).
func (i authInfo) has(scope string) bool {
	if !i.authOn {
		return true
	}
	for _, s := range i.scopes {
		if s == scopeAdmin || s == scope || (s == scopeRunsWrite && scope == scopeRunsRead) {
			return true
		}
	}
	return false
}

// owner is the name of whoever makes requests as i: who started a run it
// starts (the run view's owner). It is the key's name, and "" with auth
// off, where everything has one owner.
func (i authInfo) owner() string { return i.key }

// sees reports whether i may see and act on what belongs to tenant (a
// run's, a conversation's): admin keys and auth off see everything, any
// other key only what belongs to its own tenant, whichever key of the
// tenant started it. Callers answer 404 when it is false, so ids are not
// confirmed.
func (i authInfo) sees(tenant string) bool {
	return !i.authOn || i.has(scopeAdmin) || i.tenant == tenant
}

// authKeys returns the API keys in force (empty when auth is off); the
// caller must not change the slice.
func (a *api) authKeys() []authKey {
	a.keysMu.Lock()
	defer a.keysMu.Unlock()
	return a.keys
}

// setAuthKeys replaces the API keys: requests authenticated from then on
// use them. Empty turns auth off.
func (a *api) setAuthKeys(keys []authKey) {
	a.keysMu.Lock()
	defer a.keysMu.Unlock()
	a.keys = keys
}

// authenticate checks the bearer token against the configured keys and
// the key's scopes against need ("" needs no token). It returns the
// status to answer (401 or 403) with an error saying what is missing, or
// 0 and a nil error. With no keys configured, auth is off. Tokens are
// compared on their SHA-256, in constant time, against every key.
func (a *api) authenticate(r *http.Request, need string) (authInfo, int, error) {
	keys := a.authKeys()
	if len(keys) == 0 {
		return authInfo{}, 0, nil
	}
	if need == "" {
		return authInfo{authOn: true}, 0, nil
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !strings.EqualFold(scheme, "Bearer") || token == "" {
		return authInfo{}, http.StatusUnauthorized, fmt.Errorf("authorization: missing bearer token: this route needs the %s scope; send Authorization: Bearer <token>", need)
	}
	sum := sha256.Sum256([]byte(token))
	match := -1
	for i := range keys {
		if subtle.ConstantTimeCompare(sum[:], keys[i].TokenSHA256[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return authInfo{}, http.StatusUnauthorized, errors.New("authorization: invalid bearer token: it matches no configured API key")
	}
	info := authInfo{key: keys[match].Name, tenant: keys[match].tenant(), scopes: keys[match].Scopes, authOn: true,
		limits: keys[match].Limits, rate: keys[match].Rate}
	if !info.has(need) {
		return info, http.StatusForbidden, fmt.Errorf("authorization: key %q lacks the %s scope this route needs (it has %s); grant %s or admin in [[auth.keys]] or HARNESS_API_KEYS",
			info.key, need, strings.Join(info.scopes, ", "), need)
	}
	return info, 0, nil
}
