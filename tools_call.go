package main

import (
	"context"
	"encoding/json"
	"fmt"
)

// This file holds how a run calls one tool the model asked for: a built-in
// or an MCP tool of the run's scope, and the result as the model gets it.

// A toolResult is the outcome of one tool call as the model gets it.
type toolResult struct {
	text    string
	isError bool
	server  string // the server the call went to; "" for built-ins and unknown tools
}

// toolError is a toolResult with isError set.
func toolError(server, format string, args ...any) toolResult {
	return toolResult{text: fmt.Sprintf(format, args...), isError: true, server: server}
}

// callTool runs one tool call: a built-in from builtinTools, or an MCP
// tool of the run's scope (activating it).
func (r *run) callTool(ctx context.Context, tc toolCall) toolResult {
	if tc.ArgumentsError != "" {
		return toolError("", "tool %s: the arguments are not valid JSON (%s): send a JSON object", tc.Name, tc.ArgumentsError)
	}
	args := tc.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	entry, ok := r.catalog.lookup(tc.Name)
	if !ok {
		return toolError("", "unknown tool %q: use find_tool to search for tools, then call them by the names it returns", tc.Name)
	}
	if denied, ok := r.approval(ctx, entry, args); !ok {
		return denied
	}
	if b := builtinByName[entry.Name]; entry.Server == "" && b != nil {
		text, err := b.call(ctx, r, args)
		if err != nil {
			return toolError("", "%s", err.Error())
		}
		return toolResult{text: text}
	}
	r.catalog.activate(entry.Name)
	res, err := r.scope.callTool(ctx, entry.Server, entry.ServerTool, args)
	if err != nil {
		return toolError(entry.Server, "%s", err.Error())
	}
	text := resultToText(res)
	if text == "" {
		text = "(the tool returned no content)"
	}
	return toolResult{text: text, isError: res.IsError, server: entry.Server}
}
