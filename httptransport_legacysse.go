package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// This file holds the legacy HTTP+SSE transport of protocol 2024-11-05:
// one GET stream for every server message, and POSTs to the endpoint it
// names.

// An sseTransport is the legacy HTTP+SSE transport (protocol 2024-11-05):
// one long GET stream carries every server message, and messages are POSTed
// to the endpoint the stream names first. It is safe for concurrent use.
type sseTransport struct {
	httpEndpoint
	endpoint string // absolute POST URL, same origin as the configured url

	// ctx is cancelled by close: it aborts the stream and every POST.
	ctx    context.Context
	cancel context.CancelFunc
	recvCh chan []byte // closed by the reader when it exits
	// ended is closed by the reader as it stops, before recvCh: a send
	// made once recv is seen closed is refused.
	ended      chan struct{}
	readerDone chan struct{} // closed after recvCh
	closeOnce  sync.Once

	mu sync.Mutex
	// guards endCause
	endCause error // why the stream ended; nil while it runs or after close
}

// newSSETransport GETs cfg.URL as an event stream and waits, bounded by ctx,
// for the endpoint event. It refuses an endpoint on another origin. On
// error nothing is left running.
func newSSETransport(ctx context.Context, cfg serverConfig, secrets *liveRedactor, logger *slog.Logger) (*sseTransport, error) {
	base, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("sse connect: parse url: %w", err)
	}
	lifetime, cancel := context.WithCancel(context.Background())
	t := &sseTransport{
		httpEndpoint: newHTTPEndpoint(cfg, secrets, logger),
		ctx:          lifetime,
		cancel:       cancel,
		recvCh:       make(chan []byte, recvBuffer),
		ended:        make(chan struct{}),
		readerDone:   make(chan struct{}),
	}
	stopWatch := context.AfterFunc(ctx, cancel)
	defer stopWatch()

	req, err := http.NewRequestWithContext(lifetime, http.MethodGet, cfg.URL, nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("sse connect: build request: %w", err)
	}
	req.Header = t.requestHeader()
	req.Header[headerAccept] = acceptStream
	resp, err := t.client.Do(req)
	if err != nil {
		cancel()
		return nil, t.requestError("sse connect", ctx, ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		err := t.statusError("sse connect", resp) // reads the body: before cancel
		cancel()
		return nil, err
	}
	if !isEventStream(resp.Header) {
		drainClose(resp.Body)
		cancel()
		return nil, fmt.Errorf("sse connect: content type %q is not text/event-stream; is the url an sse endpoint?", resp.Header.Get(headerContentType))
	}
	endpoints := make(chan string, 1)
	// Owned by the transport; exits when the stream ends or on close.
	go t.readStream(resp.Body, endpoints)

	var endpoint string
	select {
	case endpoint = <-endpoints:
	case <-t.readerDone:
		select {
		case endpoint = <-endpoints:
		default:
			t.close()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("sse connect: waiting for the endpoint event: %w", ctx.Err())
			}
			return nil, fmt.Errorf("sse connect: stream ended before the endpoint event: %w", t.endErr())
		}
	}
	t.endpoint, err = resolveEndpoint(base, endpoint)
	if err != nil {
		t.close()
		return nil, err
	}
	if !stopWatch() {
		t.close()
		return nil, fmt.Errorf("sse connect: %w", ctx.Err())
	}
	return t, nil
}

// resolveEndpoint resolves the endpoint event's data against base and
// refuses another origin: configured headers must not go elsewhere.
func resolveEndpoint(base *url.URL, endpoint string) (string, error) {
	ref, err := url.Parse(strings.TrimSpace(endpoint))
	if err != nil {
		return "", fmt.Errorf("sse connect: endpoint event is not a url: %w", err)
	}
	u := base.ResolveReference(ref)
	if !sameOrigin(base, u) {
		return "", fmt.Errorf("sse connect: endpoint event names another origin (%s): refusing to send messages there; check the server's url", u.Host)
	}
	return u.String(), nil
}

// readStream delivers the stream's message events to recvCh and the first
// endpoint event's data to endpoints, until the stream ends or close; it
// then records why and closes recvCh.
func (t *sseTransport) readStream(body io.ReadCloser, endpoints chan<- string) {
	defer close(t.readerDone)
	defer close(t.recvCh)
	defer close(t.ended)
	defer body.Close()
	p := newSSEParser(body, t.maxMessage)
	defer p.release()
	for {
		ev, err := p.next()
		if err != nil {
			if t.ctx.Err() == nil {
				t.mu.Lock()
				t.endCause = errors.New("sse stream closed by server")
				if err != io.EOF {
					t.endCause = fmt.Errorf("sse stream: read: %w", err)
				}
				t.mu.Unlock()
			}
			return
		}
		switch {
		case ev.tooLarge:
			t.logger.Warn("mcp sse message over the size limit discarded; raise max_message_bytes", "limit", t.maxMessage)
		case ev.name == "endpoint":
			if endpoints != nil {
				endpoints <- string(ev.data)
				endpoints = nil
			}
		case ev.name == "message" && len(ev.data) > 0:
			if !deliverMessages(t.ctx, t.recvCh, ev.data, nil, nil) {
				return
			}
		}
	}
}

// requestHeader returns a fresh copy of the configured headers.
func (t *sseTransport) requestHeader() http.Header {
	h := make(http.Header, len(t.header)+3)
	maps.Copy(h, t.header)
	return h
}

// recv returns the channel of the stream's messages; it is closed when the
// stream ends or on close.
func (t *sseTransport) recv() <-chan []byte { return t.recvCh }

// listen relays recv to deliver (see transport).
func (t *sseTransport) listen(deliver func([]byte), ended func()) {
	relay(t.recv(), deliver, ended)
}

// endErr returns why the stream ended, or nil while it runs or after
// close.
func (t *sseTransport) endErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.endCause
}

// send POSTs msg to the endpoint; its answer arrives on the stream. It
// returns errTransportClosed (wrapped with the reason) once the stream ended.
func (t *sseTransport) send(ctx context.Context, msg []byte) error {
	select {
	case <-t.ended:
		if err := t.endErr(); err != nil {
			return fmt.Errorf("%w: %v", errTransportClosed, err)
		}
		return errTransportClosed
	default:
	}
	reqCtx, release := mergeContexts(ctx, t.ctx)
	defer release()
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, t.endpoint, bytes.NewReader(msg))
	if err != nil {
		return fmt.Errorf("post message: build request: %w", err)
	}
	req.Header = t.requestHeader()
	req.Header[headerContentType] = contentTypeRPC
	injectTraceHeaders(ctx, req.Header)
	resp, err := t.client.Do(req)
	if err != nil {
		return t.requestError("post message", ctx, t.ctx, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return t.statusError("post message", resp)
	}
	drainClose(resp.Body)
	return nil
}

// close stops the stream and waits for its reader; recv is closed when it
// returns. It is idempotent and bounded.
func (t *sseTransport) close() error {
	t.closeOnce.Do(func() {
		t.cancel()
		<-t.readerDone
	})
	return nil
}
