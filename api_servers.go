package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// This file holds the routes about the daemon itself and its servers:
// GET /v1/mcp/servers and /v1/mcp/servers/{name}, /healthz, /readyz and
// /metrics.

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
