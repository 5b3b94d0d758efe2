package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// This file holds harnessd's A2A agent card, served at
// /.well-known/agent-card.json without auth: its name, what it does, the
// JSON-RPC endpoint (an absolute URL on the Host the request came to,
// which the API's Host guard has accepted), its capabilities, the bearer
// key it wants when keys are configured, and one skill per profile plus
// the default.

// a2aDefaultSkill is the id of the skill of runs without a profile.
const a2aDefaultSkill = "default"

// An a2aCard is an A2A 1.0 AgentCard.
type a2aCard struct {
	Name                 string                     `json:"name"`
	Description          string                     `json:"description"`
	SupportedInterfaces  []a2aInterface             `json:"supportedInterfaces"`
	Version              string                     `json:"version"`
	DocumentationURL     string                     `json:"documentationUrl,omitempty"`
	Capabilities         a2aCapabilities            `json:"capabilities"`
	SecuritySchemes      map[string]json.RawMessage `json:"securitySchemes,omitempty"`
	SecurityRequirements []json.RawMessage          `json:"securityRequirements,omitempty"`
	DefaultInputModes    []string                   `json:"defaultInputModes"`
	DefaultOutputModes   []string                   `json:"defaultOutputModes"`
	Skills               []a2aSkill                 `json:"skills"`
}

// An a2aInterface is where and how the agent is reached.
type a2aInterface struct {
	URL             string `json:"url"`
	ProtocolBinding string `json:"protocolBinding"`
	ProtocolVersion string `json:"protocolVersion"`
}

// a2aCapabilities are the optional features the agent has.
type a2aCapabilities struct {
	Streaming         bool `json:"streaming"`
	PushNotifications bool `json:"pushNotifications"`
	ExtendedAgentCard bool `json:"extendedAgentCard"`
}

// An a2aSkill is one thing the agent does: a profile's runs.
type a2aSkill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// a2aBearerScheme names the bearer key in the card's security schemes.
const a2aBearerScheme = "bearer"

// serveCard answers GET /.well-known/agent-card.json.
func (g *a2aAgent) serveCard(w http.ResponseWriter, r *http.Request, _ authInfo) {
	writeJSON(w, http.StatusOK, g.card(r))
}

// card returns the agent card as seen by a request r.
func (g *a2aAgent) card(r *http.Request) a2aCard {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	c := a2aCard{
		Name: "harnessd",
		Description: "An agent daemon: it runs an LLM on your message with the tools of the MCP servers it is configured with, " +
			"asks for approval (input-required) before the calls its operator marked, keeps each context as a conversation, " +
			"and answers with the model's output as the task's artifact.",
		SupportedInterfaces: []a2aInterface{{URL: scheme + "://" + r.Host + a2aPath, ProtocolBinding: "JSONRPC", ProtocolVersion: a2aProtocolVersion}},
		Version:             buildVersion,
		Capabilities:        a2aCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:   []string{"text/plain", "application/json"},
		DefaultOutputModes:  []string{"text/plain"},
		Skills:              g.skills(),
	}
	if len(g.api.authKeys()) > 0 {
		c.SecuritySchemes = map[string]json.RawMessage{a2aBearerScheme: json.RawMessage(
			`{"httpAuthSecurityScheme":{"scheme":"Bearer","description":"an API key of this harnessd ([[auth.keys]] in config.toml or HARNESS_API_KEYS) with the runs:write scope (runs:read to follow tasks only), sent as Authorization: Bearer <token>"}}`)}
		c.SecurityRequirements = []json.RawMessage{json.RawMessage(`{"schemes":{"` + a2aBearerScheme + `":{"list":[]}}}`)}
	}
	return c
}

// skills returns the default skill and one per profile in
// $HARNESS_HOME/profiles, sorted by name; a profile that does not load is
// listed with the reason in its description.
func (g *a2aAgent) skills() []a2aSkill {
	skills := []a2aSkill{{ID: a2aDefaultSkill, Name: "Run", Tags: []string{"agent", "mcp", "tools"},
		Description: "Runs the model on the message's text with the global MCP servers' tools. " +
			"Options go in the request's metadata under \"harnessd\" (profile, model, system_prompt, max_steps, approval, budgets).",
		Examples: []string{"Summarise the open issues of the repository"}}}
	runs := g.api.runs
	if runs == nil {
		return skills
	}
	entries, err := os.ReadDir(filepath.Join(runs.opts.Home, "profiles"))
	if err != nil {
		return skills
	}
	getenv := runs.opts.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	var names []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".toml"); ok && !e.IsDir() && checkName(name, "", "") == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		desc := fmt.Sprintf("Runs with profile %q: send {\"harnessd\": {\"profile\": %q}} in the request's metadata.", name, name)
		servers, _, err := loadProfile(runs.opts.Home, name, getenv)
		if err != nil {
			desc += " It does not load now: " + err.Error()
		} else if len(servers) > 0 {
			var list []string
			for _, s := range servers {
				list = append(list, s.Name)
			}
			desc += " Its MCP servers: " + strings.Join(list, ", ") + "."
		}
		skills = append(skills, a2aSkill{ID: name, Name: name, Description: desc, Tags: []string{"agent", "mcp", "profile:" + name}})
	}
	return skills
}
