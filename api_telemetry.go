package main

import (
	"net/http"
	"strconv"
	"strings"
)

// This file holds the span of each API request: a server span named after
// its route, the child of the caller's traceparent when it sends one, and
// the parent of the run a POST /v1/runs starts.

// startHTTPSpan returns r with a server span of the request in its
// context, the child of its traceparent (and tracestate) when it has a
// valid one, and the span; r and a nil span when tracing is off.
func (a *api) startHTTPSpan(r *http.Request) (*http.Request, *traceSpan) {
	if a.tracer == nil {
		return r, nil
	}
	ctx := r.Context()
	if sc, ok := spanContextFromHeader(r.Header); ok {
		ctx = withRemoteParent(ctx, sc)
	}
	name := r.Method
	attrs := []attribute{stringAttr("http.request.method", r.Method), stringAttr("url.path", r.URL.Path)}
	if _, pattern := a.mux.Handler(r); pattern != "" {
		// A pattern may start with a method or a host; the route is its
		// path.
		route := pattern[strings.IndexByte(pattern, '/'):]
		name += " " + route
		attrs = append(attrs, stringAttr("http.route", route))
	}
	ctx, sp := a.tracer.start(ctx, name, spanServer, attrs...)
	return r.WithContext(ctx), sp
}

// endHTTPSpan ends the span of a request answered with status: a 5xx
// is the span's error (a 4xx is the client's, per the HTTP conventions).
func endHTTPSpan(sp *traceSpan, status int) {
	sp.set(intAttr("http.response.status_code", int64(status)))
	if status >= 500 {
		sp.fail(strconv.Itoa(status), "")
	}
	sp.end()
}
