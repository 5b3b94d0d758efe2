package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// This file holds the transport an MCP session runs on and the session's
// options, and the JSON-RPC multiplexer under the session: request
// ids and pending calls, deadlines and cancellation, the routing of what
// the transport receives (notifications and server requests are
// client_incoming.go's).

// An mcpTransport carries JSON-RPC messages between the client and one
// server. Implementations: stdioTransport (stdio.go), streamableTransport
// and sseTransport (httptransport.go).
type mcpTransport interface {
	// send delivers one JSON-RPC message. It blocks at most until ctx is
	// done; a request's answer arrives on recv, never as send's result.
	// For HTTP, ctx also bounds the reading of the response stream, so the
	// caller cancels it once the answer has arrived or the call is over.
	send(ctx context.Context, msg []byte) error
	// listen starts the delivery of every message the server sends, in
	// order, to deliver, called from one goroutine at a time; once the
	// transport has ended, ended is called once, after the last deliver,
	// and endErr then says why. deliver runs on the goroutine that reads
	// the server and must not block for long. listen is called once, before
	// close.
	listen(deliver func(msg []byte), ended func())
	// endErr returns why the transport ended (nil while it runs, or after a
	// clean close). For stdio it includes the exit status and stderr tail.
	endErr() error
	// close ends the transport. It is bounded in time and idempotent.
	close() error
}

// protocolVersionAware is implemented by transports that must learn the
// negotiated protocol version (Streamable HTTP sends it as a header).
type protocolVersionAware interface {
	setProtocolVersion(v string)
}

// An exchangeTransport sends each message as its own HTTP exchange
// (Streamable HTTP): a request carries the headers withRequestHeader puts
// on its context, and on a current revision ending the exchange cancels
// the request.
type exchangeTransport interface {
	mcpTransport
	sendsExchanges()
}

// clientOptions are what a session needs beyond the server's config.
type clientOptions struct {
	// Logger receives the session's logs; nil discards them.
	Logger *slog.Logger
	// Getenv reads harnessd's environment for the stdio child's minimal
	// environment; nil means os.LookupEnv.
	Getenv func(string) (string, bool)
	// OnToolsChanged is called, from the transport's reader, when the
	// server sends notifications/tools/list_changed. It must not block.
	OnToolsChanged func()
	// Capabilities are declared in initialize besides roots; nil for none.
	Capabilities map[string]any
	// Input answers elicitation and sampling for requests that come while
	// no run's call is in flight; nil declines and refuses (noAnswerer).
	Input inputAnswerer
	// HandleRequest answers server requests other than ping and roots/list;
	// it returns handled false for methods it does not know (-32601).
	// Nil answers every such request with -32601.
	HandleRequest func(method string, params json.RawMessage) (result any, rpcErr *rpcError, handled bool)
	// ProcessGroups records the process groups of stdio servers, so that a
	// later instance stops what a crash left; nil records nothing.
	ProcessGroups *procGroups
	// OAuth authorizes Streamable HTTP servers that ask for it; nil sends
	// only the configured headers.
	OAuth *oauthClients
	// Secrets is the daemon's live redactor: every session cuts what it
	// logs and quotes with it (plus its own server's values), and the
	// credentials obtained at run time join it (liveRedactor.add). Nil in
	// newRegistry becomes a root holding the global servers' values.
	Secrets *liveRedactor
	// Cache keeps the list and read results servers mark cacheable
	// (client_cache.go), shared by every session; nil caches nothing.
	Cache *responseCache
	// LogPayloads adds each message to the debug trace (client_trace.go).
	LogPayloads bool
	// Tracer traces the session's requests (client_telemetry.go) that no
	// traced operation makes; nil traces only those that one makes.
	Tracer *tracer
	// DiscoverTimeout bounds the server/discover probe of a stdio server;
	// zero means defaultDiscoverTimeout.
	DiscoverTimeout time.Duration
	// StopGrace is each step of a stdio server's stop ladder; zero means
	// stopGrace (tests shorten it).
	StopGrace time.Duration
	// ListenBackoffMin is the first delay before an ended subscription is
	// opened again; zero means listenBackoffMin (tests shorten it).
	ListenBackoffMin time.Duration
}

// A conn multiplexes JSON-RPC calls over one transport: each request gets
// an id and waits for the response with that id, which receive routes to
// it from the transport's reader. It is safe for concurrent use. It ends with close, or when its
// transport ends: ended is then closed and every pending and later call
// fails with endErr.
type conn struct {
	cfg    serverConfig
	opts   clientOptions
	logger *slog.Logger
	t      mcpTransport
	// secrets are the server's env and header values, redacted from what
	// it logs through notifications/message.
	secrets *liveRedactor
	// drops throttles the log line of dropped server requests.
	drops  logThrottle
	nextID atomic.Int64

	mu sync.Mutex
	// guards pending
	pending map[int64]*pendingCall

	// answering bounds the server requests being answered at once.
	answering chan struct{}

	ended    chan struct{} // closed when the transport has ended (transportEnded)
	endCause error         // why the transport ended; set before ended is closed
	closing  atomic.Bool   // set by close before the transport closes
	// started is set once the handshake succeeded: a transport that ends
	// before fails the start, whose error says why (not a log line too).
	started   atomic.Bool
	closeErr  error // the transport's close error; set under closeOnce
	closeOnce sync.Once
	// callers are the runs with calls in flight, for server requests.
	callers inputCallers
	// trace logs every message at debug level (client_trace.go); nil when off.
	trace *mcpTrace
	// meta is what every request carries on a current revision (see
	// client_revision.go); nil on the older ones.
	meta atomic.Pointer[requestMeta]
	// version is the session's protocol version (a string), for the
	// requests' spans (client_telemetry.go); unset before the handshake.
	version atomic.Value
	// roots, once set by setRoots, replace cfg.Roots (nil inside: none).
	roots atomic.Pointer[[]string]
	// rootsAsked and rootsAnswered are when the server last asked for
	// roots/list (marked by the reader as the request comes) and when it
	// was last answered (Unix nanoseconds; 0 never), for settleRoots
	// (client_roots.go).
	rootsAsked, rootsAnswered atomic.Int64
}

// newConn wraps a started transport and listens to it.
func newConn(cfg serverConfig, opts clientOptions, logger *slog.Logger, t mcpTransport) *conn {
	c := &conn{
		cfg:     cfg,
		opts:    opts,
		logger:  logger,
		t:       t,
		pending: make(map[int64]*pendingCall),
		secrets: opts.Secrets.derive(cfg.secretValues()...),
		ended:   make(chan struct{}),
		// ping and roots/list answer at once: 16 in flight is a flood.
		answering: make(chan struct{}, 16),
		trace:     newMCPTrace(logger, opts.LogPayloads),
	}
	c.t.listen(c.receive, c.transportEnded)
	return c
}

// A pendingCall is a request awaiting its response.
type pendingCall struct {
	ch chan rpcResponse // buffered 1; receives the response once
	// timeout is the call's timeout; the call's timer cancels it with
	// errTimeout once its deadline passes (armDeadline, expire).
	timeout time.Duration
	cancel  context.CancelCauseFunc

	mu sync.Mutex
	// guards deadline and timer
	deadline time.Time // zero for none
	timer    *time.Timer
	// limit is how far progress may push the deadline out (extend); zero
	// when progress does not: the handshake, a long-lived call.
	limit time.Time
	// held counts the server's requests for input being answered while
	// the call waits; its deadline does not run out while held.
	held atomic.Int32
	// progress hears the call's progress notifications (withCallProgress);
	// nil for none.
	progress func(progressParams)
}

// extends reports whether progress pushes the call's deadline out. limit
// is set before the call is pending, so whoever finds it there may read it.
func (pc *pendingCall) extends() bool { return !pc.limit.IsZero() }

// extend pushes the call's deadline out on progress: a timeout from now,
// up to limit. It does nothing when the call's deadline does not extend,
// or has run out. The deadline only moves later, so the timer is left
// as it is: when it fires early, expire arms it again for the rest.
func (pc *pendingCall) extend() {
	if !pc.extends() {
		return
	}
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.deadline.IsZero() {
		return
	}
	next := time.Now().Add(pc.timeout)
	if next.After(pc.limit) {
		next = pc.limit
	}
	if next.After(pc.deadline) {
		pc.deadline = next
	}
}

// expire runs when the call's timer fires: it cancels the call with
// errTimeout once its deadline has passed, unless the server waits on an
// answer for input, and so does the call: its deadline is then a timeout
// from now. A deadline that progress pushed out arms the timer again.
func (pc *pendingCall) expire() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if pc.deadline.IsZero() {
		return // stopped meanwhile
	}
	now := time.Now()
	switch {
	case now.Before(pc.deadline):
		pc.timer.Reset(pc.deadline.Sub(now))
	case pc.held.Load() > 0:
		pc.deadline = now.Add(pc.timeout)
		pc.timer.Reset(pc.timeout)
	default:
		pc.deadline = time.Time{}
		pc.cancel(errTimeout)
	}
}

// stopDeadline disarms the call's timer once the call is over.
func (pc *pendingCall) stopDeadline() {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.deadline = time.Time{}
	if pc.timer != nil {
		pc.timer.Stop()
	}
}

// callProgressKey is the context key of withCallProgress.
type callProgressKey struct{}

// withCallProgress returns ctx carrying f: the progress notifications of
// a call made under it are passed to f, from the connection's reader (f
// must not block).
func withCallProgress(ctx context.Context, f func(progressParams)) context.Context {
	return context.WithValue(ctx, callProgressKey{}, f)
}

// An rpcRequest is one JSON-RPC call as roundTrip sends it.
type rpcRequest struct {
	method string
	params any
	// withProgress, when set, returns the params carrying token as
	// _meta.progressToken, asking the server for progress notifications;
	// roundTrip calls it with the request id and ignores params.
	withProgress func(token int64) any
	// handshake marks initialize and server/discover: it is never
	// cancelled (the protocol forbids it for initialize) and progress does
	// not push its deadline out.
	handshake bool
	// name is the tool or prompt name or the resource URI the request is
	// about: Mcp-Name on a current revision over HTTP.
	name string
	// header holds the request's Mcp-Param-* headers; nil for none.
	header http.Header
	// version, when set, sends the request at that current revision
	// whatever the session's: the probe does.
	version string
	// longLived marks a subscription (client_subscribe.go): it has no deadline
	// and lasts until ctx ends.
	longLived bool
}

// roundTrip sends one request and waits for its response, bounded by ctx
// and the server's timeout (startup_timeout for the handshake; pushed out
// by progress notifications, up to 10× the timeout, except for the
// handshake), and returns the raw result
// (empty when the response had none). On expiry or cancellation it sends
// notifications/cancelled, except for the handshake.
func (c *conn) roundTrip(ctx context.Context, req rpcRequest) (raw json.RawMessage, err error) {
	select {
	case <-c.ended:
		return nil, c.endErr()
	default:
	}
	ctx, sp := c.startMCPSpan(ctx, req)
	call, err := c.newCall(ctx, req)
	if err != nil {
		endMCPSpan(sp, req, 0, nil, err)
		return nil, err
	}
	defer func() { endMCPSpan(sp, req, call.id, raw, err) }()
	defer call.end()
	if err := c.send(call.ctx, call.msg); err != nil {
		return nil, c.sendFailed(call, err)
	}
	return c.await(call)
}

// An outgoingCall is one request of roundTrip from its send to its
// answer.
type outgoingCall struct {
	c   *conn
	req rpcRequest
	id  int64
	msg []byte
	// parent is the caller's context (with the request's headers); ctx
	// ends with it, or with errTimeout as its cause when the call's
	// deadline runs out.
	parent, ctx context.Context
	cancel      context.CancelCauseFunc
	// notifyCancel says whether abandoning the call is told to the server
	// with notifications/cancelled.
	notifyCancel bool
	pending      pendingCall
}

// newCall encodes req under a new id, arms its deadline and records it
// as pending. The caller calls end once the call is over.
func (c *conn) newCall(ctx context.Context, req rpcRequest) (*outgoingCall, error) {
	call := &outgoingCall{c: c, req: req, id: c.nextID.Add(1)}
	call.pending.ch = make(chan rpcResponse, 1)
	call.pending.timeout = c.callTimeout(req)
	call.pending.progress, _ = ctx.Value(callProgressKey{}).(func(progressParams))
	if err := call.encode(ctx); err != nil {
		return nil, err
	}
	call.ctx, call.cancel = context.WithCancelCause(call.parent)
	call.pending.cancel = call.cancel
	call.armDeadline()
	c.mu.Lock()
	c.pending[call.id] = &call.pending
	c.mu.Unlock()
	return call, nil
}

// callTimeout returns the timeout of req. The handshake is part of the
// server's start: startup_timeout bounds it, so a server that starts
// slowly but answers calls fast can have a short request timeout.
func (c *conn) callTimeout(req rpcRequest) time.Duration {
	if req.handshake {
		return c.cfg.startupTimeout()
	}
	return c.cfg.requestTimeout()
}

// encode sets the call's message: req's params with the progress token
// asked for, the request's _meta on a current revision, and ctx's trace
// context in _meta when it has one; over a
// transport of HTTP exchanges the request's headers ride on the call's
// parent context. It also decides notifyCancel: never for the handshake,
// and not on a current revision over HTTP, where closing the answer
// stream cancels.
func (call *outgoingCall) encode(ctx context.Context) error {
	c, req := call.c, call.req
	_, overHTTP := c.t.(exchangeTransport)
	meta := c.meta.Load()
	if req.version != "" {
		meta = c.newRequestMeta(req.version)
	}
	if meta != nil && overHTTP {
		ctx = withRequestHeader(ctx, meta.header(req))
	}
	msg, err := encodeParams(req, call.id, meta.withTraceContext(ctx))
	if err != nil {
		return fmt.Errorf("encode request: %w", err)
	}
	call.parent, call.msg = ctx, msg
	call.notifyCancel = !req.handshake && !(meta != nil && overHTTP)
	return nil
}

// encodeParams returns the wire form of req with id: its params (with the
// progress token asked for) encoded by encoding/json, and meta's fields
// added to them unless meta is nil.
func encodeParams(req rpcRequest, id int64, meta *requestMeta) ([]byte, error) {
	params := req.params
	if req.withProgress != nil {
		params = req.withProgress(id)
	}
	var raw json.RawMessage
	var err error
	switch {
	case meta != nil:
		raw, err = meta.attach(params)
	case params != nil:
		raw, err = marshalJSON(params)
	}
	if err != nil {
		return nil, err
	}
	return encodeRequest(id, req.method, raw)
}

// armDeadline starts the call's timer, which cancels it with errTimeout
// once the timeout passes (expire), but waits again while the server waits
// on an answer for input; progress pushes the deadline out, up to 10× the
// timeout from now (not for the handshake nor a long-lived call). A
// long-lived call gets no deadline, nor does a handshake that its context
// (connect's startup_timeout) already bounds as tightly: a second deadline
// of the same length would race it and name the wrong setting.
func (call *outgoingCall) armDeadline() {
	pc, req := &call.pending, call.req
	if deadline, ok := call.parent.Deadline(); req.longLived || req.handshake && ok && time.Until(deadline) <= pc.timeout {
		return
	}
	now := time.Now()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	pc.deadline = now.Add(pc.timeout)
	if !req.handshake {
		pc.limit = now.Add(10 * pc.timeout)
	}
	pc.timer = time.AfterFunc(pc.timeout, pc.expire)
}

// end forgets the pending call: its deadline goes with it.
func (call *outgoingCall) end() {
	call.c.mu.Lock()
	delete(call.c.pending, call.id)
	call.c.mu.Unlock()
	call.pending.stopDeadline()
	call.cancel(nil)
}

// sendFailed returns the error of a call whose request could not be sent:
// its timeout, or the reason the server went away, or err.
func (c *conn) sendFailed(call *outgoingCall, err error) error {
	// Over HTTP the request may have reached the server, which answers
	// only when done (a JSON response): tell it to stop.
	cause := context.Cause(call.ctx)
	if cause != nil && call.notifyCancel {
		c.sendCancelled(call.id, cause)
	}
	if errors.Is(cause, errTimeout) {
		return timeoutError(call.req, call.pending.timeout)
	}
	if errors.Is(err, errTransportClosed) && !c.closing.Load() {
		// The server went away under the call: its reason (exit status,
		// stderr tail) is known once the transport has ended.
		timer := time.NewTimer(stopGrace)
		defer timer.Stop()
		select {
		case <-c.ended:
			return c.endErr()
		case <-timer.C:
		}
	}
	return err
}

// await waits for the call's answer, its timeout or cancellation (told
// to the server when notifyCancel), or the end of the session.
func (c *conn) await(call *outgoingCall) (json.RawMessage, error) {
	select {
	case resp := <-call.pending.ch:
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-call.ctx.Done():
		cause := context.Cause(call.ctx)
		if call.notifyCancel {
			c.sendCancelled(call.id, cause)
		}
		if errors.Is(cause, errTimeout) {
			return nil, timeoutError(call.req, call.pending.timeout)
		}
		return nil, call.parent.Err()
	case <-c.ended:
		return nil, c.endErr()
	}
}

// timeoutError is the error of a request the server did not answer in
// time, naming the setting that bounds it.
func timeoutError(req rpcRequest, timeout time.Duration) error {
	if req.handshake {
		return fmt.Errorf("no answer within startup_timeout %s (raise the server's startup_timeout if it needs longer): %w", timeout, errTimeout)
	}
	return fmt.Errorf("no answer within timeout %s (raise the server's timeout if it needs longer): %w", timeout, errTimeout)
}

// sendCancelled tells the server a request is abandoned. It never blocks
// the caller for long: the send is bounded by two seconds.
func (c *conn) sendCancelled(id int64, cause error) {
	reason := "request cancelled"
	if errors.Is(cause, errTimeout) {
		reason = "request timed out"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.notify(ctx, "notifications/cancelled", map[string]any{"requestId": id, "reason": reason}); err != nil {
		c.logger.Debug("send notifications/cancelled failed", "id", id, "err", err)
	}
}

// notify sends a notification.
func (c *conn) notify(ctx context.Context, method string, params any) error {
	msg, err := marshalJSON(outgoingRequest{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return err
	}
	return c.send(ctx, msg)
}

// untilEnded returns a copy of ctx that is also cancelled when the session
// ends. The caller must call cancel once done with it.
func (c *conn) untilEnded(ctx context.Context) (_ context.Context, cancel context.CancelFunc) {
	ctx, cancel = context.WithCancel(ctx)
	go func() {
		// Owned by untilEnded's caller; ends when the session ends or the
		// caller cancels.
		select {
		case <-c.ended:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// endErr returns why the session ended, for the calls it fails, or nil
// while it runs: errClientClosed after close, else the transport's cause.
func (c *conn) endErr() error {
	select {
	case <-c.ended:
	default:
		return nil
	}
	if c.closing.Load() {
		return errClientClosed
	}
	if c.endCause != nil {
		return fmt.Errorf("connection lost: %w", c.endCause)
	}
	return fmt.Errorf("connection lost: %w", errClientClosed)
}

// receive handles one message from the transport, on its reader: an
// answer goes straight to the call waiting for it.
func (c *conn) receive(raw []byte) {
	c.trace.message(false, raw)
	c.dispatch(raw)
}

// transportEnded records why the transport ended and ends the conn: every
// pending and later call fails with endErr.
func (c *conn) transportEnded() {
	c.endCause = c.t.endErr()
	if c.endCause != nil && !c.closing.Load() {
		level := slog.LevelDebug
		if c.started.Load() {
			level = slog.LevelWarn
		}
		c.logger.Log(context.Background(), level, "server connection lost", "err", c.endCause)
	}
	close(c.ended)
}

// dispatch routes one message: a message with a method is a server request
// or notification, never a response, whatever its id.
func (c *conn) dispatch(raw []byte) {
	var msg wireMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		c.logger.Warn("ignoring malformed message from server", "err", err, "message", c.secrets.load().cut(string(raw), 200))
		return
	}
	switch {
	case msg.Method != "" && len(msg.ID) > 0 && string(msg.ID) != "null":
		if msg.Method == "roots/list" {
			c.rootsAsked.Store(time.Now().UnixNano())
		}
		select {
		case c.answering <- struct{}{}:
			// Owned by the conn; ends when the answer is sent or the
			// session ends.
			go func() {
				defer func() { <-c.answering }()
				c.answerServerRequest(msg)
			}()
		default:
			// A server that floods requests without reading the answers
			// gets no more goroutines: it times the request out itself.
			if ok, held := c.drops.allow(); ok {
				c.logger.Warn("dropping server request: too many unanswered", "method", msg.Method, "limit", cap(c.answering), "held_back", held)
			}
		}
	case msg.Method != "":
		c.handleNotification(msg)
	case len(msg.ID) > 0:
		c.deliverResponse(msg.ID, rpcResponse{Result: msg.Result, Error: msg.Error})
	default:
		c.logger.Warn("ignoring message that is neither request, notification nor response", "message", c.secrets.load().cut(string(raw), 200))
	}
}

// deliverResponse hands a response to the call waiting for its id; a
// response to no pending call is logged and dropped.
func (c *conn) deliverResponse(rawID json.RawMessage, resp rpcResponse) {
	id, ok := parseID(rawID)
	if !ok {
		c.logger.Warn("ignoring response with unknown id", "id", string(rawID))
		return
	}
	c.mu.Lock()
	pc := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if pc == nil {
		c.logger.Debug("ignoring response to no pending request", "id", id)
		return
	}
	pc.ch <- resp
}

// close ends the conn: the transport is closed (bounded, see the
// transport's close) and every pending call fails. It is idempotent and
// safe to call concurrently; it returns once transportEnded has run.
func (c *conn) close() error {
	c.closeOnce.Do(func() {
		c.closing.Store(true)
		c.closeErr = c.t.close()
	})
	<-c.ended // the transport's close is bounded and calls transportEnded
	return c.closeErr
}
