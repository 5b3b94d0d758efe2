package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// This file holds the command line's entry: the subcommand dispatch,
// the flags every command shares (the daemon's address among them), and
// exit codes.

// An app is one invocation of the command: its output streams and the
// environment it reads. Tests run it in-process with their own.
type app struct {
	stdin          io.Reader // nil means os.Stdin
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
	fmt.Fprintf(stderr, "harnessd: %s\n", escapeControls(err.Error()))
	return code
}

// run dispatches the subcommand. Everything it writes to stdout and
// stderr passes a terminalWriter, so that a server's text (a tool's
// description, a result, an error, a log line) is shown on a terminal,
// never acted on.
func (a *app) run(ctx context.Context, args []string) error {
	a.stdout, a.stderr = newTerminalWriter(a.stdout), newTerminalWriter(a.stderr)
	if len(args) == 0 {
		return a.serve(ctx, nil)
	}
	switch args[0] {
	case "serve":
		return a.serve(ctx, args[1:])
	case "mcp":
		if len(args) < 2 {
			return usageError("mcp: missing subcommand (see harnessd mcp --help)")
		}
		switch args[1] {
		case "help", "-h", "-help", "--help":
			fmt.Fprint(a.stdout, usageText)
			return nil
		case "list":
			return a.mcpList(ctx, args[2:])
		case "call":
			return a.mcpCall(ctx, args[2:])
		case "conformance":
			return a.mcpConformance(ctx, args[2:])
		case "add":
			return a.mcpAdd(ctx, args[2:])
		case "remove":
			return a.mcpRemove(ctx, args[2:])
		case "get":
			return a.mcpGet(ctx, args[2:])
		case "import":
			return a.mcpImport(ctx, args[2:])
		case "login":
			return a.mcpLogin(ctx, args[2:])
		case "logout":
			return a.mcpLogout(ctx, args[2:])
		case "resources":
			return a.mcpResources(ctx, args[2:])
		case "read":
			return a.mcpRead(ctx, args[2:])
		case "skills":
			return a.mcpSkills(ctx, args[2:])
		case "serve":
			return a.mcpServe(ctx, args[2:])
		case "accept":
			return a.mcpAccept(ctx, args[2:])
		}
		return usageError("mcp: unknown subcommand %q: see harnessd --help", args[1])
	case "version", "--version", "-version":
		fmt.Fprint(a.stdout, versionText(buildInfo()))
		return nil
	case "check":
		return a.check(ctx, args[1:])
	case "audit":
		return a.audit(ctx, args[1:])
	case "run":
		return a.runPrompt(ctx, args[1:])
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
  harnessd mcp get NAME [flags]            a server's configuration (secrets masked), status
                                           and tools with their input schemas
  harnessd mcp add NAME [flags] -- COMMAND ARGS...
  harnessd mcp add NAME --url URL [--header K=V]... [flags]
                                           add a server to the home (or --scope workspace) config.toml
  harnessd mcp remove NAME [flags]         remove a server from that file
  harnessd mcp import [flags] FILE         convert a Claude, Cursor, VS Code or Codex server list
  harnessd mcp login [flags] NAME          log in to a server that uses OAuth (prints the URL to open)
  harnessd mcp logout [flags] NAME         forget a server's OAuth tokens
  harnessd mcp resources NAME [flags]      list a server's resources
  harnessd mcp read NAME URI [flags]       read one resource
  harnessd mcp skills [SERVER] [flags]     list the servers' skills (none read)
  harnessd mcp accept NAME [TOOL]          accept a server's changed tool definitions held by
                                           pin_tools = "hold" (shows what changed)
  harnessd mcp serve [--addr ADDR]        MCP over stdin/stdout for a desktop host, forwarded
                                           to a running harnessd (token from HARNESS_TOKEN)
  harnessd mcp conformance URL             the client side of the official MCP conformance
                                           suite (a test aid; see ./test.sh)
  harnessd check [flags]                   validate every configuration source, start nothing
                                           (exit 2 on problems; servers that cannot start
                                           here are warnings: exit 0, or 1 with --strict)
  harnessd run [flags] PROMPT              start a run on a running harnessd and follow it;
                                           --conversation ID or --continue continues a
                                           conversation, --json prints its events
  harnessd run [flags]                     on a terminal: a chat, each line a turn
  harnessd audit verify                    check the audit trail's chain (exit 1 naming the first break)
  harnessd version                         version, VCS revision and Go version

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
	fs.StringVar(&c.workspace, "workspace", ws, "workspace directory: its .harness/config.toml is read, and ${HARNESS_WORKSPACE} in the config names it (env HARNESS_WORKSPACE; default the current directory)")
	c.registerLogging(fs, "info")
}

// registerLogging adds the logging flags to fs, for a command with no
// workspace; level is the default level.
func (c *commonFlags) registerLogging(fs *flag.FlagSet, level string) {
	fs.StringVar(&c.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&c.logLevel, "log-level", level, "log level: debug, info, warn or error")
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
	if err := parseFlags(fs, args); err != nil {
		return nil, "", err
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

// parseFlags parses args into fs, flags anywhere among the other
// arguments (see interspersed). A bad flag is a usage error (exit 2) whose
// message the flag package has printed; -h gives flag.ErrHelp.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(interspersed(fs, args)); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2}
	}
	return nil
}

// interspersed returns args with the flags first and the other arguments
// after a "--", in their order, so that fs, which stops at the first
// argument that is not a flag, also takes the flags people type after
// them (mcp call TOOL ARGS --json). A flag of fs that takes a value takes
// the next argument along unless it is written -flag=value; an unknown
// flag stays a flag, for fs to refuse. Everything after a "--" is left
// as it is, flags included (mcp add NAME -- COMMAND --its-flag).
func interspersed(fs *flag.FlagSet, args []string) []string {
	var flags, rest []string
	for i := 0; i < len(args); i++ {
		arg := args[i]
		switch {
		case arg == "--":
			rest = append(rest, args[i+1:]...)
			i = len(args)
		case len(arg) > 1 && arg[0] == '-':
			flags = append(flags, arg)
			name := strings.TrimLeft(arg, "-")
			if f := fs.Lookup(name); f != nil && !isBoolFlag(f) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		default:
			rest = append(rest, arg)
		}
	}
	if len(rest) == 0 {
		return flags
	}
	return append(append(flags, "--"), rest...)
}

// isBoolFlag reports whether f is a boolean flag, which takes no value
// unless written -flag=value.
func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
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

// defaultAddr returns the daemon's address unless --addr is given: that of
// HARNESS_ADDR, or 127.0.0.1:8080. serve listens on it and run calls it.
func defaultAddr(getenv func(string) (string, bool)) string {
	if addr, _ := getenv("HARNESS_ADDR"); addr != "" {
		return addr
	}
	return "127.0.0.1:8080"
}
