package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
)

// This file holds one MCP session over any transport: the handshake and
// its version fallback, and the list, call and read requests.

// An mcpClient is one MCP session with one server: the handshake's outcome
// and the MCP requests, over the conn that multiplexes them. It is safe
// for concurrent use. An mcpClient is created by connect and ends with close,
// or when its transport ends (ended is then closed and every pending and
// later call fails with endErr).
type mcpClient struct {
	// The embedded conn brings roundTrip, notify, close and the session's
	// cfg, opts, logger and transport (client_conn.go).
	*conn
	kind string // the transport in use: the configured one, or sse after fallback

	// initMu serializes re-initialization after an expired HTTP session.
	initMu  sync.Mutex
	stateMu sync.RWMutex
	// guards the handshake results below, written by initialize
	initResult   initializeResult
	sessionEpoch int
	// toolHeaders are the x-mcp-header bindings of each listed tool, by
	// the server's tool name; set by listTools on a current revision over
	// HTTP.
	toolHeaders map[string][]headerBinding
	// probeErr is why the last server/discover failed; written only
	// during the handshake, which callers serialize.
	probeErr error
}

// connect starts the server's transport, performs the handshake and
// returns a ready session. The handshake is bounded by cfg.StartupTimeout
// and by ctx; the session itself outlives ctx and ends only with close or
// when the server goes away. On error nothing is left running, and the
// error names the server.
func connect(ctx context.Context, cfg serverConfig, opts clientOptions) (*mcpClient, error) {
	c, err := dial(ctx, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", cfg.Name, err)
	}
	return c, nil
}

// dial is connect for a caller that names the server itself: its error
// does not.
func dial(ctx context.Context, cfg serverConfig, opts clientOptions) (*mcpClient, error) {
	opts.Logger = orDiscard(opts.Logger)
	if opts.Secrets == nil {
		// A session outside any registry: it quotes through its OAuth
		// clients' redactor, which the credentials they obtain join.
		opts.Secrets = opts.OAuth.redactor()
	}
	if err := cfg.unsetErr(); err != nil {
		return nil, err
	}
	startup := cfg.startupTimeout()
	ctx, cancel := context.WithTimeout(ctx, startup)
	defer cancel()

	c, err := dialAndInitialize(ctx, cfg, cfg.Transport, opts)
	var statusErr *httpStatusError
	if err != nil && cfg.Transport == transportHTTP && cfg.TransportInferred && errors.As(err, &statusErr) &&
		(statusErr.StatusCode == 400 || statusErr.StatusCode == 404 || statusErr.StatusCode == 405) {
		opts.Logger.Info("streamable http refused, trying legacy sse", "server", cfg.Name, "status", statusErr.StatusCode)
		streamable := err
		if c, err = dialAndInitialize(ctx, cfg, transportSSE, opts); err != nil {
			hint := ""
			if errors.As(err, &statusErr) && statusErr.StatusCode/100 == 4 {
				hint = "; check the url's path (often /mcp, or /sse for a legacy server)"
			}
			err = fmt.Errorf("tried Streamable HTTP first: %v; then the legacy HTTP+SSE fallback: %w%s", streamable, err, hint)
		}
	}
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("no answer within startup_timeout %s: %w", startup, err)
		}
		return nil, err
	}
	return c, nil
}

// dialAndInitialize opens one transport kind and runs the handshake.
func dialAndInitialize(ctx context.Context, cfg serverConfig, kind string, opts clientOptions) (*mcpClient, error) {
	logger := serverLogger(opts.Logger, cfg)
	var (
		t   mcpTransport
		err error
	)
	switch kind {
	case transportStdio:
		getenv := opts.Getenv
		if getenv == nil {
			getenv = os.LookupEnv
		}
		t, err = startStdio(cfg, stdioEnv(cfg, getenv), opts.ProcessGroups, opts.StopGrace, logger)
	case transportHTTP:
		st := newStreamableTransport(cfg, opts.Secrets, logger)
		if c := opts.OAuth.forServer(cfg); c != nil {
			st.auth = c
		}
		t = st
	case transportSSE:
		t, err = newSSETransport(ctx, cfg, opts.Secrets, logger)
	default:
		err = fmt.Errorf("unknown transport %q", kind)
	}
	if err != nil {
		return nil, err
	}
	c := &mcpClient{conn: newConn(cfg, opts, logger, t), kind: kind}
	if err := c.handshake(ctx); err != nil {
		c.close()
		return nil, err
	}
	c.started.Store(true)
	if c.meta.Load() != nil {
		c.listen() // list changes come through a subscription on this revision
	}
	return c, nil
}

// initialize performs the handshake of the older revisions: the pinned
// protocol_version, else 2025-11-25 first and 2024-11-05 when the server
// refuses it with -32602 or -32600; any known version the server answers
// with is accepted (only the pinned one when pinned). It then sends
// notifications/initialized.
func (c *mcpClient) initialize(ctx context.Context) error {
	offer := cmp.Or(c.cfg.ProtocolVersion, latestProtocolVersion)
	res, err := c.initializeWith(ctx, offer)
	var rpcErr *rpcError
	if c.cfg.ProtocolVersion == "" && errors.As(err, &rpcErr) && (rpcErr.Code == codeInvalidParams || rpcErr.Code == codeInvalidRequest) {
		c.logger.Info("server refused protocol version, retrying", "refused", latestProtocolVersion, "retry", fallbackProtocolVersion)
		res, err = c.initializeWith(ctx, fallbackProtocolVersion)
	}
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	if !isKnownProtocolVersion(res.ProtocolVersion) {
		return fmt.Errorf("initialize: server answered with unsupported protocol version %q (harnessd speaks %v)", res.ProtocolVersion, knownProtocolVersions)
	}
	if c.cfg.ProtocolVersion != "" && res.ProtocolVersion != c.cfg.ProtocolVersion {
		return fmt.Errorf("initialize: server answered with protocol version %q, not the pinned protocol_version %q", res.ProtocolVersion, c.cfg.ProtocolVersion)
	}
	c.stateMu.Lock()
	c.initResult = *res
	c.sessionEpoch++
	c.stateMu.Unlock()
	c.version.Store(res.ProtocolVersion)
	if pv, ok := c.t.(protocolVersionAware); ok {
		pv.setProtocolVersion(res.ProtocolVersion)
	}
	if err := c.notify(ctx, "notifications/initialized", nil); err != nil {
		return fmt.Errorf("initialize: send notifications/initialized: %w", err)
	}
	c.applyLogLevel(ctx)
	return nil
}

func (c *mcpClient) initializeWith(ctx context.Context, version string) (*initializeResult, error) {
	params := map[string]any{
		"protocolVersion": version,
		"capabilities":    c.clientCapabilities(),
		"clientInfo":      implementation{Name: "harnessd", Version: buildVersion},
	}
	raw, err := c.roundTrip(ctx, rpcRequest{method: "initialize", params: params, handshake: true})
	if err != nil {
		return nil, err
	}
	var res initializeResult
	if err := decodeResult(raw, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

func isKnownProtocolVersion(v string) bool {
	for _, known := range knownProtocolVersions {
		if v == known {
			return true
		}
	}
	return false
}

// protocolVersion returns the negotiated version ("" before the handshake).
func (c *mcpClient) protocolVersion() string {
	c.stateMu.RLock()
	defer c.stateMu.RUnlock()
	return c.initResult.ProtocolVersion
}

// serverInfo returns the server's self-description from the handshake.
func (c *mcpClient) serverInfo() implementation {
	c.stateMu.RLock()
	defer c.stateMu.RUnlock()
	return c.initResult.ServerInfo
}

// capabilities returns the server's capabilities from the handshake.
func (c *mcpClient) capabilities() serverCapabilities {
	c.stateMu.RLock()
	defer c.stateMu.RUnlock()
	return c.initResult.Capabilities
}

// request sends req and decodes its result into result (which may be
// nil; a *json.RawMessage receives the result undecoded and unvalidated).
// An expired HTTP session is initialized again once and the request resent.
// Errors name the method; rpc errors are returned as *rpcError.
func (c *mcpClient) request(ctx context.Context, req rpcRequest, result any) error {
	c.stateMu.RLock()
	epoch := c.sessionEpoch
	c.stateMu.RUnlock()
	raw, err := c.roundTrip(ctx, req)
	rpcErr := asRPCError(err)
	switch {
	case errors.Is(err, errSessionExpired):
		if rerr := c.reinitialize(ctx, epoch); rerr != nil {
			return fmt.Errorf("%s: session expired and re-initialize failed: %w", req.method, rerr)
		}
		raw, err = c.roundTrip(ctx, req)
	case c.meta.Load() == nil || rpcErr == nil:
	case rpcErr.Code == codeUnsupportedVersion:
		// The server no longer speaks the revision: settle it again.
		c.logger.Info("server refused the protocol revision; negotiating again", "refused", c.protocolVersion())
		if rerr := c.renegotiate(ctx, epoch); rerr != nil {
			return fmt.Errorf("%s: protocol version refused and negotiating again failed: %w", req.method, rerr)
		}
		raw, err = c.roundTrip(ctx, req)
	case isBrokenStream(rpcErr):
		// No resumption on this revision: the request is sent again, with
		// a new id.
		c.logger.Info("answer stream broke; sending the request again", "method", req.method)
		raw, err = c.roundTrip(ctx, req)
	}
	if err == nil && result != nil {
		err = decodeResult(raw, result)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", req.method, sessionlessError(err))
	}
	return nil
}

// decodeResult decodes a response's raw result into result; a
// *json.RawMessage takes it as is.
func decodeResult(raw json.RawMessage, result any) error {
	if len(raw) == 0 {
		return errors.New("response has neither result nor error")
	}
	if dst, ok := result.(*json.RawMessage); ok {
		*dst = raw
		return nil
	}
	if err := json.Unmarshal(raw, result); err != nil {
		return fmt.Errorf("decode result: %w", err)
	}
	return nil
}

// transportKind returns the transport in use (stdio, http or sse).
func (c *mcpClient) transportKind() string { return c.kind }

// maxPages bounds pagination against a server that never stops.
const maxPages = 100

// listAll follows nextCursor through every page of a list method, decoding
// the items under key. It stops, with a warning, on a repeated cursor or
// after maxPages pages, returning what it has.
func listAll[T any](ctx context.Context, c *mcpClient, method, key string) ([]T, error) {
	var (
		all    []T
		cursor string
		seen   = map[string]bool{}
	)
	for page := 0; ; page++ {
		if page == maxPages {
			c.logger.Warn("stopped paginating: too many pages", "method", method, "pages", maxPages)
			return all, nil
		}
		var params any
		if cursor != "" {
			params = map[string]string{"cursor": cursor}
		}
		raw, err := c.requestCached(ctx, rpcRequest{method: method, params: params}, cursor, c.sendRequest)
		if err != nil {
			return nil, err
		}
		var res map[string]json.RawMessage
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, fmt.Errorf("%s: decode result: %w", method, err)
		}
		if items, ok := res[key]; ok && string(items) != "null" {
			var pageItems []T
			if err := json.Unmarshal(items, &pageItems); err != nil {
				return nil, fmt.Errorf("%s: decode %s: %w", method, key, err)
			}
			all = append(all, pageItems...)
		}
		next := ""
		if raw, ok := res["nextCursor"]; ok && string(raw) != "null" {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, fmt.Errorf("%s: decode nextCursor: %w", method, err)
			}
		}
		if next == "" {
			return all, nil
		}
		if seen[next] {
			c.logger.Warn("stopped paginating: server repeated a cursor", "method", method, "cursor", c.secrets.load().cut(next, 100))
			return all, nil
		}
		seen[next] = true
		cursor = next
	}
}

// listTools returns every tool the server offers, all pages. On a current
// revision over HTTP, tools with invalid x-mcp-header annotations are left
// out with a warning (see keepHeaderTools).
func (c *mcpClient) listTools(ctx context.Context) ([]toolInfo, error) {
	tools, err := listAll[toolInfo](ctx, c, "tools/list", "tools")
	if err != nil || c.meta.Load() == nil || c.kind != transportHTTP {
		return tools, err
	}
	return c.keepHeaderTools(tools), nil
}

// listResources returns every resource the server offers, all pages. It
// returns errNoResources when the server lacks the resources capability.
func (c *mcpClient) listResources(ctx context.Context) ([]resourceInfo, error) {
	if c.capabilities().Resources == nil {
		return nil, errNoResources
	}
	return listAll[resourceInfo](ctx, c, "resources/list", "resources")
}

// readResource reads one resource by URI. It returns errNoResources when
// the server lacks the resources capability.
func (c *mcpClient) readResource(ctx context.Context, uri string) (*readResourceResult, error) {
	if c.capabilities().Resources == nil {
		return nil, errNoResources
	}
	raw, err := c.requestCached(ctx, rpcRequest{method: "resources/read", params: map[string]string{"uri": uri}, name: uri}, uri, c.requestWithInput)
	var rpcErr *rpcError
	if c.meta.Load() != nil && errors.As(err, &rpcErr) && rpcErr.Code == codeInvalidParams {
		return nil, fmt.Errorf("resources/read: resource %q not found: %w", uri, err)
	}
	if err != nil {
		return nil, err
	}
	var res readResourceResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("resources/read: decode result: %w", err)
	}
	return &res, nil
}

// callParams are tools/call's params; they carry the request id as the
// progress token so progress notifications extend the call's deadline.
type callParams struct {
	// Meta comes first, where the current revision's _meta joins it.
	Meta      *callMeta       `json:"_meta,omitempty"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

type callMeta struct {
	ProgressToken int64 `json:"progressToken"`
}

// callTool calls a tool by the server's own name. args must be a JSON
// object or empty (sent as {}). A result with isError is returned as a
// result, not an error: the error return is for calls that failed.
func (c *mcpClient) callTool(ctx context.Context, name string, args json.RawMessage) (*callResult, error) {
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	call := rpcRequest{method: "tools/call", name: name, header: c.toolParamHeaders(name, args), withProgress: func(token int64) any {
		return callParams{Name: name, Arguments: args, Meta: &callMeta{ProgressToken: token}}
	}}
	defer c.callers.enter(ctx)()
	raw, err := c.requestWithInput(ctx, call)
	if rpcErr := asRPCError(err); rpcErr != nil && rpcErr.Code == codeHeaderMismatch && c.meta.Load() != nil {
		// The tool's schema changed since it was listed: list again, and
		// call once more with the headers of the new schema.
		c.logger.Info("server refused the call's headers; listing tools again", "tool", name)
		c.listChanged("notifications/tools/list_changed")
		if _, lerr := c.listTools(ctx); lerr != nil {
			return nil, fmt.Errorf("tools/call: header mismatch, and listing tools again failed: %w", lerr)
		}
		if c.opts.OnToolsChanged != nil {
			c.opts.OnToolsChanged()
		}
		call.header = c.toolParamHeaders(name, args)
		raw, err = c.requestWithInput(ctx, call)
	}
	if c.urlElicitationAnswered(ctx, err) {
		raw, err = c.requestWithInput(ctx, call)
	}
	if err != nil {
		return nil, err
	}
	res := callResult{Raw: raw}
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("tools/call: decode result: %w", err)
	}
	return &res, nil
}
