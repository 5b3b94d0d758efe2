package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path"
	"slices"
	"strings"
)

// This file holds the settings besides MCP servers that config_load.go loads
// from the same sources: the model ([model], HARNESS_MODEL) and the API
// keys ([[auth.keys]], HARNESS_API_KEYS).

// A modelSettings is the model part of the config. Empty strings and zero
// numbers mean "not configured": the agent applies its own defaults.
type modelSettings struct {
	Provider string // a name of modelProviders
	Model    string // the provider's model name, may contain "/"
	BaseURL  string
	// MaxOutputTokens caps the output of each model call (not a run's
	// tokens: that is a run's max_tokens budget).
	MaxOutputTokens int
	MaxSteps        int
	// Tuning is temperature, top_p and reasoning_effort.
	Tuning modelTuning
	// NoStream: [model] stream = false, call the model without streaming.
	NoStream bool
	// SamplingModels are the other models a server's sampling request may
	// pick with modelPreferences hints ([model] sampling_models).
	SamplingModels []modelSpec
	// Prices are the models' prices by "provider/model" ([model.prices],
	// run_budget.go); nil when none is set.
	Prices map[string]modelPrice
}

// spec returns the configured model as the runs' default modelSpec: its
// Provider is empty when no model is configured.
func (m modelSettings) spec() modelSpec {
	return modelSpec{Provider: m.Provider, Model: m.Model, BaseURL: m.BaseURL, MaxTokens: m.MaxOutputTokens, NoStream: m.NoStream, Tuning: m.Tuning}
}

// An authKey is one API key. The token itself is never kept, only its hash.
type authKey struct {
	Name string
	// Tenant is what the key's runs, conversations, approvals and
	// questions belong to: keys of one tenant share them. It defaults to
	// the key's name.
	Tenant      string
	TokenSHA256 [sha256.Size]byte
	// Scopes holds values of authScopes.
	Scopes []string
	// Limits bound the tools and servers the key's runs reach.
	Limits toolLimits
	// Rate is the runs the key may start per minute; 0 for no bound.
	Rate   int
	Source string
}

// tenant returns k's tenant: the one configured, else the key's name.
func (k authKey) tenant() string {
	if k.Tenant == "" {
		return k.Name
	}
	return k.Tenant
}

// A rawAuthKey is one API key as written in TOML or HARNESS_API_KEYS. A
// plaintext token is accepted only from the environment.
type rawAuthKey struct {
	Name        string   `json:"name" toml:"name"`
	Token       *string  `json:"token" toml:"-"`
	TokenSHA256 *string  `json:"token_sha256" toml:"token_sha256"`
	Scopes      []string `json:"scopes" toml:"scopes"`
	Tenant      string   `json:"tenant" toml:"tenant"`
	Tools       []string `json:"tools" toml:"tools"`
	Servers     []string `json:"servers" toml:"servers"`
	Rate        int      `json:"rate" toml:"rate"`
}

// A tomlModel is the [model] table; nil fields were not set in that file.
type tomlModel struct {
	Name            *string  `toml:"name"`
	BaseURL         *string  `toml:"base_url"`
	MaxOutputTokens *int     `toml:"max_output_tokens"`
	MaxSteps        *int     `toml:"max_steps"`
	Temperature     *float64 `toml:"temperature"`
	TopP            *float64 `toml:"top_p"`
	ReasoningEffort *string  `toml:"reasoning_effort"`
	// Stream calls the model with streaming (default true).
	Stream *bool `toml:"stream"`
	// SamplingModels are "provider/model" names.
	SamplingModels *[]string `toml:"sampling_models"`
	// Prices are [model.prices."provider/model"] tables.
	Prices map[string]tomlPrice `toml:"prices"`
}

// parseTOMLModel validates the [model] table of file: every field it sets
// goes into the settings, valid or not, with an error for each bad one.
func parseTOMLModel(file string, doc tomlModel) (modelSettings, []error) {
	var m modelSettings
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: [model] %s: %s", file, field, fmt.Sprintf(format, args...)))
	}
	if n := doc.Name; n != nil {
		spec, err := parseModelName(*n)
		if err != nil {
			bad("name", "%v", err)
		}
		m.Provider, m.Model = spec.Provider, spec.Model
	}
	if u := doc.BaseURL; u != nil {
		if err := checkHTTPURL(*u); err != nil {
			bad("base_url", "%v", err)
		}
		m.BaseURL = *u
	}
	if n := doc.MaxOutputTokens; n != nil {
		if *n <= 0 {
			bad("max_output_tokens", "%d is not positive; set a positive number or remove it", *n)
		}
		m.MaxOutputTokens = *n
	}
	m.Tuning = modelTuning{Temperature: doc.Temperature, TopP: doc.TopP}
	if e := doc.ReasoningEffort; e != nil {
		m.Tuning.ReasoningEffort = *e
		if *e == "" {
			bad("reasoning_effort", "is empty; use %s, or remove it", strings.Join(reasoningEfforts, ", "))
		}
	}
	for _, p := range m.Tuning.rangeProblems() {
		bad(p.field, "%s", p.msg)
	}
	if n := doc.MaxSteps; n != nil {
		if *n <= 0 {
			bad("max_steps", "%d is not positive; set a positive number or remove it", *n)
		}
		m.MaxSteps = *n
	}
	if stream := doc.Stream; stream != nil {
		m.NoStream = !*stream
	}
	if names := doc.SamplingModels; names != nil {
		m.SamplingModels = []modelSpec{}
		for i, name := range *names {
			spec, err := parseModelName(name)
			if err != nil {
				bad(fmt.Sprintf("sampling_models[%d]", i), "%v", err)
				continue
			}
			m.SamplingModels = append(m.SamplingModels, spec)
		}
	}
	if doc.Prices != nil {
		var priceErrs []error
		m.Prices, priceErrs = parsePrices(file, doc.Prices)
		errs = append(errs, priceErrs...)
	}
	return m, errs
}

// checkModel returns an error for each setting of the merged [model] that
// its provider cannot take (modelSpec.providerProblems): files and
// HARNESS_MODEL may each set a part.
func (cfg *config) checkModel() error {
	var errs []error
	for _, p := range cfg.Model.spec().providerProblems() {
		errs = append(errs, fmt.Errorf("[model] %s: %s", p.field, p.msg))
	}
	return errors.Join(errs...)
}

// parseTOMLKeys validates the [[auth.keys]] of file and returns the valid
// ones, with an error joining every problem (also two keys sharing a name
// or a token).
func parseTOMLKeys(file string, raws []rawAuthKey) ([]authKey, error) {
	var keys []authKey
	var errs []error
	for i, raw := range raws {
		key, err := buildAuthKey(fmt.Sprintf("%s: [[auth.keys]] #%d", file, i+1), file, raw)
		errs = append(errs, err)
		if err == nil {
			keys = append(keys, key)
		}
	}
	errs = append(errs, checkAuthKeys(keys))
	return keys, errors.Join(errs...)
}

// mergeModel sets in m every model field that layer's file set.
func mergeModel(m *modelSettings, layer configLayer) {
	if layer.modelSet.Name != nil {
		m.Provider, m.Model = layer.model.Provider, layer.model.Model
	}
	if layer.modelSet.BaseURL != nil {
		m.BaseURL = layer.model.BaseURL
	}
	if layer.modelSet.MaxOutputTokens != nil {
		m.MaxOutputTokens = layer.model.MaxOutputTokens
	}
	m.Tuning = m.Tuning.override(layer.model.Tuning)
	if layer.modelSet.MaxSteps != nil {
		m.MaxSteps = layer.model.MaxSteps
	}
	if layer.modelSet.Stream != nil {
		m.NoStream = layer.model.NoStream
	}
	if layer.modelSet.SamplingModels != nil {
		m.SamplingModels = layer.model.SamplingModels
	}
	for name, p := range layer.model.Prices {
		if m.Prices == nil {
			m.Prices = map[string]modelPrice{}
		}
		m.Prices[name] = p
	}
}

// parseAuthKeysJSON parses HARNESS_API_KEYS: a JSON array of
// {"name", "token" | "token_sha256", "scopes", "tenant"?}. Plaintext tokens
// are hashed at once. It returns the valid keys, the plaintext tokens (for
// the redactor only) and an error joining every problem.
func parseAuthKeysJSON(data []byte) ([]authKey, []string, error) {
	const label = "HARNESS_API_KEYS"
	entries, err := decodeJSONArray(label, `[{"name": ..., "token": ..., "scopes": [...]}]`, data)
	if err != nil {
		return nil, nil, err
	}
	var keys []authKey
	var tokens []string
	var errs []error
	for i, entry := range entries {
		entryLabel := fmt.Sprintf("%s[%d]", label, i)
		var raw rawAuthKey
		if err := decodeEntry(entry, &raw); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", entryLabel, err))
			continue
		}
		if raw.Token != nil {
			tokens = append(tokens, *raw.Token)
		}
		key, err := buildAuthKey(entryLabel, label, raw)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		keys = append(keys, key)
	}
	return keys, tokens, errors.Join(errs...)
}

// buildAuthKey validates one key; exactly one of Token and TokenSHA256 must
// be set. Errors never include the token or its hash.
func buildAuthKey(label, source string, raw rawAuthKey) (authKey, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: key %q: %s: %s", label, raw.Name, field, fmt.Sprintf(format, args...)))
	}
	key := authKey{Name: raw.Name, Tenant: raw.Tenant, Scopes: raw.Scopes, Source: source,
		Limits: toolLimits{Tools: raw.Tools, Servers: raw.Servers}, Rate: raw.Rate}
	for field, globs := range map[string][]string{"tools": raw.Tools, "servers": raw.Servers} {
		for i, g := range globs {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				bad(fmt.Sprintf("%s[%d]", field, i), "%q is not a glob (path.Match: * ? [a-z]); write a name such as mcp_github_* or github", g)
			}
		}
	}
	if raw.Rate < 0 {
		bad("rate", "%d is negative; give the runs per minute the key may start, or leave it out for no bound", raw.Rate)
	}
	if err := checkName(raw.Name, ".", "letters, digits, \"-\", \"_\" and \".\""); err != nil {
		bad("name", "%v", err)
	}
	if key.Tenant == "" {
		key.Tenant = raw.Name
	} else if err := checkName(raw.Tenant, ".", "letters, digits, \"-\", \"_\" and \".\" (or leave tenant out: the key's name)"); err != nil {
		bad("tenant", "%v", err)
	}
	switch {
	case raw.Token != nil && raw.TokenSHA256 != nil:
		bad("token", "both token and token_sha256 are set; keep one")
	case raw.Token != nil:
		if len(*raw.Token) < minTokenLength {
			bad("token", "shorter than %d characters; use a long random token (openssl rand -hex 32)", minTokenLength)
		}
		key.TokenSHA256 = sha256.Sum256([]byte(*raw.Token))
	case raw.TokenSHA256 != nil:
		h := *raw.TokenSHA256
		_, err := hex.Decode(key.TokenSHA256[:], []byte(h[:min(len(h), 2*sha256.Size)]))
		if err != nil || len(h) != 2*sha256.Size || strings.ToLower(h) != h {
			bad("token_sha256", "not 64 lowercase hex characters; use the output of: printf %%s \"$TOKEN\" | sha256sum")
		}
	default:
		bad("token_sha256", "missing; set token_sha256 to the SHA-256 of the token in lowercase hex")
	}
	if len(raw.Scopes) == 0 {
		bad("scopes", "empty; list one or more of %s", strings.Join(authScopes, ", "))
	}
	for i, sc := range raw.Scopes {
		if !slices.Contains(authScopes, sc) {
			bad(fmt.Sprintf("scopes[%d]", i), "%q is not a scope; use %s", sc, strings.Join(authScopes, ", "))
		}
	}
	return key, errors.Join(errs...)
}

// checkAuthKeys returns an error for two keys with the same name or the same
// token, naming both keys, or nil.
func checkAuthKeys(keys []authKey) error {
	var errs []error
	for i, k := range keys {
		for _, o := range keys[:i] {
			switch {
			case o.Name == k.Name:
				errs = append(errs, fmt.Errorf("auth key %q is defined twice (%s and %s); remove or rename one", k.Name, o.Source, k.Source))
			case o.TokenSHA256 == k.TokenSHA256:
				errs = append(errs, fmt.Errorf("auth keys %q (%s) and %q (%s) have the same token; give each its own token", o.Name, o.Source, k.Name, k.Source))
			}
		}
	}
	return errors.Join(errs...)
}

// Auth scopes. admin implies every scope; runs:write implies runs:read.
const (
	scopeRunsRead  = "runs:read"
	scopeRunsWrite = "runs:write"
	scopeAdmin     = "admin"
)

// authScopes are the scopes an API key may hold, in the order error
// messages list them.
var authScopes = []string{scopeRunsRead, scopeRunsWrite, scopeAdmin}
