package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
)

// This file holds what the commands share: the app they run in, the
// flags every command shares (the daemon's address among them), and exit
// codes.

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
