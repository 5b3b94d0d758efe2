package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// This file holds the mcp commands that manage the configured servers:
// mcp add, mcp remove and mcp get.

// A keyValueFlag is a repeatable K=V flag collected into a map.
type keyValueFlag struct {
	values map[string]string
}

func (f *keyValueFlag) String() string { return "" }

func (f *keyValueFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", s)
	}
	if f.values == nil {
		f.values = make(map[string]string)
	}
	f.values[k] = v
	return nil
}

// editFlags are the flags of the commands that edit a config file.
type editFlags struct {
	commonFlags
	scope   string
	replace bool
}

// register adds the shared and editing flags to fs.
func (f *editFlags) register(fs *flag.FlagSet, getenv func(string) (string, bool)) {
	f.commonFlags.register(fs, getenv)
	fs.StringVar(&f.scope, "scope", "home", "the file to edit: home ($HARNESS_HOME/config.toml) or workspace (<workspace>/.harness/config.toml)")
}

// parseNameAndFlags parses args of the form NAME [flags] or [flags] NAME
// into fs and returns NAME, the logger and the workspace.
func parseNameAndFlags(cmd string, fs *flag.FlagSet, c *commonFlags, args []string, w io.Writer) (string, string, error) {
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	_, workspace, err := c.parse(fs, args, w)
	if err != nil {
		return "", "", err
	}
	rest := fs.Args()
	if name == "" && len(rest) > 0 {
		name, rest = rest[0], rest[1:]
	}
	if name == "" {
		return "", "", usageError("%s: missing server NAME (see harnessd %s --help)", cmd, cmd)
	}
	if len(rest) > 0 {
		return "", "", usageError("%s: unexpected argument %q (a server command goes after --)", cmd, rest[0])
	}
	return name, workspace, nil
}

const mcpAddUsage = `Usage: harnessd mcp add NAME [flags] -- COMMAND ARGS...
       harnessd mcp add NAME --url URL [--header K=V]... [flags]

Adds the [mcp_servers.NAME] table to $HARNESS_HOME/config.toml (or the
workspace's with --scope workspace), leaving the rest of the file as it was.
Values are written as given: quote '${TOKEN}' to store a reference to a
variable that harnessd expands when it loads the file.

Then asks the daemon at HARNESS_ADDR (default 127.0.0.1:8080) to reload,
with the admin key in HARNESS_TOKEN, and says whether it did; if it did
not, reload it yourself (systemctl reload harnessd, or kill -HUP).

`

// mcpAdd implements "harnessd mcp add".
func (a *app) mcpAdd(ctx context.Context, args []string) error {
	var f editFlags
	var env, headers keyValueFlag
	var raw rawServer
	var transport, cwd, timeout, startupTimeout string
	flagArgs, command := splitCommand(args)
	fs := newFlagSet("mcp add", a.stderr, mcpAddUsage)
	f.register(fs, a.getenv)
	fs.BoolVar(&f.replace, "replace", false, "replace a server of that name in the file")
	fs.StringVar(&raw.URL, "url", "", "the server's MCP endpoint (http or https)")
	fs.StringVar(&transport, "transport", "", "http or sse (default: inferred; http falls back to legacy SSE)")
	fs.Var(&headers, "header", "an HTTP header K=V sent to the server (repeatable)")
	fs.Var(&env, "env", "an environment variable K=V of the server's process (repeatable)")
	fs.StringVar(&cwd, "cwd", "", "the server process's working directory (absolute)")
	fs.StringVar(&timeout, "timeout", "", "the deadline of one request, like 60s (default 30s)")
	fs.StringVar(&startupTimeout, "startup-timeout", "", "the bound of start-up and handshake, like 60s (default 30s)")
	name, workspace, err := parseNameAndFlags("mcp add", fs, &f.commonFlags, flagArgs, a.stderr)
	if err != nil {
		return err
	}
	if len(command) > 0 {
		raw.Command = command[0]
	}
	if len(command) > 1 { // no args line for a command without any
		raw.Args = command[1:]
	}
	raw.Name, raw.Env, raw.Headers, raw.Cwd = name, env.values, headers.values, cwd
	for _, opt := range []struct {
		value string
		field **string
	}{{transport, &raw.Transport}, {timeout, &raw.Timeout}, {startupTimeout, &raw.StartupTimeout}} {
		if opt.value != "" {
			*opt.field = &opt.value
		}
	}
	if _, err := buildServer("mcp add", originGlobal, "command line", raw, anyVarSet); err != nil {
		return usageError("%v", err)
	}
	for _, w := range unsetVarWarnings(raw, a.getenv) {
		fmt.Fprintf(a.stderr, "warning: %s\n", w)
	}
	file, err := configFileForScope(f.scope, workspace, a.getenv)
	if err != nil {
		return usageError("%v", err)
	}
	changed, err := spliceServers(file, map[string]rawServer{name: raw}, []string{name}, f.replace)
	if err != nil {
		return spliceHint(err)
	}
	verb := "added"
	if changed[0] {
		verb = "replaced"
	}
	fmt.Fprintf(a.stdout, "%s server %q in %s\n", verb, name, file)
	a.tellDaemon(ctx, file)
	return nil
}

// spliceHint returns err, spliceServers', with what to do on the command
// line: a name the file already has is a usage error.
func spliceHint(err error) error {
	var refusal *editRefusal
	if errors.As(err, &refusal) && refusal.kind == refusedTaken {
		return usageError("%v; give --replace to overwrite, or remove it with harnessd mcp remove (nothing was changed)", err)
	}
	return err
}

const mcpRemoveUsage = `Usage: harnessd mcp remove NAME [flags]

Removes the [mcp_servers.NAME] tables (and the comment lines just above
them) from $HARNESS_HOME/config.toml (or the workspace's with --scope
workspace), leaving the rest of the file as it was, then tells the
daemon at HARNESS_ADDR as mcp add does.

`

// mcpRemove implements "harnessd mcp remove".
func (a *app) mcpRemove(ctx context.Context, args []string) error {
	var f editFlags
	fs := newFlagSet("mcp remove", a.stderr, mcpRemoveUsage)
	f.register(fs, a.getenv)
	name, workspace, err := parseNameAndFlags("mcp remove", fs, &f.commonFlags, args, a.stderr)
	if err != nil {
		return err
	}
	file, err := configFileForScope(f.scope, workspace, a.getenv)
	if err != nil {
		return usageError("%v", err)
	}
	out, err := planRemoveServer(file, name)
	var refusal *editRefusal
	switch {
	case errors.As(err, &refusal) && refusal.kind == refusedUnknown:
		return usageError("mcp remove: %v (see harnessd mcp list; --scope picks the file)", err)
	case errors.As(err, &refusal) && refusal.kind == refusedHandWritten:
		return fmt.Errorf("mcp remove: %v; edit the file by hand", err)
	case err != nil:
		return err
	}
	if err := writeConfigFile(file, out); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "removed server %q from %s\n", name, file)
	a.tellDaemon(ctx, file)
	return nil
}

const mcpGetUsage = `Usage: harnessd mcp get NAME [flags]

Prints the configuration of server NAME (secret values masked), connects
it, and prints its status, protocol version and tools with their input
schemas. Exits 1 if the server failed.

`

// A serverDetails is what mcp get --json prints.
type serverDetails struct {
	Config serverView   `json:"config"`
	Status serverStatus `json:"status"`
	Tools  []toolView   `json:"tools"`
}

// A serverView is a serverConfig for display: header values and secret
// env values masked, other secrets redacted.
type serverView struct {
	Name           string            `json:"name"`
	Source         string            `json:"source"`
	Transport      string            `json:"transport"`
	Command        string            `json:"command,omitempty"`
	Args           []string          `json:"args,omitempty"`
	URL            string            `json:"url,omitempty"`
	Env            map[string]string `json:"env,omitempty"`
	Cwd            string            `json:"cwd,omitempty"`
	Headers        map[string]string `json:"headers,omitempty"`
	Timeout        string            `json:"timeout"`
	StartupTimeout string            `json:"startup_timeout"`
	Enabled        bool              `json:"enabled"`
	IncludeTools   []string          `json:"include_tools,omitempty"`
	ExcludeTools   []string          `json:"exclude_tools,omitempty"`
}

// maskedValue stands for a secret value in output.
const maskedValue = "********"

// viewOf returns cfg for display: its header values and the env values
// that are secrets as a whole masked, every other secret of cfg
// (config_secrets.go) redacted from its command, args and env values, and
// its URL's user information removed. Ordinary env values are shown as
// written.
func viewOf(cfg serverConfig) serverView {
	rd := newRedactor(cfg.secretValues()...)
	var env, headers map[string]string
	for k, v := range cfg.Env {
		if env == nil {
			env = make(map[string]string, len(cfg.Env))
		}
		if cfg.isSecretEnv(k) {
			env[k] = maskedValue
		} else {
			env[k] = rd.redact(v)
		}
	}
	for k := range cfg.Headers {
		if headers == nil {
			headers = make(map[string]string, len(cfg.Headers))
		}
		headers[k] = maskedValue
	}
	var args []string
	for _, a := range cfg.Args {
		args = append(args, rd.redact(a))
	}
	u := cfg.URL
	if parsed, err := parseHTTPURL(u); err == nil && parsed.User != nil {
		parsed.User = nil
		u = parsed.String()
	}
	return serverView{
		Name: cfg.Name, Source: cfg.Source, Transport: cfg.Transport, Command: rd.redact(cfg.Command),
		Args: args, URL: rd.redact(u), Env: env, Cwd: cfg.Cwd, Headers: headers,
		Timeout: cfg.requestTimeout().String(), StartupTimeout: cfg.startupTimeout().String(),
		Enabled: cfg.Enabled, IncludeTools: cfg.IncludeTools, ExcludeTools: cfg.ExcludeTools,
	}
}

// mcpGet implements "harnessd mcp get".
func (a *app) mcpGet(ctx context.Context, args []string) error {
	var f mcpFlags
	fs := a.mcpFlagSet("mcp get", mcpGetUsage, &f)
	name, workspace, err := parseNameAndFlags("mcp get", fs, &f.commonFlags, args, a.stderr)
	if err != nil {
		return err
	}
	logger, err := f.logger(a.stderr)
	if err != nil {
		return err
	}
	servers, model, err := a.mcpServers(&f, nil, logger, workspace)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(servers, func(s serverConfig) bool { return s.Name == name })
	if i < 0 {
		return usageError("mcp get: no server named %q is configured (see harnessd mcp list)", name)
	}
	cfg := servers[i]
	reg, err := connectForCommand(ctx, []serverConfig{cfg}, logger, a.getenv, commandInput(nil, a.stderr, model, a.getenv, logger))
	if err != nil {
		return err
	}
	defer reg.close()
	details := serverDetails{Config: viewOf(cfg), Status: reg.statuses()[0], Tools: []toolView{}}
	for _, ts := range reg.newScope(logger).toolSets() {
		for _, e := range ts.entries {
			if e.Server == name {
				details.Tools = append(details.Tools, toolView{Name: e.Name, ServerTool: e.ServerTool, Description: e.Description, InputSchema: e.InputSchema})
			}
		}
	}
	details.Status.Tools = nil
	if f.json {
		if err := printJSON(a, details); err != nil {
			return err
		}
	} else {
		printDetails(a.stdout, details)
	}
	if st := details.Status.Status; st != statusReady && st != statusDisabled {
		return &exitError{code: 1, err: fmt.Errorf("server %q: %s", name, details.Status.Error)}
	}
	return nil
}

// printDetails writes mcp get's text output.
func printDetails(w io.Writer, d serverDetails) {
	c := d.Config
	fmt.Fprintf(w, "%s\n  source: %s\n  transport: %s\n", c.Name, c.Source, c.Transport)
	if c.Command != "" {
		fmt.Fprintf(w, "  command: %s\n", strings.Join(append([]string{c.Command}, c.Args...), " "))
	}
	if c.URL != "" {
		fmt.Fprintf(w, "  url: %s\n", c.URL)
	}
	for _, kv := range []struct {
		what string
		m    map[string]string
	}{{"env", c.Env}, {"headers", c.Headers}} {
		for _, k := range slices.Sorted(maps.Keys(kv.m)) {
			fmt.Fprintf(w, "  %s: %s=%s\n", kv.what, k, kv.m[k])
		}
	}
	if c.Cwd != "" {
		fmt.Fprintf(w, "  cwd: %s\n", c.Cwd)
	}
	fmt.Fprintf(w, "  timeout: %s, startup_timeout: %s, enabled: %t\n", c.Timeout, c.StartupTimeout, c.Enabled)
	if len(c.IncludeTools) > 0 {
		fmt.Fprintf(w, "  include_tools: %s\n", strings.Join(c.IncludeTools, ", "))
	}
	if len(c.ExcludeTools) > 0 {
		fmt.Fprintf(w, "  exclude_tools: %s\n", strings.Join(c.ExcludeTools, ", "))
	}
	st := d.Status
	fmt.Fprintf(w, "  status: %s\n", st.Status)
	if st.ServerInfo != nil {
		fmt.Fprintf(w, "  server: %s %s, protocol %s\n", st.ServerInfo.Name, st.ServerInfo.Version, st.ProtocolVersion)
	}
	if st.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", st.Error)
	}
	for _, t := range d.Tools {
		fmt.Fprintf(w, "\n  %s  %s\n    input: %s\n", t.Name, oneLine(t.Description, 100), compactJSON(t.InputSchema))
	}
}
