package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
)

// This file holds the tests of the provider table: each OpenAI-compatible
// entry's default base URL and key variable, and runs that name it
// reaching a scripted server with its key.

// compatibleProviders are the OpenAI-compatible entries as their
// providers document them, written out here so that a typo in the table
// fails a test.
var compatibleProviders = []struct {
	name, keyEnv, baseURLEnv, wantURL string
	keyOptional                       bool
}{
	{name: "openai", keyEnv: "OPENAI_API_KEY", baseURLEnv: "OPENAI_BASE_URL", wantURL: "https://api.openai.com/v1/chat/completions"},
	{name: "google", keyEnv: "GEMINI_API_KEY", baseURLEnv: "GEMINI_BASE_URL", wantURL: "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"},
	{name: "ollama", keyEnv: "OLLAMA_API_KEY", baseURLEnv: "OLLAMA_BASE_URL", wantURL: "http://localhost:11434/v1/chat/completions", keyOptional: true},
	{name: "vllm", keyEnv: "VLLM_API_KEY", baseURLEnv: "VLLM_BASE_URL", wantURL: "http://localhost:8000/v1/chat/completions", keyOptional: true},
	{name: "openrouter", keyEnv: "OPENROUTER_API_KEY", baseURLEnv: "OPENROUTER_BASE_URL", wantURL: "https://openrouter.ai/api/v1/chat/completions"},
	{name: "groq", keyEnv: "GROQ_API_KEY", baseURLEnv: "GROQ_BASE_URL", wantURL: "https://api.groq.com/openai/v1/chat/completions"},
	{name: "mistral", keyEnv: "MISTRAL_API_KEY", baseURLEnv: "MISTRAL_BASE_URL", wantURL: "https://api.mistral.ai/v1/chat/completions"},
	{name: "deepseek", keyEnv: "DEEPSEEK_API_KEY", baseURLEnv: "DEEPSEEK_BASE_URL", wantURL: "https://api.deepseek.com/v1/chat/completions"},
	{name: "xai", keyEnv: "XAI_API_KEY", baseURLEnv: "XAI_BASE_URL", wantURL: "https://api.x.ai/v1/chat/completions"},
}

// TestModelProviderDefaults: each entry posts to its provider's documented
// URL, wants its key there unless it is a local server, and hands its key
// to the redactor.
func TestModelProviderDefaults(t *testing.T) {
	t.Parallel()
	if n := len(compatibleProviders); n != len(modelProviders)-1 {
		t.Fatalf("the test knows %d OpenAI-compatible providers, the table %d: add the new ones here", n, len(modelProviders)-1)
	}
	for _, tt := range compatibleProviders {
		t.Run(tt.name, func(t *testing.T) {
			spec, err := parseModelName(tt.name + "/some-model")
			if err != nil {
				t.Fatalf("parseModelName(%q) = %v", tt.name+"/some-model", err)
			}
			_, err = newModelProvider(spec, fakeEnv(nil), modelTestLogger)
			if tt.keyOptional && err != nil {
				t.Errorf("newModelProvider(%s) without %s = %v, want a provider (a local server needs no key)", tt.name, tt.keyEnv, err)
			}
			if wantErr := tt.keyEnv + " is not set"; !tt.keyOptional && (err == nil || !strings.Contains(err.Error(), wantErr)) {
				t.Errorf("newModelProvider(%s) without %s = %v, want an error containing %q", tt.name, tt.keyEnv, err, wantErr)
			}
			key := "key-of-" + tt.name + "-0123456789"
			env := fakeEnv(map[string]string{tt.keyEnv: key})
			p, err := newModelProvider(spec, env, modelTestLogger)
			if err != nil {
				t.Fatalf("newModelProvider(%s) = %v", tt.name, err)
			}
			if got := modelEndpointOf(t, p).url; got != tt.wantURL {
				t.Errorf("%s posts to %q, want %q", tt.name, got, tt.wantURL)
			}
			if got := modelSecrets(env); !slices.Contains(got, key) {
				t.Errorf("modelSecrets() = %q, want %s's key among them", got, tt.keyEnv)
			}
		})
	}
}

// TestModelProviderReachesItsBaseURL: a run naming each OpenAI-compatible
// provider ("google/gemini-2.5-flash") reaches the server its base URL
// variable names, with its key, which is redacted when the model echoes
// it; a run of [model] reaches [model] base_url, which wins over the
// variable.
func TestModelProviderReachesItsBaseURL(t *testing.T) {
	for _, tt := range compatibleProviders {
		t.Run(tt.name, func(t *testing.T) {
			key := "key-of-" + tt.name + "-0123456789"
			t.Setenv(tt.keyEnv, key)
			wantCall := func(model string) func(fakeRequest) error {
				return func(req fakeRequest) error {
					if got := req.Header.Get("Authorization"); got != "Bearer "+key {
						return fmt.Errorf("Authorization = %q, want the bearer %s", got, tt.keyEnv)
					}
					if req.Model != model {
						return fmt.Errorf("model = %q, want %q", req.Model, model)
					}
					return nil
				}
			}
			byEnv := newFakeModel(t, providerOpenAI, fakeTurn{Text: "by env, key " + key, Check: wantCall("named-model")})
			byConfig := newFakeModel(t, providerOpenAI, fakeTurn{Text: "by config", Check: wantCall("configured-model")})
			t.Setenv(tt.baseURLEnv, byEnv.URL())
			noDefault := newProviderAPITest(t, modelSpec{})
			named := waitRunID(t, noDefault, noDefault.postRun(t, "", `{"prompt":"hi","model":"`+tt.name+`/named-model"}`))
			configured := newProviderAPITest(t, modelSpec{Provider: tt.name, Model: "configured-model", BaseURL: byConfig.URL()})
			ofConfig := waitRunID(t, configured, configured.postRun(t, "", `{"prompt":"hi"}`))
			if want := "by env, key " + redactedText; named.Output != want || ofConfig.Output != "by config" {
				t.Errorf("outputs %q (%s), %q (%s), want %q and %q", named.Output, named.Error, ofConfig.Output, ofConfig.Error, want, "by config")
			}
		})
	}
}

// TestConfiguredBaseURLStaysWithItsProvider: [model] base_url points at
// the configured provider's server; a run naming another provider goes to
// that provider's.
func TestConfiguredBaseURLStaysWithItsProvider(t *testing.T) {
	t.Setenv("GROQ_API_KEY", "groq-key-0123456789")
	groq := newFakeModel(t, providerOpenAI, fakeTurn{Text: "from groq"})
	t.Setenv("GROQ_BASE_URL", groq.URL())
	unreachable := httptest.NewServer(nil)
	unreachable.Close()
	at := newProviderAPITest(t, modelSpec{Provider: "ollama", Model: "llama3.2", BaseURL: unreachable.URL + "/v1"})
	v := waitRunID(t, at, at.postRun(t, "", `{"prompt":"hi","model":"groq/llama-3.3-70b-versatile"}`))
	if v.Output != "from groq" {
		t.Errorf("run naming groq: output %q, error %q; want it answered by GROQ_BASE_URL's server", v.Output, v.Error)
	}
}

// newProviderAPITest serves the API over a run manager whose runs call
// the providers newModelProvider builds from the process's environment
// (set with t.Setenv), with model as [model].
func newProviderAPITest(t *testing.T, model modelSpec) *apiTest {
	t.Helper()
	reg := newRegistry(nil, registryOptions{})
	t.Cleanup(reg.close)
	return serveRunsAPI(t, newRunsWith(t, runManagerOptions{Registry: reg, Logger: slog.New(slog.DiscardHandler), Home: t.TempDir(),
		Getenv: os.LookupEnv, Model: model, Metrics: newMetrics()}))
}

// serveRunsAPI serves the API, without keys, over runs.
func serveRunsAPI(t *testing.T, runs *runManager) *apiTest {
	t.Helper()
	a := newAPI(runs, runs.opts.Registry, nil, runs.opts.Metrics, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &apiTest{url: srv.URL, client: srv.Client(), api: a, runs: runs}
}

// requestFields decodes the raw body of req into its top-level fields.
func requestFields(t *testing.T, req fakeRequest) map[string]json.RawMessage {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(req.Raw, &fields); err != nil {
		t.Fatalf("request body %s: %v", req.Raw, err)
	}
	return fields
}
