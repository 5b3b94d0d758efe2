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
	"strconv"
	"strings"
	"unicode"
)

// This file holds how a failed HTTP exchange is described: status errors,
// network errors without the URL, web pages recognised and reduced to their
// text, and 2xx answers that are not MCP.

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

// Reasons a failed exchange with an address a caller chose is reported
// with (see peerError).
const (
	peerUnreachable  = "could not reach an HTTP server at that address"
	peerTimedOut     = "timed out"
	peerRefusedByUs  = "refused by the address policy: "
	peerStatusFormat = "HTTP status %d"
)

// A peerError is a failed exchange with an address a caller without the
// admin scope chose (an untrusted server's URL, a run's webhook_url): its
// message is a fixed reason that quotes nothing the peer sent, while the
// error it wraps, the detail, is for the log and for admins. The address
// may be an internal service the caller cannot reach otherwise: quoting
// its banner would read it for them, and telling a closed port ("connection
// refused") from an open one that is not HTTP ("malformed HTTP status
// code") would map its ports, so both are peerUnreachable.
type peerError struct {
	reason string
	detail error
}

func (e *peerError) Error() string { return e.reason }
func (e *peerError) Unwrap() error { return e.detail }

// hidePeer returns err, from an exchange with an address a caller chose,
// as a *peerError with a fixed reason: refused by the address policy,
// timed out, the HTTP status of an answer, else peerUnreachable. A nil err
// stays nil.
func hidePeer(err error) error {
	if err == nil {
		return nil
	}
	var status *httpStatusError
	var netErr net.Error
	reason := peerUnreachable
	switch {
	case errors.Is(err, errBlockedAddress):
		reason = peerRefusedByUs + errBlockedAddress.Error()
	case errors.As(err, &status):
		reason = fmt.Sprintf(peerStatusFormat, status.StatusCode)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		reason = peerTimedOut
	}
	return &peerError{reason: reason, detail: err}
}

// peerDetail returns err's message with the detail of the *peerError it
// holds in place of its reason: what the log and admins see.
func peerDetail(err error) string {
	var pe *peerError
	if !errors.As(err, &pe) {
		return err.Error()
	}
	return strings.Replace(err.Error(), pe.reason, pe.detail.Error(), 1)
}

// requestError is httpRequestError for this endpoint: for an untrusted
// server the network error is a *peerError, its detail logged.
func (e httpEndpoint) requestError(op string, ctx, lifetime context.Context, err error) error {
	err = httpRequestError(op, ctx, lifetime, err)
	if !e.untrusted || errors.Is(err, errTransportClosed) || ctx.Err() != nil {
		return err
	}
	e.logger.Warn("http exchange with a server a caller chose failed", "op", op, "err", err)
	return fmt.Errorf("%s: %w", op, hidePeer(errors.Unwrap(err)))
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
	prefix, _ := io.ReadAll(io.LimitReader(resp.Body, int64(statusBodyLimit+e.secrets.load().longest())))
	if isHTML(resp.Header, prefix) {
		// A web server's error page: its text says what went wrong, its
		// markup only buries that.
		text := e.secrets.load().cut(htmlText(prefix), statusBodyLimit/2)
		return fmt.Errorf("%s: %w", op, &httpStatusError{StatusCode: resp.StatusCode, Body: fmt.Sprintf("an HTML page %q", text)})
	}
	return fmt.Errorf("%s: %w", op, &httpStatusError{StatusCode: resp.StatusCode, Body: e.secrets.load().cut(printable(prefix), statusBodyLimit-len("…"))})
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
		what += fmt.Sprintf(" and %q", e.secrets.load().cut(printable(body), 80))
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

// errNeedsAuth marks errors that a person must fix by logging in.
var errNeedsAuth = errors.New("needs authorization")
