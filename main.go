// Command harnessd runs LLM agent runs started over an HTTP API, with tools
// from external MCP servers that it consumes as an MCP client.
//
// Usage:
//
//	harnessd [serve] [flags]            serve the API
//	harnessd mcp list [flags]           connect every configured server, list its tools
//	harnessd mcp call [flags] TOOL [JSON-ARGS]
//	harnessd version
//
// Run any command with --help for its flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// This file holds the command line: flags and subcommands (serve, mcp list,
// mcp call, mcp conformance, version), the wiring of the daemon, signals
// and graceful shutdown.

// buildVersion is set at link time with -ldflags "-X main.buildVersion=...".
var buildVersion = "dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.LookupEnv}
	err := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(err, a.stderr))
}

// An app is one invocation of the command: its output streams and the
// environment it reads. Tests run it in-process with their own.
type app struct {
	stdout, stderr io.Writer
	getenv         func(string) (string, bool)
}

// An exitError carries a process exit code; its message (if any) has
// already been printed or is printed by exitCode.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// usageError marks bad flags or configuration: exit status 2.
func usageError(format string, args ...any) error {
	return &exitError{code: 2, err: fmt.Errorf(format, args...)}
}

// exitCode prints err (if it has a message) and returns the exit status.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	code := 1
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
		if ee.err == nil {
			return code
		}
	}
	fmt.Fprintf(stderr, "harnessd: %v\n", err)
	return code
}

// run dispatches the subcommand.
func (a *app) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return a.serve(ctx, nil)
	}
	switch args[0] {
	case "serve":
		return a.serve(ctx, args[1:])
	case "mcp":
		if len(args) < 2 {
			return usageError("mcp: missing subcommand: use \"harnessd mcp list\" or \"harnessd mcp call\"")
		}
		switch args[1] {
		case "list":
			return a.mcpList(ctx, args[2:])
		case "call":
			return a.mcpCall(ctx, args[2:])
		case "conformance":
			return a.mcpConformance(ctx, args[2:])
		}
		return usageError("mcp: unknown subcommand %q: use \"harnessd mcp list\" or \"harnessd mcp call\"", args[1])
	case "version", "--version":
		fmt.Fprintf(a.stdout, "harnessd %s\n", buildVersion)
		return nil
	case "help", "-h", "--help":
		fmt.Fprint(a.stdout, usageText)
		return nil
	}
	if strings.HasPrefix(args[0], "-") {
		return a.serve(ctx, args)
	}
	return usageError("unknown command %q (see harnessd --help)", args[0])
}

const usageText = `harnessd runs LLM agent runs whose tools come from external MCP servers.

Usage:
  harnessd [serve] [flags]                 serve the HTTP API
  harnessd mcp list [flags] [-- COMMAND ARGS...]
                                           connect every configured server and list its tools
  harnessd mcp call [flags] TOOL [JSON-ARGS] [-- COMMAND ARGS...]
                                           call one tool by its mcp_<server>_<tool> name
  harnessd mcp conformance URL             the client side of the official MCP conformance
                                           suite (a test aid; see ./test.sh)
  harnessd version

Run "harnessd COMMAND --help" for a command's flags.
`

// commonFlags are the flags every command shares.
type commonFlags struct {
	workspace string
	logFormat string
	logLevel  string
}

// register adds the shared flags to fs; defaults come from the environment.
func (c *commonFlags) register(fs *flag.FlagSet, getenv func(string) (string, bool)) {
	ws, _ := getenv("HARNESS_WORKSPACE")
	fs.StringVar(&c.workspace, "workspace", ws, "workspace directory: its .harness/config.toml is read and it is the servers' root (env HARNESS_WORKSPACE; default the current directory)")
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", "info", "log level: debug, info, warn or error")
}

// logger builds the logger the flags ask for.
func (c *commonFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return nil, usageError("--log-level %q: want debug, info, warn or error", c.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch c.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError("--log-format %q: want text or json", c.logFormat)
}

// parse parses args into fs (whose flags include c's) and returns the
// logger (writing to w) and the absolute workspace directory the flags ask
// for. A bad flag is a usage error (exit 2) whose message the flag package
// has printed; -h gives flag.ErrHelp.
func (c *commonFlags) parse(fs *flag.FlagSet, args []string, w io.Writer) (*slog.Logger, string, error) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, "", err
		}
		return nil, "", &exitError{code: 2}
	}
	logger, err := c.logger(w)
	if err != nil {
		return nil, "", err
	}
	workspace, err := c.resolveWorkspace()
	if err != nil {
		return nil, "", err
	}
	return logger, workspace, nil
}

// resolveWorkspace returns the absolute workspace directory.
func (c *commonFlags) resolveWorkspace() (string, error) {
	ws := c.workspace
	if ws == "" {
		ws = "."
	}
	abs, err := absDir(ws)
	if err != nil {
		return "", usageError("--workspace %q: %v", ws, err)
	}
	return abs, nil
}

// absDir returns dir made absolute, or an error if it is not a directory.
func absDir(dir string) (string, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return "", err
	}
	if !info.IsDir() {
		return "", errors.New("not a directory")
	}
	return filepath.Abs(dir)
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer, usage string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	return fs
}

// mcpFlags are the flags of the mcp commands.
type mcpFlags struct {
	commonFlags
	json bool
	url  string
	name string
}

// mcpFlagSet returns the flag set of an mcp subcommand, bound to f, with
// logging quiet (warn) by default so the output is the command's own.
func (a *app) mcpFlagSet(name, usage string, f *mcpFlags) *flag.FlagSet {
	fs := newFlagSet(name, a.stderr, usage)
	f.register(fs, a.getenv)
	// The commands print every server's outcome themselves.
	fs.Lookup("log-level").DefValue = "error"
	f.logLevel = "error"
	fs.BoolVar(&f.json, "json", false, "print JSON instead of text")
	fs.StringVar(&f.url, "url", "", "use this one MCP endpoint (http or https) instead of the configuration")
	fs.StringVar(&f.name, "name", "adhoc", "the name of the server given by --url or after --")
	return fs
}

// mcpServers returns the servers an mcp command works on: the ad-hoc one
// (--url or a command after --) or every configured global server.
func (a *app) mcpServers(f *mcpFlags, command []string, logger *slog.Logger, workspace string) ([]serverConfig, error) {
	if f.url != "" || len(command) > 0 {
		if f.url != "" && len(command) > 0 {
			return nil, usageError("give either --url or a command after --, not both")
		}
		server, err := adhocServer(f.name, f.url, command)
		if err != nil {
			return nil, usageError("%v", err)
		}
		return []serverConfig{server}, nil
	}
	home, err := defaultHome(a.getenv)
	if err != nil {
		return nil, usageError("%v", err)
	}
	cfg, err := loadConfig(loadOptions{Home: home, Workspace: workspace, Getenv: a.getenv, Logger: logger})
	if err != nil {
		return nil, usageError("%v", err)
	}
	if len(cfg.Servers) == 0 {
		return nil, usageError("no MCP servers configured: add [mcp_servers.<name>] to %s, set HARNESS_MCP_SERVERS, or give --url or -- COMMAND", filepath.Join(home, "config.toml"))
	}
	return cfg.Servers, nil
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
// first attempt.
func connectForCommand(ctx context.Context, servers []serverConfig, logger *slog.Logger, workspace string, getenv func(string) (string, bool)) (*registry, error) {
	reg := newRegistry(servers, registryOptions{
		Logger: logger,
		Client: clientOptions{Roots: []string{workspace}, Getenv: getenv},
	})
	if err := reg.waitReady(ctx); err != nil {
		reg.close()
		return nil, err
	}
	return reg, nil
}

const mcpListUsage = `Usage: harnessd mcp list [flags] [-- COMMAND ARGS...]

Connects every configured MCP server (or the one given by --url or after --)
and prints each server's status and its tools under their mcp_ names.
Exits 1 if any server failed.

`

// mcpList implements "harnessd mcp list".
func (a *app) mcpList(ctx context.Context, args []string) error {
	var f mcpFlags
	flagArgs, command := splitCommand(args)
	fs := a.mcpFlagSet("mcp list", mcpListUsage, &f)
	logger, workspace, err := f.parse(fs, flagArgs, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("mcp list: unexpected argument %q (a server command goes after --)", fs.Arg(0))
	}
	servers, err := a.mcpServers(&f, command, logger, workspace)
	if err != nil {
		return err
	}
	reg, err := connectForCommand(ctx, servers, logger, workspace, a.getenv)
	if err != nil {
		return err
	}
	defer reg.close()
	statuses := reg.statuses()
	failed := 0
	for _, st := range statuses {
		if st.Status != statusReady && st.Status != statusDisabled {
			failed++
		}
	}
	if f.json {
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"servers": statuses}); err != nil {
			return err
		}
	} else {
		printStatuses(a.stdout, statuses)
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d servers failed", failed, len(statuses))}
	}
	return nil
}

// printStatuses writes servers and their tools as aligned text.
func printStatuses(w io.Writer, statuses []serverStatus) {
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
			fmt.Fprintf(w, "  %-*s  %s\n", width, tool.Name, firstLine(tool.Description, 100))
		}
	}
}

// firstLine returns the first line of s, at most n bytes.
func firstLine(s string, n int) string {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		s = s[:i]
	}
	return truncate(strings.TrimSpace(s), n)
}

const mcpCallUsage = `Usage: harnessd mcp call [flags] TOOL [JSON-ARGS] [-- COMMAND ARGS...]

Calls one tool by its mcp_<server>_<tool> name with JSON-ARGS (a JSON object,
default {}) and prints the result's text (with --json, the whole result).
Exits 1 if the tool reports an error or the call fails.

`

// mcpCall implements "harnessd mcp call".
func (a *app) mcpCall(ctx context.Context, args []string) error {
	var f mcpFlags
	flagArgs, command := splitCommand(args)
	fs := a.mcpFlagSet("mcp call", mcpCallUsage, &f)
	logger, workspace, err := f.parse(fs, flagArgs, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() < 1 || fs.NArg() > 2 {
		return usageError("mcp call: want TOOL [JSON-ARGS], got %d arguments (see harnessd mcp call --help)", fs.NArg())
	}
	toolName := fs.Arg(0)
	toolArgs := json.RawMessage("{}")
	if fs.NArg() == 2 {
		toolArgs = json.RawMessage(fs.Arg(1))
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(toolArgs, &obj); err != nil || obj == nil {
			return usageError("mcp call: JSON-ARGS must be a JSON object, like '{\"message\":\"hi\"}'")
		}
	}
	servers, err := a.mcpServers(&f, command, logger, workspace)
	if err != nil {
		return err
	}
	var candidates []serverConfig
	for _, s := range servers {
		if s.Enabled && strings.HasPrefix(toolName, "mcp_"+sanitizeName(s.Name)+"_") {
			candidates = append(candidates, s)
		}
	}
	if len(candidates) == 0 {
		return fmt.Errorf("mcp call: no configured server has a tool named %q: names are mcp_<server>_<tool> (see harnessd mcp list)", toolName)
	}
	reg, err := connectForCommand(ctx, candidates, logger, workspace, a.getenv)
	if err != nil {
		return err
	}
	defer reg.close()
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
			res, err := scope.callTool(ctx, e.Server, e.ServerTool, toolArgs)
			if err != nil {
				return fmt.Errorf("mcp call %s: %w", toolName, err)
			}
			return a.printResult(&f, toolName, res)
		}
	}
	if len(failures) > 0 {
		return fmt.Errorf("mcp call %s: %s", toolName, strings.Join(failures, "; "))
	}
	return fmt.Errorf("mcp call: no tool named %q (see harnessd mcp list)", toolName)
}

// printResult prints a tool result; an isError result is an exit 1.
func (a *app) printResult(f *mcpFlags, toolName string, res *callResult) error {
	if f.json {
		raw := res.Raw
		if len(raw) == 0 {
			raw, _ = json.Marshal(res)
		}
		fmt.Fprintf(a.stdout, "%s\n", raw)
		if res.IsError {
			return &exitError{code: 1, err: fmt.Errorf("tool %s reported an error", toolName)}
		}
		return nil
	}
	text := resultToText(res)
	if res.IsError {
		return &exitError{code: 1, err: fmt.Errorf("tool %s reported an error: %s", toolName, text)}
	}
	fmt.Fprintln(a.stdout, text)
	return nil
}

const serveUsage = `Usage: harnessd [serve] [flags]

Loads the configuration, connects every global MCP server in the background
and serves the HTTP API.

`

// shutdownBudget bounds graceful shutdown on SIGINT/SIGTERM.
const shutdownBudget = 10 * time.Second

// serve implements "harnessd serve".
func (a *app) serve(ctx context.Context, args []string) error {
	var (
		f        commonFlags
		addr     string
		insecure bool
	)
	fs := newFlagSet("serve", a.stderr, serveUsage)
	f.register(fs, a.getenv)
	defaultAddr, ok := a.getenv("HARNESS_ADDR")
	if !ok || defaultAddr == "" {
		defaultAddr = "127.0.0.1:8080"
	}
	fs.StringVar(&addr, "addr", defaultAddr, "address to listen on (env HARNESS_ADDR)")
	fs.BoolVar(&insecure, "insecure", false, "allow a non-loopback --addr without API keys")
	logger, workspace, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("serve: unexpected argument %q", fs.Arg(0))
	}
	home, err := defaultHome(a.getenv)
	if err != nil {
		return usageError("%v", err)
	}
	cfg, err := loadConfig(loadOptions{Home: home, Workspace: workspace, Getenv: a.getenv, Logger: logger})
	if err != nil {
		return usageError("%v", err)
	}
	if len(cfg.AuthKeys) == 0 && !insecure && !isLoopbackAddr(addr) {
		return usageError("--addr %s is not a loopback address and no API keys are configured: add [[auth.keys]] or HARNESS_API_KEYS, or pass --insecure", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}

	reg := newRegistry(cfg.Servers, registryOptions{
		Logger:  logger,
		Client:  clientOptions{Roots: []string{workspace}, Getenv: a.getenv},
		Restart: true,
	})
	m := newMetrics()
	model := cfg.Model
	runs := newRunManager(runManagerOptions{
		Registry:   reg,
		Logger:     logger,
		Home:       home,
		Getenv:     a.getenv,
		Model:      model.name(),
		ModelBase:  model.BaseURL,
		MaxTokens:  model.MaxTokens,
		MaxSteps:   model.MaxSteps,
		AllowHosts: cfg.ConnectAllowHosts,
		Globals:    cfg.Servers,
		Metrics:    m,
	})
	stopping := make(chan struct{})
	srv := newHTTPServer(newAPI(runs, reg, cfg.AuthKeys, m, logger, stopping), logger)
	serveErr := make(chan error, 1)
	// Owned by serve; exits when the server is shut down below.
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("harnessd listening", "addr", ln.Addr().String(), "version", buildVersion, "servers", len(cfg.Servers),
		"auth", len(cfg.AuthKeys) > 0, "config_files", cfg.Files, "model", model.name())

	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runsCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		runs.shutdown(runsCtx)
		reg.close()
		return fmt.Errorf("serve: %w", err)
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	// Stop accepting at once, but cancel the runs while their event
	// streams are still open, so followers see each run end; then end the
	// streams that are left.
	httpCtx, httpCancel := context.WithTimeout(shutdownCtx, 2*time.Second)
	defer httpCancel()
	httpDone := make(chan error, 1)
	// Owned by serve; exits when every connection is closed or httpCtx is
	// done.
	go func() { httpDone <- srv.Shutdown(httpCtx) }()
	runsCtx, runsCancel := context.WithTimeout(shutdownCtx, 2*time.Second)
	defer runsCancel()
	if err := runs.shutdown(runsCtx); err != nil {
		logger.Warn("runs still ending at shutdown", "err", err)
	}
	close(stopping)
	if err := <-httpDone; err != nil {
		srv.Close()
	}
	closed := make(chan struct{})
	// Owned by serve; exits when every server is closed (bounded by the
	// stop ladder).
	go func() {
		reg.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-shutdownCtx.Done():
		logger.Warn("servers still closing at the shutdown deadline")
	}
	logger.Info("stopped")
	return nil
}

// newHTTPServer returns the API's server: a client must send its request
// headers within readHeaderTimeout, and idle connections close after
// idleTimeout. No overall read or write timeout: event streams are long.
func newHTTPServer(handler http.Handler, logger *slog.Logger) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// isLoopbackAddr reports whether a listen address only binds loopback.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

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
