package main

import (
	"encoding/json"
	"errors"
)

// This file holds the MCP wire types the client reads: tools, content,
// resources, results, progress notifications, and the handshake's answer.

// A toolInfo is one tool as a server lists it.
type toolInfo struct {
	Name        string          `json:"name"`
	Title       string          `json:"title,omitempty"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	// OutputSchema is the schema of the structured result, when the
	// server declares one; pinned with the rest (tools_pins.go).
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	// Annotations are the server's hints about the tool (readOnlyHint,
	// ...), relayed as given; approvals read readOnlyHint.
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// A contentBlock is one item of a tool result's content or of a resource's
// contents. Only the fields harnessd reads are decoded.
type contentBlock struct {
	Type     string          `json:"type"`
	Text     string          `json:"text,omitempty"`
	Data     string          `json:"data,omitempty"`     // base64, image and audio
	MIMEType string          `json:"mimeType,omitempty"` // image, audio, resource
	Resource *resourceBody   `json:"resource,omitempty"` // embedded resource
	URI      string          `json:"uri,omitempty"`      // resource_link
	Name     string          `json:"name,omitempty"`     // resource_link
	Raw      json.RawMessage `json:"-"`
}

// A resourceBody is the contents of a resource: text or a base64 blob.
type resourceBody struct {
	URI      string `json:"uri"`
	MIMEType string `json:"mimeType,omitempty"`
	Text     string `json:"text,omitempty"`
	Blob     string `json:"blob,omitempty"`
}

// A callResult is the result of tools/call.
type callResult struct {
	Content           []contentBlock  `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent,omitempty"`
	IsError           bool            `json:"isError,omitempty"`
	// Raw is the whole result as the server sent it.
	Raw json.RawMessage `json:"-"`
}

// A resourceInfo is one resource as resources/list returns it.
type resourceInfo struct {
	URI         string `json:"uri"`
	Name        string `json:"name,omitempty"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	MIMEType    string `json:"mimeType,omitempty"`
	Size        int64  `json:"size,omitempty"`
}

// A readResourceResult is the result of resources/read.
type readResourceResult struct {
	Contents []resourceBody `json:"contents"`
}

// Errors callers of the client test.
var (
	// errTimeout: the server did not answer within the server's timeout.
	errTimeout = errors.New("timed out")
	// errClientClosed: the session was closed while the call was pending.
	errClientClosed = errors.New("connection closed")
	// errNoResources: the server does not declare the resources capability.
	errNoResources = errors.New("server does not offer resources")
)

// implementation names a client or server in the handshake.
type implementation struct {
	Name    string `json:"name"`
	Title   string `json:"title,omitempty"`
	Version string `json:"version"`
}

// serverCapabilities is the part of the server's capabilities harnessd uses.
type serverCapabilities struct {
	Tools *struct {
		ListChanged bool `json:"listChanged,omitempty"`
	} `json:"tools,omitempty"`
	Resources *struct {
		ListChanged bool `json:"listChanged,omitempty"`
		Subscribe   bool `json:"subscribe,omitempty"`
	} `json:"resources,omitempty"`
	Logging json.RawMessage `json:"logging,omitempty"`
	Prompts json.RawMessage `json:"prompts,omitempty"`
	// Extensions are the extensions the server declares, by identifier
	// (client_skills.go reads skillsExtension).
	Extensions map[string]json.RawMessage `json:"extensions,omitempty"`
}

type initializeResult struct {
	ProtocolVersion string             `json:"protocolVersion"`
	Capabilities    serverCapabilities `json:"capabilities"`
	ServerInfo      implementation     `json:"serverInfo"`
	Instructions    string             `json:"instructions,omitempty"`
}

// progressParams are the params of notifications/progress.
type progressParams struct {
	ProgressToken json.RawMessage `json:"progressToken"`
	Progress      float64         `json:"progress"`
	Total         float64         `json:"total"`
	Message       string          `json:"message"`
}
