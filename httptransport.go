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
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the Streamable HTTP transport: sessions, sending a
// message and the answer's status, and re-initialization on 404. The
// answer and GET streams are in httptransport_stream.go.

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
	secrets    *liveRedactor
	maxMessage int
	logger     *slog.Logger
	client     *http.Client
	untrusted  bool       // serverConfig.Untrusted: error bodies are not quoted
	auth       authorizer // nil: no OAuth
}

// An authorizer sends a request with a server's credentials, and renews
// them once when the server asks (oauthClient, in oauth_client.go).
type authorizer interface {
	do(ctx context.Context, c *http.Client, build func() (*http.Request, error)) (*http.Response, error)
}

// do sends the request build returns, through auth when there is one.
func (e httpEndpoint) do(ctx context.Context, build func() (*http.Request, error)) (*http.Response, error) {
	if e.auth != nil {
		return e.auth.do(ctx, e.client, build)
	}
	req, err := build()
	if err != nil {
		return nil, err
	}
	return e.client.Do(req)
}

// newHTTPEndpoint returns the endpoint part of a transport for cfg; its
// redactor hides the server's own secrets and follows parent (the
// daemon's; nil for none).
func newHTTPEndpoint(cfg serverConfig, parent *liveRedactor, logger *slog.Logger) httpEndpoint {
	return httpEndpoint{
		header:     configuredHeader(cfg),
		secrets:    parent.derive(cfg.secretValues()...),
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

	mu sync.Mutex
	// guards closed, endCause, sessionID, expired, protocolVersion and stopGet
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

// getStreamOpenWait bounds how long a new session's first POST after
// initialize waits for its GET stream to open: a server that sends no
// headers until its first event would otherwise hold the handshake.
const getStreamOpenWait = 2 * time.Second

// newStreamableTransport returns a Streamable HTTP transport for cfg.URL.
// It does no I/O: the first send opens the first connection.
func newStreamableTransport(cfg serverConfig, secrets *liveRedactor, logger *slog.Logger) *streamableTransport {
	ctx, cancel := context.WithCancel(context.Background())
	return &streamableTransport{
		httpEndpoint: newHTTPEndpoint(cfg, secrets, logger),
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

// listen relays recv to deliver (see transport).
func (t *streamableTransport) listen(deliver func([]byte), ended func()) {
	relay(t.recv(), deliver, ended)
}

// relay delivers the messages of ch, in order, to deliver from a goroutine
// of its own, then calls ended once ch is closed. The HTTP transports have
// several producers (each answer stream and the GET stream), which their
// channel puts in one order.
func relay(ch <-chan []byte, deliver func([]byte), ended func()) {
	// Owned by the transport; exits when ch is closed, which close does.
	go func() {
		for msg := range ch {
			deliver(msg)
		}
		ended()
	}()
}

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
	// The session's end is logged once, by the conn (a warning once the
	// session had started; before, the start's error says it).
	t.logger.Debug("mcp http server unreachable; ending the session", "err", err)
	// Owned by the transport; ends when close returns (bounded).
	go t.close()
}

// sendsExchanges marks the transport as an exchangeTransport: one POST
// per message.
func (t *streamableTransport) sendsExchanges() {}

// setProtocolVersion records the negotiated version, sent from now on as
// MCP-Protocol-Version ("" forgets it). On an older revision it asks for the GET stream to
// be opened after the next successful POST (a new session gets a new GET
// stream); the current revision has no GET stream, no session and no
// resumption.
func (t *streamableTransport) setProtocolVersion(v string) {
	t.mu.Lock()
	t.protocolVersion = v
	t.mu.Unlock()
	switch {
	case v == "":
		// Forgotten before negotiating again: nothing is settled yet.
	case isSessionlessVersion(v):
		t.getSettledOnce.Do(func() { close(t.getSettled) })
	default:
		t.getWanted.Store(true)
	}
}

// session returns the session id and the negotiated protocol version,
// "" for none.
func (t *streamableTransport) session() (sessionID, version string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sessionID, t.protocolVersion
}

// resumeSession makes a new transport go on with the session another one
// negotiated (see session), as if it had: its requests carry the session
// id and version, and its GET stream opens with the next POST. A server
// that forgot the session answers 404, which send reports as
// errSessionExpired. It is called before the first send.
func (t *streamableTransport) resumeSession(sessionID, version string) {
	t.mu.Lock()
	t.sessionID = sessionID
	t.mu.Unlock()
	if version != "" {
		t.setProtocolVersion(version)
	}
}

// isSessionless reports whether the transport speaks a current revision.
func (t *streamableTransport) isSessionless() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return isSessionlessVersion(t.protocolVersion)
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
	if t.getWanted.Load() && sessionID != "" {
		// The session is new: open its GET stream before this POST (the
		// initialized notification) and let it settle, so that what the
		// server sends on it in answer, or while the next calls run, is
		// not sent while no stream is open, which loses it.
		select {
		case <-t.startGetStream():
		case <-ctx.Done():
		case <-time.After(getStreamOpenWait):
		}
	}
	a := t.newAnswerStream(ctx, msg)
	sse, err := a.post(ctx, sessionID, version, initializing)
	if sse != nil {
		// Owned by the transport; exits when the stream ends (after any
		// resumption), when send's ctx is done before the answer,
		// answerGrace after the answer, or on close.
		go a.readToEnd(sse)
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
	resp, err := t.do(ctx, func() (*http.Request, error) {
		return t.newRequest(ctx, http.MethodDelete, sessionID, version, nil)
	})
	if err != nil {
		t.logger.Debug("mcp http delete session failed", "err", httpRequestError("delete session", ctx, ctx, err))
		return
	}
	drainClose(resp.Body)
	if resp.StatusCode >= 300 && resp.StatusCode != http.StatusMethodNotAllowed && resp.StatusCode != http.StatusNotFound {
		t.logger.Debug("mcp http delete session refused", "status", resp.StatusCode)
	}
}

// requestHeaderKey is the context key of a request's extra HTTP headers.
type requestHeaderKey struct{}

// withRequestHeader returns ctx carrying h for the transport to send with
// the request.
func withRequestHeader(ctx context.Context, h http.Header) context.Context {
	return context.WithValue(ctx, requestHeaderKey{}, h)
}

// requestHeader returns the headers withRequestHeader put in ctx, or nil.
func requestHeader(ctx context.Context) http.Header {
	h, _ := ctx.Value(requestHeaderKey{}).(http.Header)
	return h
}
