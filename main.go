// Command harnessd runs LLM agent runs started over an HTTP API, with tools
// from external MCP servers that it consumes as an MCP client.
//
// Usage:
//
//	harnessd [serve] [flags]            serve the API
//	harnessd mcp list [flags]           connect every configured server, list its tools
//	harnessd mcp call [flags] TOOL [JSON-ARGS]
//	harnessd mcp get|add|remove NAME [flags]
//	harnessd mcp import [flags] FILE
//	harnessd mcp serve [flags]          MCP on stdin/stdout, forwarded to a running harnessd
//	harnessd check [flags]
//	harnessd run [flags] [PROMPT]       start a run on a running harnessd and follow it;
//	                                    without PROMPT on a terminal, a chat
//	harnessd version
//
// Run any command with --help for its flags.
//
// The source files come in families, one per layer, named by the part
// before the first underscore: the head of each family has the plain name
// (config.go, client.go, run.go) and the rest of it are head_concern.go
// (config_server.go, client_conn.go, run_store.go). From the top down, each
// using only those below it where it can: main (the dispatch of the
// command line), cmd (the commands and the daemon), api, run, tools,
// input, model, registry, client, oauth, the transports stdio and
// httptransport, and config; jsonrpc, protocol, id, file, metrics, redact,
// backoff, term, version and log serve every layer. Test files follow
// their file (client_conn_test.go); _linux and _other keep their build
// meaning.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// This file holds the program's entry: the signals that stop it, the
// dispatch of the command line to its command (each in its cmd_ file), the
// usage, and the exit code.

// main runs the command line's command with the process's streams and
// environment.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.LookupEnv}
	err := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(err, a.stderr))
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
