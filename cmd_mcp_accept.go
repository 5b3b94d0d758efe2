package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"syscall"
)

// This file holds harnessd mcp accept: an admin accepts the changed tool
// definitions a server's pin_tools = "hold" keeps out of the catalogs,
// through a running daemon's API, or in the pin file when none runs.

const mcpAcceptUsage = `Usage: harnessd mcp accept [flags] NAME [TOOL]

Accepts the changed definitions of server NAME's held tools (only TOOL's
when given): they become the pinned definitions and the tools are offered
again. Prints what changed (the fields, the old and new descriptions).
When a harnessd runs at --addr (HARNESS_ADDR; its admin token in
HARNESS_TOKEN) it is told, and offers the tools at once; when none runs,
the pin file in $HARNESS_HOME/pins is edited.

`

// mcpAccept is "harnessd mcp accept".
func (a *app) mcpAccept(ctx context.Context, args []string) error {
	fs := newFlagSet("mcp accept", a.stderr, mcpAcceptUsage)
	addr := fs.String("addr", defaultAddr(a.getenv), "address of the running harnessd (env HARNESS_ADDR)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usageError("mcp accept: give the server's NAME and optionally one TOOL: harnessd mcp accept NAME [TOOL]")
	}
	name, tool := fs.Arg(0), fs.Arg(1)
	if err := checkServerName(name); err != nil {
		return usageError("mcp accept: %v", err)
	}
	accepted, err := a.acceptThroughDaemon(ctx, daemonURL(*addr), name, tool)
	if errors.Is(err, syscall.ECONNREFUSED) {
		home, herr := defaultHome(a.getenv)
		if herr != nil {
			return usageError("%v", herr)
		}
		fmt.Fprintf(a.stderr, "no harnessd at %s: editing the pin file in %s\n", *addr, pinsDir(home))
		accepted, err = newPinStore(pinsDir(home), nil, nil, nil).accept(name, tool)
	}
	if err != nil {
		return fmt.Errorf("mcp accept: %w", err)
	}
	if len(accepted) == 0 {
		fmt.Fprintf(a.stdout, "server %q: no tool held, nothing to accept\n", name)
		return nil
	}
	for _, ch := range accepted {
		fmt.Fprintf(a.stdout, "accepted %s\n", describeChange(name, ch))
	}
	return nil
}

// acceptThroughDaemon asks the daemon at base to accept the server's held
// tools (POST /v1/mcp/servers/{name}/accept). A daemon that is not
// listening gives an error wrapping syscall.ECONNREFUSED.
func (a *app) acceptThroughDaemon(ctx context.Context, base, name, tool string) ([]toolChange, error) {
	token, _ := a.getenv("HARNESS_TOKEN")
	token = strings.TrimSpace(token)
	payload, _ := json.Marshal(acceptRequest{Tool: tool}) // a struct of a string always encodes
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/mcp/servers/"+url.PathEscape(name)+"/accept", bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %v", base, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) {
			return nil, err
		}
		return nil, fmt.Errorf("cannot reach harnessd at %s (%v): is it running?", base, unwrapURLError(err))
	}
	defer resp.Body.Close()
	var body struct {
		acceptAnswer
		apiError
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("harnessd at %s: POST %s: %s, and the answer is not JSON: %v", base, req.URL.Path, resp.Status, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, errors.New(tokenRefusal(base, token != "", body.Error.Message))
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("harnessd at %s: %s: set HARNESS_TOKEN to an admin key's token", base, body.Error.Message)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("harnessd at %s: %s", base, body.Error.Message)
	}
	return body.Accepted, nil
}
