// Command echoserver is a reference MCP server built on the official Go SDK.
// harnessd's tests and benchmarks use it as a peer that is not harnessd's own
// code. It offers two tools: echo ({"message": string} returns the message as
// text) and add ({"a": number, "b": number} returns the sum). With -full it
// also offers resources, tools that ask the client for input, tools that
// change its lists, and cache hints on its lists (see extras.go).
//
// Usage:
//
//	echoserver stdio [-full] [-ttl 0s] [-trace FILE]
//	echoserver http|http-stateless|http-json|sse [-addr 127.0.0.1:0] [-full] [-ttl 0s]
//
// The HTTP modes print one line, "listening http://HOST:PORT/mcp" (or /sse
// for sse), on stdout once the listener is open, and serve until stdin
// reaches end of file or the process gets SIGTERM or SIGINT. Keep stdin open
// (a pipe, a terminal) for as long as the server should run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const usage = "usage: echoserver stdio|http|http-stateless|http-json|sse [-addr 127.0.0.1:0] [-full] [-ttl DURATION] [-trace FILE]"

func main() {
	log.SetFlags(0)
	log.SetPrefix("echoserver: ")
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil {
		log.Print(err)
		os.Exit(1)
	}
}

// run starts the server in the mode args[0] names and blocks until it ends.
func run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	mode := args[0]
	flags := flag.NewFlagSet("echoserver "+mode, flag.ContinueOnError)
	addr := flags.String("addr", "127.0.0.1:0", "address to listen on (HTTP modes)")
	full := flags.Bool("full", false, "also offer resources, input-required tools and list-changing tools")
	ttl := flags.Duration("ttl", 0, "with -full: the ttlMs hint of lists and reads")
	trace := flags.String("trace", "", "stdio: append every message read and written to this file (to tell a client's loss from the server's)")
	if err := flags.Parse(args[1:]); err != nil {
		return err
	}
	var server *mcp.Server
	if *full {
		server = newFullServer(*ttl)
	} else {
		server = newServer(nil)
	}
	switch mode {
	case "stdio":
		if *trace == "" {
			return server.Run(ctx, &mcp.StdioTransport{})
		}
		f, err := os.OpenFile(*trace, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("-trace: %w", err)
		}
		defer f.Close()
		return server.Run(ctx, &mcp.LoggingTransport{Transport: &mcp.StdioTransport{}, Writer: stampWriter{f}})
	case "http":
		return serveHTTP(ctx, *addr, "/mcp", mcp.NewStreamableHTTPHandler(serverFor(server), nil))
	case "http-stateless":
		return serveHTTP(ctx, *addr, "/mcp", mcp.NewStreamableHTTPHandler(serverFor(server), &mcp.StreamableHTTPOptions{Stateless: true}))
	case "http-json":
		return serveHTTP(ctx, *addr, "/mcp", mcp.NewStreamableHTTPHandler(serverFor(server), &mcp.StreamableHTTPOptions{JSONResponse: true}))
	case "sse":
		return serveHTTP(ctx, *addr, "/sse", mcp.NewSSEHandler(serverFor(server), nil))
	}
	return fmt.Errorf("unknown mode %q\n%s", mode, usage)
}

// A stampWriter starts each write (one trace line) with the time, in the
// format of harnessd's own trace lines, so the two sides can be lined up.
type stampWriter struct{ w io.Writer }

func (s stampWriter) Write(p []byte) (int, error) {
	line := append([]byte(time.Now().Format("15:04:05.000000 ")), p...)
	if _, err := s.w.Write(line); err != nil {
		return 0, err
	}
	return len(p), nil
}

// An echoInput is the arguments of the echo tool.
type echoInput struct {
	Message string `json:"message" jsonschema:"the text to send back"`
}

// An addInput is the arguments of the add tool.
type addInput struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

// An addOutput is the structured result of the add tool.
type addOutput struct {
	Sum float64 `json:"sum"`
}

// newServer returns the MCP server with the echo and add tools, built with
// opts (nil for the defaults). One server serves every session; it is safe
// for concurrent use.
func newServer(opts *mcp.ServerOptions) *mcp.Server {
	server := mcp.NewServer(&mcp.Implementation{Name: "echoserver", Version: "1.0.0"}, opts)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Returns the message it is given."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addInput) (*mcp.CallToolResult, addOutput, error) {
			sum := in.A + in.B
			text := strconv.FormatFloat(sum, 'g', -1, 64)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, addOutput{Sum: sum}, nil
		})
	return server
}

func serverFor(server *mcp.Server) func(*http.Request) *mcp.Server {
	return func(*http.Request) *mcp.Server { return server }
}

// serveHTTP serves handler at path on addr, announces the endpoint on stdout
// and blocks until ctx is done or stdin reaches end of file.
func serveHTTP(ctx context.Context, addr, path string, handler http.Handler) error {
	listener, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle(path, handler)
	httpServer := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	// Owned by serveHTTP; exits when httpServer is shut down or closed.
	go func() { served <- httpServer.Serve(listener) }()

	stdinClosed := make(chan struct{})
	// Owned by serveHTTP; exits at end of stdin, which is the parent's way
	// of saying stop (or when the process exits).
	go func() {
		io.Copy(io.Discard, os.Stdin)
		close(stdinClosed)
	}()

	fmt.Printf("listening http://%s%s\n", listener.Addr(), path)
	select {
	case <-ctx.Done():
	case <-stdinClosed:
	case err := <-served:
		return fmt.Errorf("serve %s: %w", addr, err)
	}
	// Open SSE streams never go idle, so Shutdown is bounded and then forced.
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := httpServer.Shutdown(shutdownCtx); err != nil {
		httpServer.Close()
	}
	return nil
}
