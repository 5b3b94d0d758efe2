package main

import (
	"maps"
	"slices"
)

// This file holds how OAuth credentials reach the redactor: every one an
// OAuth client obtains or loads (access, refresh and ID tokens,
// registered client secrets, client assertions, DPoP keys and proofs,
// jwt-bearer and identity assertions) is handed to the daemon's live
// redactor the moment it exists, before its first use.

// learn hands credentials to the redactor of everything harnessd logs,
// stores and answers: every credential the client obtains (tokens,
// registered client secrets, assertions, DPoP keys and proof headers,
// identity assertions) passes here the moment it exists, before its
// first use. Empty values are skipped. Safe for concurrent use.
func (c *oauthClient) learn(values ...string) { c.secrets.add(values...) }

// credentials returns the secret values of a stored record: its tokens
// and the registered clients' secrets.
func (rec oauthRecord) credentials() []string {
	var out []string
	if rec.Token != nil {
		out = append(out, rec.Token.AccessToken, rec.Token.RefreshToken)
	}
	if rec.DPoPKey != "" {
		out = append(out, rec.DPoPKey)
	}
	for _, id := range rec.Clients {
		out = append(out, id.ClientSecret)
	}
	return out
}

// learnInto makes secrets the redactor every client m hands out from then
// on tells its credentials, carrying over what m's clients told before;
// a nil m does nothing. Safe for concurrent use.
func (m *oauthClients) learnInto(secrets *liveRedactor) {
	if m == nil || secrets == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.secrets == secrets {
		return
	}
	if held := m.secrets.load(); held != nil {
		secrets.add(slices.Collect(maps.Keys(held.set))...)
	}
	m.secrets = secrets
}

// redactor returns the redactor m's clients tell their credentials (a
// fresh one for a nil m). Safe for concurrent use.
func (m *oauthClients) redactor() *liveRedactor {
	if m == nil {
		return newLiveRedactor(nil)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.secrets
}
