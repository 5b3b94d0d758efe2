package main

import (
	"context"
	"encoding/json"
	"time"
)

// This file holds what a server sends a session besides answers: its
// notifications (list changes, progress, logs) and its requests (ping,
// and the input that input.go answers), and the answers to them.

// handleNotification acts on a server notification.
func (c *conn) handleNotification(msg wireMessage) {
	c.listChanged(msg.Method)
	switch msg.Method {
	case "notifications/subscriptions/acknowledged":
		c.subscriptionAcknowledged(msg.Params)
	case "notifications/tools/list_changed":
		if c.opts.OnToolsChanged != nil {
			c.opts.OnToolsChanged()
		}
	case "notifications/progress":
		var p progressParams
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
		if pc != nil {
			pc.extend()
		}
		if pc != nil && c.opts.Input != nil {
			c.opts.Input.callProgress(c.cfg.Name, p)
		}
		if pc != nil && pc.progress != nil {
			pc.progress(p)
		}
	case "notifications/elicitation/complete":
		c.elicitationComplete(msg.Params)
	case "notifications/message":
		var p struct {
			Level  string          `json:"level"`
			Logger string          `json:"logger"`
			Data   json.RawMessage `json:"data"`
		}
		if json.Unmarshal(msg.Params, &p) != nil {
			return
		}
		c.logger.Log(context.Background(), mcpLogLevel(p.Level), "server log", "level", p.Level, "logger", p.Logger, "data", c.secrets.load().cut(string(p.Data), 1000))
	default:
		c.logger.Debug("server notification", "method", msg.Method)
	}
}

// answerServerRequest answers ping, and what input.go answers (roots,
// elicitation, sampling); any other method gets -32601. The answer's send
// is bounded by the server's timeout.
func (c *conn) answerServerRequest(msg wireMessage) {
	resp := outgoingResponse{JSONRPC: "2.0", ID: msg.ID}
	switch msg.Method {
	case "ping":
		resp.Result = struct{}{}
	default:
		handled := false
		if c.opts.HandleRequest != nil {
			resp.Result, resp.Error, handled = c.opts.HandleRequest(msg.Method, msg.Params)
		}
		if !handled {
			resp.Result, resp.Error, handled = c.serveInput(msg.Method, msg.Params)
		}
		if !handled {
			resp.Result, resp.Error = nil, &rpcError{Code: codeMethodNotFound, Message: "method not supported by harnessd: " + msg.Method}
		}
	}
	out, err := json.Marshal(resp)
	if err != nil {
		// The server still gets an answer, so it does not wait for one.
		c.logger.Warn("encode answer to server request failed", "method", msg.Method, "err", err)
		resp.Result, resp.Error = nil, &rpcError{Code: codeInternalError, Message: "harnessd could not encode its answer to " + msg.Method}
		if out, err = json.Marshal(resp); err != nil {
			return // unreachable: the id came in as valid JSON
		}
	}
	ctx, cancel := c.untilEnded(context.Background())
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, c.cfg.requestTimeout())
	defer cancelTimeout()
	if err := c.send(ctx, out); err != nil {
		c.logger.Debug("answer server request failed", "method", msg.Method, "err", err)
	} else if msg.Method == "roots/list" && resp.Error == nil {
		c.rootsAnswered.Store(time.Now().UnixNano())
	}
}
