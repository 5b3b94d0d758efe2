package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"time"
)

// This file holds the JSON-RPC multiplexer of a client: request ids and
// pending calls, deadlines and cancellation, the read loop, notifications,
// and answers to server requests.

// A pendingCall is a request awaiting its response.
type pendingCall struct {
	ch chan rpcResponse // buffered 1; receives the response once
	// extend pushes the call's deadline out on progress; nil when the
	// call has no deadline.
	extend func()
}

// progressParams is implemented by params that carry a progress token.
type progressParams interface {
	withProgressToken(id int64) any
}

// roundTrip sends one request and waits for its response, bounded by ctx
// and the server's timeout (pushed out by progress notifications, up to 10×
// the timeout), and returns the raw result (empty when the response had
// none). On expiry or cancellation it sends notifications/cancelled (except
// for initialize, which must not be cancelled).
func (c *client) roundTrip(ctx context.Context, method string, params any, cancellable bool) (json.RawMessage, error) {
	select {
	case <-c.done:
		return nil, c.lostErr()
	default:
	}
	id := c.nextID.Add(1)
	if p, ok := params.(progressParams); ok {
		params = p.withProgressToken(id)
	}
	msg, err := json.Marshal(outgoingRequest{JSONRPC: "2.0", ID: &id, Method: method, Params: params})
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}

	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timeout := c.cfg.requestTimeout()
	pc := &pendingCall{ch: make(chan rpcResponse, 1)}
	timer := time.AfterFunc(timeout, func() { cancel(errTimeout) })
	defer timer.Stop()
	if cancellable {
		limit := time.Now().Add(10 * timeout)
		pc.extend = func() {
			next := timeout
			if remaining := time.Until(limit); remaining < next {
				next = remaining
			}
			if next > 0 {
				timer.Reset(next)
			}
		}
	}

	c.mu.Lock()
	c.pending[id] = pc
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
	}()

	if err := c.t.send(callCtx, msg); err != nil {
		// Over HTTP the request may have reached the server, which answers
		// only when done (a JSON response): tell it to stop.
		cause := context.Cause(callCtx)
		if cause != nil && cancellable {
			c.sendCancelled(id, cause)
		}
		if errors.Is(cause, errTimeout) {
			return nil, timeoutError(timeout)
		}
		if errors.Is(err, errTransportClosed) && !c.closing.Load() {
			// The server went away under the call: its reason (exit status,
			// stderr tail) is known once the read loop has drained.
			timer := time.NewTimer(stopGrace)
			defer timer.Stop()
			select {
			case <-c.done:
				return nil, c.lostErr()
			case <-timer.C:
			}
		}
		return nil, err
	}

	select {
	case resp := <-pc.ch:
		if resp.Error != nil {
			return nil, resp.Error
		}
		return resp.Result, nil
	case <-callCtx.Done():
		cause := context.Cause(callCtx)
		if cancellable {
			c.sendCancelled(id, cause)
		}
		if errors.Is(cause, errTimeout) {
			return nil, timeoutError(timeout)
		}
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.lostErr()
	}
}

// timeoutError is the error of a call the server did not answer in time.
func timeoutError(timeout time.Duration) error {
	return fmt.Errorf("no answer within timeout %s (raise the server's timeout if it needs longer): %w", timeout, errTimeout)
}

// sendCancelled tells the server a request is abandoned. It never blocks
// the caller for long: the send is bounded by two seconds.
func (c *client) sendCancelled(id int64, cause error) {
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
func (c *client) notify(ctx context.Context, method string, params any) error {
	msg, err := json.Marshal(outgoingRequest{JSONRPC: "2.0", Method: method, Params: params})
	if err != nil {
		return err
	}
	return c.t.send(ctx, msg)
}

// lostErr is the error for calls on a session whose transport has ended.
func (c *client) lostErr() error {
	if c.closing.Load() {
		return errClientClosed
	}
	if c.doneErr != nil {
		return fmt.Errorf("connection lost: %w", c.doneErr)
	}
	return fmt.Errorf("connection lost: %w", errClientClosed)
}

// closed returns a channel closed when the session has ended.
func (c *client) closed() <-chan struct{} { return c.done }

// failure returns why the session ended, or nil while it runs.
func (c *client) failure() error {
	select {
	case <-c.done:
		return c.lostErr()
	default:
		return nil
	}
}

// readLoop dispatches every message from the transport until it ends.
func (c *client) readLoop() {
	for raw := range c.t.recv() {
		c.dispatch(raw)
	}
	c.doneErr = c.t.err()
	if c.doneErr != nil && !c.closing.Load() {
		c.logger.Warn("server connection lost", "err", c.doneErr)
	}
	close(c.done)
}

// dispatch routes one message: a message with a method is a server request
// or notification, never a response, whatever its id. A well-formed
// response is routed after a scan of its top level, its result left for
// the waiting call to decode; anything else is decoded whole here.
func (c *client) dispatch(raw []byte) {
	if shape := scanMessage(raw); shape.complete && shape.method == nil && shape.id != nil {
		resp := rpcResponse{Result: shape.result}
		if len(shape.error) > 0 && string(shape.error) != "null" {
			resp.Error = new(rpcError)
			if json.Unmarshal(shape.error, resp.Error) == nil {
				c.deliverResponse(shape.id, resp)
				return
			}
		} else {
			c.deliverResponse(shape.id, resp)
			return
		}
	}
	var msg wireMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		c.logger.Warn("ignoring malformed message from server", "err", err, "message", truncate(string(raw), 200))
		return
	}
	switch {
	case msg.Method != "" && len(msg.ID) > 0 && string(msg.ID) != "null":
		select {
		case c.answering <- struct{}{}:
			// Owned by the client; ends when the answer is sent or the
			// session ends.
			go func() {
				defer func() { <-c.answering }()
				c.answerServerRequest(msg)
			}()
		default:
			// A server that floods requests without reading the answers
			// gets no more goroutines: it times the request out itself.
			c.logger.Warn("dropping server request: too many unanswered", "method", msg.Method, "limit", cap(c.answering))
		}
	case msg.Method != "":
		c.handleNotification(msg)
	case len(msg.ID) > 0:
		c.deliverResponse(msg.ID, rpcResponse{Result: msg.Result, Error: msg.Error})
	default:
		c.logger.Warn("ignoring message that is neither request, notification nor response", "message", truncate(string(raw), 200))
	}
}

// deliverResponse hands a response to the call waiting for its id; a
// response to no pending call is logged and dropped.
func (c *client) deliverResponse(rawID json.RawMessage, resp rpcResponse) {
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

// handleNotification acts on a server notification.
func (c *client) handleNotification(msg wireMessage) {
	switch msg.Method {
	case "notifications/tools/list_changed":
		if c.opts.OnToolsChanged != nil {
			c.opts.OnToolsChanged()
		}
	case "notifications/progress":
		var p struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return
		}
		id, ok := parseID(p.ProgressToken)
		if !ok {
			return
		}
		c.mu.Lock()
		pc := c.pending[id]
		c.mu.Unlock()
		if pc != nil && pc.extend != nil {
			pc.extend()
		}
	case "notifications/message":
		var p struct {
			Level  string          `json:"level"`
			Logger string          `json:"logger"`
			Data   json.RawMessage `json:"data"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return
		}
		c.logger.Log(context.Background(), mcpLogLevel(p.Level), "server log", "level", p.Level, "logger", p.Logger, "data", c.secrets.cut(string(p.Data), 1000))
	default:
		c.logger.Debug("server notification", "method", msg.Method)
	}
}

// mcpLogLevel maps an MCP (syslog) log level onto slog's.
func mcpLogLevel(level string) slog.Level {
	switch level {
	case "debug":
		return slog.LevelDebug
	case "info", "notice":
		return slog.LevelInfo
	case "warning":
		return slog.LevelWarn
	case "error", "critical", "alert", "emergency":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// answerServerRequest answers ping and roots/list; any other method gets
// -32601. The answer's send is bounded by the server's timeout.
func (c *client) answerServerRequest(msg wireMessage) {
	resp := outgoingResponse{JSONRPC: "2.0", ID: msg.ID}
	switch msg.Method {
	case "ping":
		resp.Result = struct{}{}
	case "roots/list":
		resp.Result = map[string]any{"roots": c.roots()}
	default:
		handled := false
		if c.opts.HandleRequest != nil {
			resp.Result, resp.Error, handled = c.opts.HandleRequest(msg.Method, msg.Params)
		}
		if !handled {
			resp.Result, resp.Error = nil, &rpcError{Code: codeMethodNotFound, Message: "method not supported by harnessd: " + msg.Method}
		}
	}
	out, err := json.Marshal(resp)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.requestTimeout())
	defer cancel()
	go func() {
		// Owned by answerServerRequest; ends when the session ends or the
		// answer was sent (cancel below).
		select {
		case <-c.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	if err := c.t.send(ctx, out); err != nil {
		c.logger.Debug("answer server request failed", "method", msg.Method, "err", err)
	}
}

// A root is one entry of roots/list.
type root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

func (c *client) roots() []root {
	roots := make([]root, 0, len(c.opts.Roots))
	for _, dir := range c.opts.Roots {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		roots = append(roots, root{URI: u.String(), Name: filepath.Base(abs)})
	}
	return roots
}
