package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"
)

// This file holds the protocol revision in use with a server: probing for
// the current revision (2026-07-28) with server/discover, falling back to
// the initialize handshake of the older ones, and what every request of
// the current revision carries (_meta, and over HTTP the standard headers).

// defaultDiscoverTimeout bounds the server/discover probe of a stdio server
// that may never answer an unknown method. Older servers answer it with
// -32601 at once; the bound is only for those that stay silent.
const defaultDiscoverTimeout = 2 * time.Second

// errOlderServer: the probe found a server that speaks only the initialize
// handshake.
var errOlderServer = errors.New("server speaks an older protocol revision")

// errProbeTimeout: the server did not answer server/discover in time.
var errProbeTimeout = errors.New("no answer to server/discover")

// A discoverResult is the result of server/discover.
type discoverResult struct {
	SupportedVersions []string           `json:"supportedVersions"`
	Capabilities      serverCapabilities `json:"capabilities"`
	Instructions      string             `json:"instructions,omitempty"`
	Meta              struct {
		ServerInfo implementation `json:"io.modelcontextprotocol/serverInfo"`
	} `json:"_meta"`
	// ServerInfo is where some servers put it instead of _meta.
	ServerInfo *implementation `json:"serverInfo,omitempty"`
}

// supportedVersions returns the supported list of an
// UnsupportedProtocolVersionError's data, or nil.
func supportedVersions(data json.RawMessage) []string {
	var d struct {
		Supported []string `json:"supported"`
	}
	if json.Unmarshal(data, &d) != nil {
		return nil
	}
	return d.Supported
}

// bestSessionlessVersion returns the newest current revision harnessd and the
// server both speak, or "" for none.
func bestSessionlessVersion(supported []string) string {
	for _, v := range sessionlessProtocolVersions {
		if slices.Contains(supported, v) {
			return v
		}
	}
	return ""
}

// handshake settles the revision spoken with the server: a pinned
// protocol_version is used as is; otherwise the current revision is probed
// with server/discover and an older server is initialized instead. Legacy
// SSE speaks only the older revisions.
func (c *mcpClient) handshake(ctx context.Context) error {
	c.probeErr = nil
	pinned := c.cfg.ProtocolVersion
	switch {
	case isSessionlessVersion(pinned):
		return c.discover(ctx, pinned, false)
	case pinned != "" || c.kind == transportSSE:
		return c.initialize(ctx)
	}
	err := c.discover(ctx, sessionlessProtocolVersion, true)
	if !errors.Is(err, errOlderServer) {
		return err
	}
	c.logger.Debug("server speaks an older revision; initializing", "reason", err)
	err = c.initialize(ctx)
	var rpcErr *rpcError
	if !errors.As(err, &rpcErr) || !errors.Is(c.probeErr, errProbeTimeout) {
		return err
	}
	// The probe timed out and initialize was refused: a server of the
	// current revision that was slow to start. Ask it again, unbounded.
	if derr := c.discover(ctx, sessionlessProtocolVersion, false); derr == nil {
		return nil
	}
	return err
}

// reinitialize runs the handshake again unless another caller already did
// since epoch was read.
func (c *mcpClient) reinitialize(ctx context.Context, epoch int) error {
	return c.handshakeAgain(epoch, func() error {
		c.logger.Info("session expired, initializing again")
		return c.initialize(ctx)
	})
}

// renegotiate runs the whole handshake again, probe included, unless
// another caller already did since epoch was read.
func (c *mcpClient) renegotiate(ctx context.Context, epoch int) error {
	return c.handshakeAgain(epoch, func() error {
		// An initialize the new handshake may fall back to must not carry
		// the refused revision's header.
		c.meta.Store(nil)
		if pv, ok := c.t.(protocolVersionAware); ok {
			pv.setProtocolVersion("")
		}
		return c.handshake(ctx)
	})
}

// handshakeAgain runs handshake, one caller at a time, unless a handshake
// has completed since epoch was read: callers that saw the same failure
// then retry on the session the first one settled.
func (c *mcpClient) handshakeAgain(epoch int, handshake func() error) error {
	c.initMu.Lock()
	defer c.initMu.Unlock()
	c.stateMu.RLock()
	current := c.sessionEpoch
	c.stateMu.RUnlock()
	if current != epoch {
		return nil
	}
	return handshake()
}

// discover runs server/discover at version, once more at the best
// revision the server names if it refuses that one. When probing, answers
// that mark an older server (an error that is not of the current revision,
// an HTTP status other than 401 and 403, no answer within the probe's
// bound on stdio, or no common current revision) return errOlderServer.
func (c *mcpClient) discover(ctx context.Context, version string, probing bool) error {
	for attempt := 0; ; attempt++ {
		res, err := c.discoverWith(ctx, version, probing)
		if err == nil {
			// A result without the versions is no DiscoverResult: some older
			// servers answer any method with an empty result.
			negotiated := version
			if !slices.Contains(res.SupportedVersions, version) {
				negotiated = bestSessionlessVersion(res.SupportedVersions)
			}
			if negotiated == "" {
				if probing {
					return fmt.Errorf("%w: it supports %v", errOlderServer, res.SupportedVersions)
				}
				return fmt.Errorf("server/discover: the server supports %v, not %s", res.SupportedVersions, version)
			}
			c.useSessionless(negotiated, res)
			return nil
		}
		c.probeErr = err
		var rpcErr *rpcError
		var statusErr *httpStatusError
		switch {
		case errors.As(err, &rpcErr) && rpcErr.Code == codeUnsupportedVersion:
			supported := supportedVersions(rpcErr.Data)
			if best := bestSessionlessVersion(supported); best != "" && attempt == 0 {
				version = best
				continue
			}
			if probing {
				return fmt.Errorf("%w: it supports %v", errOlderServer, supported)
			}
			return fmt.Errorf("server/discover: the server supports %v, not %s (set protocol_version to one of them)", supported, version)
		case !probing:
			return fmt.Errorf("server/discover: %w", err)
		case errors.As(err, &rpcErr) && !isSessionlessError(rpcErr.Code):
			return fmt.Errorf("%w: server/discover: %v", errOlderServer, err)
		case errors.Is(err, errProbeTimeout):
			return fmt.Errorf("%w: %v", errOlderServer, err)
		case errors.As(err, &statusErr) && statusErr.StatusCode != http.StatusUnauthorized && statusErr.StatusCode != http.StatusForbidden:
			return fmt.Errorf("%w: server/discover: %v", errOlderServer, err)
		}
		return fmt.Errorf("server/discover: %w", err)
	}
}

// discoverWith sends one server/discover at version. On stdio a probe is
// bounded by the discover timeout (errProbeTimeout).
func (c *mcpClient) discoverWith(ctx context.Context, version string, probing bool) (*discoverResult, error) {
	probeCtx, bound := ctx, c.discoverTimeout()
	if probing && c.kind == transportStdio {
		// A server that stays silent may be an older one that ignores
		// unknown methods: leave it half the start-up time to initialize.
		if deadline, ok := ctx.Deadline(); ok {
			bound = min(bound, time.Until(deadline)/2)
		}
		var cancel context.CancelFunc
		probeCtx, cancel = context.WithTimeoutCause(ctx, bound, errProbeTimeout)
		defer cancel()
	}
	// A discovery still fresh (its ttlMs, client_cache.go) is not asked again.
	raw, cached := c.opts.Cache.get(c.cfg, "server/discover", version)
	if !cached {
		var err error
		raw, err = c.roundTrip(probeCtx, rpcRequest{method: "server/discover", handshake: true, version: version})
		if err != nil {
			if ctx.Err() == nil && errors.Is(context.Cause(probeCtx), errProbeTimeout) {
				return nil, fmt.Errorf("%w within %s", errProbeTimeout, bound.Round(time.Millisecond))
			}
			return nil, err
		}
	}
	var res discoverResult
	if err := decodeResult(raw, &res); err != nil {
		return nil, err
	}
	if !cached && len(res.SupportedVersions) > 0 {
		c.opts.Cache.put(c.cfg, "server/discover", version, raw)
	}
	return &res, nil
}

// discoverTimeout returns the bound of the stdio probe.
func (c *mcpClient) discoverTimeout() time.Duration {
	if c.opts.DiscoverTimeout > 0 {
		return c.opts.DiscoverTimeout
	}
	return defaultDiscoverTimeout
}

// useSessionless records the outcome of server/discover: from now on every
// request carries version in _meta (and headers over HTTP).
func (c *mcpClient) useSessionless(version string, res *discoverResult) {
	info := res.Meta.ServerInfo
	if res.ServerInfo != nil && info.Name == "" {
		info = *res.ServerInfo
	}
	c.stateMu.Lock()
	c.initResult = initializeResult{ProtocolVersion: version, Capabilities: res.Capabilities, ServerInfo: info, Instructions: res.Instructions}
	c.sessionEpoch++
	c.stateMu.Unlock()
	c.version.Store(version)
	c.meta.Store(c.newRequestMeta(version))
	if pv, ok := c.t.(protocolVersionAware); ok {
		pv.setProtocolVersion(version)
	}
}

// A requestMeta is what every request of a current revision carries: the
// _meta fields, encoded once, and the revision for MCP-Protocol-Version.
// Read-only once built.
type requestMeta struct {
	version string
	// encoded are the fields as one JSON object. No map of them is kept:
	// a traced request builds its own requestMeta, and copied the map
	// (with the span and export changes of telemetry.go and
	// telemetry_otlp.go, a traced stdio tool call allocates 81 times and
	// 9.0 KiB instead of 103 and 12.5 KiB, BenchmarkRecordedToolCall).
	encoded []byte
}

// newRequestMeta returns the _meta of requests at version.
func (c *conn) newRequestMeta(version string) *requestMeta {
	fields := make(map[string]json.RawMessage, 4)
	fields[metaProtocolVersion], _ = json.Marshal(version)
	fields[metaClientInfo], _ = json.Marshal(implementation{Name: "harnessd", Version: buildVersion})
	fields[metaClientCapabilities], _ = json.Marshal(c.clientCapabilities())
	if c.cfg.LogLevel != "" {
		fields[metaLogLevel], _ = json.Marshal(c.cfg.LogLevel)
	}
	encoded, _ := marshalJSON(fields)
	return &requestMeta{version: version, encoded: encoded}
}

// attach returns params (any JSON object, or nil) encoded with the _meta
// fields added; fields the params' own _meta already has (a progress
// token, say) are kept.
func (m *requestMeta) attach(params any) (json.RawMessage, error) {
	var raw []byte
	if params != nil {
		var err error
		if raw, err = marshalJSON(params); err != nil {
			return nil, err
		}
	}
	if raw == nil || string(raw) == "null" {
		raw = []byte("{}")
	}
	if len(raw) < 2 || raw[0] != '{' {
		return nil, fmt.Errorf("params are not an object: %.40s", raw)
	}
	// The common cases, params of our own: without a _meta, the encoded
	// fields go in front of their members as _meta; with a _meta of their
	// own first (a progress token) and none of ours, in front of its
	// members.
	const ownMeta = `{"_meta":{`
	switch {
	case !bytes.Contains(raw, []byte(`"_meta"`)):
		return splice(raw, 1, `{"_meta":`, m.encoded), nil
	case bytes.HasPrefix(raw, []byte(ownMeta)) && !bytes.Contains(raw, []byte(`"io.modelcontextprotocol/`)):
		return splice(raw, len(ownMeta), ownMeta, m.encoded[1:len(m.encoded)-1]), nil
	}
	fields := map[string]json.RawMessage{}
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, fmt.Errorf("params are not an object: %w", err)
	}
	meta := map[string]json.RawMessage{}
	if own, ok := fields["_meta"]; ok && string(own) != "null" {
		if err := json.Unmarshal(own, &meta); err != nil {
			return nil, fmt.Errorf("params' _meta is not an object: %w", err)
		}
	}
	var ours map[string]json.RawMessage
	if err := json.Unmarshal(m.encoded, &ours); err != nil {
		return nil, err
	}
	for k, v := range ours {
		if _, ok := meta[k]; !ok {
			meta[k] = v
		}
	}
	var err error
	if fields["_meta"], err = marshalJSON(meta); err != nil {
		return nil, err
	}
	return marshalJSON(fields)
}

// splice returns head and members followed by raw[at:], with a comma
// between unless raw[at:] closes the object.
func splice(raw []byte, at int, head string, members []byte) []byte {
	rest := raw[at:]
	out := make([]byte, 0, len(head)+len(members)+1+len(rest))
	out = append(out, head...)
	out = append(out, members...)
	if rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// header returns the HTTP headers of req at this revision: the protocol
// version, Mcp-Method, Mcp-Name when req names a tool, prompt or resource,
// and req's own (Mcp-Param-*).
func (m *requestMeta) header(req rpcRequest) http.Header {
	h := make(http.Header, 3+len(req.header))
	for k, v := range req.header {
		h[k] = v
	}
	h[headerProtocolVersion] = []string{m.version}
	h[headerMethod] = []string{req.method}
	if req.name != "" {
		h[headerName] = []string{encodeHeaderValue(req.name)}
	}
	return h
}

// clientCapabilities returns the capabilities harnessd declares: roots,
// the server-input ones, and the session's own. Roots are declared even
// for a server with none configured: it is answered an empty list, which
// server-filesystem takes as "keep the directories of the command line",
// and a reload that gives it roots can then tell it
// (notifications/roots/list_changed). Without the capability that server
// would keep its directories too, but could never be given roots later,
// and one started without directories would exit at once.
func (c *conn) clientCapabilities() map[string]any {
	capabilities := map[string]any{"roots": map[string]any{"listChanged": true}}
	for k, v := range clientInputCapabilities() {
		capabilities[k] = v
	}
	for k, v := range c.opts.Capabilities {
		capabilities[k] = v
	}
	return capabilities
}

// sessionlessError turns the errors of the current revision that reach a user
// into ones that say what happened; others are returned as they are.
func sessionlessError(err error) error {
	var rpcErr *rpcError
	if !errors.As(err, &rpcErr) {
		return err
	}
	switch rpcErr.Code {
	case codeMissingCapability:
		return fmt.Errorf("the server requires client capabilities harnessd does not offer (%s): %w", missingCapabilities(rpcErr.Data), err)
	}
	return err
}

// missingCapabilities names the capabilities of a -32021 error's data, or
// says the server named none.
func missingCapabilities(data json.RawMessage) string {
	var d map[string]json.RawMessage
	if json.Unmarshal(data, &d) != nil {
		return "the server named none"
	}
	var required map[string]json.RawMessage
	if json.Unmarshal(d["requiredCapabilities"], &required) != nil || len(required) == 0 {
		return "the server named none"
	}
	names := slices.Sorted(maps.Keys(required))
	return strings.Join(names, ", ")
}
