package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
)

// This file holds the mcp subcommands that use servers without a model:
// mcp list and mcp call, over the configured servers or one ad-hoc server.

// mcpFlags are the flags of the mcp commands.
type mcpFlags struct {
	commonFlags
	json bool
	url  string
	name string
}

// mcpFlagSet returns the flag set of an mcp subcommand, bound to f, with
// logging at warn by default: the commands print every server's outcome
// themselves, but a warning (a server skipped, two tools sharing a name)
// would otherwise go unseen.
func (a *app) mcpFlagSet(name, usage string, f *mcpFlags) *flag.FlagSet {
	fs := newFlagSet(name, a.stderr, usage)
	f.register(fs, a.getenv)
	fs.Lookup("log-level").DefValue = "warn"
	f.logLevel = "warn"
	fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
	fs.StringVar(&f.url, "url", "", "use this one MCP endpoint (http or https) instead of the configuration")
	fs.StringVar(&f.name, "name", "adhoc", "the name of the server given by --url or after --")
	return fs
}

// mcpServers returns the servers an mcp command works on: the ad-hoc one
// (--url or a command after --) or every configured global server.
// The model is the configured default (none for an ad-hoc server), for
// servers that ask for sampling.
func (a *app) mcpServers(f *mcpFlags, command []string, logger *slog.Logger, workspace string) ([]serverConfig, modelSettings, error) {
	if f.url != "" || len(command) > 0 {
		if f.url != "" && len(command) > 0 {
			return nil, modelSettings{}, usageError("give either --url or a command after --, not both")
		}
		server, err := adhocServer(f.name, f.url, command)
		if err != nil {
			return nil, modelSettings{}, usageError("%v", err)
		}
		return []serverConfig{server}, modelSettings{}, nil
	}
	home, err := defaultHome(a.getenv)
	if err != nil {
		return nil, modelSettings{}, usageError("%v", err)
	}
	cfg, err := loadConfig(loadOptions{Home: home, Workspace: workspace, Getenv: a.getenv, Logger: logger})
	if err != nil {
		return nil, modelSettings{}, usageError("%v", err)
	}
	if len(cfg.Servers) == 0 {
		return nil, modelSettings{}, usageError("no MCP servers configured: add [mcp_servers.<name>] to %s, set HARNESS_MCP_SERVERS, or give --url or -- COMMAND", filepath.Join(home, "config.toml"))
	}
	return cfg.Servers, cfg.Model, nil
}

// splitCommand splits args at the first "--" into what comes before and
// the command after it.
func splitCommand(args []string) (before, command []string) {
	for i, arg := range args {
		if arg == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

// connectForCommand connects servers once (no restarts) and waits for every
// first attempt. input answers the servers' questions.
func connectForCommand(ctx context.Context, servers []serverConfig, logger *slog.Logger, getenv func(string) (string, bool), input *inputPolicy) (*registry, error) {
	var oauth *oauthClients
	if home, err := defaultHome(getenv); err == nil {
		oauth = newOAuthClients(newTokenStore(oauthDir(home)), logger)
	}
	reg := newRegistry(servers, registryOptions{
		Logger: logger,
		Client: clientOptions{Getenv: getenv, OAuth: oauth, Input: input},
	})
	if err := reg.waitReady(ctx); err != nil {
		reg.close()
		return nil, err
	}
	return reg, nil
}

const mcpListUsage = `Usage: harnessd mcp list [flags] [-- COMMAND ARGS...]

Connects every configured MCP server (or the one given by --url or after --)
and prints each server's status and its tools under their mcp_ names (with
--verbose or --json, their input schemas too). Exits 1 if any server failed.

`

// mcpList implements "harnessd mcp list".
func (a *app) mcpList(ctx context.Context, args []string) error {
	var f mcpFlags
	flagArgs, command := splitCommand(args)
	fs := a.mcpFlagSet("mcp list", mcpListUsage, &f)
	var verbose bool
	fs.BoolVar(&verbose, "verbose", false, "print each tool's input schema")
	logger, workspace, err := f.parse(fs, flagArgs, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("mcp list: unexpected argument %q (a server command goes after --)", fs.Arg(0))
	}
	servers, model, err := a.mcpServers(&f, command, logger, workspace)
	if err != nil {
		return err
	}
	reg, err := connectForCommand(ctx, servers, logger, a.getenv, commandInput(nil, a.stderr, model, a.getenv, logger))
	if err != nil {
		return err
	}
	defer reg.close()
	statuses := reg.statuses()
	var schemas map[string]json.RawMessage
	if verbose || f.json {
		schemas = toolSchemas(reg.toolSets())
	}
	failed := 0
	for _, st := range statuses {
		if st.Status != statusReady && st.Status != statusDisabled {
			failed++
		}
	}
	if f.json {
		if err := printJSON(a, map[string]any{"servers": withSchemas(statuses, schemas)}); err != nil {
			return err
		}
	} else {
		printStatuses(a.stdout, statuses, schemas)
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d servers failed", failed, len(statuses))}
	}
	return nil
}

// printStatuses writes servers and their tools as aligned text, each
// tool's input schema too if schemas has it.
func printStatuses(w io.Writer, statuses []serverStatus, schemas map[string]json.RawMessage) {
	for i, st := range statuses {
		if i > 0 {
			fmt.Fprintln(w)
		}
		line := fmt.Sprintf("%s  %s  %s", st.Name, st.Transport, st.Status)
		if st.ServerInfo != nil {
			line += fmt.Sprintf("  %s %s  protocol %s", st.ServerInfo.Name, st.ServerInfo.Version, st.ProtocolVersion)
		}
		fmt.Fprintln(w, line)
		if st.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", st.Error)
		}
		width := 0
		for _, tool := range st.Tools {
			width = max(width, len(tool.Name))
		}
		for _, tool := range st.Tools {
			fmt.Fprintf(w, "  %-*s  %s\n", width, tool.Name, oneLine(tool.Description, 100))
			if schema, ok := schemas[tool.Name]; ok {
				fmt.Fprintf(w, "  %-*s  input: %s\n", width, "", compactJSON(schema))
			}
		}
	}
}

// toolSchemas returns the input schema of every tool of sets by its
// mcp_ name.
func toolSchemas(sets []*serverTools) map[string]json.RawMessage {
	schemas := make(map[string]json.RawMessage)
	for _, ts := range sets {
		for _, e := range ts.entries {
			schemas[e.Name] = e.InputSchema
		}
	}
	return schemas
}

// A listedServer is a server of mcp list --json: its status, and its
// tools with their input schemas.
type listedServer struct {
	serverStatus
	Tools []toolView `json:"tools"`
}

// withSchemas returns statuses with the input schema of each tool.
func withSchemas(statuses []serverStatus, schemas map[string]json.RawMessage) []listedServer {
	out := make([]listedServer, len(statuses))
	for i, st := range statuses {
		out[i] = listedServer{serverStatus: st, Tools: []toolView{}}
		for _, tool := range st.Tools {
			out[i].Tools = append(out[i].Tools, toolView{Name: tool.Name, ServerTool: tool.ServerTool, Description: tool.Description, InputSchema: schemas[tool.Name]})
		}
	}
	return out
}

const mcpCallUsage = `Usage: harnessd mcp call [flags] TOOL [JSON-ARGS] [-- COMMAND ARGS...]

Calls one tool by its mcp_<server>_<tool> name with JSON-ARGS (a JSON object,
default {}) and prints the result's text (with --json, the whole result).
Exits 1 if the tool reports an error or the call fails.

`

// callArgs returns the tool name and JSON arguments of "mcp call" (an
// empty object when none are given), or a usage error.
func callArgs(args []string) (string, json.RawMessage, error) {
	if len(args) < 1 || len(args) > 2 {
		return "", nil, usageError("mcp call: want TOOL [JSON-ARGS], got %d arguments (see harnessd mcp call --help)", len(args))
	}
	toolArgs := json.RawMessage("{}")
	if len(args) == 2 {
		toolArgs = json.RawMessage(args[1])
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(toolArgs, &obj); err != nil || obj == nil {
			return "", nil, usageError("mcp call: JSON-ARGS must be a JSON object, like '{\"message\":\"hi\"}'")
		}
	}
	return args[0], toolArgs, nil
}

// mcpCall implements "harnessd mcp call".
func (a *app) mcpCall(ctx context.Context, args []string) (err error) {
	var f mcpFlags
	flagArgs, command := splitCommand(args)
	fs := a.mcpFlagSet("mcp call", mcpCallUsage, &f)
	logger, workspace, err := f.parse(fs, flagArgs, a.stderr)
	if err != nil {
		return err
	}
	toolName, toolArgs, err := callArgs(fs.Args())
	if err != nil {
		return err
	}
	servers, model, err := a.mcpServers(&f, command, logger, workspace)
	if err != nil {
		return err
	}
	// The candidates connect without their tool filters, so that a tool
	// they hide can be named with the setting that hides it.
	var candidates []serverConfig
	filters := make(map[string]serverConfig)
	for _, s := range servers {
		if !strings.HasPrefix(toolName, mcpToolPrefix(s.Name)) {
			continue
		}
		if !s.Enabled {
			return fmt.Errorf("mcp call: %q would be a tool of server %q, which is disabled by enabled = false (%s); set enabled = true to use it", toolName, s.Name, s.Source)
		}
		filters[s.Name] = s
		s.IncludeTools, s.ExcludeTools = nil, nil
		candidates = append(candidates, s)
	}
	if len(candidates) == 0 {
		return fmt.Errorf("mcp call: no configured server has a tool named %q: names are mcp_<server>_<tool> (see harnessd mcp list)", toolName)
	}
	input := commandInput(a.stdinOrDefault(), a.stderr, model, a.getenv, logger)
	if isTerminalWriter(a.stderr) {
		input.Progress = printProgress(a.stderr)
	}
	reg, err := connectForCommand(ctx, candidates, logger, a.getenv, input)
	if err != nil {
		return err
	}
	defer reg.close()
	// Errors may quote what the output may (see printResult).
	defer func() { err = redactedError(reg.secrets().load(), err) }()
	scope := reg.newScope(logger)
	var failures []string
	for _, st := range reg.statuses() {
		if st.Status != statusReady {
			failures = append(failures, st.Error)
		}
	}
	for _, ts := range scope.toolSets() {
		for _, e := range ts.entries {
			if e.Name != toolName {
				continue
			}
			if err := hiddenBy(filters[e.Server], e.ServerTool); err != nil {
				return fmt.Errorf("mcp call: %w", err)
			}
			// A server that asked for roots may still be applying them.
			if c, err := scope.server(e.Server).current(); err == nil {
				if err := c.settleRoots(ctx); err != nil {
					return err
				}
			}
			res, err := scope.callTool(ctx, e.Server, e.ServerTool, toolArgs)
			if err != nil {
				return fmt.Errorf("mcp call %s: %w", toolName, err)
			}
			return a.printResult(&f, toolName, res, reg.secrets().load())
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("mcp call %s: %s", toolName, strings.Join(failures, "; "))
	}
	return fmt.Errorf("mcp call: no tool named %q (see harnessd mcp list)", toolName)
}

// redactedError returns err with rd's secrets redacted from its message,
// keeping its exit status; nil for nil.
func redactedError(rd *redactor, err error) error {
	if err == nil || rd.size() == 0 {
		return err
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err == nil {
			return err
		}
		return &exitError{code: ee.code, err: errors.New(rd.redact(ee.err.Error()))}
	}
	return errors.New(rd.redact(err.Error()))
}

// hiddenBy returns an error naming the setting of cfg (include_tools or
// exclude_tools) that hides its tool serverTool, or nil if none does.
func hiddenBy(cfg serverConfig, serverTool string) error {
	if !matchesAny(cfg.IncludeTools, serverTool, true) {
		return fmt.Errorf("tool %q of server %q is hidden by include_tools %q (%s); add it there to use it", serverTool, cfg.Name, cfg.IncludeTools, cfg.Source)
	}
	for _, glob := range cfg.ExcludeTools {
		if matchesAny([]string{glob}, serverTool, false) {
			return fmt.Errorf("tool %q of server %q is hidden by exclude_tools entry %q (%s); remove it there to use it", serverTool, cfg.Name, glob, cfg.Source)
		}
	}
	return nil
}

// printResult prints a tool result, with rd's secrets redacted; an
// isError result is an exit 1.
func (a *app) printResult(f *mcpFlags, toolName string, res *callResult, rd *redactor) error {
	if f.json {
		raw := res.Raw
		if len(raw) == 0 {
			raw, _ = json.Marshal(res)
		}
		if rd.occurs(raw) || (rd != nil && rd.escaped.occurs(raw)) {
			raw = rd.marshal(json.RawMessage(raw), false)
		}
		fmt.Fprintf(a.stdout, "%s\n", raw)
		if res.IsError {
			return &exitError{code: 1, err: fmt.Errorf("tool %s reported an error", toolName)}
		}
		return nil
	}
	text := rd.redact(resultToText(res))
	if res.IsError {
		return &exitError{code: 1, err: fmt.Errorf("tool %s reported an error: %s", toolName, text)}
	}
	fmt.Fprintln(a.stdout, text)
	return nil
}

// A toolView is one tool with its input schema.
type toolView struct {
	Name        string          `json:"name"`
	ServerTool  string          `json:"server_tool"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}
