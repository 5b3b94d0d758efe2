package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// This file holds live management for admin keys: global servers added,
// replaced, removed, enabled, disabled and restarted, a server's tool
// tried, and the configuration reloaded. An edit is written to a config
// file exactly as harnessd mcp add writes it and applied without a
// restart, through the daemon (configManager). The schedules' edits are in
// api_schedule.go.

// A configManager changes the configuration of a running harnessd; the
// daemon implements it (config_reload.go). Safe for concurrent use.
type configManager interface {
	// configFiles returns the config.toml files harnessd reads, home
	// first, whether they exist or not.
	configFiles() []string
	// editConfig writes what plan returns to file and applies the
	// result, or leaves file and harnessd as they were: a
	// *configRefusal for a configuration that would not load, plan's
	// error, or the write's. Edits and reloads are serialised.
	editConfig(file string, plan func() ([]byte, error)) error
	// reload reads the configuration again and applies it (SIGHUP).
	reload() error
}

// routeManagement registers the management routes (all admin).
func (a *api) routeManagement() {
	a.route("/v1/mcp/servers", map[string]route{http.MethodPost: {scopeAdmin, a.addServer}})
	a.route("/v1/mcp/servers/{name}", map[string]route{
		http.MethodPut:    {scopeAdmin, a.replaceServer},
		http.MethodDelete: {scopeAdmin, a.deleteServer},
	})
	a.route("/v1/mcp/servers/{name}/enable", map[string]route{http.MethodPost: {scopeAdmin, a.enableServer}})
	a.route("/v1/mcp/servers/{name}/disable", map[string]route{http.MethodPost: {scopeAdmin, a.disableServer}})
	a.route("/v1/mcp/servers/{name}/restart", map[string]route{http.MethodPost: {scopeAdmin, a.restartServer}})
	a.route("/v1/mcp/servers/{name}/tools/{tool}/call", map[string]route{http.MethodPost: {scopeAdmin, a.callServerTool}})
	a.route("/v1/config/reload", map[string]route{http.MethodPost: {scopeAdmin, a.reloadConfig}})
	a.route("/v1/schedules", map[string]route{http.MethodPost: {scopeAdmin, a.createSchedule}})
	a.route("/v1/schedules/{name}", map[string]route{
		http.MethodPut:    {scopeAdmin, a.replaceSchedule},
		http.MethodDelete: {scopeAdmin, a.deleteSchedule},
	})
	a.route("/v1/schedules/{name}/pause", map[string]route{http.MethodPost: {scopeAdmin, a.pauseSchedule}})
	a.route("/v1/schedules/{name}/resume", map[string]route{http.MethodPost: {scopeAdmin, a.resumeSchedule}})
}

// managed returns the configManager, or answers 503 and returns nil when
// this API runs without one (it is not harnessd serve).
func (a *api) managed(w http.ResponseWriter) configManager {
	if a.manager == nil {
		writeError(w, http.StatusServiceUnavailable, "not_managed", "this API cannot change its configuration: only harnessd serve can")
	}
	return a.manager
}

// editTarget returns the config file an addition goes to: ?scope=home
// (the default, $HARNESS_HOME/config.toml) or ?scope=workspace, as
// harnessd mcp add --scope. It answers 400 and returns "" otherwise.
func editTarget(w http.ResponseWriter, r *http.Request, m configManager) string {
	files := m.configFiles()
	switch scope := r.URL.Query().Get("scope"); {
	case scope == "" || scope == "home":
		return files[0]
	case scope == "workspace" && len(files) > 1:
		return files[1]
	case scope == "workspace":
		writeError(w, http.StatusBadRequest, "invalid_request", "scope \"workspace\": harnessd runs without a workspace (--workspace); leave scope out to write "+files[0])
	default:
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("scope %q: want home or workspace", scope))
	}
	return ""
}

// editedServer returns, for a route that edits the global server named in
// r's path, the manager, the name and the file that holds the server; it
// answers the refusal and returns file "" when there is none of them.
func (a *api) editedServer(w http.ResponseWriter, r *http.Request) (configManager, string, string) {
	m := a.managed(w)
	if m == nil {
		return nil, "", ""
	}
	name := r.PathValue("name")
	return m, name, a.fileOfServer(w, m, name)
}

// fileOfServer returns the config file that defines the global server
// name, or answers 404 for no such server, 409 for one that comes from
// elsewhere (HARNESS_MCP_SERVERS), and returns "".
func (a *api) fileOfServer(w http.ResponseWriter, m configManager, name string) string {
	i := slices.IndexFunc(a.reg.globals(), func(s serverConfig) bool { return s.Name == name })
	if i < 0 {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no global MCP server %q (see GET /v1/mcp/servers; add one with POST /v1/mcp/servers)", name))
		return ""
	}
	source := a.reg.globals()[i].Source
	if !slices.Contains(m.configFiles(), source) {
		writeError(w, http.StatusConflict, "not_editable", fmt.Sprintf("server %q comes from %s, not a config file, so it cannot be edited through the API: change %s and restart harnessd, or define the server in %s instead", name, source, source, m.configFiles()[0]))
		return ""
	}
	return source
}

// decodeServerBody decodes a server entry (the fields of an
// [mcp_servers.NAME] table, plus name; "type" as in other clients' files)
// and checks its shape as harnessd mcp add does. name is the path's (""
// for POST, where the body names it). It answers 400 and returns false
// for a bad entry.
func decodeServerBody(w http.ResponseWriter, r *http.Request, name string) (rawServer, bool) {
	var raw rawServer
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err == nil {
		err = serverEntry{label: "request body", raw: body}.decode(&raw)
	}
	switch {
	case err != nil:
	case name != "" && raw.Name != "" && raw.Name != name:
		err = fmt.Errorf("request body: name: %q differs from the path's %q; leave it out or make them agree", raw.Name, name)
	case name == "" && raw.Name == "":
		err = errors.New("request body: name: missing; give the server's name")
	}
	if err == nil {
		if name != "" {
			raw.Name = name
		}
		_, err = buildServer("request body", originGlobal, "request body", raw, anyVarSet)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return raw, false
	}
	raw.Type = nil // written as transport
	return raw, true
}

// addServer answers POST /v1/mcp/servers: 201 with the new server's
// status once it is written to the config file (?scope=) and started;
// 409 for a name any source already uses.
func (a *api) addServer(w http.ResponseWriter, r *http.Request, info authInfo) {
	m := a.managed(w)
	if m == nil {
		return
	}
	raw, ok := decodeServerBody(w, r, "")
	if !ok {
		return
	}
	if i := slices.IndexFunc(a.reg.globals(), func(s serverConfig) bool { return s.Name == raw.Name }); i >= 0 {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("server %q already exists (from %s): replace it with PUT /v1/mcp/servers/%s, or choose another name", raw.Name, a.reg.globals()[i].Source, raw.Name))
		return
	}
	file := editTarget(w, r, m)
	if file == "" {
		return
	}
	err := m.editConfig(file, func() ([]byte, error) {
		data, _, err := planSplice(file, map[string]rawServer{raw.Name: raw}, []string{raw.Name}, false)
		return data, err
	})
	a.answerServerEdit(w, info, "added", raw.Name, file, http.StatusCreated, err)
}

// replaceServer answers PUT /v1/mcp/servers/{name}: the body is the whole
// new entry (enabled false disables it); 200 with its status once written
// and applied (a changed server restarts).
func (a *api) replaceServer(w http.ResponseWriter, r *http.Request, info authInfo) {
	m, name, file := a.editedServer(w, r)
	if file == "" {
		return
	}
	raw, ok := decodeServerBody(w, r, name)
	if !ok {
		return
	}
	err := m.editConfig(file, func() ([]byte, error) {
		data, _, err := planSplice(file, map[string]rawServer{name: raw}, []string{name}, true)
		return data, err
	})
	a.answerServerEdit(w, info, "replaced", name, file, http.StatusOK, err)
}

// enableServer answers POST /v1/mcp/servers/{name}/enable.
func (a *api) enableServer(w http.ResponseWriter, r *http.Request, info authInfo) {
	a.setServerEnabled(w, r, info, true)
}

// disableServer answers POST /v1/mcp/servers/{name}/disable.
func (a *api) disableServer(w http.ResponseWriter, r *http.Request, info authInfo) {
	a.setServerEnabled(w, r, info, false)
}

// setServerEnabled writes enabled = on in the server's table, its other
// fields kept as written, and applies it: a disabled server stops, an
// enabled one starts.
func (a *api) setServerEnabled(w http.ResponseWriter, r *http.Request, info authInfo, on bool) {
	m, name, file := a.editedServer(w, r)
	if file == "" {
		return
	}
	err := m.editConfig(file, func() ([]byte, error) {
		raw, err := fileServerTable(file, name)
		if err != nil {
			return nil, err
		}
		raw.Enabled = &on
		data, _, err := planSplice(file, map[string]rawServer{name: raw}, []string{name}, true)
		return data, err
	})
	verb := "disabled"
	if on {
		verb = "enabled"
	}
	a.answerServerEdit(w, info, verb, name, file, http.StatusOK, err)
}

// deleteServer answers DELETE /v1/mcp/servers/{name}: 200 once its tables
// are removed from the file and the server retired.
func (a *api) deleteServer(w http.ResponseWriter, r *http.Request, info authInfo) {
	m, name, file := a.editedServer(w, r)
	if file == "" {
		return
	}
	err := m.editConfig(file, func() ([]byte, error) { return planRemoveServer(file, name) })
	a.answerServerEdit(w, info, "removed", name, file, http.StatusOK, err)
}

// answerServerEdit answers an edit of server name in file: status with the
// server's state (none once removed), or the edit's error (writeEditError).
func (a *api) answerServerEdit(w http.ResponseWriter, info authInfo, verb, name, file string, status int, err error) {
	if err != nil {
		a.writeEditError(w, "server", name, err)
		return
	}
	a.logger.Info("server "+verb+" through the API", "server", name, "file", file, "key", info.key)
	body := map[string]any{"name": name, "file": file, "change": verb}
	if s := a.reg.server(name); s != nil {
		body["server"] = s.snapshot()
	}
	writeBody(w, status, a.globalSecrets.load().marshal(body, true))
}

// writeEditError answers an edit's error: 400 for an entry or a result
// that would not load, 404 for a name the file does not define, 409 for a
// name it already has or writes in a form the editor cannot change, 409
// for a file harnessd cannot read or write. Nothing was changed in any
// case, and the message says so.
func (a *api) writeEditError(w http.ResponseWriter, what, name string, err error) {
	var refusal *editRefusal
	var invalid *configRefusal
	msg := a.globalSecrets.load().redact(err.Error())
	switch {
	case errors.As(err, &refusal) && refusal.kind == refusedUnknown:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s %q: %s", what, name, msg))
	case errors.As(err, &refusal) && refusal.kind == refusedTaken:
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("%s %q: %s; replace it with PUT, or choose another name (nothing was changed)", what, name, msg))
	case errors.As(err, &refusal) && refusal.kind == refusedHandWritten:
		writeError(w, http.StatusConflict, "not_editable", fmt.Sprintf("%s %q: %s; edit the file by hand, then reload (nothing was changed)", what, name, msg))
	case errors.As(err, &refusal), errors.As(err, &invalid):
		writeError(w, http.StatusBadRequest, "invalid_config", fmt.Sprintf("%s %q: the configuration would not load, so nothing was changed:\n%s", what, name, msg))
	default:
		writeError(w, http.StatusConflict, "config_not_writable", fmt.Sprintf("%s %q: %s: make the config file and its directory writable by harnessd's user (nothing was changed)", what, name, msg))
	}
}

// restartServer answers POST /v1/mcp/servers/{name}/restart: 202 with the
// server's status once its replacement is starting (a new process for a
// stdio server); 404 for an unknown server, 409 for a disabled one.
func (a *api) restartServer(w http.ResponseWriter, r *http.Request, info authInfo) {
	name := r.PathValue("name")
	err := a.reg.restart(name)
	switch {
	case errors.Is(err, errNoGlobalServer):
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no global MCP server %q (see GET /v1/mcp/servers)", name))
	case err != nil:
		writeError(w, http.StatusConflict, "conflict", err.Error())
	default:
		a.logger.Info("server restarted through the API", "server", name, "key", info.key)
		writeBody(w, http.StatusAccepted, a.globalSecrets.load().marshal(map[string]any{"name": name, "server": a.reg.server(name).snapshot()}, true))
	}
}

// A toolCallRequest is the body of POST
// /v1/mcp/servers/{name}/tools/{tool}/call.
type toolCallRequest struct {
	Arguments json.RawMessage `json:"arguments"`
}

// callServerTool answers POST /v1/mcp/servers/{name}/tools/{tool}/call
// ({tool} the server's own name of it): 200 with the result, redacted,
// whether the tool reported an error (isError) or not; 404 for a server
// or tool the list does not have (a tool its filters hide included); 502
// when the call failed (the server is down, timed out, answered with an
// error).
func (a *api) callServerTool(w http.ResponseWriter, r *http.Request, info authInfo) {
	name, tool := r.PathValue("name"), r.PathValue("tool")
	var req toolCallRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	args := []byte(strings.TrimSpace(string(req.Arguments)))
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' {
		writeError(w, http.StatusBadRequest, "invalid_request", "request body: arguments: not a JSON object; send the tool's arguments as {\"name\": value, ...}")
		return
	}
	s := a.reg.server(name)
	if s == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no global MCP server %q (see GET /v1/mcp/servers)", name))
		return
	}
	if tools := s.toolSet(); tools == nil || !slices.ContainsFunc(tools.entries, func(e toolEntry) bool { return e.ServerTool == tool }) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("server %q has no tool %q (see GET /v1/mcp/servers/%s; a tool its include_tools or exclude_tools hide is not listed)", name, tool, name))
		return
	}
	scope := a.reg.newScope(a.logger)
	defer scope.close()
	ctx, cancel := context.WithTimeout(r.Context(), s.config().requestTimeout())
	defer cancel()
	rd := a.globalSecrets.load()
	res, err := scope.callTool(ctx, name, tool, args)
	if err != nil {
		a.logger.Info("tool tried through the API failed", "server", name, "tool", tool, "key", info.key, "err", err)
		writeError(w, http.StatusBadGateway, "tool_call_failed", rd.redact(fmt.Sprintf("call %s of server %q: %v", tool, name, err)))
		return
	}
	a.logger.Info("tool tried through the API", "server", name, "tool", tool, "key", info.key, "is_error", res.IsError)
	writeBody(w, http.StatusOK, rd.marshal(map[string]any{"server": name, "tool": tool, "result": res}, true))
}

// reloadConfig answers POST /v1/config/reload: the configuration is read
// again and applied as SIGHUP does; 200 with the files read, 400 naming
// every problem of a configuration that would not load (the running one
// stays). harnessd mcp add, remove and import call it.
func (a *api) reloadConfig(w http.ResponseWriter, r *http.Request, info authInfo) {
	m := a.managed(w)
	if m == nil {
		return
	}
	if err := m.reload(); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_config", "reload refused, the running configuration stays:\n"+a.globalSecrets.load().redact(err.Error()))
		return
	}
	a.logger.Info("configuration reloaded through the API", "key", info.key)
	writeJSON(w, http.StatusOK, map[string]any{"reloaded": true, "config_files": m.configFiles()})
}
