package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestAuthKeys(t *testing.T) {
	t.Parallel()
	hashOf := func(s string) string {
		h := sha256.Sum256([]byte(s))
		return hex.EncodeToString(h[:])
	}
	tokenHash := hashOf("0123456789abcdef-token")
	tests := []struct {
		name, toml, env string
		want            string // name:hash-prefix:scopes,...
		wantErr         string
	}{
		{name: "none"},
		{name: "toml", toml: "[[auth.keys]]\nname = \"ci\"\ntoken_sha256 = \"" + tokenHash + "\"\nscopes = [\"runs:write\"]\n",
			want: "ci:" + tokenHash[:8] + ":[runs:write]"},
		{name: "env plaintext hashed", env: `[{"name":"ops","token":"0123456789abcdef-token","scopes":["admin","runs:read"]}]`,
			want: "ops:" + tokenHash[:8] + ":[admin runs:read]"},
		{name: "toml then env", toml: "[[auth.keys]]\nname = \"a\"\ntoken_sha256 = \"" + hashOf("a-very-long-token-1") + "\"\nscopes = [\"admin\"]\n",
			env:  `[{"name":"b","token_sha256":"` + tokenHash + `","scopes":["runs:read"]}]`,
			want: "a:" + hashOf("a-very-long-token-1")[:8] + ":[admin],b:" + tokenHash[:8] + ":[runs:read]"},
		{name: "short token", env: `[{"name":"x","token":"s3cret","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token: shorter than 16 characters; use a long random token (openssl rand -hex 32)`},
		{name: "both", env: `[{"name":"x","token":"s3cret-s3cret-s3cret","token_sha256":"` + tokenHash + `","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token: both token and token_sha256 are set; keep one`},
		{name: "uppercase hash", env: `[{"name":"x","token_sha256":"` + strings.ToUpper(tokenHash) + `","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token_sha256: not 64 lowercase hex characters; use the output of: printf %s "$TOKEN" | sha256sum`},
		{name: "long hash", env: `[{"name":"x","token_sha256":"` + tokenHash + `00","scopes":["admin"]}]`,
			wantErr: `HARNESS_API_KEYS[0]: key "x": token_sha256: not 64 lowercase hex characters; use the output of: printf %s "$TOKEN" | sha256sum`},
		{name: "bad scope and name", toml: "[[auth.keys]]\nname = \"a b\"\ntoken_sha256 = \"" + tokenHash + "\"\nscopes = [\"write\"]\n",
			wantErr: "F: [[auth.keys]] #1: key \"a b\": name: \"a b\" has invalid characters; use only letters, digits, \"-\", \"_\" and \".\"\n" +
				`F: [[auth.keys]] #1: key "a b": scopes[0]: "write" is not a scope; use runs:read, runs:write, admin`},
		{name: "same name", toml: "[[auth.keys]]\nname = \"a\"\ntoken_sha256 = \"" + tokenHash + "\"\nscopes = [\"admin\"]\n",
			env:     `[{"name":"a","token":"another-long-token","scopes":["admin"]}]`,
			wantErr: `auth key "a" is defined twice (F and HARNESS_API_KEYS); remove or rename one`},
		{name: "same token", env: `[{"name":"a","token":"0123456789abcdef-token","scopes":["admin"]},{"name":"b","token_sha256":"` + tokenHash + `","scopes":["runs:read"]}]`,
			wantErr: `auth keys "a" (HARNESS_API_KEYS) and "b" (HARNESS_API_KEYS) have the same token; give each its own token`},
		{name: "unknown env field", env: `[{"name":"a","secret":"x"}]`,
			wantErr: `HARNESS_API_KEYS[0]: unknown field "secret"; valid fields are name, token, token_sha256, scopes, tenant, tools, servers, rate`},
		{name: "not array", env: `{}`,
			wantErr: `HARNESS_API_KEYS: not a JSON array; write [{"name": ..., "token": ..., "scopes": [...]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.toml != "" {
				writeFile(t, home, "config.toml", tt.toml)
			}
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(map[string]string{"HARNESS_API_KEYS": tt.env})})
			gotErr := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "F")
			if gotErr != tt.wantErr {
				t.Fatalf("loadConfig() error =\n%s\nwant\n%s", gotErr, tt.wantErr)
			}
			if strings.Contains(gotErr, "s3cret") {
				t.Errorf("loadConfig() error %q reveals a token", gotErr)
			}
			if err != nil {
				return
			}
			var parts []string
			for _, k := range cfg.AuthKeys {
				parts = append(parts, fmt.Sprintf("%s:%x:%v", k.Name, k.TokenSHA256[:4], k.Scopes))
			}
			if got := strings.Join(parts, ","); got != tt.want {
				t.Errorf("loadConfig() keys = %q, want %q", got, tt.want)
			}
		})
	}
}

// unknownProviderGemini is the error of a model named "gemini/...".
const unknownProviderGemini = `unknown provider "gemini": want one of openai, anthropic, google, ollama, vllm, openrouter, groq, mistral, deepseek, xai`

func TestModelSettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, home, ws, env string
		want                modelSettings
		wantErr             string
	}{
		{name: "none"},
		{name: "env only", env: "openai/gpt-4o", want: modelSettings{Provider: "openai", Model: "gpt-4o"}},
		{name: "model with slash", env: "openai/meta-llama/Llama-3-8B", want: modelSettings{Provider: "openai", Model: "meta-llama/Llama-3-8B"}},
		{name: "fields merge by layer",
			home: "[model]\nname = \"anthropic/claude-sonnet-4-5\"\nbase_url = \"http://h\"\nmax_output_tokens = 1000\ntemperature = 0.5\ntop_p = 0.9\n",
			ws:   "[model]\nmax_output_tokens = 2000\nmax_steps = 7\ntemperature = 1\n",
			want: modelSettings{Provider: "anthropic", Model: "claude-sonnet-4-5", BaseURL: "http://h", MaxOutputTokens: 2000, MaxSteps: 7,
				Tuning: modelTuning{Temperature: floatPtr(1), TopP: floatPtr(0.9)}}},
		{name: "reasoning effort", home: "[model]\nname = \"openai/gpt-5\"\nreasoning_effort = \"high\"\n",
			want: modelSettings{Provider: "openai", Model: "gpt-5", Tuning: modelTuning{ReasoningEffort: "high"}}},
		{name: "env overrides name", home: "[model]\nname = \"anthropic/c\"\nmax_steps = 3\n", env: "openai/o",
			want: modelSettings{Provider: "openai", Model: "o", MaxSteps: 3}},
		{name: "an OpenAI-compatible provider", env: "google/gemini-2.5-flash", want: modelSettings{Provider: "google", Model: "gemini-2.5-flash"}},
		{name: "sampling models, the workspace's replacing the home's",
			home: "[model]\nsampling_models = [\"openai/gpt-4o\"]\n",
			ws:   "[model]\nsampling_models = [\"anthropic/claude-haiku-4-5\", \"openai/gpt-4o-mini\"]\n",
			want: modelSettings{SamplingModels: []modelSpec{{Provider: "anthropic", Model: "claude-haiku-4-5"}, {Provider: "openai", Model: "gpt-4o-mini"}}}},
		{name: "bad sampling models", home: "[model]\nsampling_models = [\"gpt-4o\", \"openai/o\", \"gemini/pro\"]\n",
			wantErr: `H: [model] sampling_models[0]: model "gpt-4o": want provider/model, e.g. openai/gpt-4o, anthropic/claude-sonnet-4-5 or google/gemini-2.5-flash` + "\n" +
				`H: [model] sampling_models[2]: model "gemini/pro": ` + unknownProviderGemini},
		{name: "bad provider", env: "gemini/pro",
			wantErr: `HARNESS_MODEL: model "gemini/pro": ` + unknownProviderGemini},
		{name: "no model", home: "[model]\nname = \"openai/\"\n",
			wantErr: `H: [model] name: model "openai/": want provider/model, e.g. openai/gpt-4o, anthropic/claude-sonnet-4-5 or google/gemini-2.5-flash`},
		{name: "bad url and numbers", home: "[model]\nbase_url = \"api.openai.com\"\nmax_output_tokens = -1\n",
			wantErr: "H: [model] base_url: no scheme; write a full URL like http://localhost:3001/mcp\n" +
				"H: [model] max_output_tokens: -1 is not positive; set a positive number or remove it"},
		{name: "the old max_tokens is refused naming the new key, with the file's other problems",
			home: "[model]\nmax_tokens = 1000\nmax_steps = 0\n",
			wantErr: `H: unknown key "model.max_tokens"; renamed max_output_tokens (the output tokens of one model call; a run's max_tokens is its whole budget): write max_output_tokens instead` + "\n" +
				"H: [model] max_steps: 0 is not positive; set a positive number or remove it"},
		{name: "bad sampling settings", home: "[model]\ntemperature = 2.5\ntop_p = -0.1\nreasoning_effort = \"extreme\"\n",
			wantErr: "H: [model] temperature: 2.5 is out of range: use 0 to 2, or leave it out for the model's default\n" +
				"H: [model] top_p: -0.1 is out of range: use 0 to 1, or leave it out for the model's default\n" +
				`H: [model] reasoning_effort: "extreme" is not an effort: use low, medium, high, or leave it out for the model's default`},
		{name: "an empty reasoning effort", home: "[model]\nreasoning_effort = \"\"\n",
			wantErr: "H: [model] reasoning_effort: is empty; use low, medium, high, or remove it"},
		{name: "a typo in [model] lists its keys", home: "[model]\ntemprature = 1\n",
			wantErr: `H: unknown key "model.temprature"; valid keys are name, base_url, max_output_tokens, max_steps, temperature, top_p, reasoning_effort, stream, sampling_models, prices`},
		{name: "Anthropic's limits, checked once the layers merged",
			home: "[model]\nname = \"openai/gpt-4o\"\ntemperature = 1.5\n", env: "anthropic/claude-sonnet-4-5",
			wantErr: "[model] temperature: 1.5 is over 1, the most Anthropic takes: use 0 to 1"},
		{name: "Anthropic's thinking takes no temperature, a top_p of 0.95 or more, and more output than its budget",
			home: "[model]\nname = \"anthropic/claude-sonnet-4-5\"\ntemperature = 0.2\ntop_p = 0.5\nreasoning_effort = \"medium\"\nmax_output_tokens = 4096\n",
			wantErr: `[model] temperature: cannot be set with reasoning_effort "medium": Anthropic's extended thinking takes no temperature; remove one of them` + "\n" +
				`[model] top_p: 0.5 is under 0.95, the least Anthropic's extended thinking (reasoning_effort "medium") takes: raise it or remove one of them` + "\n" +
				`[model] reasoning_effort: "medium" thinks with up to 4096 tokens on Anthropic, which max_output_tokens (4096) must exceed: raise max_output_tokens above 4096 or lower the effort`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := configDirs(t, tt.home, tt.ws)
			cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: fakeEnv(map[string]string{"HARNESS_MODEL": tt.env})})
			if got := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "H"); got != tt.wantErr {
				t.Fatalf("loadConfig() error =\n%s\nwant\n%s", got, tt.wantErr)
			}
			if err == nil && !reflect.DeepEqual(cfg.Model, tt.want) {
				t.Errorf("loadConfig() model = %+v, want %+v", cfg.Model, tt.want)
			}
		})
	}
}

// floatPtr returns a pointer to v, for the optional settings.
func floatPtr(v float64) *float64 { return &v }
