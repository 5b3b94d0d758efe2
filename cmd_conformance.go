package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	logger.Info("connected", "protocol_version", c.protocolVersion())
	tools, err := c.listTools(ctx)
	if err != nil {
		return err
	}
	if err := conformanceSkills(ctx, c, scenario, logger); err != nil {
		return err
	}
	calls, err := conformanceCalls(scenario, a.getenv, tools)
	if err != nil {
		return err
	}
	for _, call := range calls {
		res, err := c.callTool(ctx, call.Name, call.Arguments)
		if err != nil {
			return err
		}
		logger.Info("tool result", "tool", call.Name, "text", resultToText(res), "is_error", res.IsError)
		if res.IsError {
			return fmt.Errorf("tool %s reported an error: %s", call.Name, resultToText(res))
		}
	}
	return nil
}

// conformanceSkills lists the skills of a server that declares the
// extension (reading none of their files) and, for the verification
// scenarios, loads each skill and then reads its other files, as an agent
// following it would: a file that fails verification ends the run.
func conformanceSkills(ctx context.Context, c *mcpClient, scenario string, logger *slog.Logger) error {
	skills, err := c.listSkills(ctx)
	if err != nil || len(skills) == 0 {
		return err
	}
	logger.Info("skills listed", "skills", len(skills))
	if !strings.HasPrefix(scenario, "sep-2640-client-verify-") {
		return nil
	}
	for i := range skills {
		e := &skills[i]
		if _, err := c.loadSkill(ctx, e); err != nil {
			return err
		}
		for _, f := range e.Files {
			if f.URI == e.URI {
				continue
			}
			if _, err := c.readSkillFile(ctx, e, f.URI); err != nil {
				return err
			}
		}
		logger.Info("skill loaded", "skill", e.name(), "files", len(e.Files))
	}
	return nil
}

// A conformanceCall is one tool call a scenario asks for.
type conformanceCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// conformanceCalls returns the tool calls that act out scenario against
// tools: those MCP_CONFORMANCE_CONTEXT lists (of the tools listed; those
// left out, for invalid header annotations, are not called), the echo of
// a schema for the schema-preservation scenario, every tool for the one on
// invalid tool headers and the one on input-required results, none where listing is all (initialize, the $ref
// scenario), else the first tool with no arguments.
func conformanceCalls(scenario string, getenv func(string) (string, bool), tools []toolInfo) ([]conformanceCall, error) {
	var context struct {
		ToolCalls []conformanceCall `json:"toolCalls"`
	}
	if raw, ok := getenv("MCP_CONFORMANCE_CONTEXT"); ok && raw != "" {
		if err := json.Unmarshal([]byte(raw), &context); err != nil {
			return nil, fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	listed := make(map[string]toolInfo, len(tools))
	for _, tool := range tools {
		listed[tool.Name] = tool
	}
	var calls []conformanceCall
	switch {
	case scenario == "initialize" || scenario == "json-schema-ref-no-deref":
	case len(context.ToolCalls) > 0:
		for _, call := range context.ToolCalls {
			if _, ok := listed[call.Name]; ok {
				calls = append(calls, call)
			}
		}
	case scenario == "tools_call":
		calls = append(calls, conformanceCall{"add_numbers", json.RawMessage(`{"a":5,"b":3}`)})
	case scenario == "json-schema-2020-12-preservation":
		focal, ok := listed["json_schema_2020_12_tool"]
		if !ok {
			return nil, fmt.Errorf("tools/list: no json_schema_2020_12_tool")
		}
		args, err := json.Marshal(map[string]json.RawMessage{"schema": focal.InputSchema})
		if err != nil {
			return nil, err
		}
		calls = append(calls, conformanceCall{"json_schema_echo", args})
	case scenario == "http-invalid-tool-headers" || scenario == "sep-2322-client-request-state":
		for _, tool := range tools {
			calls = append(calls, conformanceCall{tool.Name, json.RawMessage(`{}`)})
		}
	case len(tools) > 0:
		calls = append(calls, conformanceCall{tools[0].Name, json.RawMessage(`{}`)})
	}
	return calls, nil
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
		// workload identity and enterprise-managed authorization
		ValidJWT         string `json:"valid_jwt"`
		IdPClientID      string `json:"idp_client_id"`
		IdPIDToken       string `json:"idp_id_token"`
		IdPTokenEndpoint string `json:"idp_token_endpoint"`
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
	scenario, _ := getenv("MCP_CONFORMANCE_SCENARIO")
	switch {
	case strings.HasPrefix(sc.Name, "auth/client-credentials"):
		cfg.Grant = grantClientCredentials
	case sc.ValidJWT != "":
		cfg.Grant, cfg.assertion = grantJWTBearer, sc.ValidJWT
	case sc.IdPTokenEndpoint != "" || scenario == "auth/cross-app-access-complete-flow":
		cfg.Grant, cfg.assertion = grantJWTBearer, sc.IdPIDToken
		cfg.IdPTokenEndpoint, cfg.IdPClientID = sc.IdPTokenEndpoint, sc.IdPClientID
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
