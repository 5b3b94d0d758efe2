package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// This file holds what both HTTP transports share: the HTTP clients, the
// redirect and dial policy (blocked networks), status errors, and the
// delivery of answer messages.

// An httpStatusError is a non-success HTTP answer to a POST. The client
// falls back to legacy SSE when an inferred "http" server answers the
// initialize request with 400, 404 or 405.
type httpStatusError struct {
	StatusCode int
	Body       string // at most a short prefix of the body
}

func (e *httpStatusError) Error() string {
	if e.Body == "" {
		return "http status " + strconv.Itoa(e.StatusCode)
	}
	return "http status " + strconv.Itoa(e.StatusCode) + ": " + e.Body
}

// httpClient is shared by every HTTP transport so connections to one server
// are pooled and kept alive across calls and sessions. It has no overall
// timeout: each request is bounded by its context, and an SSE stream may
// legitimately last for hours. It follows redirects only within the origin
// of the original request, so configured headers never reach another host.
var httpClient = newHTTPClient(nil)

// guardedClient is httpClient for untrusted servers (serverConfig.Untrusted):
// it refuses to dial a blocked address (see blockedNets) even when the name
// resolves differently at dial time than it did when it was checked (DNS
// rebinding).
var guardedClient = newHTTPClient(refuseBlockedAddress)

// newHTTPClient returns a client for MCP servers whose dialer runs control
// (nil for none) on every address before connecting.
func newHTTPClient(control func(network, address string, c syscall.RawConn) error) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second, Control: control}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          256,
			MaxIdleConnsPerHost:   64,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ExpectContinueTimeout: time.Second,
		},
		CheckRedirect: checkRedirect,
	}
}

// clientFor returns the HTTP client for cfg: untrusted servers get the one
// that refuses blocked addresses.
func clientFor(cfg serverConfig) *http.Client {
	if cfg.Untrusted {
		return guardedClient
	}
	return httpClient
}

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

// httpRequestError describes a failed HTTP exchange: errTransportClosed if the
// transport's lifetime ended, the context's error if the caller's did, else
// the network error without the URL (it may hold a token in its query).
func httpRequestError(op string, ctx, lifetime context.Context, err error) error {
	if lifetime.Err() != nil && ctx.Err() == nil {
		return errTransportClosed
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s: %w", op, ctx.Err())
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		err = urlErr.Err
	}
	return fmt.Errorf("%s: %w", op, err)
}

// statusError turns a non-success answer into an error and closes its body.
// 401 and 403 get distinct messages; every status is an *httpStatusError
// underneath. The body prefix is at most statusBodyLimit bytes, and only
// for a trusted server: an untrusted one may be an internal service that
// an API caller wants to read through harnessd.
func (e httpEndpoint) statusError(op string, resp *http.Response) error {
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return fmt.Errorf("%s: authentication failed (%w): check the \"headers\" configured for this server (e.g. its Authorization token)", op, &httpStatusError{StatusCode: resp.StatusCode})
	case http.StatusForbidden:
		return fmt.Errorf("%s: access forbidden (%w): the server refused these credentials; check the \"headers\" configured for this server and the token's permissions", op, &httpStatusError{StatusCode: resp.StatusCode})
	}
	if e.untrusted {
		return fmt.Errorf("%s: %w", op, &httpStatusError{StatusCode: resp.StatusCode})
	}
	// Read past the limit by the longest secret, so that one crossing the
	// cut is redacted whole before the cut.
	prefix, _ := io.ReadAll(io.LimitReader(resp.Body, int64(statusBodyLimit+e.secrets.longest())))
	if isHTML(resp.Header, prefix) {
		// A web server's error page: its text says what went wrong, its
		// markup only buries that.
		text := e.secrets.cut(htmlText(prefix), statusBodyLimit/2)
		return fmt.Errorf("%s: %w", op, &httpStatusError{StatusCode: resp.StatusCode, Body: fmt.Sprintf("an HTML page %q", text)})
	}
	return fmt.Errorf("%s: %w", op, &httpStatusError{StatusCode: resp.StatusCode, Body: e.secrets.cut(printable(prefix), statusBodyLimit-len("…"))})
}

// isHTML reports whether an answer, with header and body starting with
// prefix, is a web page.
func isHTML(header http.Header, prefix []byte) bool {
	if strings.HasPrefix(header.Get(headerContentType), "text/html") {
		return true
	}
	start := bytes.ToLower(bytes.TrimSpace(prefix))
	return bytes.HasPrefix(start, []byte("<!doctype html")) || bytes.HasPrefix(start, []byte("<html"))
}

// htmlText returns the text of an HTML fragment on one line, without its
// tags, scripts and styles.
func htmlText(b []byte) string {
	var out strings.Builder
	s := string(b)
	for s != "" {
		open := strings.IndexByte(s, '<')
		if open < 0 {
			out.WriteString(s)
			break
		}
		out.WriteString(s[:open])
		out.WriteByte(' ')
		end := strings.IndexByte(s[open:], '>')
		if end < 0 {
			break
		}
		name, _, _ := strings.Cut(strings.TrimSpace(s[open+1:open+end]), " ")
		tag := strings.ToLower(name)
		s = s[open+end+1:]
		if tag == "script" || tag == "style" {
			if close := strings.Index(strings.ToLower(s), "</"+tag); close >= 0 {
				s = s[close:]
			}
		}
	}
	return strings.Join(strings.Fields(printable([]byte(html.UnescapeString(out.String())))), " ")
}

// notMCPError describes a 2xx answer to a request that is neither an event
// stream nor a JSON-RPC message (a web page, a health check, a proxy's
// text), so the call fails at once instead of waiting for an answer that
// never comes. The body is quoted only for a trusted server.
func (e httpEndpoint) notMCPError(op string, resp *http.Response, body []byte) error {
	what := fmt.Sprintf("%d with Content-Type %q", resp.StatusCode, resp.Header.Get(headerContentType))
	switch {
	case len(bytes.TrimSpace(body)) == 0:
		what += " and an empty body"
	case !e.untrusted:
		what += fmt.Sprintf(" and %q", e.secrets.cut(printable(body), 80))
	}
	return fmt.Errorf("%s: the server answered %s, not a JSON-RPC message or an event stream: is the url an MCP endpoint?", op, what)
}

// isJSONRPCAnswer reports whether body holds JSON-RPC messages: one object
// with a method or an id, or a batch.
func isJSONRPCAnswer(body []byte) bool {
	body = bytes.TrimSpace(body)
	if !json.Valid(body) {
		return false
	}
	if len(body) > 0 && body[0] == '[' {
		return true
	}
	hasMethod, id := jsonrpcShape(body)
	return hasMethod || id != nil
}

// printable returns b as one line of valid UTF-8 without control characters.
func printable(b []byte) string {
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

// readBody reads a JSON answer of at most limit bytes and closes it.
func readBody(resp *http.Response, limit int) ([]byte, error) {
	defer resp.Body.Close()
	if resp.ContentLength > int64(limit) {
		return nil, fmt.Errorf("answer of %d bytes exceeds max_message_bytes (%d): raise max_message_bytes for this server", resp.ContentLength, limit)
	}
	if resp.ContentLength >= 0 {
		body := make([]byte, resp.ContentLength)
		_, err := io.ReadFull(resp.Body, body)
		return body, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	if len(body) > limit {
		return nil, fmt.Errorf("answer exceeds max_message_bytes (%d): raise max_message_bytes for this server", limit)
	}
	return body, err
}

// drainClose reads a little of body, so the connection can be reused, and
// closes it.
func drainClose(body io.ReadCloser) {
	_, _ = io.CopyN(io.Discard, body, 4<<10)
	body.Close()
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

// mergeContexts returns a context done when ctx or lifetime is done, and
// the function releasing it.
func mergeContexts(ctx, lifetime context.Context) (context.Context, func()) {
	merged, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(lifetime, cancel)
	return merged, func() {
		stop()
		cancel()
	}
}

// deliverMessages puts data on recv: each element when it is a JSON array
// (a batch), else data itself. It sets *answered (when non-nil) once a
// response arrives, calling onAnswer (when non-nil) just before delivering
// it. It returns false if ctx ended first.
func deliverMessages(ctx context.Context, recv chan<- []byte, data []byte, answered *bool, onAnswer func()) bool {
	if batch, isBatch, err := splitBatch(data); isBatch && err == nil {
		for _, m := range batch {
			if !deliverMessage(ctx, recv, m, answered, onAnswer) {
				return false
			}
		}
		return true
	}
	// Not a batch, or a malformed one: the client reports it as it is.
	return deliverMessage(ctx, recv, data, answered, onAnswer)
}

// deliverMessage puts one message on recv unless ctx ends first.
func deliverMessage(ctx context.Context, recv chan<- []byte, msg []byte, answered *bool, onAnswer func()) bool {
	if answered != nil && !*answered {
		if hasMethod, id := jsonrpcShape(msg); !hasMethod && id != nil {
			*answered = true
			if onAnswer != nil {
				// Before the caller can see the answer and cancel: the rest
				// of the stream must not die with the caller's context.
				onAnswer()
			}
		}
	}
	select {
	case recv <- msg:
		return true
	case <-ctx.Done():
		return false
	}
}

// isEventStream reports whether h declares a text/event-stream body.
func isEventStream(h http.Header) bool {
	ct := h.Get(headerContentType)
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.EqualFold(strings.TrimSpace(ct), "text/event-stream")
}

// reconnectDelay returns how long to wait before reconnection attempt n
// (from 1): the server's retry interval when it gave one, else a backoff
// doubling from reconnectInitialDelay up to reconnectMaxDelay.
func reconnectDelay(retry time.Duration, n int) time.Duration {
	if retry > 0 {
		return retry
	}
	return backoffDelay(reconnectInitialDelay, reconnectMaxDelay, n)
}

// sleepContext waits for d; it returns false if ctx ended first.
func sleepContext(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
