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
// using only those below it where it can: main, cmd (the commands and the
// daemon), api, run, tools, input, model, registry, client, oauth, the
// transports stdio and httptransport, and config; jsonrpc, protocol,
// metrics, redact, backoff, term, version and log serve every layer. Test files
// follow their file (client_conn_test.go); _linux and _other keep their
// build meaning.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

// This file holds the program's entry: the signals that stop it, and
// its exit code (cmd.go runs the command).

// main runs the command line's command with the process's streams and
// environment.
func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	a := &app{stdout: os.Stdout, stderr: os.Stderr, getenv: os.LookupEnv}
	err := a.run(ctx, os.Args[1:])
	stop()
	os.Exit(exitCode(err, a.stderr))
}
