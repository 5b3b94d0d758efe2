package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"
)

// This file holds the client side of the official MCP conformance suite:
// harnessd mcp conformance URL, driven by the suite's scenario variables.

const mcpConformanceUsage = `Usage: harnessd mcp conformance URL

The client side of the official MCP conformance suite
(@modelcontextprotocol/conformance): connects to URL over Streamable HTTP,
lists the tools and acts out the scenario named by MCP_CONFORMANCE_SCENARIO.
It declares elicitation and accepts every elicitation with the requested
schema's defaults, which harnessd itself never does.

`

// mcpConformance implements "harnessd mcp conformance".
func (a *app) mcpConformance(ctx context.Context, args []string) error {
	fs := newFlagSet("mcp conformance", a.stderr, mcpConformanceUsage)
	var f commonFlags
	f.register(fs, a.getenv)
	logger, _, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("mcp conformance: want exactly one URL")
	}
	scenario, _ := a.getenv("MCP_CONFORMANCE_SCENARIO")
	server, err := adhocServer("conformance", fs.Arg(0), nil)
	if err != nil {
		return usageError("%v", err)
	}
	oauth, err := conformanceOAuth(a.getenv, &server, logger)
	if err != nil {
		return err
	}
	if v, _ := a.getenv("MCP_CONFORMANCE_PROTOCOL_VERSION"); v == statelessProtocolVersion {
		return statelessConformance(ctx, server, oauth.forServer(server), logger)
	}
	c, err := connect(ctx, server, clientOptions{
		OAuth:         oauth,
		Logger:        logger,
		Capabilities:  map[string]any{"elicitation": map[string]any{}},
		HandleRequest: acceptElicitationDefaults,
	})
	if err != nil {
		return err
	}
	defer c.close()
	if w, ok := c.t.(interface{ getStreamSettled() <-chan struct{} }); ok {
		// The elicitation scenario sends its request on the GET stream.
		timer := time.NewTimer(5 * time.Second)
		select {
		case <-w.getStreamSettled():
		case <-timer.C:
			logger.Warn("the GET stream did not open within 5s; going on without it")
		case <-ctx.Done():
			return ctx.Err()
		}
		timer.Stop()
	}
	tools, err := c.listTools(ctx)
	if err != nil {
		return err
	}
	var name string
	var callArgs json.RawMessage
	switch {
	case scenario == "initialize":
		return nil
	case scenario == "tools_call":
		name, callArgs = "add_numbers", json.RawMessage(`{"a":5,"b":3}`)
	case len(tools) > 0:
		name, callArgs = tools[0].Name, json.RawMessage(`{}`)
	default:
		return nil
	}
	res, err := c.callTool(ctx, name, callArgs)
	if err != nil {
		return err
	}
	logger.Info("tool result", "tool", name, "text", resultToText(res), "is_error", res.IsError)
	if res.IsError {
		return fmt.Errorf("tool %s reported an error: %s", name, resultToText(res))
	}
	return nil
}

// conformanceClientMetadataURL is the client ID metadata document URL the
// suite's authorization servers expect from clients that use one.
const conformanceClientMetadataURL = "https://conformance-test.local/client-metadata.json"

// conformanceOAuth returns the OAuth clients of a conformance run and sets
// server's oauth table from MCP_CONFORMANCE_CONTEXT (pre-registered and
// client credentials details). The suite's authorization server approves
// at once: the authorization URL's redirect is read, not followed. Tokens
// go to $HARNESS_HOME/oauth when HARNESS_HOME is set, else stay in memory.
func conformanceOAuth(getenv func(string) (string, bool), server *serverConfig, logger *slog.Logger) (*oauthClients, error) {
	var sc struct {
		Name          string `json:"name"`
		ClientID      string `json:"client_id"`
		ClientSecret  string `json:"client_secret"`
		PrivateKeyPEM string `json:"private_key_pem"`
		SigningAlg    string `json:"signing_algorithm"`
	}
	if raw, ok := getenv("MCP_CONFORMANCE_CONTEXT"); ok && raw != "" {
		if err := json.Unmarshal([]byte(raw), &sc); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	cfg := &oauthConfig{
		ClientID:          sc.ClientID,
		ClientSecret:      sc.ClientSecret,
		ClientMetadataURL: conformanceClientMetadataURL,
		Grant:             grantAuthorizationCode,
		signingAlg:        sc.SigningAlg,
	}
	if sc.PrivateKeyPEM != "" {
		cfg.privateKeyPEM = []byte(sc.PrivateKeyPEM)
	}
	if strings.HasPrefix(sc.Name, "auth/client-credentials") {
		cfg.Grant = grantClientCredentials
	}
	server.OAuth = cfg
	var store *tokenStore
	if home, ok := getenv("HARNESS_HOME"); ok && home != "" {
		store = newTokenStore(filepath.Join(home, "oauth"))
	}
	clients := newOAuthClients(store, logger)
	noRedirects := &http.Client{
		Timeout:       30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	clients.authorize = func(ctx context.Context, authURL string) (string, error) {
		return readRedirect(ctx, noRedirects, authURL)
	}
	return clients, nil
}

// statelessProtocolVersion is the protocol revision without initialize
// or sessions, which harnessd's client does not speak yet.
const statelessProtocolVersion = "2026-07-28"

// statelessConformance acts out a scenario of protocol 2026-07-28 (the
// authorization scenarios that exist only there): it lists the tools and
// calls the first, each request carrying the revision's header and _meta,
// through the same OAuth client the daemon uses.
func statelessConformance(ctx context.Context, server serverConfig, auth *oauthClient, logger *slog.Logger) error {
	call := func(id int, method string, params map[string]any) (json.RawMessage, error) {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    statelessProtocolVersion,
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		}
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
		resp, err := auth.do(ctx, httpClient, func() (*http.Request, error) {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, server.URL, bytes.NewReader(body))
			if err == nil {
				req.Header[headerAccept] = acceptPost
				req.Header[headerContentType] = contentTypeRPC
				req.Header[headerProtocolVersion] = []string{statelessProtocolVersion}
			}
			return req, err
		})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if resp.StatusCode/100 != 2 {
			return nil, httpEndpoint{}.statusError(method, resp)
		}
		defer resp.Body.Close()
		var answer struct {
			Result json.RawMessage `json:"result"`
			Error  *rpcError       `json:"error"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, oauthMetadataLimit)).Decode(&answer); err != nil {
			return nil, fmt.Errorf("%s: %w", method, err)
		}
		if answer.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, answer.Error.Message)
		}
		return answer.Result, nil
	}
	raw, err := call(1, "tools/list", map[string]any{})
	if err != nil {
		return err
	}
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &list); err != nil || len(list.Tools) == 0 {
		return fmt.Errorf("tools/list: no tools in %s", raw)
	}
	if _, err := call(2, "tools/call", map[string]any{"name": list.Tools[0].Name, "arguments": map[string]any{}}); err != nil {
		return err
	}
	logger.Info("tool called", "tool", list.Tools[0].Name)
	return nil
}

// readRedirect GETs authURL and returns the absolute Location it redirects
// to, without following it.
func readRedirect(ctx context.Context, client *http.Client, authURL string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	drainClose(resp.Body)
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("authorization endpoint answered %d without a redirect", resp.StatusCode)
	}
	return loc.String(), nil
}

// acceptElicitationDefaults answers elicitation/create by accepting with
// the default of every property of the requested schema that has one.
func acceptElicitationDefaults(method string, params json.RawMessage) (any, *rpcError, bool) {
	if method != "elicitation/create" {
		return nil, nil, false
	}
	var p struct {
		RequestedSchema struct {
			Properties map[string]struct {
				Default json.RawMessage `json:"default"`
			} `json:"properties"`
		} `json:"requestedSchema"`
	}
	if err := json.Unmarshal(params, &p); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: err.Error()}, true
	}
	content := map[string]json.RawMessage{}
	for name, prop := range p.RequestedSchema.Properties {
		if len(prop.Default) > 0 {
			content[name] = prop.Default
		}
	}
	return map[string]any{"action": "accept", "content": content}, nil, true
}
