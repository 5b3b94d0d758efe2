package main

// This file holds a server's origin: where its definition came from, and
// the defaults and run behaviour that follow from it. A server's Source is
// only the label shown for it (a file path, "profile <name>", "run", ...).

// A serverOrigin says where a server's definition came from. The zero
// value is originGlobal.
type serverOrigin int

const (
	// originGlobal: the configuration files, HARNESS_MCP_SERVERS or the
	// command line.
	originGlobal serverOrigin = iota
	// originProfile: the run's profile. A profile server may shadow the
	// global server of exactly its name, and stays when it fails to
	// connect, so calls fail with its error instead of reaching the global.
	originProfile
	// originPerRun: the run request's mcp_servers. It is required unless
	// it says otherwise, its tools are dynamic, it stays, failed, when it
	// fails to connect, and its OAuth tokens live with its run only.
	originPerRun
	// originConnect: the agent's connect_mcp. It may not sample, its tools
	// are dynamic, and it is dropped when it fails to connect, so the agent
	// may try the name again.
	originConnect
)

// mayShadow reports whether a run-local server of the origin may hide the
// global server of exactly its name.
func (o serverOrigin) mayShadow() bool { return o == originProfile }

// requiredByDefault reports whether a server of the origin is required
// when it does not say.
func (o serverOrigin) requiredByDefault() bool { return o == originPerRun }

// samplingByDefault reports whether a server of the origin may ask for
// completions when it does not say.
func (o serverOrigin) samplingByDefault() bool { return o != originConnect }

// dynamic reports whether the tools of a run-local server of the origin
// carry the "dynamic" tag: it joined the run by the run's request or its
// agent, not by configuration.
func (o serverOrigin) dynamic() bool { return o == originPerRun || o == originConnect }

// keepFailed reports whether a run-local server of the origin stays in
// its run when it fails to connect.
func (o serverOrigin) keepFailed() bool { return o != originConnect }

// ownsTokens reports whether a server of the origin keeps its OAuth tokens
// with its connection only (in memory, ending with its run), never in the
// token store nor shared with another server of the same name.
func (o serverOrigin) ownsTokens() bool { return o == originPerRun }
