package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"strings"
)

// This file holds the JWT bearer grant (RFC 7523 §2.1) of workload
// identity federation (a platform-issued JWT, read at each use, is
// exchanged for an access token) and of enterprise-managed authorization
// (the enterprise IdP first exchanges the person's ID token for an
// identity assertion grant, RFC 8693, which the MCP server's
// authorization server accepts as the assertion).

const (
	jwtBearerGrantType = "urn:ietf:params:oauth:grant-type:jwt-bearer"
	tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
	tokenTypeIDToken   = "urn:ietf:params:oauth:token-type:id_token"
	tokenTypeIDJAG     = "urn:ietf:params:oauth:token-type:id-jag"
)

// machineGrant reports whether the server's grant needs no person
// (client credentials, JWT bearer): an expired token is replaced by
// running the grant again.
func (c *oauthClient) machineGrant() bool {
	return c.cfg.Grant == grantClientCredentials || c.cfg.Grant == grantJWTBearer
}

// readAssertion reads the grant's assertion now (platform tokens rotate:
// never cached) and hands it to the redactor (learn). It is never logged.
func (c *oauthClient) readAssertion() (string, error) {
	var v, from string
	switch {
	case c.cfg.AssertionFile != "":
		from = "oauth.assertion_file " + c.cfg.AssertionFile
		b, err := os.ReadFile(c.cfg.AssertionFile)
		if err != nil {
			return "", fmt.Errorf("server %q: %s: %v", c.server, from, err)
		}
		v = string(b)
	case c.cfg.AssertionEnv != "":
		from = "oauth.assertion_env " + c.cfg.AssertionEnv
		v, _ = c.getenv(c.cfg.AssertionEnv)
	default:
		from, v = "the assertion", c.cfg.assertion
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return "", fmt.Errorf("server %q: %s is empty; the platform's JWT should be there", c.server, from)
	}
	c.learn(v)
	return v, nil
}

// jwtBearer obtains a token with the JWT bearer grant: the assertion read
// now (exchanged first at the enterprise IdP when idp_token_endpoint is
// set). An error answer is returned as is: no retry, no other grant.
// Called with the lock held.
func (c *oauthClient) jwtBearer(ctx context.Context, d discovery, ch bearerChallenge, scopes []string) error {
	if scopes == nil {
		scopes = c.selectScopes(d, ch, grantJWTBearer)
	}
	assertion, err := c.readAssertion()
	if err != nil {
		return err
	}
	if c.cfg.IdPTokenEndpoint != "" {
		if assertion, err = c.identityAssertionGrant(ctx, assertion, d, scopes); err != nil {
			return err
		}
	}
	id := oauthClientID{Issuer: d.AS.Issuer, ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret}
	switch {
	case c.cfg.PrivateKeyFile != "" || c.cfg.privateKeyPEM != nil:
		id.AuthMethod = authMethodJWT
	default:
		id.AuthMethod = chooseAuthMethod(d.AS.TokenEndpointAuthMethodsSupported, c.cfg.ClientSecret != "")
	}
	tr, err := c.requestor(d.AS.TokenEndpoint, id, d.AS.Issuer)
	if err != nil {
		return err
	}
	if tr.dpop, err = c.tokenProver(d.AS); err != nil {
		return err
	}
	form := url.Values{"grant_type": {jwtBearerGrantType}, "assertion": {assertion}}
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	setResource(form, d.Resource)
	tok, err := tr.request(ctx, form, scopes)
	if err != nil {
		return fmt.Errorf("server %q: jwt bearer grant: %w", c.server, err)
	}
	c.rec.Token = &tok
	c.logger.Info("oauth token obtained", "grant", grantJWTBearer, "issuer", d.AS.Issuer, "scopes", tok.Scopes)
	return c.persist()
}

// identityAssertionGrant exchanges the ID token at the enterprise IdP
// (RFC 8693) for an identity assertion grant (ID-JAG) naming the MCP
// server's authorization server as audience and the server as resource.
func (c *oauthClient) identityAssertionGrant(ctx context.Context, idToken string, d discovery, scopes []string) (string, error) {
	id := oauthClientID{ClientID: c.cfg.IdPClientID, ClientSecret: c.cfg.IdPClientSecret, AuthMethod: authMethodNone}
	if id.ClientSecret != "" {
		id.AuthMethod = authMethodBasic
	}
	tr := &tokenRequestor{http: c.http, endpoint: c.cfg.IdPTokenEndpoint, client: id, learn: c.learn}
	form := url.Values{
		"grant_type":           {tokenExchangeGrant},
		"requested_token_type": {tokenTypeIDJAG},
		"subject_token":        {idToken},
		"subject_token_type":   {tokenTypeIDToken},
		"audience":             {d.AS.Issuer},
	}
	setResource(form, d.Resource)
	if len(scopes) > 0 {
		form.Set("scope", strings.Join(scopes, " "))
	}
	if err := tr.checkEndpoint(); err != nil {
		return "", fmt.Errorf("server %q: oauth.idp_token_endpoint: %w", c.server, err)
	}
	if err := tr.authenticate(form); err != nil {
		return "", err
	}
	status, _, raw, err := tr.post(ctx, form)
	if err != nil {
		return "", fmt.Errorf("server %q: token exchange at the IdP: %w", c.server, err)
	}
	var answer struct {
		tokenAnswer
		IssuedTokenType string `json:"issued_token_type"`
	}
	jsonErr := json.Unmarshal(raw, &answer)
	// Credentials from here on, even in an answer refused below.
	tr.tell(answer.AccessToken, answer.RefreshToken, answer.IDToken)
	switch {
	case status/100 != 2 || answer.Error != "":
		return "", fmt.Errorf("server %q: token exchange at the IdP: %w", c.server,
			&tokenError{Status: status, Code: answer.Error, Description: answer.ErrorDescription})
	case jsonErr != nil || answer.AccessToken == "":
		return "", fmt.Errorf("server %q: token exchange at the IdP %s: the answer has no access_token", c.server, c.cfg.IdPTokenEndpoint)
	case answer.IssuedTokenType != "" && answer.IssuedTokenType != tokenTypeIDJAG:
		return "", fmt.Errorf("server %q: token exchange at the IdP: issued a %s, not an identity assertion grant", c.server, answer.IssuedTokenType)
	}
	return answer.AccessToken, nil
}
