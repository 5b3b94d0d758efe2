package main

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// This file holds the rule every OAuth endpoint harnessd talks to obeys:
// https, or http to a loopback address only, so that codes, verifiers,
// client secrets and tokens never cross a network in cleartext.

// checkOAuthEndpoint returns an error naming field and raw unless raw is
// an https URL, or an http URL whose host is loopback (localhost,
// 127.0.0.0/8, ::1). An empty raw is not checked (the caller reports a
// missing endpoint itself).
func checkOAuthEndpoint(field, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("oauth: %s %q: not an absolute url; refusing to use it", field, raw)
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return nil
	case "http":
		if isLoopbackHost(u.Hostname()) {
			return nil
		}
	}
	return fmt.Errorf("oauth: %s %q: not https; OAuth endpoints must use https (plain http only on loopback), so no code, secret or token crosses the network in cleartext: fix the server's metadata", field, raw)
}

// isLoopbackHost reports whether host (without port) is localhost or a
// loopback IP address.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkASEndpoints checks every endpoint of an authorization server's
// metadata (see checkOAuthEndpoint); the first bad one is the error.
func checkASEndpoints(as authServerMetadata) error {
	for _, e := range []struct{ field, url string }{
		{"issuer", as.Issuer},
		{"authorization_endpoint", as.AuthorizationEndpoint},
		{"token_endpoint", as.TokenEndpoint},
		{"registration_endpoint", as.RegistrationEndpoint},
		{"jwks_uri", as.JWKSURI},
	} {
		if err := checkOAuthEndpoint(e.field, e.url); err != nil {
			return err
		}
	}
	return nil
}
