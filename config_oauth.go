package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// This file holds a server's oauth table: as written in TOML or JSON, its
// validation, and the oauthConfig the OAuth client works from.

// The grants of oauth.grant.
const (
	grantAuthorizationCode = "authorization_code"
	grantClientCredentials = "client_credentials"
	grantJWTBearer         = "jwt_bearer"
)

// defaultRedirectURI is the loopback callback of "mcp login" when the
// server's oauth table names none.
const defaultRedirectURI = "http://127.0.0.1:8788/callback"

// DPoP modes of oauth.dpop.
const (
	dpopAuto   = "auto"   // when the authorization server advertises ES256 proofs
	dpopAlways = "always" // on every token request
	dpopNever  = "never"
)

// An oauthConfig is a server's oauth table.
type oauthConfig struct {
	ClientID          string
	ClientSecret      string
	ClientMetadataURL string
	Scopes            []string
	RedirectURI       string
	Grant             string // grantAuthorizationCode (the default), grantClientCredentials or grantJWTBearer
	PrivateKeyFile    string
	// privateKeyPEM is the key itself when it does not come from a file
	// (the conformance suite hands it over inline).
	privateKeyPEM []byte
	signingAlg    string
	// DPoP is oauth.dpop: dpopAuto (also ""), dpopAlways or dpopNever.
	DPoP string
	// AssertionFile and AssertionEnv name where the jwt_bearer grant's
	// assertion is read, at each use (oauth_grant_jwt.go).
	AssertionFile string
	AssertionEnv  string
	// IdPTokenEndpoint, when set, makes the jwt_bearer assertion an
	// identity assertion grant obtained there by token exchange.
	IdPTokenEndpoint string
	IdPClientID      string
	IdPClientSecret  string
	// assertion is the assertion itself when it comes from neither (the
	// conformance suite hands it over inline).
	assertion string
}

// secrets returns the secret values of the table, for redaction.
func (c *oauthConfig) secrets() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, v := range []string{c.ClientSecret, c.IdPClientSecret, c.assertion} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// A rawOAuth is a server's oauth table as written in TOML or JSON.
type rawOAuth struct {
	ClientID          string   `json:"client_id" toml:"client_id"`
	ClientSecret      string   `json:"client_secret" toml:"client_secret"`
	ClientMetadataURL string   `json:"client_metadata_url" toml:"client_metadata_url"`
	Scopes            []string `json:"scopes" toml:"scopes"`
	RedirectURI       string   `json:"redirect_uri" toml:"redirect_uri"`
	Grant             string   `json:"grant" toml:"grant"`
	PrivateKeyFile    string   `json:"private_key_file" toml:"private_key_file"`
	DPoP              string   `json:"dpop" toml:"dpop"`
	AssertionFile     string   `json:"assertion_file" toml:"assertion_file"`
	AssertionEnv      string   `json:"assertion_env" toml:"assertion_env"`
	IdPTokenEndpoint  string   `json:"idp_token_endpoint" toml:"idp_token_endpoint"`
	IdPClientID       string   `json:"idp_client_id" toml:"idp_client_id"`
	IdPClientSecret   string   `json:"idp_client_secret" toml:"idp_client_secret"`
}

// buildOAuth validates a server's oauth table, expanding ${VAR} in its
// strings, and reports problems through bad.
func buildOAuth(raw rawOAuth, transport string, expand func(field, s string) string, bad func(field, format string, args ...any)) *oauthConfig {
	c := &oauthConfig{
		ClientID:          expand("oauth.client_id", raw.ClientID),
		ClientSecret:      expand("oauth.client_secret", raw.ClientSecret),
		ClientMetadataURL: expand("oauth.client_metadata_url", raw.ClientMetadataURL),
		Scopes:            raw.Scopes,
		RedirectURI:       expand("oauth.redirect_uri", raw.RedirectURI),
		Grant:             raw.Grant,
		PrivateKeyFile:    expand("oauth.private_key_file", raw.PrivateKeyFile),
		DPoP:              raw.DPoP,
		AssertionFile:     expand("oauth.assertion_file", raw.AssertionFile),
		AssertionEnv:      raw.AssertionEnv,
		IdPTokenEndpoint:  expand("oauth.idp_token_endpoint", raw.IdPTokenEndpoint),
		IdPClientID:       expand("oauth.idp_client_id", raw.IdPClientID),
		IdPClientSecret:   expand("oauth.idp_client_secret", raw.IdPClientSecret),
	}
	if transport != transportHTTP {
		bad("oauth", "only an http server takes an oauth table; remove it or set url (with transport http)")
	}
	switch c.Grant {
	case "":
		c.Grant = grantAuthorizationCode
	case grantAuthorizationCode:
	case grantClientCredentials:
		if c.ClientID == "" {
			bad("oauth.client_id", "grant client_credentials needs a client_id; set it")
		}
		if c.ClientSecret == "" && c.PrivateKeyFile == "" {
			bad("oauth.client_secret", "grant client_credentials needs client_secret or private_key_file; set one")
		}
	case grantJWTBearer:
	default:
		bad("oauth.grant", "%q is not supported; use authorization_code, client_credentials or jwt_bearer", c.Grant)
	}
	checkJWTBearer(c, bad)
	switch c.DPoP {
	case "":
		c.DPoP = dpopAuto
	case dpopAuto, dpopAlways, dpopNever:
	default:
		bad("oauth.dpop", "%q is not a DPoP mode; use auto (when the authorization server supports it), always or never", c.DPoP)
	}
	if c.ClientSecret != "" && c.PrivateKeyFile != "" {
		bad("oauth.private_key_file", "set client_secret or private_key_file, not both")
	}
	if c.PrivateKeyFile != "" && !filepath.IsAbs(c.PrivateKeyFile) {
		bad("oauth.private_key_file", "not an absolute path; write a full path (${HOME}/key.pem works)")
	}
	if c.ClientSecret != "" && c.ClientID == "" {
		bad("oauth.client_secret", "a client_secret needs its client_id; set client_id")
	}
	if c.ClientMetadataURL != "" {
		if u, err := url.Parse(c.ClientMetadataURL); err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" {
			bad("oauth.client_metadata_url", "must be an https URL with a path, where the client metadata document is served")
		}
	}
	if c.RedirectURI != "" {
		if u, err := url.Parse(c.RedirectURI); err != nil || u.Scheme != "http" || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1") || u.Port() == "" {
			bad("oauth.redirect_uri", "must be a loopback http URL with a port, like %s", defaultRedirectURI)
		}
	}
	for i, s := range c.Scopes {
		if s == "" || strings.ContainsAny(s, " \"\\") {
			bad(fmt.Sprintf("oauth.scopes[%d]", i), "%q is not a scope; scopes have no spaces, quotes or backslashes", s)
		}
	}
	return c
}

// checkJWTBearer validates the fields of grant jwt_bearer (and reports
// them set for another grant).
func checkJWTBearer(c *oauthConfig, bad func(field, format string, args ...any)) {
	if c.Grant != grantJWTBearer {
		for _, f := range [][2]string{{"assertion_file", c.AssertionFile}, {"assertion_env", c.AssertionEnv},
			{"idp_token_endpoint", c.IdPTokenEndpoint}, {"idp_client_id", c.IdPClientID}, {"idp_client_secret", c.IdPClientSecret}} {
			if f[1] != "" {
				bad("oauth."+f[0], "only grant jwt_bearer takes %s; set grant = \"jwt_bearer\" or remove it", f[0])
			}
		}
		return
	}
	switch {
	case c.AssertionFile == "" && c.AssertionEnv == "":
		bad("oauth.assertion_file", "grant jwt_bearer needs assertion_file or assertion_env (where the platform's JWT is)")
	case c.AssertionFile != "" && c.AssertionEnv != "":
		bad("oauth.assertion_env", "set assertion_file or assertion_env, not both")
	case c.AssertionFile != "" && !filepath.IsAbs(c.AssertionFile):
		bad("oauth.assertion_file", "not an absolute path; write a full path (${HOME}/token.jwt works)")
	}
	if c.IdPTokenEndpoint != "" {
		if u, err := url.Parse(c.IdPTokenEndpoint); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			bad("oauth.idp_token_endpoint", "must be the http(s) URL of the enterprise IdP's token endpoint")
		}
		if c.IdPClientID == "" {
			bad("oauth.idp_client_id", "idp_token_endpoint needs the client_id harnessd has at the IdP; set idp_client_id")
		}
	} else if c.IdPClientID != "" || c.IdPClientSecret != "" {
		bad("oauth.idp_token_endpoint", "idp_client_id and idp_client_secret need idp_token_endpoint; set it")
	}
}
