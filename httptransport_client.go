package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// This file holds what both HTTP transports share: the HTTP clients, the
// reading of answers, and the delivery of answer messages. The redirect and
// dial policy is in httptransport_guard.go, the description of failures in
// httptransport_errors.go.

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
