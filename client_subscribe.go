package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"time"
)

// This file holds subscriptions/listen, which replaces the GET stream of the
// older revisions on the current one (2026-07-28): one long-lived request
// per session asks for the list changes harnessd acts on (tools, resources).
// The server acknowledges it (notifications/subscriptions/acknowledged) and
// then sends the notifications it agreed to, on the request's answer stream
// over HTTP or among its other messages over stdio; the conn handles
// them as it always has. The request ends with the session (its context is
// cancelled: the answer stream is closed, or notifications/cancelled sent);
// when the server ends it first, it is opened again after a backoff, and the
// lists are re-read, since changes may have gone unnoticed in between.

// Bounds of the backoff between reopenings of an ended subscription.
const (
	listenBackoffMin = time.Second
	listenBackoffMax = time.Minute
)

// A listenRequest is the params of subscriptions/listen.
type listenRequest struct {
	Notifications listenSet `json:"notifications"`
}

// A listenSet is the notifications a subscription asks for, or those the
// server agreed to.
type listenSet struct {
	ToolsListChanged     bool `json:"toolsListChanged,omitempty"`
	ResourcesListChanged bool `json:"resourcesListChanged,omitempty"`
}

// wanted returns the notifications worth asking the server for: those of
// the lists it says may change.
func (c *mcpClient) wanted() listenSet {
	caps := c.capabilities()
	return listenSet{
		ToolsListChanged:     caps.Tools != nil && caps.Tools.ListChanged,
		ResourcesListChanged: caps.Resources != nil && caps.Resources.ListChanged,
	}
}

// listen opens the session's subscription, when the server offers list
// changes, and keeps it open until the session ends. It returns at once;
// the subscription runs on a goroutine of its own.
func (c *mcpClient) listen() {
	want := c.wanted()
	if !want.ToolsListChanged && !want.ResourcesListChanged {
		return
	}
	ctx, cancel := c.untilEnded(context.Background())
	// Owned by the client; ends with the session.
	go func() {
		defer cancel()
		for failures := 0; ; {
			started := time.Now()
			_, err := c.roundTrip(ctx, rpcRequest{method: "subscriptions/listen", params: listenRequest{Notifications: want}, longLived: true})
			if ctx.Err() != nil || c.closing.Load() || c.endErr() != nil {
				return // the session ends: so does its subscription
			}
			var rpcErr *rpcError
			if errors.As(err, &rpcErr) && (rpcErr.Code == codeMethodNotFound || rpcErr.Code == codeInvalidParams) {
				c.logger.Warn("server refused subscriptions/listen; list changes will go unnoticed", "err", err)
				return
			}
			if time.Since(started) > listenBackoffMax {
				failures = 0
			}
			failures++
			delay := backoffDelay(cmp.Or(c.opts.ListenBackoffMin, listenBackoffMin), listenBackoffMax, failures)
			c.logger.Info("subscription ended; opening it again", "err", err, "after", delay)
			if !sleepContext(ctx, delay) {
				return
			}
			// Changes while it was closed went unnoticed: act as if notified.
			if want.ToolsListChanged {
				c.listChanged("notifications/tools/list_changed")
				if c.opts.OnToolsChanged != nil {
					c.opts.OnToolsChanged()
				}
			}
			if want.ResourcesListChanged {
				c.listChanged("notifications/resources/list_changed")
			}
		}
	}()
}

// subscriptionAcknowledged logs what the server agreed to send on a
// subscription.
func (c *conn) subscriptionAcknowledged(params json.RawMessage) {
	var ack listenRequest
	if json.Unmarshal(params, &ack) != nil {
		c.logger.Warn("ignoring malformed subscriptions/acknowledged", "params", c.secrets.load().cut(string(params), 200))
		return
	}
	c.logger.Debug("subscription acknowledged", "tools_list_changed", ack.Notifications.ToolsListChanged, "resources_list_changed", ack.Notifications.ResourcesListChanged)
}
