package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
)

// This file holds logging in to a server that needs OAuth, where a person
// approves in a browser on any machine: the two steps (start: the
// authorization URL; complete: the redirected URL). harnessd mcp login and
// logout are in cmd_mcp_login.go, the API's login in api_login.go.

// probeChallenge POSTs an initialize request to the server without a
// token and returns the challenge of its 401. It fails when the server
// does not ask for authorization.
func (c *oauthClient) probeChallenge(ctx context.Context, header http.Header) (bearerChallenge, error) {
	body := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"harnessd","version":"` + buildVersion + `"}}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.serverURL, bytes.NewReader(body))
	if err != nil {
		return bearerChallenge{}, fmt.Errorf("server %q: %w", c.server, err)
	}
	maps.Copy(req.Header, header)
	req.Header[headerAccept] = acceptPost
	req.Header[headerContentType] = contentTypeRPC
	resp, err := c.http.Do(req)
	if err != nil {
		return bearerChallenge{}, fmt.Errorf("server %q: %w", c.server, err)
	}
	drainClose(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized {
		return bearerChallenge{}, fmt.Errorf("server %q answered %d without a token: it does not ask for OAuth authorization", c.server, resp.StatusCode)
	}
	return bearerChallengeOf(resp.Header), nil
}

// startLogin begins a login: it discovers the server's authorization and
// returns the URL a person opens, remembering the flow for completeLogin
// (a new start replaces it). With the client credentials grant no person
// is needed: it obtains the token and returns "".
func (c *oauthClient) startLogin(ctx context.Context, header http.Header) (string, error) {
	ch, err := c.probeChallenge(ctx, header)
	if err != nil {
		return "", err
	}
	if err := c.acquire(ctx); err != nil {
		return "", err
	}
	defer c.release()
	c.reload()
	d, err := discoverAuthorization(ctx, c.http, c.serverURL, ch)
	if err != nil {
		return "", fmt.Errorf("server %q: %w", c.server, err)
	}
	switch c.cfg.Grant {
	case grantClientCredentials:
		return "", c.clientCredentials(ctx, d, ch, nil)
	case grantJWTBearer:
		return "", c.jwtBearer(ctx, d, ch, nil)
	}
	p, err := c.begin(ctx, d, ch, nil)
	if err != nil {
		return "", err
	}
	authURL, err := p.URL()
	if err != nil {
		return "", err
	}
	c.pending = p
	return authURL, nil
}

// errNoLogin: completeLogin without a login in progress.
var errNoLogin = errors.New("no login in progress; start one first")

// completeLogin finishes the login started last with the URL the
// authorization server redirected to, and stores the token.
func (c *oauthClient) completeLogin(ctx context.Context, redirected string) error {
	if err := c.acquire(ctx); err != nil {
		return err
	}
	defer c.release()
	p := c.pending
	if p == nil {
		return fmt.Errorf("server %q: %w", c.server, errNoLogin)
	}
	if err := c.finish(ctx, p, redirected); err != nil {
		return err
	}
	c.pending = nil
	return nil
}

// pendingState returns the state of the login started last, "" for none.
func (c *oauthClient) pendingState() string {
	if c.acquire(context.Background()) != nil {
		return ""
	}
	defer c.release()
	if c.pending == nil {
		return ""
	}
	return c.pending.State
}
