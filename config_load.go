package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// This file holds configuration sources and layering: the TOML files, the
// HARNESS_MCP_SERVERS variable, profiles and per-run servers, merged with
// the seed's precedence and checked for name collisions.

// errInvalidProfileName is wrapped by loadProfile's error for a name that
// cannot be a profile; the API answers it with 400.
var errInvalidProfileName = errors.New("invalid profile name")

// A loadOptions says where loadConfig looks. Home empty means defaultHome,
// Workspace empty means no workspace layer, Getenv nil means os.LookupEnv and
// Logger nil discards the warnings.
type loadOptions struct {
	Home, Workspace string
	Getenv          func(string) (string, bool)
	Logger          *slog.Logger
	// Files holds contents read instead of the file at a path: an edit
	// is checked as the whole configuration it would make before it is
	// written. Nil reads every file from disk.
	Files map[string][]byte
}

// A tomlConfig is one config.toml file.
type tomlConfig struct {
	runLimits
	tomlBudgets
	AllowedHosts    *[]string            `toml:"allowed_hosts"`
	MaxConnections  *int                 `toml:"max_connections"`
	MaxKeptRuns     *int64               `toml:"max_kept_runs"`
	MaxKeptRunAge   *string              `toml:"max_kept_run_age"`
	MaxKeptRunBytes *int64               `toml:"max_kept_run_bytes"`
	MCPServers      map[string]rawServer `toml:"mcp_servers"`
	Model           tomlModel            `toml:"model"`
	Auth            struct {
		Keys []rawAuthKey `toml:"keys"`
	} `toml:"auth"`
	ConnectMCP struct {
		AllowHosts *[]string `toml:"allow_hosts"`
	} `toml:"connect_mcp"`
	Webhooks  tomlWebhooks  `toml:"webhooks"`
	Schedules []rawSchedule `toml:"schedules"`
	Audit     tomlAudit     `toml:"audit"`
	Telemetry tomlTelemetry `toml:"telemetry"`

	// The budget of sampling outside runs' calls (input_budget.go).
	MaxOutsideSamplingRequests *int64 `toml:"max_outside_sampling_requests"`
	MaxOutsideSamplingTokens   *int64 `toml:"max_outside_sampling_tokens"`
}

// A tomlProfile is one profile file: only [mcp_servers] is read.
type tomlProfile struct {
	MCPServers map[string]rawServer `toml:"mcp_servers"`
}

// loadConfig reads $HARNESS_HOME/config.toml, <workspace>/.harness/config.toml
// (each optional) and the HARNESS_ variables (servers, keys, model, limits,
// budgets, retention, outside sampling, webhook secret) and OTEL_ ones
// (telemetry), and returns the
// merged, validated config. A server in the workspace file
// replaces the home file's server of the same name whole; [model] merges
// field by field; [[auth.keys]] merge by name; allow_hosts is replaced
// whole. A HARNESS_MCP_SERVERS entry named like a TOML server is logged and
// skipped. The error joins every problem found, one per line; the config
// returned with it holds the valid parts, for reporting only.
func loadConfig(opts loadOptions) (*config, error) {
	opts, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	cfg := &config{Audit: defaultAudit()}
	err = errors.Join(
		cfg.readFiles(configPaths(opts.Home, opts.Workspace), opts.Files, opts.Getenv),
		cfg.addEnvServers(opts.Getenv, opts.Logger),
		cfg.applyEnvLimits(opts.Getenv),
		cfg.applyEnvBudgets(opts.Getenv),
		cfg.applyEnvModel(opts.Getenv),
		cfg.checkModel(),
		cfg.applyEnvMaxConnections(opts.Getenv),
		cfg.applyEnvKeptRuns(opts.Getenv),
		cfg.applyEnvOutsideSampling(opts.Getenv),
		cfg.addEnvKeys(opts.Getenv),
		cfg.applyEnvWebhooks(opts.Getenv),
		cfg.applyEnvTelemetry(opts.Getenv),
	)
	return cfg, err
}

// resolve returns opts with its defaults filled in: os.LookupEnv, a
// discarding logger and defaultHome; with a workspace, Getenv answers
// HARNESS_WORKSPACE with it (withWorkspace).
func (opts loadOptions) resolve() (loadOptions, error) {
	if opts.Getenv == nil {
		opts.Getenv = os.LookupEnv
	}
	if opts.Workspace != "" {
		opts.Getenv = withWorkspace(opts.Getenv, opts.Workspace)
	}
	opts.Logger = orDiscard(opts.Logger)
	if opts.Home == "" {
		home, err := defaultHome(opts.Getenv)
		if err != nil {
			return opts, err
		}
		opts.Home = home
	}
	return opts, nil
}

// configPaths returns the TOML files to read, lowest precedence first:
// the home's config.toml, then the workspace's unless it is the same file.
func configPaths(home, workspace string) []string {
	paths := []string{filepath.Join(home, "config.toml")}
	if workspace != "" {
		ws := filepath.Join(workspace, ".harness", "config.toml")
		if filepath.Clean(ws) != filepath.Clean(paths[0]) {
			paths = append(paths, ws)
		}
	}
	return paths
}

// readFiles layers the TOML files at paths (a missing one is skipped) onto
// cfg, in order, and returns every problem found, joined. A path in
// override is read from there instead of the disk.
func (cfg *config) readFiles(paths []string, override map[string][]byte, getenv func(string) (string, bool)) error {
	var errs []error
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if o, ok := override[p]; ok {
			data, err = o, nil
		}
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("read config: %v; fix its permissions or remove it", err))
			continue
		}
		cfg.Files = append(cfg.Files, p)
		layer, err := parseConfigTOML(p, data, getenv)
		errs = append(errs, err)
		cfg.Servers = mergeByName(cfg.Servers, layer.servers, func(s serverConfig) string { return s.Name })
		cfg.AuthKeys = mergeByName(cfg.AuthKeys, layer.authKeys, func(k authKey) string { return k.Name })
		mergeModel(&cfg.Model, layer)
		if layer.allowHosts != nil {
			cfg.ConnectAllowHosts = *layer.allowHosts
		}
		if layer.allowedHosts != nil {
			cfg.AllowedHosts = *layer.allowedHosts
		}
		if layer.maxConnections != nil {
			cfg.MaxConnections = *layer.maxConnections
		}
		cfg.KeptRuns.merge(layer.keptRuns)
		cfg.OutsideSampling.merge(layer.outsideSampling)
		cfg.Limits.overlay(layer.limits)
		cfg.Webhooks.merge(layer.webhooks)
		cfg.Schedules = mergeByName(cfg.Schedules, layer.schedules, func(s scheduleConfig) string { return s.Name })
		cfg.Budgets.merge(layer.budgets)
		errs = append(errs, mergeTOMLAudit(p, layer.audit, &cfg.Audit))
		cfg.telemetryFiles.merge(layer.telemetry)
	}
	// Each file checked its own names; what is left is a clash between
	// a home and a workspace server.
	for i, s := range cfg.Servers {
		if j := firstClash(s.Name, cfg.Servers[:i]); j >= 0 && cfg.Servers[j].Source != s.Source {
			errs = append(errs, clashError(cfg.Servers[j], s))
		}
	}
	return errors.Join(errs...)
}

// mergeByName returns base with each element of later that has the name of
// an element of base in that element's place, and the others appended.
func mergeByName[T any](base, later []T, name func(T) string) []T {
	for _, l := range later {
		if i := slices.IndexFunc(base, func(b T) bool { return name(b) == name(l) }); i >= 0 {
			base[i] = l
		} else {
			base = append(base, l)
		}
	}
	return base
}

// parseConfigTOML parses and validates one config.toml file whose contents
// are data. On error the layer still holds every valid part of the file.
func parseConfigTOML(file string, data []byte, getenv func(string) (string, bool)) (configLayer, error) {
	var doc tomlConfig
	var layer configLayer
	md, errs, err := decodeTOML(file, data, &doc, configFile)
	if err != nil {
		return layer, err
	}
	servers, err := tomlServers(file, originGlobal, file, md, doc.MCPServers, getenv)
	errs = append(errs, err)
	layer.servers = servers

	layer.modelSet = doc.Model
	var modelErrs []error
	layer.model, modelErrs = parseTOMLModel(file, doc.Model)
	errs = append(errs, modelErrs...)
	layer.authKeys, err = parseTOMLKeys(file, doc.Auth.Keys)
	errs = append(errs, err)

	if hosts := doc.ConnectMCP.AllowHosts; hosts != nil {
		clean, err := hostPatterns(file+": [connect_mcp] allow_hosts", *hosts)
		layer.allowHosts = &clean
		errs = append(errs, err)
	}
	if hosts := doc.AllowedHosts; hosts != nil {
		clean, err := hostPatterns(file+": allowed_hosts", *hosts)
		layer.allowedHosts = &clean
		errs = append(errs, err)
	}
	if n := doc.MaxConnections; n != nil {
		if *n <= 0 {
			errs = append(errs, fmt.Errorf("%s: max_connections: %d is not positive; set a positive number or remove it", file, *n))
		}
		layer.maxConnections = n
	}
	setting := func(key string, v string) settingValue {
		return settingValue{value: v, source: file + ": " + key}
	}
	if n := doc.MaxKeptRuns; n != nil {
		layer.keptRuns.runs = setting("max_kept_runs", strconv.FormatInt(*n, 10))
	}
	if d := doc.MaxKeptRunAge; d != nil {
		layer.keptRuns.age = setting("max_kept_run_age", cmp.Or(*d, `""`))
	}
	if n := doc.MaxKeptRunBytes; n != nil {
		layer.keptRuns.bytes = setting("max_kept_run_bytes", strconv.FormatInt(*n, 10))
	}
	if n := doc.MaxOutsideSamplingRequests; n != nil {
		layer.outsideSampling.requests = setting("max_outside_sampling_requests", strconv.FormatInt(*n, 10))
	}
	if n := doc.MaxOutsideSamplingTokens; n != nil {
		layer.outsideSampling.tokens = setting("max_outside_sampling_tokens", strconv.FormatInt(*n, 10))
	}
	errs = append(errs, doc.runLimits.checkTOML(file)...)
	layer.limits = doc.runLimits
	layer.webhooks, err = parseTOMLWebhooks(file, doc.Webhooks)
	errs = append(errs, err)
	layer.schedules, err = parseSchedules(file, doc.Schedules)
	errs = append(errs, err)
	layer.budgets = doc.tomlBudgets.settings(file)
	layer.audit = doc.Audit
	layer.telemetry = doc.Telemetry.settings(file)
	return layer, errors.Join(errs...)
}

// tomlServers validates the [mcp_servers] tables of one file, in file order
// (md's key order). label prefixes errors; source becomes each Source.
func tomlServers(label string, origin serverOrigin, source string, md toml.MetaData, tables map[string]rawServer, getenv func(string) (string, bool)) ([]serverConfig, error) {
	var names []string
	for _, k := range md.Keys() {
		if len(k) >= 2 && k[0] == "mcp_servers" && !slices.Contains(names, k[1]) {
			names = append(names, k[1])
		}
	}
	for _, n := range slices.Sorted(maps.Keys(tables)) {
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var servers []serverConfig
	var errs []error
	for _, n := range names {
		raw, ok := tables[n]
		if !ok {
			continue
		}
		raw.Name = n
		s, err := buildServer(label, origin, source, raw, getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		servers = append(servers, s)
	}
	if err := validateServerNames(servers); err != nil {
		errs = append(errs, err)
	}
	return servers, errors.Join(errs...)
}

// parseServerJSON parses a JSON array of server objects or the object
// shape {"mcpServers": {...}}, as in HARNESS_MCP_SERVERS; source names it in errors and in each Source. Names
// must be unique, also once sanitized. It returns the valid servers and an
// error joining every problem. Empty data means no servers.
func parseServerJSON(source string, data []byte, getenv func(string) (string, bool)) ([]serverConfig, error) {
	servers, err := decodeServers(source, originGlobal, source, data, true, getenv)
	if err2 := validateServerNames(servers); err2 != nil {
		err = errors.Join(err, err2)
	}
	return servers, err
}

// decodeServers decodes each element of a JSON array (or, when objects,
// of the object shape of serverEntries) on its own, so that one bad entry
// does not hide the problems of the others. A nil getenv forbids ${VAR}.
func decodeServers(label string, origin serverOrigin, source string, data []byte, objects bool, getenv func(string) (string, bool)) ([]serverConfig, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, nil
	}
	entries, err := serverEntries(label, data, objects)
	if err != nil {
		return nil, err
	}
	var servers []serverConfig
	var errs []error
	for _, entry := range entries {
		var raw rawServer
		if err := entry.decode(&raw); err != nil {
			errs = append(errs, err)
			continue
		}
		s, err := buildServer(entry.label, origin, source, raw, getenv)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		servers = append(servers, s)
	}
	return servers, errors.Join(errs...)
}

// validateServerNames returns an error naming both servers (and their
// sources) for every pair in servers with the same name or the same
// sanitized name, or nil.
func validateServerNames(servers []serverConfig) error {
	var errs []error
	for i, s := range servers {
		j := firstClash(s.Name, servers[:i])
		if j < 0 {
			continue
		}
		errs = append(errs, clashError(servers[j], s))
	}
	return errors.Join(errs...)
}

// clashError says that prev and s, two servers of one source or layer,
// collide (see sameToolPrefix).
func clashError(prev, s serverConfig) error {
	if prev.Name == s.Name {
		return fmt.Errorf("server %q is defined twice (%s and %s); remove or rename one", s.Name, prev.Source, s.Source)
	}
	return fmt.Errorf("servers %q (%s) and %q (%s) both make tool names start with %q; rename one",
		prev.Name, prev.Source, s.Name, s.Source, mcpToolPrefix(s.Name))
}

// loadProfile reads $home/profiles/<name>.toml and returns its servers,
// with Source "profile <name>". A missing file returns found false and no
// error. An invalid name returns an error wrapping errInvalidProfileName.
func loadProfile(home, name string, getenv func(string) (string, bool)) (servers []serverConfig, found bool, err error) {
	if err := checkName(name, "", "letters, digits, \"-\" and \"_\""); err != nil {
		return nil, false, fmt.Errorf("profile %q: %w: %v", name, errInvalidProfileName, err)
	}
	file := filepath.Join(home, "profiles", name+".toml")
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("profile %q: read: %v; fix its permissions or remove it", name, err)
	}
	label := fmt.Sprintf("profile %q (%s)", name, file)
	var doc tomlProfile
	md, errs, err := decodeTOML(label, data, &doc, profileFile)
	if err != nil {
		return nil, true, err
	}
	servers, err = tomlServers(label, originProfile, "profile "+name, md, doc.MCPServers, getenv)
	if err := errors.Join(append(errs, err)...); err != nil {
		return nil, true, err
	}
	return servers, true, nil
}

// checkProfileServers refuses profile servers whose sanitized name equals
// that of a global with another name. A profile server may shadow the
// global of exactly its name (see shadow).
func checkProfileServers(globals, profile []serverConfig) error {
	var errs []error
	for _, p := range profile {
		if j := firstClash(p.Name, globals); j >= 0 && globals[j].Name != p.Name {
			g := globals[j]
			errs = append(errs, fmt.Errorf("profile server %q (%s) and global server %q (%s) both make tool names start with %q; rename the profile's server",
				p.Name, p.Source, g.Name, g.Source, mcpToolPrefix(p.Name)))
		}
	}
	return errors.Join(errs...)
}

// parseRunServers parses the mcp_servers array of a run request (nil or
// JSON null means none). Entries may not use ${VAR}, and none may share a
// name or sanitized name with a global server (disabled ones included), a
// server of the run's profile, or another entry. Every error is the
// client's fault (400); servers is nil with it. Each Origin is
// originPerRun, each Source "run".
func parseRunServers(raw json.RawMessage, globals, profile []serverConfig) ([]serverConfig, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return nil, nil
	}
	servers, err := decodeServers("mcp_servers", originPerRun, "run", raw, false, nil)
	if err != nil {
		return nil, err
	}
	if len(servers) > maxRunServers {
		return nil, fmt.Errorf("mcp_servers: %d servers; a run may add at most %d", len(servers), maxRunServers)
	}
	var errs []error
	for i, s := range servers {
		for _, group := range []struct {
			what    string
			servers []serverConfig
		}{{"global server", globals}, {"server of the run's profile", profile}, {"mcp_servers entry", servers[:i]}} {
			if j := firstClash(s.Name, group.servers); j >= 0 {
				errs = append(errs, fmt.Errorf("mcp_servers[%d]: server %q: name: collides with %s %q; choose another name", i, s.Name, group.what, group.servers[j].Name))
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return servers, nil
}

// adhocServer returns the server given on the command line of the mcp
// subcommands: --url rawURL, or command (COMMAND ARGS... after "--"), named
// name, with Source "command line". Values are taken literally: the shell
// has already expanded them.
func adhocServer(name, rawURL string, command []string) (serverConfig, error) {
	literal := func(s string) string { return strings.ReplaceAll(s, "$", "$$") }
	raw := rawServer{Name: name, URL: literal(rawURL)}
	if len(command) > 0 {
		raw.Command = literal(command[0])
		for _, a := range command[1:] {
			raw.Args = append(raw.Args, literal(a))
		}
	}
	return buildServer("command line", originGlobal, "command line", raw, nil)
}

// connectServer returns the server the agent connects with connect_mcp:
// the URL taken literally (never expanded: the model chose it), the
// transport inferred like any other source's, Source "connect_mcp".
func connectServer(name, rawURL string) (serverConfig, error) {
	if err := checkAgentServerName(name); err != nil {
		return serverConfig{}, fmt.Errorf("%s: server %q: %v", toolConnectMCP, name, err)
	}
	raw := rawServer{Name: name, URL: strings.ReplaceAll(rawURL, "$", "$$")}
	cfg, err := buildServer(toolConnectMCP, originConnect, toolConnectMCP, raw, nil)
	cfg.Untrusted = true
	return cfg, err
}
