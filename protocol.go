package main

import "slices"

// This file holds what the MCP specification fixes and every layer that
// speaks it shares: the protocol revisions, the current revision's error
// codes and _meta keys, and the log levels.

// Protocol versions of the initialize handshake, newest first. The client
// offers the first and accepts any of them in the server's answer. The
// current revisions, without the handshake, follow.
var knownProtocolVersions = []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}

// The newest and the oldest revision of the initialize handshake.
const (
	latestProtocolVersion   = "2025-11-25"
	fallbackProtocolVersion = "2024-11-05"
)

// sessionlessProtocolVersions are the revisions without initialize or sessions,
// newest first: every request carries its version, client info and
// capabilities in _meta.
var sessionlessProtocolVersions = []string{"2026-07-28"}

// sessionlessProtocolVersion is the revision the probe offers first.
const sessionlessProtocolVersion = "2026-07-28"

// Error codes of the current revision.
const (
	// codeHeaderMismatch: the HTTP headers do not match the body (for
	// Mcp-Param-*: the tool's schema changed since it was listed).
	codeHeaderMismatch = -32020
	// codeMissingCapability: the server needs a client capability that
	// harnessd does not declare.
	codeMissingCapability = -32021
	// codeUnsupportedVersion: the server does not speak the requested
	// revision; its data lists those it does.
	codeUnsupportedVersion = -32022
)

// The _meta keys every request of the current revision carries.
const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo         = "io.modelcontextprotocol/serverInfo"
	metaLogLevel           = "io.modelcontextprotocol/logLevel"
)

// isSessionlessVersion reports whether v is a revision without initialize.
func isSessionlessVersion(v string) bool { return slices.Contains(sessionlessProtocolVersions, v) }

// isSessionlessError reports whether code is an error only servers of the
// current revision send: a 400 carrying one is an answer, not a refusal.
func isSessionlessError(code int) bool {
	return code == codeHeaderMismatch || code == codeMissingCapability || code == codeUnsupportedVersion
}

// mcpLogLevels are the levels of logging/setLevel, most verbose first.
var mcpLogLevels = []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}
