package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strings"
	"syscall"
)

// This file holds what an HTTP server may make harnessd reach: the
// addresses never dialled (link-local and metadata), the allow_hosts of
// connect_mcp, and redirects kept within the first request's origin.

// refuseBlockedAddress is a dialer control that refuses link-local and
// metadata addresses, after name resolution.
func refuseBlockedAddress(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	ip := net.ParseIP(host)
	for _, n := range blockedNets {
		if ip != nil && n.Contains(ip) {
			return fmt.Errorf("dial %s: a link-local or metadata address harnessd never connects to", address)
		}
	}
	return nil
}

// checkRedirect allows at most 10 redirects, all to the origin of the first
// request: a configured Authorization or API key header must not follow a
// redirect to a host the operator never named.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	if !sameOrigin(via[0].URL, req.URL) {
		return fmt.Errorf("refusing redirect to another origin (%s): set the server's url to the final address", req.URL.Host)
	}
	return nil
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(originHost(a), originHost(b))
}

// originHost returns u's host:port with the scheme's default port made explicit.
func originHost(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Addresses connect_mcp never reaches: link-local (cloud metadata lives
// there) and the AWS IPv6 metadata endpoint.
var blockedNets = func() []*net.IPNet {
	var nets []*net.IPNet
	for _, cidr := range []string{"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128"} {
		_, n, _ := net.ParseCIDR(cidr)
		nets = append(nets, n)
	}
	return nets
}()

// checkConnectHost refuses hosts outside allowHosts (globs; empty allows
// any) and hosts that resolve to a blocked address.
func checkConnectHost(ctx context.Context, host string, allowHosts []string) error {
	if err := checkAllowedHost(host, allowHosts); err != nil {
		return err
	}
	return checkResolvedHost(ctx, host)
}

// checkAllowedHost refuses a host outside allowHosts (globs; empty allows
// any).
func checkAllowedHost(host string, allowHosts []string) error {
	if len(allowHosts) == 0 {
		return nil
	}
	for _, pattern := range allowHosts {
		if ok, _ := path.Match(strings.ToLower(pattern), strings.ToLower(host)); ok {
			return nil
		}
	}
	return fmt.Errorf("host %q is not in [connect_mcp] allow_hosts", host)
}

// checkUntrustedURL applies, without name resolution, the checks of an
// untrusted server's URL: its host must match allowHosts and must not be a
// blocked address literal.
func checkUntrustedURL(rawURL string, allowHosts []string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return errors.New("url does not parse")
	}
	if err := checkAllowedHost(u.Hostname(), allowHosts); err != nil {
		return err
	}
	if ip := net.ParseIP(u.Hostname()); ip != nil {
		return checkResolvedHost(context.Background(), u.Hostname())
	}
	return nil
}

// checkResolvedURL refuses a URL whose host is or resolves to a blocked
// address.
func checkResolvedURL(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return errors.New("url does not parse")
	}
	return checkResolvedHost(ctx, u.Hostname())
}

// checkResolvedHost refuses a host that is or resolves to a blocked
// address.
func checkResolvedHost(ctx context.Context, host string) error {
	var ips []net.IP
	if ip := net.ParseIP(host); ip != nil {
		ips = []net.IP{ip}
	} else {
		addrs, err := net.DefaultResolver.LookupIPAddr(ctx, host)
		if err != nil {
			return fmt.Errorf("host %q: %v", host, err)
		}
		for _, a := range addrs {
			ips = append(ips, a.IP)
		}
	}
	for _, ip := range ips {
		for _, n := range blockedNets {
			if n.Contains(ip) {
				return fmt.Errorf("host %q resolves to %s, a link-local or metadata address harnessd never connects to", host, ip)
			}
		}
	}
	return nil
}
