package main

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"path"
	"strings"
	"sync"
)

// This file holds what the API refuses before routing, so that no web page
// the local user visits can drive harnessd: a Host that is not ours (DNS
// rebinding), a cross-origin state-changing request, and a body that is
// not JSON (a "simple" cross-site POST). It also holds the cap on open API
// connections.

// defaultMaxConnections is the default cap on open API connections.
const defaultMaxConnections = 512

// A hostPolicy says which Host header values the API answers. The zero
// policy accepts loopback names and addresses only. Safe for concurrent use
// (never modified).
type hostPolicy struct {
	// listenHost is the host of the listen address ("" when unknown).
	listenHost string
	// allowed holds the configured allowed_hosts: lower-case names or
	// path.Match globs, matched against the Host without its port.
	allowed []string
}

// newHostPolicy returns the policy for an API listening on addr with the
// extra host names allowed (from allowed_hosts).
func newHostPolicy(addr string, allowed []string) hostPolicy {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	return hostPolicy{listenHost: strings.ToLower(host), allowed: allowed}
}

// allows reports whether a request whose Host header is hostport is for us:
// a loopback name or address, the listen address, any address literal when
// listening on every interface, or an allowed_hosts entry. An empty Host
// (HTTP/1.0) is allowed: browsers always send one.
func (p hostPolicy) allows(hostport string) bool {
	if hostport == "" {
		return true
	}
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	ip := net.ParseIP(host)
	switch {
	case host == "localhost" || strings.HasSuffix(host, ".localhost"):
		return true
	case ip != nil && ip.IsLoopback():
		return true
	case host == p.listenHost:
		return true
	case ip != nil && (p.listenHost == "" || net.ParseIP(p.listenHost).IsUnspecified()):
		// A name is what DNS rebinding needs; an address literal was
		// typed by whoever reached this interface.
		return true
	}
	for _, pattern := range p.allowed {
		if ok, _ := path.Match(pattern, host); ok {
			return true
		}
	}
	return false
}

// crossOrigin refuses state-changing requests a browser marks as
// cross-site (Sec-Fetch-Site) or whose Origin is not the Host. Requests
// without either header (curl, SDKs) pass. Safe for concurrent use.
var crossOrigin = http.NewCrossOriginProtection()

// refuseRequest answers and returns true when r must not reach a route: a
// foreign Host (421), a cross-origin state-changing request (403) or a
// body that is not declared application/json (415).
func (a *api) refuseRequest(w http.ResponseWriter, r *http.Request) bool {
	if !a.hosts.allows(r.Host) {
		writeError(w, http.StatusMisdirectedRequest, "host_not_allowed",
			fmt.Sprintf("Host %q is not an address of this harnessd: use the listen address or localhost, or add the name to allowed_hosts in config.toml", r.Host))
		return true
	}
	if err := crossOrigin.Check(r); err != nil {
		writeError(w, http.StatusForbidden, "cross_origin",
			fmt.Sprintf("%s %s: cross-origin requests that change state are refused (Origin %q): call the API from a program, not a web page", r.Method, r.URL.Path, r.Header.Get("Origin")))
		return true
	}
	if r.ContentLength != 0 {
		ct := r.Header.Get("Content-Type")
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type",
				fmt.Sprintf("Content-Type %q: request bodies must be JSON; send Content-Type: application/json", ct))
			return true
		}
	}
	return false
}

// A limitListener is a net.Listener that keeps at most max connections
// open: Accept waits while max are open. Safe for concurrent use.
type limitListener struct {
	net.Listener
	slots     chan struct{}
	closed    chan struct{}
	closeOnce sync.Once
}

// newLimitListener returns ln limited to max open connections.
func newLimitListener(ln net.Listener, max int) net.Listener {
	return &limitListener{Listener: ln, slots: make(chan struct{}, max), closed: make(chan struct{})}
}

// Accept waits for a free slot, then for a connection. The slot is freed
// when the connection is closed (once, however often Close is called).
// Accept returns net.ErrClosed once the listener is closed, even while
// waiting for a slot.
func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.closed:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

// Close closes the listener and ends any Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.closeOnce.Do(func() { close(l.closed) })
	return l.Listener.Close()
}

// A limitedConn frees its listener's slot when closed.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
