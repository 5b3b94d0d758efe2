package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// This file holds "harnessd mcp serve": MCP over stdin and stdout for a
// desktop host, each of the host's messages forwarded to the Streamable
// HTTP endpoint /mcp of a running harnessd through the client's own
// transport (sessions, SSE answers, the GET stream, resumption), and
// every message of the daemon's written back, one a line. What a host can
// act on when forwarding fails is in cmd_mcp_serve_errors.go.

const mcpServeUsage = `Usage: harnessd mcp serve [flags]

Speak MCP on stdin and stdout, one JSON-RPC message a line, for a host
that starts its MCP servers as commands (Claude Desktop, Claude Code,
Codex, VS Code), and forward every message to the /mcp endpoint of a
running harnessd, so its tools and runs reach the host. Requests run
concurrently; the daemon's requests to the host (elicitation) and its
notifications are passed on. When stdin closes, requests still in flight
have --grace to finish, then are cancelled; the session is ended and the
command exits 0. stdout carries only MCP; logs go to stderr.

A host's entry: {"command": "harnessd", "args": ["mcp", "serve"],
"env": {"HARNESS_TOKEN": "..."}}

Environment: HARNESS_ADDR (the daemon's address), HARNESS_TOKEN (the API
key's token, when the daemon has keys).

Flags:
`

const (
	// defaultBridgeGrace is how long requests in flight when stdin closes
	// may still finish: long enough for a script that pipes a few calls
	// and closes stdin, short of the time a host waits before SIGTERM.
	defaultBridgeGrace = 5 * time.Second
	// bridgeSendTimeout bounds the forwarding of one of the host's
	// notifications or answers, which the reader waits for so that they
	// reach the daemon in the host's order.
	bridgeSendTimeout = 30 * time.Second
	// bridgeCancelReason is the reason of the cancellations the bridge
	// sends for the requests still in flight when it stops.
	bridgeCancelReason = "the MCP host closed the connection"
	// stdinBufSize is the size of the stdin reader's buffer.
	stdinBufSize = 64 << 10
)

// mcpServe implements "harnessd mcp serve".
func (a *app) mcpServe(ctx context.Context, args []string) error {
	fs := newFlagSet("mcp serve", a.stderr, mcpServeUsage)
	var (
		addr  string
		grace time.Duration
		logs  commonFlags
	)
	fs.StringVar(&addr, "addr", defaultAddr(a.getenv), "address of the running harnessd, or the URL of its /mcp endpoint (env HARNESS_ADDR)")
	fs.DurationVar(&grace, "grace", defaultBridgeGrace, "how long requests in flight when stdin closes may still finish before they are cancelled")
	logs.registerLogging(fs, "warn")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("mcp serve: unexpected argument %q: it takes flags only (see harnessd mcp serve --help)", fs.Arg(0))
	}
	if grace < 0 {
		return usageError("mcp serve: --grace %s: want a duration of 0 or more", grace)
	}
	logger, err := logs.logger(a.stderr)
	if err != nil {
		return err
	}
	// A host that goes away closes stdout: writing to it must fail with
	// EPIPE, so the bridge cancels its calls and ends its session, rather
	// than kill the process.
	signal.Ignore(syscall.SIGPIPE)
	token, _ := a.getenv("HARNESS_TOKEN")
	b := newStdioBridge(addr, strings.TrimSpace(token), plainWriter(a.stdout), logger)
	return b.serve(ctx, a.stdinOrDefault(), grace)
}

// A stdioBridge forwards MCP between a host on stdin and stdout and the
// /mcp endpoint of a daemon. The host's requests go out concurrently, each
// on a goroutine of its own; its notifications and answers go out in
// order, from the reader. Safe for concurrent use.
type stdioBridge struct {
	base   string       // the daemon's base URL, as messages name it
	token  string       // HARNESS_TOKEN; "" for none
	cfg    serverConfig // the upstream transport's: the endpoint and the Authorization header
	logger *slog.Logger
	out    *lineWriter
	// sends counts the goroutines forwarding requests; relays the
	// transports' relays, which write to out.
	sends, relays sync.WaitGroup

	mu sync.Mutex
	// guards up, calls, closing and idle
	up      *streamableTransport   // nil before the first message
	calls   map[string]*bridgeCall // the host's requests awaiting answers, by callKey
	closing bool                   // shutdown began: nothing more goes out
	idle    chan struct{}          // closed once calls is empty, while awaitCalls waits for it
}

// A bridgeCall is one of the host's requests in flight.
type bridgeCall struct {
	id          json.RawMessage
	t           *streamableTransport // the transport it went out on
	initialize  bool                 // its answer negotiates the protocol version
	sessionless bool                 // of a revision whose requests are cancelled by closing their stream
	cancel      context.CancelFunc   // ends the request's context
}

// newStdioBridge returns a bridge to the daemon at addr (host:port or a
// URL, to which /mcp is added unless it ends with it) writing to out.
func newStdioBridge(addr, token string, out io.Writer, logger *slog.Logger) *stdioBridge {
	base := daemonURL(addr)
	endpoint := base
	if !strings.HasSuffix(endpoint, "/mcp") {
		endpoint += "/mcp"
	}
	cfg := serverConfig{Name: "harnessd", Transport: transportHTTP, URL: endpoint, MaxMessageBytes: defaultMaxMessageBytes, Enabled: true}
	if token != "" {
		cfg.Headers = map[string]string{"Authorization": "Bearer " + token}
	}
	return &stdioBridge{
		base:   base,
		token:  token,
		cfg:    cfg,
		logger: logger,
		out:    newLineWriter(out),
		calls:  map[string]*bridgeCall{},
	}
}

// serve forwards until stdin ends, ctx is done or stdout fails; then it
// stops (see shutdown) and returns nil. Only after stdin ended do the
// requests in flight get grace to finish.
func (b *stdioBridge) serve(ctx context.Context, stdin io.Reader, grace time.Duration) error {
	b.logger.Info("mcp serve: forwarding MCP on stdio", "endpoint", b.cfg.URL, "token", b.token != "")
	read := make(chan error, 1)
	// Ends at the end of stdin (or a read error); when serve returns
	// first, on a signal or a broken stdout, it ends with the process.
	go func() { read <- b.readStdin(stdin) }()
	select {
	case err := <-read:
		if err != nil && !errors.Is(err, io.EOF) {
			b.logger.Warn("mcp serve: reading stdin failed", "err", err)
		}
		b.awaitCalls(ctx, grace)
	case <-ctx.Done():
	case <-b.out.broken:
		b.logger.Warn("mcp serve: writing stdout failed; stopping", "err", b.out.failure())
	}
	b.shutdown()
	return nil
}

// readStdin handles every line of stdin, in order, and returns the error
// that ended it (io.EOF at its end).
func (b *stdioBridge) readStdin(stdin io.Reader) error {
	framer := newLineFramer(stdin, stdinBufSize, b.cfg.MaxMessageBytes)
	for {
		fr, err := framer.next()
		if err != nil {
			return err
		}
		b.handle(fr)
	}
}

// A hostMessage is what the bridge reads of one of the host's messages.
type hostMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// hostParams are the params the bridge reads: the revision a request of
// the current revision names, the tool, prompt or resource it names, and
// the request a cancellation names.
type hostParams struct {
	Meta struct {
		ProtocolVersion string `json:"io.modelcontextprotocol/protocolVersion"`
	} `json:"_meta"`
	Name      string          `json:"name"`
	URI       string          `json:"uri"`
	RequestID json.RawMessage `json:"requestId"`
}

// handle forwards one line of the host's, or answers it with an error
// when it is not one JSON-RPC message.
func (b *stdioBridge) handle(fr frame) {
	if fr.rejected {
		b.refuseOversized(fr)
		return
	}
	line := bytes.TrimSpace(fr.line)
	if len(line) == 0 {
		return
	}
	if !json.Valid(line) {
		b.logger.Warn("mcp serve: stdin line is not JSON; answered with a parse error", "bytes", len(line))
		b.reply(nil, &rpcError{Code: codeParseError, Message: "parse error: the line is not JSON: send one JSON-RPC message a line"})
		return
	}
	var m hostMessage
	if line[0] != '{' || json.Unmarshal(line, &m) != nil || (m.Method == "" && len(m.ID) == 0) {
		what := "not a JSON-RPC message (an object with a method or an id)"
		if line[0] == '[' {
			what = "a batch: send one JSON-RPC message a line"
		}
		b.reply(nil, &rpcError{Code: codeInvalidRequest, Message: "invalid request: " + what})
		return
	}
	msg := bytes.Clone(line) // the framer reuses its buffer
	var p hostParams
	json.Unmarshal(m.Params, &p) // lenient: params the bridge cannot read are passed on as they are
	if isRequest(msg) {
		b.startCall(m, p, msg)
		return
	}
	b.pass(m, p, msg)
}

// refuseOversized answers a line over the size limit with an error, when
// its id can be found.
func (b *stdioBridge) refuseOversized(fr frame) {
	b.logger.Warn("mcp serve: stdin line over the size limit discarded", "bytes", fr.size, "limit", b.cfg.MaxMessageBytes)
	m := idPattern.FindSubmatch(fr.head)
	if m == nil {
		return
	}
	b.reply(m[1], &rpcError{Code: codeInvalidRequest, Message: fmt.Sprintf("request too large: over %d bytes", b.cfg.MaxMessageBytes)})
}

// startCall forwards a request on a goroutine of its own; its answer comes
// through deliver, or, if it cannot be forwarded, an error answer here.
func (b *stdioBridge) startCall(m hostMessage, p hostParams, msg []byte) {
	t := b.upstream()
	if t == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	call := &bridgeCall{id: m.ID, t: t, initialize: m.Method == "initialize", sessionless: isSessionlessVersion(p.Meta.ProtocolVersion), cancel: cancel}
	key := callKey(m.ID)
	b.mu.Lock()
	if b.closing {
		b.mu.Unlock()
		cancel()
		return
	}
	if old := b.calls[key]; old != nil {
		b.logger.Warn("mcp serve: the host reused the id of a request in flight", "id", key)
	}
	b.calls[key] = call
	b.sends.Add(1)
	b.mu.Unlock()
	// Owned by the bridge; ends when the request is answered, cancelled,
	// or refused (shutdown waits for it).
	go func() {
		defer b.sends.Done()
		err := t.send(withRequestHeader(ctx, hostRevisionHeader(m, p)), msg)
		if err == nil || !b.endCall(key, call) {
			return
		}
		rpcErr := b.failure(err, t)
		b.logger.Warn("mcp serve: request not forwarded", "method", m.Method, "err", rpcErr.Message)
		b.reply(m.ID, rpcErr)
	}()
}

// pass forwards one of the host's notifications or answers and waits for
// the daemon to take it, so they arrive in order. A cancellation of a
// request in flight also ends the request's context: on a current
// revision closing the stream is the cancellation, so it is not sent.
func (b *stdioBridge) pass(m hostMessage, p hostParams, msg []byte) {
	if m.Method == "notifications/cancelled" && len(p.RequestID) > 0 {
		if call := b.takeCall(callKey(p.RequestID)); call != nil {
			defer call.cancel()
			if call.sessionless {
				return
			}
		}
	}
	t := b.upstream()
	if t == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), bridgeSendTimeout)
	defer cancel()
	if err := t.send(withRequestHeader(ctx, hostRevisionHeader(m, p)), msg); err != nil {
		b.logger.Warn("mcp serve: message not forwarded", "method", m.Method, "err", b.failure(err, t).Message)
	}
}

// hostRevisionHeader returns the HTTP headers of a message of the current
// revision (its _meta names one), as the client sends them: the version,
// Mcp-Method and Mcp-Name. nil for a message of an older revision, which
// goes out in the session.
func hostRevisionHeader(m hostMessage, p hostParams) map[string][]string {
	if !isSessionlessVersion(p.Meta.ProtocolVersion) {
		return nil
	}
	name := p.Name
	if m.Method == "resources/read" {
		name = p.URI
	}
	return (&requestMeta{version: p.Meta.ProtocolVersion}).header(rpcRequest{method: m.Method, name: name})
}

// upstream returns the transport to the daemon: the current one, or a new
// one when there is none yet or the daemon could not be reached (the
// session, if any, goes on in the new one). nil once shutdown began.
func (b *stdioBridge) upstream() *streamableTransport {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closing {
		return nil
	}
	if b.up != nil && b.up.endErr() == nil {
		return b.up
	}
	t := newStreamableTransport(b.cfg, nil, b.logger)
	if b.up != nil {
		t.resumeSession(b.up.session())
	}
	b.up = t
	b.relays.Add(1)
	t.listen(b.deliver, b.relays.Done)
	return t
}

// deliver writes one message of the daemon's to stdout. An answer ends
// its call; the answer to initialize first gives the transport the
// negotiated version, before the host can send anything in the session.
// What is not a JSON-RPC message is dropped, so stdout carries only MCP.
func (b *stdioBridge) deliver(msg []byte) {
	hasMethod, id := jsonrpcShape(msg)
	if !hasMethod && id == nil {
		b.logger.Warn("mcp serve: dropped a message from harnessd that is not JSON-RPC", "bytes", len(msg))
		return
	}
	if !hasMethod {
		if call := b.takeCall(callKey(id)); call != nil {
			if call.initialize {
				var answer struct {
					Result struct {
						ProtocolVersion string `json:"protocolVersion"`
					} `json:"result"`
				}
				if json.Unmarshal(msg, &answer) == nil && answer.Result.ProtocolVersion != "" {
					call.t.setProtocolVersion(answer.Result.ProtocolVersion)
				}
			}
			call.cancel() // the transport reads the rest of the stream on its own
		}
	}
	b.out.write(msg)
}

// reply writes an error answer to the host's request id (null when the
// request could not be read).
func (b *stdioBridge) reply(id json.RawMessage, e *rpcError) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	msg, err := json.Marshal(wireMessage{JSONRPC: "2.0", ID: id, Error: e})
	if err != nil {
		b.logger.Error("mcp serve: encode an error answer", "err", err)
		return
	}
	b.out.write(msg)
}

// callKey returns the key of a request id in calls: its compact text.
func callKey(id json.RawMessage) string {
	var buf bytes.Buffer
	if json.Compact(&buf, id) != nil {
		return string(id)
	}
	return buf.String()
}

// takeCall removes the call with key from calls and returns it; nil if
// none is in flight.
func (b *stdioBridge) takeCall(key string) *bridgeCall {
	b.mu.Lock()
	defer b.mu.Unlock()
	call := b.calls[key]
	if call != nil {
		b.removeLocked(key)
	}
	return call
}

// endCall removes call, if it is still in flight under key, and cancels
// its context. It reports whether it was in flight.
func (b *stdioBridge) endCall(key string, call *bridgeCall) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	call.cancel()
	if b.calls[key] != call {
		return false
	}
	b.removeLocked(key)
	return true
}

// removeLocked removes the call with key, signalling idle when none is
// left. b.mu is held.
func (b *stdioBridge) removeLocked(key string) {
	delete(b.calls, key)
	if len(b.calls) == 0 && b.idle != nil {
		close(b.idle)
		b.idle = nil
	}
}

// awaitCalls waits until no request is in flight, for at most grace, or
// until ctx is done or stdout fails.
func (b *stdioBridge) awaitCalls(ctx context.Context, grace time.Duration) {
	b.mu.Lock()
	if len(b.calls) == 0 || grace == 0 {
		b.mu.Unlock()
		return
	}
	idle := make(chan struct{})
	b.idle = idle
	b.mu.Unlock()
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-idle:
	case <-timer.C:
		b.logger.Info("mcp serve: requests still in flight after --grace; cancelling them", "grace", grace)
	case <-ctx.Done():
	case <-b.out.broken:
	}
}

// shutdown stops forwarding, cancels the requests still in flight (on the
// daemon too), ends the session and waits until every goroutine of the
// bridge has ended. It is called once.
func (b *stdioBridge) shutdown() {
	b.mu.Lock()
	b.closing = true
	calls := b.calls
	b.calls = map[string]*bridgeCall{}
	t := b.up
	b.mu.Unlock()
	for _, call := range calls {
		b.cancelUpstream(call)
	}
	b.sends.Wait()
	if t != nil {
		t.close() // deletes the session, bounded
	}
	b.relays.Wait()
}

// cancelUpstream tells the daemon the host gave up call (on an older
// revision with notifications/cancelled; on the current one, closing the
// request's stream does) and ends the call's context.
func (b *stdioBridge) cancelUpstream(call *bridgeCall) {
	defer call.cancel()
	if call.sessionless || call.t.endErr() != nil {
		return
	}
	params, _ := json.Marshal(map[string]any{"requestId": call.id, "reason": bridgeCancelReason})
	msg, _ := json.Marshal(wireMessage{JSONRPC: "2.0", Method: "notifications/cancelled", Params: params})
	ctx, cancel := context.WithTimeout(context.Background(), deleteSessionTimeout)
	defer cancel()
	if err := call.t.send(ctx, msg); err != nil {
		b.logger.Debug("mcp serve: cancellation not forwarded", "id", callKey(call.id), "err", err)
	}
}

// A lineWriter writes JSON-RPC messages to the host, one a line, whole
// (a message spread over lines by the daemon is compacted). Once a write
// fails it writes nothing more and broken is closed. Safe for concurrent
// use.
type lineWriter struct {
	broken chan struct{}

	mu sync.Mutex
	// guards w, buf and err
	w   io.Writer
	buf bytes.Buffer
	err error
}

// newLineWriter returns a lineWriter of w.
func newLineWriter(w io.Writer) *lineWriter {
	return &lineWriter{w: w, broken: make(chan struct{})}
}

// write writes msg, which must be valid JSON, and a newline in one Write.
func (o *lineWriter) write(msg []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return
	}
	o.buf.Reset()
	if bytes.ContainsAny(msg, "\r\n") {
		json.Compact(&o.buf, msg)
	} else {
		o.buf.Write(msg)
	}
	o.buf.WriteByte('\n')
	if _, err := o.w.Write(o.buf.Bytes()); err != nil {
		o.err = err
		close(o.broken)
	}
}

// failure returns the error that broke the writer, or nil.
func (o *lineWriter) failure() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}
