package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// This file holds OAuth discovery for remote MCP servers: WWW-Authenticate
// challenges, protected resource metadata (RFC 9728) and authorization
// server metadata (RFC 8414 and OpenID Connect Discovery), as the MCP
// authorization specification orders them.

// oauthMetadataLimit bounds a metadata document or token answer.
const oauthMetadataLimit = 1 << 20

// An authChallenge is one challenge of a WWW-Authenticate header: its
// scheme (lower case) and its auth-params (names lower case).
type authChallenge struct {
	Scheme string
	Params map[string]string
}

// parseWWWAuthenticate returns the challenges of the WWW-Authenticate
// values (RFC 9110 §11.6.1): several challenges per value, auth-params
// with quoted strings and escapes, and token68 values (kept under "").
// It is lenient: a malformed rest of a value ends that value's parsing.
func parseWWWAuthenticate(values []string) []authChallenge {
	var out []authChallenge
	for _, v := range values {
		p := headerParser{s: v}
		var cur *authChallenge
		for {
			p.skipSpaceAndCommas()
			if p.done() {
				break
			}
			tok := p.token()
			if tok == "" {
				break
			}
			p.skipSpace()
			if p.peek() == '=' && cur != nil {
				// An auth-param of the current challenge, unless "=" starts
				// a token68 padding (then it is handled below).
				save := p.i
				p.i++
				p.skipSpace()
				if p.peek() == '=' || p.done() || p.peek() == ',' {
					p.i = save
				} else {
					var val string
					if p.peek() == '"' {
						val = p.quoted()
					} else {
						val = p.token()
					}
					cur.Params[strings.ToLower(tok)] = val
					continue
				}
			}
			if cur != nil && p.peek() == '=' {
				// token68 of the current challenge: "abc==".
				for p.peek() == '=' {
					tok += "="
					p.i++
				}
				cur.Params[""] = tok
				continue
			}
			out = append(out, authChallenge{Scheme: strings.ToLower(tok), Params: map[string]string{}})
			cur = &out[len(out)-1]
		}
	}
	return out
}

// A headerParser reads tokens and quoted strings from a header value.
type headerParser struct {
	s string
	i int
}

func (p *headerParser) done() bool { return p.i >= len(p.s) }

func (p *headerParser) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *headerParser) skipSpace() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *headerParser) skipSpaceAndCommas() {
	for !p.done() && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == ',') {
		p.i++
	}
}

// token reads a run of token (and token68) characters.
func (p *headerParser) token() string {
	start := p.i
	for !p.done() {
		c := p.s[p.i]
		if c <= ' ' || c == ',' || c == '=' || c == '"' || c >= 0x7f {
			break
		}
		p.i++
	}
	return p.s[start:p.i]
}

// quoted reads a quoted string, undoing backslash escapes.
func (p *headerParser) quoted() string {
	p.i++ // opening quote
	var b strings.Builder
	for !p.done() {
		c := p.s[p.i]
		p.i++
		switch {
		case c == '\\' && !p.done():
			b.WriteByte(p.s[p.i])
			p.i++
		case c == '"':
			return b.String()
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// A bearerChallenge is what a server's Bearer challenge asks for; the zero
// value means the server gave none.
type bearerChallenge struct {
	ResourceMetadata string
	Scopes           []string
	Error            string // "invalid_token", "insufficient_scope", ...
}

// bearerChallengeOf returns the Bearer challenge of h's WWW-Authenticate
// header; the zero value when there is none.
func bearerChallengeOf(h http.Header) bearerChallenge {
	for _, c := range parseWWWAuthenticate(h.Values("Www-Authenticate")) {
		if c.Scheme != "bearer" && c.Scheme != "dpop" {
			continue
		}
		return bearerChallenge{
			ResourceMetadata: c.Params["resource_metadata"],
			Scopes:           strings.Fields(c.Params["scope"]),
			Error:            c.Params["error"],
		}
	}
	return bearerChallenge{}
}

// A resourceMetadata is an OAuth protected resource metadata document
// (RFC 9728), reduced to what a client uses.
type resourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers"`
	ScopesSupported      []string `json:"scopes_supported"`
}

// An authServerMetadata is an authorization server metadata document
// (RFC 8414 or OpenID Connect Discovery), reduced to what a client uses.
type authServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint"`
	JWKSURI                           string   `json:"jwks_uri"`
	ScopesSupported                   []string `json:"scopes_supported"`
	GrantTypesSupported               []string `json:"grant_types_supported"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported"`
	DPoPSigningAlgValuesSupported     []string `json:"dpop_signing_alg_values_supported"`
}

// errNoMetadata says a metadata document was not found at any candidate
// location (each answered 4xx).
var errNoMetadata = errors.New("no metadata document found")

// A discovery is what the client learned of a server's authorization:
// the resource identifier to request tokens for, the scopes it offers, and
// its authorization server.
type discovery struct {
	Resource        string
	ScopesSupported []string
	AS              authServerMetadata
}

// discoverAuthorization finds the authorization of the MCP server at
// serverURL, given the challenge of its 401 or 403 answer (the zero value
// when none). It reads the protected resource metadata and then the
// authorization server's; for servers that publish no resource metadata
// (protocol 2025-03-26) it falls back to the server's origin as the
// authorization server and, without its metadata either, to /authorize,
// /token and /register there. It makes only GET requests.
func discoverAuthorization(ctx context.Context, client *http.Client, serverURL string, ch bearerChallenge) (discovery, error) {
	prm, err := fetchResourceMetadata(ctx, client, serverURL, ch.ResourceMetadata)
	if errors.Is(err, errNoMetadata) {
		return legacyDiscovery(ctx, client, serverURL)
	}
	if err != nil {
		return discovery{}, err
	}
	issuer := prm.AuthorizationServers[0]
	if err := checkOAuthEndpoint("authorization_servers[0]", issuer); err != nil {
		return discovery{}, err
	}
	as, err := fetchAuthServerMetadata(ctx, client, issuer)
	if err != nil {
		return discovery{}, err
	}
	if err := checkASEndpoints(as); err != nil {
		return discovery{}, err
	}
	return discovery{Resource: prm.Resource, ScopesSupported: prm.ScopesSupported, AS: as}, nil
}

// legacyDiscovery is the 2025-03-26 discovery: the authorization server
// is the MCP server's origin, with default endpoints when it publishes no
// metadata.
func legacyDiscovery(ctx context.Context, client *http.Client, serverURL string) (discovery, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return discovery{}, fmt.Errorf("oauth discovery: server url: %w", err)
	}
	origin := u.Scheme + "://" + u.Host
	d := discovery{Resource: canonicalResource(serverURL)}
	as, err := fetchAuthServerMetadata(ctx, client, origin)
	switch {
	case err == nil:
		d.AS = as
	case errors.Is(err, errNoMetadata):
		d.AS = authServerMetadata{
			Issuer:                origin,
			AuthorizationEndpoint: origin + "/authorize",
			TokenEndpoint:         origin + "/token",
			RegistrationEndpoint:  origin + "/register",
		}
	default:
		return discovery{}, err
	}
	if err := checkASEndpoints(d.AS); err != nil {
		return discovery{}, err
	}
	return d, nil
}

// canonicalResource returns the canonical URI of an MCP server for RFC 8707
// (lower-case scheme and host, no fragment, no trailing slash on a path).
func canonicalResource(serverURL string) string {
	u, err := url.Parse(serverURL)
	if err != nil {
		return serverURL
	}
	u.Scheme = strings.ToLower(u.Scheme)
	u.Host = strings.ToLower(u.Host)
	u.Fragment = ""
	u.RawFragment = ""
	if u.Path != "/" {
		u.Path = strings.TrimSuffix(u.Path, "/")
		u.RawPath = ""
	} else {
		u.Path = ""
	}
	return u.String()
}

// resourceMetadataURLs returns where to look for serverURL's protected
// resource metadata: the challenge's resource_metadata when given, else
// the path-based then the root well-known location.
func resourceMetadataURLs(serverURL, fromChallenge string) ([]string, error) {
	u, err := url.Parse(serverURL)
	if err != nil {
		return nil, fmt.Errorf("oauth discovery: server url: %w", err)
	}
	var urls []string
	if fromChallenge != "" {
		urls = append(urls, fromChallenge)
	}
	origin := u.Scheme + "://" + u.Host
	const wellKnown = "/.well-known/oauth-protected-resource"
	if p := strings.TrimSuffix(u.EscapedPath(), "/"); p != "" {
		urls = append(urls, origin+wellKnown+p)
	}
	return append(urls, origin+wellKnown), nil
}

// fetchResourceMetadata returns the protected resource metadata of the
// server at serverURL, trying fromChallenge and then the well-known
// locations. A document without authorization_servers, or whose resource
// does not name this server, is an error: nothing from it is used. It
// returns errNoMetadata when every location answered 4xx.
func fetchResourceMetadata(ctx context.Context, client *http.Client, serverURL, fromChallenge string) (resourceMetadata, error) {
	urls, err := resourceMetadataURLs(serverURL, fromChallenge)
	if err != nil {
		return resourceMetadata{}, err
	}
	var prm resourceMetadata
	if err := fetchFirstMetadata(ctx, client, "protected resource metadata", urls, &prm); err != nil {
		return resourceMetadata{}, err
	}
	if len(prm.AuthorizationServers) == 0 || prm.AuthorizationServers[0] == "" {
		return resourceMetadata{}, errors.New("oauth discovery: protected resource metadata names no authorization_servers")
	}
	if prm.Resource == "" {
		prm.Resource = canonicalResource(serverURL)
	} else if !resourceCovers(prm.Resource, serverURL) {
		return resourceMetadata{}, fmt.Errorf("oauth discovery: protected resource metadata is for %q, not this server %q; refusing to authorize", prm.Resource, serverURL)
	}
	return prm, nil
}

// resourceCovers reports whether the resource identifier names the server
// at serverURL: the same scheme and host, and a path equal to the server's
// or a parent of it.
func resourceCovers(resource, serverURL string) bool {
	r, err1 := url.Parse(resource)
	s, err2 := url.Parse(serverURL)
	if err1 != nil || err2 != nil {
		return false
	}
	if !strings.EqualFold(r.Scheme, s.Scheme) || !strings.EqualFold(r.Host, s.Host) {
		return false
	}
	rp := strings.TrimSuffix(r.Path, "/")
	sp := strings.TrimSuffix(s.Path, "/")
	return rp == "" || rp == sp || strings.HasPrefix(sp, rp+"/")
}

// authServerMetadataURLs returns where to look for the metadata of the
// authorization server named issuer, in the specification's order: for
// an issuer with a path, RFC 8414 with the path inserted, OpenID Connect
// with the path inserted, then OpenID Connect with the path appended; for
// one without, RFC 8414 then OpenID Connect.
func authServerMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("oauth discovery: authorization server %q is not an absolute url", issuer)
	}
	origin := u.Scheme + "://" + u.Host
	p := strings.TrimSuffix(u.EscapedPath(), "/")
	if p == "" {
		return []string{
			origin + "/.well-known/oauth-authorization-server",
			origin + "/.well-known/openid-configuration",
		}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + p,
		origin + "/.well-known/openid-configuration" + p,
		origin + p + "/.well-known/openid-configuration",
	}, nil
}

// fetchAuthServerMetadata returns the metadata of the authorization server
// named issuer. A document whose issuer is not exactly issuer is an error
// and nothing from it is used. It returns errNoMetadata when every
// location answered 4xx.
func fetchAuthServerMetadata(ctx context.Context, client *http.Client, issuer string) (authServerMetadata, error) {
	urls, err := authServerMetadataURLs(issuer)
	if err != nil {
		return authServerMetadata{}, err
	}
	var as authServerMetadata
	if err := fetchFirstMetadata(ctx, client, "authorization server metadata", urls, &as); err != nil {
		return authServerMetadata{}, err
	}
	if as.Issuer != issuer {
		return authServerMetadata{}, fmt.Errorf("oauth discovery: authorization server metadata of %q names issuer %q; refusing to use it", issuer, as.Issuer)
	}
	if as.AuthorizationEndpoint == "" && as.TokenEndpoint == "" {
		return authServerMetadata{}, fmt.Errorf("oauth discovery: authorization server metadata of %q has no endpoints", issuer)
	}
	if len(as.CodeChallengeMethodsSupported) > 0 && !slices.Contains(as.CodeChallengeMethodsSupported, "S256") {
		return authServerMetadata{}, fmt.Errorf("oauth discovery: authorization server %q does not support PKCE S256", issuer)
	}
	return as, nil
}

// fetchFirstMetadata GETs each url in turn and decodes the first 2xx
// answer into v. A 4xx answer moves on to the next url; anything else
// (a network error, a 5xx, a body that is not JSON) is an error at once.
// It returns errNoMetadata when every url answered 4xx.
func fetchFirstMetadata(ctx context.Context, client *http.Client, what string, urls []string, v any) error {
	for _, u := range urls {
		if err := checkOAuthEndpoint(what, u); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return fmt.Errorf("oauth discovery: %s at %s: %w", what, u, err)
		}
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return fmt.Errorf("oauth discovery: %s: %w", what, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, oauthMetadataLimit))
		resp.Body.Close()
		switch {
		case resp.StatusCode >= 400 && resp.StatusCode < 500:
			continue
		case resp.StatusCode/100 != 2:
			return fmt.Errorf("oauth discovery: %s at %s: status %d", what, u, resp.StatusCode)
		case err != nil:
			return fmt.Errorf("oauth discovery: %s at %s: %w", what, u, err)
		}
		if err := json.Unmarshal(body, v); err != nil {
			return fmt.Errorf("oauth discovery: %s at %s: %w", what, u, err)
		}
		return nil
	}
	return fmt.Errorf("oauth discovery: %s: %w (tried %s)", what, errNoMetadata, strings.Join(urls, ", "))
}
