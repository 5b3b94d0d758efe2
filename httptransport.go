package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the Streamable HTTP transport: sessions, answer streams
// (JSON or SSE), the GET stream, stream resumption and re-initialization on
// 404.

// Canonical header names, so headers are set without re-canonicalizing.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-Id"
	headerAccept          = "Accept"
	headerContentType     = "Content-Type"
)

const (
	deleteSessionTimeout  = 2 * time.Second
	statusBodyLimit       = 512
	reconnectInitialDelay = time.Second
	reconnectMaxDelay     = 30 * time.Second
	// maxResumeAttempts bounds the reconnections of a POST's answer stream
	// that bring no new event.
	maxResumeAttempts = 5
	recvBuffer        = 64
	// answerGrace bounds the reading of an answer stream after the answer,
	// for servers that do not end it.
	answerGrace = 2 * time.Second
	// brokenStreamCode is the JSON-RPC error code of the answer a transport
	// makes up when a request's response stream ends without the answer.
	brokenStreamCode = -32000
)

// Header values shared by every request; net/http never modifies them.
var (
	acceptPost     = []string{"application/json, text/event-stream"}
	acceptStream   = []string{"text/event-stream"}
	contentTypeRPC = []string{"application/json"}
	utf8BOM        = []byte("\xEF\xBB\xBF")
)

// configuredHeader returns cfg.Headers with canonical keys, built once per
// transport. The result is read-only: requests copy it.
func configuredHeader(cfg serverConfig) http.Header {
	h := make(http.Header, len(cfg.Headers))
	for k, v := range cfg.Headers {
		h[textproto.CanonicalMIMEHeaderKey(k)] = []string{v}
	}
	return h
}

// An httpEndpoint is what both HTTP transports know of their server: the
// configured headers (and their values, redacted from error bodies), the
// message size limit, the HTTP client and the logger. Read-only.
type httpEndpoint struct {
	header     http.Header // configured headers, canonical keys
	secrets    *redactor
	maxMessage int
	logger     *slog.Logger
	client     *http.Client
	untrusted  bool         // serverConfig.Untrusted: error bodies are not quoted
	auth       *oauthClient // nil: no OAuth
}

// newHTTPEndpoint returns the endpoint part of a transport for cfg.
func newHTTPEndpoint(cfg serverConfig, logger *slog.Logger) httpEndpoint {
	return httpEndpoint{
		header:     configuredHeader(cfg),
		secrets:    newRedactor(cfg.secretValues()...),
		maxMessage: cfg.messageLimit(),
		logger:     logger,
		client:     clientFor(cfg),
		untrusted:  cfg.Untrusted,
	}
}

// A streamableTransport is the Streamable HTTP transport (protocol
// 2025-03-26 and later): one POST per message, answers as JSON or SSE, an
// optional GET stream for server-initiated messages, and a session id.
// It is safe for concurrent use.
type streamableTransport struct {
	httpEndpoint
	url string

	// ctx is cancelled by close: it aborts every request and stream reader.
	ctx    context.Context
	cancel context.CancelFunc
	recvCh chan []byte
	// producers counts sends and stream readers that may write to recvCh;
	// close closes recvCh only after it drops to zero.
	producers sync.WaitGroup
	closeOnce sync.Once
	// getWanted is set by setProtocolVersion: the GET stream starts after
	// the next successful POST (the initialized notification).
	getWanted atomic.Bool

	// guards closed, endCause, sessionID, expired, protocolVersion and stopGet
	mu              sync.Mutex
	closed          bool
	endCause        error // why the transport ended by itself; see fail
	sessionID       string
	expired         bool // the session expired and no new one was given yet
	protocolVersion string
	stopGet         context.CancelFunc // nil when no GET stream runs

	// getSettled is closed once the first GET stream attempt has an
	// outcome: open, refused or failed.
	getSettled     chan struct{}
	getSettledOnce sync.Once
}

// newStreamableTransport returns a Streamable HTTP transport for cfg.URL.
// It does no I/O: the first send opens the first connection.
func newStreamableTransport(cfg serverConfig, logger *slog.Logger) *streamableTransport {
	ctx, cancel := context.WithCancel(context.Background())
	return &streamableTransport{
		httpEndpoint: newHTTPEndpoint(cfg, logger),
		url:          cfg.URL,
		ctx:          ctx,
		cancel:       cancel,
		recvCh:       make(chan []byte, recvBuffer),
		getSettled:   make(chan struct{}),
	}
}

// getStreamSettled returns a channel closed once the first attempt to open
// the GET stream has an outcome, so a caller can wait until server-initiated
// messages have a way in before it sends requests that trigger them.
func (t *streamableTransport) getStreamSettled() <-chan struct{} { return t.getSettled }

// recv returns the channel of every message the server sends. It is closed
// once close has stopped every reader.
func (t *streamableTransport) recv() <-chan []byte { return t.recvCh }

// endErr returns why the transport ended by itself (the server could not
// be reached), or nil while it runs and after a close. Other failed
// requests report their own error from send and leave the transport
// running.
func (t *streamableTransport) endErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.endCause
}

// isUnreachable reports whether err says no server listens at the
// endpoint any more (the connection was refused, the host has no route, or
// its name does not resolve): the server is down, not merely slow.
func isUnreachable(err error) bool {
	var opErr *net.OpError
	var dnsErr *net.DNSError
	return (errors.As(err, &opErr) && opErr.Op == "dial") || errors.As(err, &dnsErr)
}

// fail ends the transport because the server cannot be reached: err is
// kept for endErr, and recv is closed, so the client's session ends and its
// owner (the registry) reconnects with backoff. It closes asynchronously
// since it runs on a goroutine that close waits for.
func (t *streamableTransport) fail(err error) {
	t.mu.Lock()
	if t.closed || t.endCause != nil {
		t.mu.Unlock()
		return
	}
	t.endCause = fmt.Errorf("server unreachable: %w", err)
	t.mu.Unlock()
	t.logger.Warn("mcp http server unreachable; ending the session", "error", err)
	// Owned by the transport; ends when close returns (bounded).
	go t.close()
}

// setProtocolVersion records the negotiated version, sent from now on as
// MCP-Protocol-Version, and asks for the GET stream to be opened after the
// next successful POST (a new session gets a new GET stream).
func (t *streamableTransport) setProtocolVersion(v string) {
	t.mu.Lock()
	t.protocolVersion = v
	t.mu.Unlock()
	t.getWanted.Store(true)
}

// send POSTs msg. It returns once the answer's headers are processed: a
// JSON answer is already on recv; an SSE answer is read by its
// answerStream's goroutine, which follows ctx until the answer arrived, so
// the caller keeps ctx alive until then. It returns errSessionExpired when
// the server forgot the session (404), errTransportClosed after close, and
// *httpStatusError (possibly wrapped) for another non-success status.
func (t *streamableTransport) send(ctx context.Context, msg []byte) error {
	sessionID, version, initializing, err := t.admit(msg)
	if err != nil {
		return err
	}
	a := t.newAnswerStream(ctx, msg)
	sse, err := a.post(ctx, sessionID, version, initializing)
	if sse != nil {
		a.readAsync(sse)
	} else {
		a.end()
	}
	if err != nil {
		return err
	}
	if t.getWanted.Load() {
		t.startGetStream()
	}
	return nil
}

// admit lets one message out: it returns the session to send it in, and
// whether it is an initialize that a new session waits for, and counts it
// as a producer (the answerStream's end releases it). It refuses with
// errTransportClosed after close and errSessionExpired while an expired
// session awaits a new initialize.
func (t *streamableTransport) admit(msg []byte) (sessionID, version string, initializing bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return "", "", false, errTransportClosed
	}
	// Until a new initialize gives a new session, a message would go out
	// without one and be refused: the client re-initializes first.
	if t.expired {
		if initializing = isInitialize(msg); !initializing {
			return "", "", false, errSessionExpired
		}
	}
	t.producers.Add(1)
	return t.sessionID, t.protocolVersion, initializing, nil
}

// An answerStream is one POST and its answer. Its request lives on the
// transport's context and follows the caller's ctx only until the answer
// arrived: an SSE answer is then read to its end, for at most answerGrace,
// so its connection returns to the pool even when the caller cancels at
// once. end releases it; whoever reads the answer calls it: send for a JSON
// answer (or none), the stream's goroutine for an SSE answer.
type answerStream struct {
	t   *streamableTransport
	msg []byte
	// ctx is the request's context; cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	// unwatch stops following the caller's ctx; it reports false once that
	// ctx has cancelled the request.
	unwatch func() bool
	// grace bounds the reading after the answer; nil before. Owned by the
	// goroutine that reads the answer.
	grace *time.Timer
}

// newAnswerStream returns the answer stream of msg, sent on behalf of
// caller. The transport must have admitted msg.
func (t *streamableTransport) newAnswerStream(caller context.Context, msg []byte) *answerStream {
	ctx, cancel := context.WithCancel(t.ctx)
	return &answerStream{t: t, msg: msg, ctx: ctx, cancel: cancel, unwatch: context.AfterFunc(caller, cancel)}
}

// answered detaches the stream from its caller once the answer is on its
// way to recv: the rest is read for at most answerGrace.
func (a *answerStream) answered() {
	if a.unwatch() {
		a.grace = time.AfterFunc(answerGrace, a.cancel)
	}
}

// end cancels the request and releases the transport's producer count.
// It is called once.
func (a *answerStream) end() {
	a.unwatch()
	if a.grace != nil {
		a.grace.Stop()
	}
	a.cancel()
	a.t.producers.Done()
}

// post sends the message and handles the answer's status. It returns the
// response when the answer is an SSE stream still to be read (the caller
// hands it to readAsync), else nil: a JSON answer is already on recv.
func (a *answerStream) post(ctx context.Context, sessionID, version string, initializing bool) (*http.Response, error) {
	t := a.t
	resp, err := t.auth.do(ctx, t.client, func() (*http.Request, error) {
		req, err := t.newRequest(a.ctx, http.MethodPost, sessionID, version, a.msg)
		if err == nil {
			req.Header[headerAccept] = acceptPost
			req.Header[headerContentType] = contentTypeRPC
		}
		return req, err
	})
	if err != nil {
		err = httpRequestError("post message", ctx, t.ctx, err)
		if isUnreachable(err) {
			t.fail(err)
		}
		return nil, err
	}
	t.captureSession(resp)
	if initializing && resp.StatusCode/100 == 2 {
		t.mu.Lock()
		t.expired = false // even if the server gave no session this time
		t.mu.Unlock()
	}
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		drainClose(resp.Body)
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		if isEventStream(resp.Header) {
			return resp, nil
		}
		body, err := readBody(resp, t.maxMessage)
		if err != nil {
			return nil, fmt.Errorf("post message: read answer: %w", err)
		}
		if isRequest(a.msg) && !isJSONRPCAnswer(body) {
			return nil, t.notMCPError("post message", resp, body)
		}
		if len(bytes.TrimSpace(body)) > 0 && !deliverMessages(a.ctx, t.recvCh, body, nil, nil) {
			return nil, httpRequestError("post message", ctx, t.ctx, a.ctx.Err())
		}
	case resp.StatusCode == http.StatusNotFound && sessionID != "":
		drainClose(resp.Body)
		t.expireSession(sessionID)
		return nil, errSessionExpired
	default:
		return nil, t.statusError("post message", resp)
	}
	return nil, nil
}

// readAsync reads the SSE answer resp on a goroutine of its own, which
// ends the stream when done.
func (a *answerStream) readAsync(resp *http.Response) {
	// Owned by the transport; exits when the stream ends (after any
	// resumption), when the caller's ctx is done before the answer,
	// answerGrace after the answer, or on close.
	go func() {
		defer a.end()
		a.read(resp)
	}()
}

// newRequest returns a request to the endpoint carrying the configured
// headers, the session id and the protocol version when they are set.
func (t *streamableTransport) newRequest(ctx context.Context, method, sessionID, version string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, t.url, r)
	if err != nil {
		return nil, fmt.Errorf("build %s request: %w", strings.ToLower(method), err)
	}
	h := make(http.Header, len(t.header)+5)
	maps.Copy(h, t.header)
	if sessionID != "" {
		h[headerSessionID] = []string{sessionID}
	}
	if version != "" {
		h[headerProtocolVersion] = []string{version}
	}
	req.Header = h
	return req, nil
}

// captureSession stores the session id of resp, if it has a valid one.
func (t *streamableTransport) captureSession(resp *http.Response) {
	id := resp.Header.Get(headerSessionID)
	if id == "" {
		return
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			t.logger.Warn("mcp http session id ignored: not visible ascii")
			return
		}
	}
	t.mu.Lock()
	t.sessionID, t.expired = id, false
	t.mu.Unlock()
}

// expireSession forgets the session old (unless a newer one replaced it),
// its protocol version and its GET stream, so the next initialize starts
// a fresh session.
func (t *streamableTransport) expireSession(old string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.sessionID != old {
		return
	}
	t.sessionID, t.protocolVersion, t.expired = "", "", true
	if t.stopGet != nil {
		t.stopGet()
		t.stopGet = nil
	}
}

// startGetStream (re)starts the GET stream for the current session.
func (t *streamableTransport) startGetStream() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !t.getWanted.Swap(false) {
		return
	}
	if t.stopGet != nil {
		t.stopGet()
	}
	ctx, cancel := context.WithCancel(t.ctx)
	t.stopGet = cancel
	t.producers.Add(1)
	// Owned by the transport; exits on close, when a newer session replaces
	// it, or when the server offers no GET stream.
	go func() {
		defer t.producers.Done()
		defer cancel()
		t.runGetStream(ctx)
	}()
}

// errNoGetStream: the server answered a GET with 404 or 405.
var errNoGetStream = errors.New("server offers no get stream")

// openStream GETs the endpoint as an SSE stream, resuming after lastID when
// set. It returns the response only for a 2xx event stream; errNoGetStream
// for 404 and 405.
func (t *streamableTransport) openStream(ctx context.Context, lastID string) (*http.Response, error) {
	t.mu.Lock()
	sessionID, version := t.sessionID, t.protocolVersion
	t.mu.Unlock()
	resp, err := t.auth.do(ctx, t.client, func() (*http.Request, error) {
		req, err := t.newRequest(ctx, http.MethodGet, sessionID, version, nil)
		if err == nil {
			req.Header[headerAccept] = acceptStream
			if lastID != "" {
				req.Header[headerLastEventID] = []string{lastID}
			}
		}
		return req, err
	})
	if err != nil {
		return nil, httpRequestError("get event stream", ctx, t.ctx, err)
	}
	t.captureSession(resp)
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed:
		drainClose(resp.Body)
		return nil, errNoGetStream
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, t.statusError("get event stream", resp)
	case !isEventStream(resp.Header):
		drainClose(resp.Body)
		return nil, fmt.Errorf("get event stream: content type %q is not text/event-stream", resp.Header.Get(headerContentType))
	}
	return resp, nil
}

// runGetStream delivers the messages of the GET stream, reconnecting with
// backoff (or the server's retry interval) and Last-Event-ID until ctx is
// done or the server refuses the stream. It blocks until then.
func (t *streamableTransport) runGetStream(ctx context.Context) {
	var cur streamCursor
	failures := 0
	for {
		resp, err := t.openStream(ctx, cur.lastID)
		t.getSettledOnce.Do(func() { close(t.getSettled) })
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return
		}
		var status *httpStatusError
		switch {
		case errors.Is(err, errNoGetStream):
			t.logger.Debug("mcp http server offers no get stream")
			return
		case errors.As(err, &status) && status.StatusCode < 500 && status.StatusCode != http.StatusTooManyRequests:
			t.logger.Warn("mcp http get stream refused; server-initiated messages arrive only with answers", "error", err)
			return
		case isUnreachable(err):
			t.fail(err)
			return
		case err != nil:
			t.logger.Debug("mcp http get stream failed; retrying", "error", err)
		default:
			delivered := cur.delivered
			err = t.pump(ctx, resp.Body, &cur, nil)
			resp.Body.Close()
			if ctx.Err() != nil {
				return
			}
			if cur.delivered != delivered {
				failures = 0
			}
			t.logger.Debug("mcp http get stream ended; reconnecting", "error", err)
		}
		failures++
		if !sleepContext(ctx, reconnectDelay(cur.retry, failures)) {
			return
		}
	}
}

// A streamCursor is what one logical SSE stream carries across its
// connections.
type streamCursor struct {
	lastID    string
	retry     time.Duration // the server's retry field; 0 if none
	answered  bool          // a response arrived on the stream
	tooLarge  bool          // an event over the size limit was discarded
	delivered int           // messages delivered so far
}

// pump delivers the message events of body to recv until the body ends
// (nil) or fails (the read error). With a non-nil onAnswer it notes the
// first response in cur and then calls onAnswer.
func (t *streamableTransport) pump(ctx context.Context, body io.Reader, cur *streamCursor, onAnswer func()) error {
	p := newSSEParser(body, t.maxMessage)
	defer p.release()
	p.lastID, p.retry = cur.lastID, cur.retry
	for {
		ev, err := p.next()
		cur.lastID, cur.retry = p.lastID, p.retry
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		switch {
		case ev.tooLarge:
			t.logger.Warn("mcp http message over the size limit discarded; raise max_message_bytes", "limit", t.maxMessage)
			cur.tooLarge = true
		case ev.name == "message" && len(ev.data) > 0:
			var answered *bool
			if onAnswer != nil && !cur.answered {
				answered = &cur.answered
			}
			if !deliverMessages(ctx, t.recvCh, ev.data, answered, onAnswer) {
				return ctx.Err()
			}
			cur.delivered++
		}
	}
}

// read delivers the SSE answer resp to the POSTed message, calling
// answered once the answer is on its way to recv. A stream that breaks
// before the answer is resumed with GET and Last-Event-ID when the server
// gave event ids; failing that, the breakage is logged and a request gets
// an error answer on recv so its caller does not wait for its deadline.
func (a *answerStream) read(resp *http.Response) {
	t, ctx, msg := a.t, a.ctx, a.msg
	var cur streamCursor
	resumeID, attempts := "", 0
	for {
		err := t.pump(ctx, resp.Body, &cur, a.answered)
		resp.Body.Close()
		if cur.answered || ctx.Err() != nil || !isRequest(msg) {
			return
		}
		reason := "the server ended the stream"
		if err != nil {
			reason = err.Error()
		}
		if cur.lastID == "" || cur.tooLarge {
			t.failRequest(ctx, msg, reason, cur)
			return
		}
		if cur.lastID != resumeID {
			resumeID, attempts = cur.lastID, 0
		}
		attempts++
		if attempts > maxResumeAttempts {
			t.failRequest(ctx, msg, reason+" (resumption made no progress)", cur)
			return
		}
		if !sleepContext(ctx, reconnectDelay(cur.retry, attempts)) {
			return
		}
		resp, err = t.openStream(ctx, cur.lastID)
		if ctx.Err() != nil {
			if resp != nil {
				resp.Body.Close()
			}
			return
		}
		if err != nil {
			t.failRequest(ctx, msg, "resume: "+err.Error(), cur)
			return
		}
	}
}

// isInitialize reports whether msg is an initialize request.
func isInitialize(msg []byte) bool {
	var m struct {
		Method string `json:"method"`
	}
	return json.Unmarshal(msg, &m) == nil && m.Method == "initialize"
}

// isRequest reports whether msg is a JSON-RPC request (a method and an id).
func isRequest(msg []byte) bool {
	hasMethod, id := jsonrpcShape(msg)
	return hasMethod && id != nil && !bytes.Equal(id, []byte("null"))
}

// failRequest logs a broken answer stream and delivers an error answer
// with the id of the request msg.
func (t *streamableTransport) failRequest(ctx context.Context, msg []byte, reason string, cur streamCursor) {
	text := "response stream ended before the answer: " + reason
	if cur.tooLarge {
		text = "response larger than max_message_bytes (" + strconv.Itoa(t.maxMessage) + " bytes): raise max_message_bytes for this server"
	}
	t.logger.Warn("mcp http answer stream broke before the answer", "reason", reason, "resumable", cur.lastID != "")
	_, id := jsonrpcShape(msg)
	quoted, _ := json.Marshal(text)
	answer := make([]byte, 0, len(id)+len(quoted)+64)
	answer = append(answer, `{"jsonrpc":"2.0","id":`...)
	answer = append(answer, id...)
	answer = append(answer, `,"error":{"code":`...)
	answer = strconv.AppendInt(answer, brokenStreamCode, 10)
	answer = append(answer, `,"message":`...)
	answer = append(answer, quoted...)
	answer = append(answer, "}}"...)
	deliverMessages(ctx, t.recvCh, answer, nil, nil)
}

// close deletes the session (bounded by 2s, errors logged), stops every
// request and stream, then closes recv. It is idempotent; concurrent calls
// return once the first has finished.
func (t *streamableTransport) close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		t.closed = true
		sessionID, version := t.sessionID, t.protocolVersion
		t.mu.Unlock()
		t.cancel()
		if sessionID != "" {
			t.deleteSession(sessionID, version)
		}
		t.producers.Wait()
		close(t.recvCh)
	})
	return nil
}

// deleteSession asks the server to end the session; it blocks at most
// deleteSessionTimeout.
func (t *streamableTransport) deleteSession(sessionID, version string) {
	ctx, cancel := context.WithTimeout(context.Background(), deleteSessionTimeout)
	defer cancel()
	resp, err := t.auth.do(ctx, t.client, func() (*http.Request, error) {
		return t.newRequest(ctx, http.MethodDelete, sessionID, version, nil)
	})
	if err != nil {
		t.logger.Debug("mcp http delete session failed", "error", httpRequestError("delete session", ctx, ctx, err))
		return
	}
	drainClose(resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotFound {
		t.logger.Debug("mcp http delete session refused", "status", resp.StatusCode)
	}
}
