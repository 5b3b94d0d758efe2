package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// This file holds the event streams of a Streamable HTTP session: each
// POST's answer (answerStream), the GET stream for server-initiated
// messages, and their resumption with Last-Event-ID.

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
// caller. The transport must have admitted msg. It is a value: the
// goroutine that reads an SSE answer takes its own copy (see readToEnd),
// so a call allocates no more than the request it makes.
func (t *streamableTransport) newAnswerStream(caller context.Context, msg []byte) answerStream {
	ctx, cancel := context.WithCancel(t.ctx)
	return answerStream{t: t, msg: msg, ctx: ctx, cancel: cancel, unwatch: context.AfterFunc(caller, cancel)}
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
// hands it to readToEnd), else nil: a JSON answer is already on recv.
func (a *answerStream) post(ctx context.Context, sessionID, version string, initializing bool) (*http.Response, error) {
	t := a.t
	// A request of a current revision carries its own headers, and no
	// session.
	revisionHeader := requestHeader(ctx)
	if revisionHeader != nil {
		sessionID = ""
	}
	resp, err := t.do(ctx, func() (*http.Request, error) {
		req, err := t.newRequest(a.ctx, http.MethodPost, sessionID, version, a.msg)
		if err == nil {
			req.Header[headerAccept] = acceptPost
			req.Header[headerContentType] = contentTypeRPC
			for k, v := range revisionHeader {
				req.Header[k] = v
			}
			injectTraceHeaders(ctx, req.Header)
		}
		return req, err
	})
	if err != nil {
		err = t.requestError("post message", ctx, t.ctx, err)
		if isUnreachable(err) || errors.Is(err, errNeedsAuth) {
			t.fail(err)
		}
		return nil, err
	}
	if revisionHeader == nil {
		t.captureSession(resp)
	}
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
	case revisionHeader != nil && (resp.StatusCode == http.StatusBadRequest || resp.StatusCode == http.StatusNotFound):
		// A server of the current revision answers in JSON-RPC: with an
		// error of its own at 400 (unsupported version, header mismatch,
		// missing capability), with -32601 at 404 for a method it lacks.
		// Anything else is an older server's refusal.
		body, err := readBody(resp, statusBodyLimit*8)
		if err != nil {
			return nil, fmt.Errorf("post message: read answer: %w", err)
		}
		var answer struct {
			Error *rpcError `json:"error"`
		}
		if json.Unmarshal(body, &answer) == nil && answer.Error != nil &&
			(resp.StatusCode == http.StatusBadRequest && isSessionlessError(answer.Error.Code) ||
				resp.StatusCode == http.StatusNotFound && answer.Error.Code == codeMethodNotFound) {
			return nil, answer.Error
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return nil, t.statusError("post message", resp)
	default:
		return nil, t.statusError("post message", resp)
	}
	return nil, nil
}

// readToEnd reads the SSE answer resp and then ends the stream. It runs
// on a goroutine of its own, which owns this copy of the stream.
func (a answerStream) readToEnd(resp *http.Response) {
	defer a.end()
	a.read(resp)
}

// startGetStream (re)starts the GET stream for the current session. The
// channel it returns is closed once the stream's first attempt has an
// outcome (at once when no stream was wanted).
func (t *streamableTransport) startGetStream() <-chan struct{} {
	settled := make(chan struct{})
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || !t.getWanted.Swap(false) {
		close(settled)
		return settled
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
		t.runGetStream(ctx, settled)
	}()
	return settled
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
	resp, err := t.do(ctx, func() (*http.Request, error) {
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
		return nil, t.requestError("get event stream", ctx, t.ctx, err)
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
// done or the server refuses the stream. It blocks until then. settled
// is closed once the first attempt has an outcome.
func (t *streamableTransport) runGetStream(ctx context.Context, settled chan struct{}) {
	var cur streamCursor
	failures := 0
	for first := true; ; first = false {
		resp, err := t.openStream(ctx, cur.lastID)
		if first {
			t.getSettledOnce.Do(func() { close(t.getSettled) })
			close(settled)
		}
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
			t.logger.Warn("mcp http get stream refused; server-initiated messages arrive only with answers", "err", err)
			return
		case isUnreachable(err):
			t.fail(err)
			return
		case err != nil:
			t.logger.Debug("mcp http get stream failed; retrying", "err", err)
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
			t.logger.Debug("mcp http get stream ended; reconnecting", "err", err)
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
		if cur.lastID == "" || cur.tooLarge || t.isSessionless() {
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

// failRequest logs a broken answer stream and delivers an error answer
// with the id of the request msg.
func (t *streamableTransport) failRequest(ctx context.Context, msg []byte, reason string, cur streamCursor) {
	text := brokenStreamPrefix + reason
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

// brokenStreamPrefix starts the message of the answer failRequest makes up.
const brokenStreamPrefix = "response stream ended before the answer: "

// isBrokenStream reports whether e is the answer the transport made up for
// a request whose answer stream broke (not one the server sent).
func isBrokenStream(e *rpcError) bool {
	return e.Code == brokenStreamCode && strings.HasPrefix(e.Message, brokenStreamPrefix)
}
