package main

import "time"

// This file holds server configuration: the config type, the four sources,
// validation, transport inference, ${VAR} expansion and profiles.

// Transport names as they appear in configuration.
const (
	transportStdio = "stdio"
	transportHTTP  = "http"
	transportSSE   = "sse"
)

// Defaults for a server's limits.
const (
	defaultTimeout         = 30 * time.Second
	defaultStartupTimeout  = 30 * time.Second
	defaultMaxMessageBytes = 4 << 20
)

// A serverConfig is one validated MCP server definition, whatever its source.
// Every field is resolved: Transport is one of the transport constants, the
// durations and limits are positive. It is a value type: copies share only
// the slices and maps, which are never modified after validation.
type serverConfig struct {
	Name      string
	Transport string
	// TransportInferred is true when the source did not name the transport;
	// an inferred "http" server may fall back to legacy SSE.
	TransportInferred bool
	Command           string
	Args              []string
	URL               string
	Env               map[string]string
	Cwd               string
	Headers           map[string]string
	Timeout           time.Duration
	StartupTimeout    time.Duration
	Enabled           bool
	IncludeTools      []string
	ExcludeTools      []string
	MaxMessageBytes   int
	// Source says where the definition came from: a file path,
	// "HARNESS_MCP_SERVERS", "profile <name>", "run", "connect_mcp" or "command line".
	Source string
}
