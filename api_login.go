package main

import (
	"errors"
	"fmt"
	"net/http"
)

// This file holds the API's two-step login to a server that needs OAuth:
// POST /v1/mcp/servers/{name}/login starts it (the authorization URL) and
// completes it (the redirected URL).

// loginServer answers POST /v1/mcp/servers/{name}/login (admin), for
// appliances where nobody has a shell: the body {} starts a login and
// answers {"authorization_url": ...}; the body {"redirected_url": ...}
// (the URL the browser ended on) completes it and answers
// {"status": "logged_in"}. The server reconnects on its next retry.
func (a *api) loginServer(w http.ResponseWriter, r *http.Request, _ authInfo) {
	name := r.PathValue("name")
	s := a.reg.server(name)
	if s == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no global MCP server %q (see GET /v1/mcp/servers)", name))
		return
	}
	c := a.reg.opts.Client.OAuth.forServer(s.cfg)
	if c == nil {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("server %q is not a Streamable HTTP server with OAuth", name))
		return
	}
	var body struct {
		RedirectedURL string `json:"redirected_url"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error()+` (send {} to start, {"redirected_url": "..."} to complete)`)
		return
	}
	if body.RedirectedURL == "" {
		authURL, err := c.startLogin(r.Context(), configuredHeader(s.cfg))
		switch {
		case err != nil:
			writeError(w, http.StatusBadGateway, "login_failed", err.Error())
		case authURL == "":
			writeJSON(w, http.StatusOK, map[string]string{"status": "logged_in"})
		default:
			writeJSON(w, http.StatusOK, map[string]string{"authorization_url": authURL})
		}
		return
	}
	err := c.completeLogin(r.Context(), body.RedirectedURL)
	switch {
	case errors.Is(err, errNoLogin):
		writeError(w, http.StatusConflict, "no_login", err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, "login_failed", err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "logged_in"})
	}
}
