package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// This file holds what the registry does with pinned tool definitions: a
// global server's listing is checked against its pins (a toolPinner, the
// pin store of tools_pins.go) before its tools are published, the tools
// held are left out of the snapshot and reported in its status, and an
// admin's accept re-pins them and re-lists the server at once.

// A toolChange is a tool whose definition differs from its pin: the
// digests of both and the fields that differ, with both descriptions.
type toolChange struct {
	// Tool is the server's own name of the tool.
	Tool      string `json:"tool"`
	OldDigest string `json:"old_digest"`
	NewDigest string `json:"new_digest"`
	// Changed names the fields that differ: title, description,
	// inputSchema, outputSchema, annotations.
	Changed        []string `json:"changed"`
	OldDescription string   `json:"old_description,omitempty"`
	NewDescription string   `json:"new_description,omitempty"`
	// SeenAt is when the new definition was first listed.
	SeenAt time.Time `json:"seen_at"`
}

// A toolPinner keeps the pinned definitions of the global servers' tools
// (tools_pins.go). It is safe for concurrent use.
type toolPinner interface {
	// check records the definitions of tools not seen before and compares
	// the others with their pins, as mode (pinHold, pinWarn) says; it
	// returns the tools held and the changes taken in under pinWarn.
	check(server, mode string, tools []toolInfo) (held, warned []toolChange, err error)
	// accept pins the held definitions of the server (only tool's, when
	// tool is not "") and returns what it accepted.
	accept(server, tool string) ([]toolChange, error)
}

// checkPins checks a listing of the server against its pins, for a
// global server whose pin_tools is not off, and returns the tools held
// and the changes warned of (pinWarn). Only the tools its include_tools
// and exclude_tools leave are pinned.
func (s *managedServer) checkPins(tools []toolInfo) (held, warned []toolChange, err error) {
	if s.pins == nil || s.cfg.PinTools == pinOff || s.cfg.PinTools == "" {
		return nil, nil, nil
	}
	kept := slices.DeleteFunc(slices.Clone(tools), func(t toolInfo) bool { return !keepsTool(s.cfg.IncludeTools, s.cfg.ExcludeTools, t.Name) })
	return s.pins.check(s.cfg.Name, s.cfg.PinTools, kept)
}

// withoutHeld returns the tools of infos that held does not name.
func withoutHeld(infos []toolInfo, held []toolChange) []toolInfo {
	if len(held) == 0 {
		return infos
	}
	return slices.DeleteFunc(slices.Clone(infos), func(t toolInfo) bool {
		return slices.ContainsFunc(held, func(h toolChange) bool { return h.Tool == t.Name })
	})
}

// acceptPins accepts the held definitions of the global server name (only
// tool's when tool is not ""), then re-lists the server, if connected, so
// that the tools are offered at once. It returns what was accepted.
func (r *registry) acceptPins(ctx context.Context, name, tool string) ([]toolChange, error) {
	s := r.server(name)
	if s == nil {
		return nil, fmt.Errorf("no global MCP server %q (see GET /v1/mcp/servers)", name)
	}
	if r.opts.Pins == nil {
		return nil, fmt.Errorf("server %q: tool definitions are not pinned", name)
	}
	accepted, err := r.opts.Pins.accept(name, tool)
	if err != nil {
		return nil, err
	}
	if c, err := s.current(); err == nil {
		if err := s.relist(ctx, c); err != nil {
			return accepted, fmt.Errorf("server %q: accepted, but re-listing its tools failed: %v; they are offered at its next listing", name, err)
		}
	}
	return accepted, nil
}
