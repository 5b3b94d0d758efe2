package main

import (
	"fmt"
	"strings"
)

// This file holds the table of model providers: for each name a model may
// start with, the wire format it speaks, where it is by default, and the
// environment variables of its API key and base URL.

// A modelProviderEntry is one provider of the table.
type modelProviderEntry struct {
	name string // the part of a model name before the first '/'
	// wire is the format spoken: providerOpenAI (Chat Completions) or
	// providerAnthropic (Messages).
	wire string
	// keyEnv holds the API key, sent as a bearer token (X-Api-Key for
	// Anthropic); baseURLEnv overrides defaultBaseURL.
	keyEnv, baseURLEnv, defaultBaseURL string
	// keyOptional: the default base URL is a local server that may run
	// without a key. Otherwise a missing key is an error on the default
	// host, and allowed elsewhere (a proxy, a self-hosted server).
	keyOptional bool
	// maxCompletionTokens: the provider's own API wants the output cap as
	// max_completion_tokens (OpenAI's newer models refuse max_tokens);
	// everything else is sent max_tokens.
	maxCompletionTokens bool
}

// modelProviders is every provider harnessd knows, in the order errors
// list them. Every OpenAI-compatible entry serves Chat Completions at
// <base URL>/chat/completions.
var modelProviders = []modelProviderEntry{
	{name: providerOpenAI, wire: providerOpenAI, keyEnv: "OPENAI_API_KEY", baseURLEnv: "OPENAI_BASE_URL",
		defaultBaseURL: "https://api.openai.com/v1", maxCompletionTokens: true},
	{name: providerAnthropic, wire: providerAnthropic, keyEnv: "ANTHROPIC_API_KEY", baseURLEnv: "ANTHROPIC_BASE_URL",
		defaultBaseURL: "https://api.anthropic.com"},
	{name: "google", wire: providerOpenAI, keyEnv: "GEMINI_API_KEY", baseURLEnv: "GEMINI_BASE_URL",
		defaultBaseURL: "https://generativelanguage.googleapis.com/v1beta/openai"},
	{name: "ollama", wire: providerOpenAI, keyEnv: "OLLAMA_API_KEY", baseURLEnv: "OLLAMA_BASE_URL",
		defaultBaseURL: "http://localhost:11434/v1", keyOptional: true},
	{name: "vllm", wire: providerOpenAI, keyEnv: "VLLM_API_KEY", baseURLEnv: "VLLM_BASE_URL",
		defaultBaseURL: "http://localhost:8000/v1", keyOptional: true},
	{name: "openrouter", wire: providerOpenAI, keyEnv: "OPENROUTER_API_KEY", baseURLEnv: "OPENROUTER_BASE_URL",
		defaultBaseURL: "https://openrouter.ai/api/v1"},
	{name: "groq", wire: providerOpenAI, keyEnv: "GROQ_API_KEY", baseURLEnv: "GROQ_BASE_URL",
		defaultBaseURL: "https://api.groq.com/openai/v1"},
	{name: "mistral", wire: providerOpenAI, keyEnv: "MISTRAL_API_KEY", baseURLEnv: "MISTRAL_BASE_URL",
		defaultBaseURL: "https://api.mistral.ai/v1"},
	{name: "deepseek", wire: providerOpenAI, keyEnv: "DEEPSEEK_API_KEY", baseURLEnv: "DEEPSEEK_BASE_URL",
		defaultBaseURL: "https://api.deepseek.com/v1"},
	{name: "xai", wire: providerOpenAI, keyEnv: "XAI_API_KEY", baseURLEnv: "XAI_BASE_URL",
		defaultBaseURL: "https://api.x.ai/v1"},
}

// lookupModelProvider returns the entry named name, or an error listing
// the known providers.
func lookupModelProvider(name string) (modelProviderEntry, error) {
	for _, p := range modelProviders {
		if p.name == name {
			return p, nil
		}
	}
	names := make([]string, len(modelProviders))
	for i, p := range modelProviders {
		names[i] = p.name
	}
	return modelProviderEntry{}, fmt.Errorf("unknown provider %q: want one of %s", name, strings.Join(names, ", "))
}

// path returns where the entry's wire format posts, under the base URL.
func (p modelProviderEntry) path() string {
	if p.wire == providerAnthropic {
		return "/v1/messages"
	}
	return "/chat/completions"
}

// modelSecrets returns the model API keys and the passwords in the base
// URLs that getenv holds for every provider of the table, for the
// redactor: a model may echo its key, and an error may quote its URL. A
// nil getenv holds none.
func modelSecrets(getenv func(string) (string, bool)) []string {
	var values []string
	if getenv == nil {
		return nil
	}
	for _, p := range modelProviders {
		if v, ok := getenv(p.keyEnv); ok {
			values = append(values, strings.TrimSpace(v))
		}
		if v, ok := getenv(p.baseURLEnv); ok {
			values = append(values, urlPasswords(v)...)
		}
	}
	return values
}

// The providers whose wire formats harnessd speaks; the others of the
// table speak OpenAI's.
const (
	providerOpenAI    = "openai"
	providerAnthropic = "anthropic"
)
