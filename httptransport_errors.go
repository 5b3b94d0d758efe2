package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
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
