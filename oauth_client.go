package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file holds the OAuth client of one remote MCP server: the token it
// presents, refresh ahead of expiry (one token request at a time), what it
// does on 401 and 403 (refresh, re-authorization, step-up), client
// credentials, and the login that needs a person.

const (
	// refreshAhead is how long before its expiry a token is renewed.
	refreshAhead = time.Minute
)

// An authorizeFunc has the authorization URL approved and returns the URL
// the authorization server redirected to.
type authorizeFunc func(ctx context.Context, authURL string) (redirected string, err error)

// An oauthClient obtains, keeps and renews the access token of one server.
// It is safe for concurrent use; token requests are made one at a time,
// and callers waiting meanwhile get the token the request obtained.
type oauthClient struct {
	server    string
	serverURL string
	cfg       oauthConfig
	http      *http.Client
	store     *tokenStore // nil keeps tokens in memory only
	logger    *slog.Logger
	// authorize approves authorization URLs; nil when no person is there
	// (the daemon): the server then needs "harnessd mcp login".
	authorize authorizeFunc
	// secrets is told every credential the client obtains or loads, before
	// its first use (see learn); nil tells no one.
	secrets *liveRedactor

	// lock is held (a token in it) during token requests and while rec
	// is read or written; waiting for it respects the caller's context.
	lock chan struct{}
	rec  oauthRecord
	// pending is the login started by startLogin, guarded by lock.
	pending *authorizationRequest
	// prover signs the DPoP proofs of this server, guarded by lock; nil
	// until the first DPoP token request (oauth_dpop.go).
	prover *dpopProver
	// getenv reads oauth.assertion_env; never nil.
	getenv func(string) (string, bool)
}

// newOAuthClient returns the OAuth client of the server cfg. cfg.OAuth
// nil means no oauth table: discovery and registration are automatic.
func newOAuthClient(cfg serverConfig, store *tokenStore, httpClient *http.Client, logger *slog.Logger) *oauthClient {
	c := &oauthClient{
		server:    cfg.Name,
		serverURL: cfg.URL,
		http:      httpClient,
		store:     store,
		logger:    logger,
		lock:      make(chan struct{}, 1),
		rec:       oauthRecord{ServerURL: cfg.URL},
		getenv:    os.LookupEnv,
	}
	if cfg.OAuth != nil {
		c.cfg = *cfg.OAuth
	}
	if c.cfg.RedirectURI == "" {
		c.cfg.RedirectURI = defaultRedirectURI
	}
	return c
}

func (c *oauthClient) acquire(ctx context.Context) error {
	select {
	case c.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *oauthClient) release() { <-c.lock }

// reload reads the stored record, so a login made by another process is
// picked up. Called with the lock held.
func (c *oauthClient) reload() {
	if c.store == nil {
		return
	}
	rec, err := c.store.load(c.server, c.serverURL)
	if err != nil {
		c.logger.Warn("oauth store unreadable", "err", err)
		return
	}
	c.learn(rec.credentials()...)
	c.rec = rec
}

// persist saves the record. Called with the lock held.
func (c *oauthClient) persist() error {
	if c.store == nil {
		return nil
	}
	return c.store.save(c.server, c.rec)
}

// needsLogin returns the error of a server that needs a person to log in.
func (c *oauthClient) needsLogin(why string) error {
	return fmt.Errorf("server %q %w: %s; run: harnessd mcp login %s", c.server, errNeedsAuth, why, c.server)
}

// accessToken returns the token to present, renewing it first when it
// expires within refreshAhead and can be refreshed. It returns "" when
// there is no token yet (the server's 401 then starts authorization).
func (c *oauthClient) accessToken(ctx context.Context) (string, error) {
	token, _, err := c.presentation(ctx)
	return token, err
}

// presentation is accessToken with the prover of a DPoP-bound token (nil
// for a bearer token).
func (c *oauthClient) presentation(ctx context.Context) (string, *dpopProver, error) {
	if err := c.acquire(ctx); err != nil {
		return "", nil, err
	}
	defer c.release()
	if c.rec.Token == nil {
		c.reload()
	}
	tok := c.rec.Token
	if tok == nil {
		return "", nil, nil
	}
	ahead := refreshAhead
	if tok.RefreshToken == "" && c.machineGrant() {
		ahead = 0 // used to its end (it may live less than refreshAhead); the 401 then runs the grant
	}
	if tok.expiresWithin(ahead, time.Now()) {
		if err := c.renew(ctx); err != nil {
			c.logger.Info("oauth token not renewed", "err", err)
		}
		if c.rec.Token == nil {
			return "", nil, nil
		}
	}
	tok = c.rec.Token
	if tok.TokenType != "DPoP" {
		return tok.AccessToken, nil, nil
	}
	p, err := c.dpopProver()
	if err != nil {
		return "", nil, err
	}
	return tok.AccessToken, p, nil
}

// renew replaces an expiring or refused token: by refresh when it has a
// refresh token, by a new client credentials grant when configured so.
// On failure the token is dropped. Called with the lock held.
func (c *oauthClient) renew(ctx context.Context) error {
	tok := c.rec.Token
	switch {
	case tok != nil && tok.RefreshToken != "":
		tr, err := c.requestor(tok.TokenEndpoint, c.rec.Clients[tok.Issuer], tok.Issuer)
		if err != nil {
			return err
		}
		if tok.TokenType == "DPoP" || c.cfg.DPoP == dpopAlways {
			if tr.dpop, err = c.dpopProver(); err != nil {
				return err
			}
		}
		fresh, err := tr.refresh(ctx, *tok)
		if err != nil {
			if invalidGrant(err) {
				c.rec.Token = nil
				c.persist()
			}
			return err
		}
		c.logger.Info("oauth token refreshed")
		c.rec.Token = &fresh
		return c.persist()
	case c.machineGrant():
		c.rec.Token = nil
		c.persist()                        // else a reload brings the expired token back
		return errors.New("token expired") // the next 401 runs the grant again
	}
	c.rec.Token = nil
	return c.persist()
}

// requestor returns the token requestor for the client identity id (the
// configured one when id is empty) at endpoint.
func (c *oauthClient) requestor(endpoint string, id oauthClientID, issuer string) (*tokenRequestor, error) {
	if id.ClientID == "" && c.cfg.ClientID != "" {
		id = oauthClientID{Issuer: issuer, ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret,
			AuthMethod: chooseAuthMethod(nil, c.cfg.ClientSecret != "")}
	}
	tr := &tokenRequestor{http: c.http, endpoint: endpoint, client: id, learn: c.learn}
	if id.AuthMethod == authMethodJWT {
		key, err := c.signingKey()
		if err != nil {
			return nil, err
		}
		tr.key = key
	}
	return tr, nil
}

// signingKey reads the configured private key.
func (c *oauthClient) signingKey() (*signingKey, error) {
	pemBytes := c.cfg.privateKeyPEM
	if pemBytes == nil {
		b, err := os.ReadFile(c.cfg.PrivateKeyFile)
		if err != nil {
			return nil, fmt.Errorf("server %q: oauth.private_key_file: %w", c.server, err)
		}
		pemBytes = b
	}
	key, err := parseSigningKey(pemBytes, c.cfg.signingAlg)
	if err != nil {
		return nil, fmt.Errorf("server %q: oauth.private_key_file %s: %v", c.server, c.cfg.PrivateKeyFile, err)
	}
	return key, nil
}

// challenge answers a 401 or 403 of the server to a request that carried
// sent (maybe ""). It returns nil when a new token is ready, so the
// request may be sent once more; otherwise why not (wrapping errNeedsAuth
// when a person must log in). A 403 other than insufficient_scope is not
// for authorization to fix.
func (c *oauthClient) challenge(ctx context.Context, status int, header http.Header, sent string) error {
	ch := bearerChallengeOf(header)
	if status == http.StatusForbidden && ch.Error != "insufficient_scope" {
		return fmt.Errorf("server %q: forbidden (403)", c.server)
	}
	if err := c.acquire(ctx); err != nil {
		return err
	}
	defer c.release()
	c.reload()
	if status == http.StatusUnauthorized && c.rec.Token != nil && c.rec.Token.AccessToken != sent {
		return nil // renewed meanwhile, or a new login
	}
	if c.authorize == nil && !c.machineGrant() {
		// No person here: refresh (no discovery needed) or ask for a
		// login, without any request to the authorization server.
		if status == http.StatusUnauthorized && c.rec.Token != nil && c.rec.Token.RefreshToken != "" {
			err := c.renew(ctx)
			if err == nil {
				return nil
			}
			c.logger.Info("oauth refresh failed", "err", err)
		}
		if status == http.StatusForbidden {
			// The token still serves other requests.
			return c.needsLogin(fmt.Sprintf("the server asks for more scopes (%s)", strings.Join(ch.Scopes, " ")))
		}
		c.rec.Token = nil
		c.persist()
		return c.needsLogin("no valid token")
	}
	var scopes []string
	if status == http.StatusForbidden && c.rec.Token != nil {
		// Step-up: what is held and what is asked for.
		scopes = slices.Clone(c.rec.Token.Scopes)
		for _, s := range ch.Scopes {
			if !slices.Contains(scopes, s) {
				scopes = append(scopes, s)
			}
		}
	}
	d, err := discoverAuthorization(ctx, c.http, c.serverURL, ch)
	if err != nil {
		return fmt.Errorf("server %q: %w", c.server, err)
	}
	if status == http.StatusUnauthorized && c.rec.Token != nil && c.rec.Token.RefreshToken != "" && c.rec.Token.Issuer == d.AS.Issuer {
		if err := c.renew(ctx); err == nil {
			return nil
		} else {
			c.logger.Info("oauth refresh failed", "err", err)
		}
	}
	switch c.cfg.Grant {
	case grantClientCredentials:
		return c.clientCredentials(ctx, d, ch, scopes)
	case grantJWTBearer:
		return c.jwtBearer(ctx, d, ch, scopes)
	}
	p, err := c.begin(ctx, d, ch, scopes)
	if err != nil {
		return err
	}
	authURL, err := p.URL()
	if err != nil {
		return err
	}
	redirected, err := c.authorize(ctx, authURL)
	if err != nil {
		return fmt.Errorf("server %q: authorize: %w", c.server, err)
	}
	return c.finish(ctx, p, redirected)
}

// selectScopes returns the scopes to ask for: the configured ones, else
// the challenge's, else the resource's scopes_supported, else none; plus
// offline_access when the authorization server lists it (for a refresh
// token), for the authorization code grant.
func (c *oauthClient) selectScopes(d discovery, ch bearerChallenge, grant string) []string {
	var scopes []string
	switch {
	case len(c.cfg.Scopes) > 0:
		scopes = slices.Clone(c.cfg.Scopes)
	case len(ch.Scopes) > 0:
		scopes = slices.Clone(ch.Scopes)
	default:
		scopes = slices.Clone(d.ScopesSupported)
	}
	if grant == grantAuthorizationCode && slices.Contains(d.AS.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	return scopes
}

// clientCredentials obtains a token with the client credentials grant.
// Called with the lock held.
func (c *oauthClient) clientCredentials(ctx context.Context, d discovery, ch bearerChallenge, scopes []string) error {
	if c.cfg.ClientID == "" {
		return fmt.Errorf("server %q: oauth.grant client_credentials needs oauth.client_id", c.server)
	}
	if scopes == nil {
		scopes = c.selectScopes(d, ch, grantClientCredentials)
	}
	id := oauthClientID{Issuer: d.AS.Issuer, ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret}
	switch {
	case c.cfg.PrivateKeyFile != "" || c.cfg.privateKeyPEM != nil:
		id.AuthMethod = authMethodJWT
	case c.cfg.ClientSecret == "":
		return fmt.Errorf("server %q: oauth.grant client_credentials needs oauth.client_secret or oauth.private_key_file", c.server)
	default:
		id.AuthMethod = chooseAuthMethod(d.AS.TokenEndpointAuthMethodsSupported, true)
	}
	tr, err := c.requestor(d.AS.TokenEndpoint, id, d.AS.Issuer)
	if err != nil {
		return err
	}
	if tr.dpop, err = c.tokenProver(d.AS); err != nil {
		return err
	}
	tok, err := tr.clientCredentials(ctx, scopes, d.Resource)
	if err != nil {
		return fmt.Errorf("server %q: client credentials: %w", c.server, err)
	}
	c.rec.Token = &tok
	return c.persist()
}

// begin prepares an authorization code flow after discovery: it picks the
// client identity for the authorization server (configured, a client ID
// metadata document, a stored registration there, or a new one) and the
// scopes (those given, else selectScopes). Called with the lock held.
func (c *oauthClient) begin(ctx context.Context, d discovery, ch bearerChallenge, scopes []string) (*authorizationRequest, error) {
	as := d.AS
	var id oauthClientID
	stored, haveStored := c.rec.Clients[as.Issuer]
	switch {
	case c.cfg.ClientID != "":
		id = oauthClientID{Issuer: as.Issuer, ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret,
			AuthMethod: chooseAuthMethod(as.TokenEndpointAuthMethodsSupported, c.cfg.ClientSecret != "")}
	case c.cfg.ClientMetadataURL != "" && as.ClientIDMetadataDocumentSupported:
		id = oauthClientID{Issuer: as.Issuer, ClientID: c.cfg.ClientMetadataURL, AuthMethod: authMethodNone}
	case haveStored && stored.RedirectURI == c.cfg.RedirectURI:
		id = stored
	default:
		reg, err := registerClient(ctx, c.http, as, c.cfg.RedirectURI, scopes)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", c.server, err)
		}
		c.learn(reg.ClientSecret)
		if c.rec.Clients == nil {
			c.rec.Clients = map[string]oauthClientID{}
		}
		c.rec.Clients[as.Issuer] = reg
		if err := c.persist(); err != nil {
			return nil, err
		}
		id = reg
	}
	if scopes == nil {
		scopes = c.selectScopes(d, ch, grantAuthorizationCode)
	}
	return newAuthorizationRequest(as, id, c.cfg.RedirectURI, scopes, d.Resource), nil
}

// finish checks the authorization response and redeems its code. Called
// with the lock held.
func (c *oauthClient) finish(ctx context.Context, p *authorizationRequest, redirected string) error {
	code, err := p.code(redirected)
	if err != nil {
		return fmt.Errorf("server %q: %w", c.server, err)
	}
	tr, err := c.requestor(p.AS.TokenEndpoint, p.Client, p.AS.Issuer)
	if err != nil {
		return err
	}
	if tr.dpop, err = c.tokenProver(p.AS); err != nil {
		return err
	}
	tok, err := tr.redeem(ctx, p, code)
	if err != nil {
		return fmt.Errorf("server %q: %w", c.server, err)
	}
	c.rec.Token = &tok
	c.logger.Info("oauth login complete", "issuer", p.AS.Issuer, "scopes", tok.Scopes)
	return c.persist()
}

// do sends the request build returns with the server's token, and once
// more after a 401 or 403 that challenge answers with a new token: at most
// one re-authorization per request. A DPoP-bound token goes with a fresh
// proof, and a resource server's use_dpop_nonce answer is retried once
// with its nonce. With a nil client it sends the request as built.
func (c *oauthClient) do(ctx context.Context, httpClient *http.Client, build func() (*http.Request, error)) (*http.Response, error) {
	nonceRetried := false
	for attempt := 0; ; attempt++ {
		req, err := build()
		if err != nil {
			return nil, err
		}
		if c == nil {
			return httpClient.Do(req)
		}
		token, prover, err := c.presentation(ctx)
		if err != nil {
			return nil, err
		}
		if err := presentToken(req, token, prover); err != nil {
			return nil, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return resp, err
		}
		if prover != nil && prover.note(req.URL, resp.Header) && !nonceRetried && resourceNonceChallenge(resp.StatusCode, resp.Header) {
			drainClose(resp.Body)
			nonceRetried = true
			attempt--
			continue
		}
		if attempt > 0 || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
			return resp, nil
		}
		if resp.StatusCode == http.StatusForbidden && bearerChallengeOf(resp.Header).Error != "insufficient_scope" {
			return resp, nil
		}
		drainClose(resp.Body)
		if err := c.challenge(ctx, resp.StatusCode, resp.Header, token); err != nil {
			return nil, err
		}
	}
}

// presentToken sets req's Authorization (and, for a DPoP-bound token, its
// DPoP proof); nothing for an empty token.
func presentToken(req *http.Request, token string, prover *dpopProver) error {
	switch {
	case token == "":
	case prover == nil:
		req.Header.Set("Authorization", "Bearer "+token)
	default:
		proof, err := prover.sign(req.Method, req.URL, token)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "DPoP "+token)
		req.Header.Set("DPoP", proof)
	}
	return nil
}

// oauthDir returns the token store directory under home.
func oauthDir(home string) string { return filepath.Join(home, "oauth") }

// An oauthClients hands out the one oauthClient of each server, so that
// reconnections share its token and its one-at-a-time token requests.
// It is safe for concurrent use.
type oauthClients struct {
	store  *tokenStore
	logger *slog.Logger
	// secrets is given to every client (oauthClient.secrets): every token,
	// DPoP key and proof, and assertion the clients obtain joins it. A
	// fresh root until learnInto makes it the daemon's live redactor;
	// guarded by mu.
	secrets *liveRedactor
	// authorize is given to every client; nil in the daemon.
	authorize authorizeFunc
	// getenv reads oauth.assertion_env; nil means os.LookupEnv.
	getenv func(string) (string, bool)

	mu sync.Mutex
	// guards byName and secrets
	byName map[string]*oauthClient
}

// newOAuthClients returns the OAuth clients of a daemon storing tokens in
// store.
func newOAuthClients(store *tokenStore, logger *slog.Logger) *oauthClients {
	return &oauthClients{store: store, logger: logger, byName: map[string]*oauthClient{},
		secrets: newLiveRedactor(nil)}
}

// forServer returns the OAuth client of cfg; nil for a server that is not
// Streamable HTTP, or that is untrusted (named by the model or by a
// non-admin run request: nobody may log in for it, and it must not reach
// the token store). A per-run server gets a client of its own, never kept
// here: its tokens stay in memory with its connection, so they end with
// its run and never reach another run's server of the same name.
func (m *oauthClients) forServer(cfg serverConfig) *oauthClient {
	if m == nil || cfg.Transport != transportHTTP || cfg.Untrusted {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if cfg.Origin.ownsTokens() {
		return m.newClient(cfg, nil)
	}
	key := cfg.Source + "\x00" + cfg.Name
	c := m.byName[key]
	if c == nil || c.serverURL != cfg.URL {
		c = m.newClient(cfg, m.store)
		m.byName[key] = c
	}
	return c
}

// newClient returns a new OAuth client of cfg keeping its tokens in store
// (in memory only when store is nil). Called with mu held.
func (m *oauthClients) newClient(cfg serverConfig, store *tokenStore) *oauthClient {
	c := newOAuthClient(cfg, store, clientFor(cfg), redactLoggerLive(m.logger.With("server", cfg.Name), m.secrets))
	c.authorize = m.authorize
	c.secrets = m.secrets
	if m.getenv != nil {
		c.getenv = m.getenv
	}
	return c
}
