package main

import (
	"context"
	"encoding/json"
	"fmt"
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
	c, err := connect(ctx, server, clientOptions{
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
