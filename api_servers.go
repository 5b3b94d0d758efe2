package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// This file holds the routes about the daemon itself and its servers:
// GET /v1/mcp/servers and /v1/mcp/servers/{name}, POST
// /v1/mcp/servers/{name}/accept, /healthz, /readyz and /metrics.

// listServers answers GET /v1/mcp/servers: every global server's status
// and tools, never its env or header values.
func (a *api) listServers(w http.ResponseWriter, r *http.Request, _ authInfo) {
	writeBody(w, http.StatusOK, a.globalSecrets.load().marshal(map[string]any{"servers": a.reg.statuses()}, true))
}

// A serverDetail is one server in GET /v1/mcp/servers/{name}: its status
// as the list shows it, with each tool's input schema.
type serverDetail struct {
	serverStatus
	Tools []toolDetail `json:"tools"`
}

// A toolDetail is one tool of a serverDetail.
type toolDetail struct {
	statusTool
	InputSchema json.RawMessage `json:"input_schema"`
}

// getServer answers GET /v1/mcp/servers/{name}: one global server with its
// tools' input schemas; 404 for a name the list does not have.
func (a *api) getServer(w http.ResponseWriter, r *http.Request, _ authInfo) {
	name := r.PathValue("name")
	s := a.reg.server(name)
	if s == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no global MCP server %q (see GET /v1/mcp/servers)", name))
		return
	}
	d := serverDetail{serverStatus: s.snapshot(), Tools: []toolDetail{}}
	if tools := s.toolSet(); tools != nil {
		for _, e := range tools.entries {
			d.Tools = append(d.Tools, toolDetail{statusTool{Name: e.Name, ServerTool: e.ServerTool, Description: e.Description}, e.InputSchema})
		}
	}
	writeBody(w, http.StatusOK, a.globalSecrets.load().marshal(d, true))
}

// An acceptRequest is the optional body of POST
// /v1/mcp/servers/{name}/accept: the one tool to accept, all held when
// empty.
type acceptRequest struct {
	Tool string `json:"tool"`
}

// An acceptAnswer is the answer of POST /v1/mcp/servers/{name}/accept:
// what was accepted, none when no tool was held.
type acceptAnswer struct {
	Server   string       `json:"server"`
	Accepted []toolChange `json:"accepted"`
}

// acceptServerTools answers POST /v1/mcp/servers/{name}/accept (admin):
// the held tool definitions of the server (or the one tool named) become
// its pins and its tools are offered at once; the answer lists what was
// accepted, each with its old and new digest and the fields changed.
func (a *api) acceptServerTools(w http.ResponseWriter, r *http.Request, _ authInfo) {
	name := r.PathValue("name")
	if a.reg.server(name) == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no global MCP server %q (see GET /v1/mcp/servers)", name))
		return
	}
	var req acceptRequest
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err == nil && len(bytes.TrimSpace(data)) > 0 {
		err = decodeStrictJSON(bytes.NewReader(data), &req)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error()+` (send nothing, or {"tool": "name"} to accept one tool)`)
		return
	}
	accepted, err := a.reg.acceptPins(r.Context(), name, req.Tool)
	switch {
	case errors.Is(err, errNotHeld):
		writeError(w, http.StatusConflict, "not_held", err.Error())
		return
	case err != nil && accepted == nil:
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	case err != nil:
		a.logger.Warn("accepted tool definitions", "server", name, "err", err)
	}
	if accepted == nil {
		accepted = []toolChange{}
	}
	writeJSON(w, http.StatusOK, acceptAnswer{Server: name, Accepted: accepted})
}

// healthz answers 200 while the process serves.
func (a *api) healthz(w http.ResponseWriter, r *http.Request, _ authInfo) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 once every global server finished its first
// connection attempt (whatever its outcome) and every required one is
// ready, while the run store can write; 503 otherwise.
func (a *api) readyz(w http.ResponseWriter, r *http.Request, _ authInfo) {
	if !a.reg.isReady() {
		var pending []string
		for _, s := range a.reg.statuses() {
			if s.Status == statusConnecting {
				pending = append(pending, s.Name)
			}
		}
		writeError(w, http.StatusServiceUnavailable, "not_ready", fmt.Sprintf("global MCP servers still connecting: %s", strings.Join(pending, ", ")))
		return
	}
	if down := a.reg.requiredDown(); len(down) > 0 {
		writeError(w, http.StatusServiceUnavailable, "not_ready", fmt.Sprintf("required global MCP servers not ready: %s (see GET /v1/mcp/servers)", strings.Join(down, ", ")))
		return
	}
	if err := a.runs.storeHealth().err; err != nil {
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// serveMetrics answers GET /metrics in the Prometheus text format.
func (a *api) serveMetrics(w http.ResponseWriter, r *http.Request, _ authInfo) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	a.metrics.write(w, a.reg.statuses(), a.runs.storeHealth())
}
