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
// addresses never dialled (link-local and metadata, also inside IPv6
// addresses carrying an IPv4 one), the allow_hosts of
// connect_mcp, and redirects kept within the first request's origin.

// errBlockedAddress is why the guarded dialer refuses an address.
var errBlockedAddress = errors.New("a link-local or metadata address harnessd never connects to")

// refuseBlockedAddress is a dialer control that refuses link-local and
// metadata addresses, after name resolution.
func refuseBlockedAddress(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s: %w", address, err)
	}
	if isBlockedIP(net.ParseIP(host)) {
		return fmt.Errorf("dial %s: %w", address, errBlockedAddress)
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

// Addresses connect_mcp never reaches: link-local (AWS, GCP and others'
// metadata live there), the AWS IPv6 metadata endpoint, Alibaba's
// (100.100.100.200), Oracle's (192.0.0.192) and Azure's wire server
// (168.63.129.16). isBlockedIP also finds them inside IPv6 addresses.
var blockedNets = func() []*net.IPNet {
	var nets []*net.IPNet
	for _, cidr := range []string{"169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128",
		"100.100.100.200/32", "192.0.0.192/32", "168.63.129.16/32"} {
		nets = append(nets, mustCIDR(cidr))
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
		if isBlockedIP(ip) {
			return fmt.Errorf("host %q resolves to %s, a link-local or metadata address harnessd never connects to", host, ip)
		}
	}
	return nil
}

// isBlockedIP reports whether ip is in blockedNets, directly, as an
// IPv4-mapped address, or as the IPv4 address embedded in a NAT64
// (64:ff9b::/96), 6to4 (2002::/16) or Teredo (2001::/32: server and
// client) address, each of which a gateway may turn into a connection to
// that IPv4 address.
func isBlockedIP(ip net.IP) bool {
	if ip == nil {
		return false
	}
	for _, candidate := range append([]net.IP{ip}, embeddedIPv4(ip)...) {
		for _, n := range blockedNets {
			if n.Contains(candidate) {
				return true
			}
		}
	}
	return false
}

// Prefixes of IPv6 addresses that carry an IPv4 address.
var (
	nat64Prefix  = mustCIDR("64:ff9b::/96")
	sixToFour    = mustCIDR("2002::/16")
	teredoPrefix = mustCIDR("2001::/32")
)

// embeddedIPv4 returns the IPv4 addresses an IPv6 address carries: the
// last 32 bits of NAT64, bits 16-47 of 6to4, and Teredo's server (bits
// 32-63) and client (the last 32 bits, inverted). Nil for others.
func embeddedIPv4(ip net.IP) []net.IP {
	ip16 := ip.To16()
	if ip16 == nil || ip.To4() != nil {
		return nil
	}
	switch {
	case nat64Prefix.Contains(ip16):
		return []net.IP{net.IPv4(ip16[12], ip16[13], ip16[14], ip16[15])}
	case sixToFour.Contains(ip16):
		return []net.IP{net.IPv4(ip16[2], ip16[3], ip16[4], ip16[5])}
	case teredoPrefix.Contains(ip16):
		return []net.IP{net.IPv4(ip16[4], ip16[5], ip16[6], ip16[7]),
			net.IPv4(ip16[12]^0xff, ip16[13]^0xff, ip16[14]^0xff, ip16[15]^0xff)}
	}
	return nil
}

// mustCIDR parses a constant CIDR.
func mustCIDR(cidr string) *net.IPNet {
	_, n, err := net.ParseCIDR(cidr)
	if err != nil {
		panic(err)
	}
	return n
}
