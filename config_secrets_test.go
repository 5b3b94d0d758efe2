package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// This file tests which configured values are secrets: names that say
// so, values the operator marks, ${VAR} expansions, URL passwords and
// header credentials are hidden; every other value is shown as written.

func TestIsSecretName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		want bool
	}{
		{"GITHUB_TOKEN", true},
		{"GITHUB_PERSONAL_ACCESS_TOKEN", true},
		{"OPENAI_API_KEY", true},
		{"x_api_key", true},
		{"AWS_SECRET_ACCESS_KEY", true},
		{"db_password", true},
		{"PGPASSFILE", true},
		{"MYSQL_PWD", true},
		{"GOOGLE_APPLICATION_CREDENTIALS", true},
		{"AuthHeader", true},
		{"COOKIE_JAR", true},
		{"SESSION_ID", true},
		{"PRIVATE_KEY_PEM", true},
		{"WEBHOOK_SIGNATURE", true},
		{"SENTRY_DSN", true},
		{"NODE_ENV", false},
		{"LOG_FORMAT", false},
		{"LOG_LEVEL", false},
		{"MEMORY_FILE_PATH", false},
		{"TZ", false},
		{"DATABASE_URL", false},
		{"DEBUG", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := isSecretName(tt.name); got != tt.want {
			t.Errorf("isSecretName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestURLPasswords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"postgres://app:pw-9f8e7d6c@db.internal:5432/x", []string{"pw-9f8e7d6c"}},
		{"--remote=https://bot:p%40ss-w0rd-1@git.example/r.git and http://u:second-pass@h", []string{"p%40ss-w0rd-1", "p@ss-w0rd-1", "second-pass"}},
		{"https://user-only@h/x", nil},
		{"https://h/x?redirect=a:b@c", nil},
		{"https://example.com/mcp", nil},
		{"production", nil},
	}
	for _, tt := range tests {
		if got := urlPasswords(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("urlPasswords(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestServerSecrets builds servers as an operator writes them and checks
// what a server's answer quoting their values shows: secrets as
// [redacted], every ordinary value as written.
func TestServerSecrets(t *testing.T) {
	t.Parallel()
	getenv := fakeEnv(map[string]string{
		"GITHUB_TOKEN":    "ghp-from-environment-0123",
		"DEPLOY_HOST":     "deploy.example.internal",
		"UPSTREAM_APIKEY": "upstream-key-998877",
	})
	tests := []struct {
		name   string
		server string // a JSON server object
		quote  string // what the server says
		want   string // what is shown
	}{
		{
			name:   "ordinary env values",
			server: `{"name":"s","command":"x","env":{"NODE_ENV":"production","LOG_FORMAT":"structured","LOG_LEVEL":"warning","TZ":"Europe/Berlin","MEMORY_FILE_PATH":"/var/lib/memory.jsonl"}}`,
			quote:  "deploy to production with structured logs at warning, TZ Europe/Berlin, graph in /var/lib/memory.jsonl",
			want:   "deploy to production with structured logs at warning, TZ Europe/Berlin, graph in /var/lib/memory.jsonl",
		},
		{
			name:   "env names that say secret",
			server: `{"name":"s","command":"x","env":{"GITHUB_TOKEN":"ghp-literal-value-4455","db_password":"hunter22-long","SENTRY_DSN":"dsn-value-abcdef","NODE_ENV":"production"}}`,
			quote:  "token ghp-literal-value-4455 password hunter22-long dsn dsn-value-abcdef in production",
			want:   "token [redacted] password [redacted] dsn [redacted] in production",
		},
		{
			name:   "marked by secret_env",
			server: `{"name":"s","command":"x","env":{"DEPLOY_TARGET":"blue-cluster-7","NODE_ENV":"production"},"secret_env":["DEPLOY_TARGET"]}`,
			quote:  "deploying blue-cluster-7 in production",
			want:   "deploying [redacted] in production",
		},
		{
			name:   "expanded from a variable whose name says secret",
			server: `{"name":"s","command":"x","args":["--token","${GITHUB_TOKEN}","--host","${DEPLOY_HOST}"],"env":{"UPSTREAM":"${UPSTREAM_APIKEY}"}}`,
			quote:  "token ghp-from-environment-0123 key upstream-key-998877 host deploy.example.internal",
			want:   "token [redacted] key [redacted] host deploy.example.internal",
		},
		{
			name:   "a default of such a variable",
			server: `{"name":"s","command":"x","args":["${MISSING_TOKEN:-default-token-123}"]}`,
			quote:  "using default-token-123",
			want:   "using [redacted]",
		},
		{
			name:   "password in a URL",
			server: `{"name":"s","command":"x","args":["https://bot:git-pass-556677@git.example/r.git"],"env":{"DATABASE_URL":"postgres://app:pg-pass-112233@db/x"}}`,
			quote:  "cloning as bot with git-pass-556677 from git.example, db app pg-pass-112233",
			want:   "cloning as bot with [redacted] from git.example, db app [redacted]",
		},
		{
			name:   "header values and the credential after the scheme",
			server: `{"name":"s","url":"https://mcp.example/mcp","headers":{"Authorization":"Bearer bearer-tok-667788","X-Team":"platform-team"}}`,
			quote:  "saw Bearer bearer-tok-667788, then bearer-tok-667788 alone, for platform-team",
			want:   "saw [redacted], then [redacted] alone, for [redacted]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			servers, err := parseServerJSON("test", []byte("["+tt.server+"]"), getenv)
			if err != nil {
				t.Fatal(err)
			}
			if got := newRedactor(servers[0].secretValues()...).redact(tt.quote); got != tt.want {
				t.Errorf("server %s: redact(%q) = %q, want %q", tt.server, tt.quote, got, tt.want)
			}
		})
	}
}

// TestSecretEnvErrors checks secret_env in both sources: a name that is
// not in the server's env, and a value of the wrong type, are errors
// naming the server and the field.
func TestSecretEnvErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		toml    string // a TOML config file; empty for json
		json    string // HARNESS_MCP_SERVERS
		wantErr []string
	}{
		{name: "toml name not in env", toml: "[mcp_servers.gh]\ncommand = \"x\"\nenv = { GH = \"v\" }\nsecret_env = [\"GH\", \"GH_TOKN\"]\n",
			wantErr: []string{`server "gh": secret_env[1]: "GH_TOKN" is not a variable of this server's env; name one of its env keys, or remove it`}},
		{name: "json name not in env", json: `[{"name":"gh","command":"x","env":{"GH":"v"},"secret_env":["GH","gh"]}]`,
			wantErr: []string{`HARNESS_MCP_SERVERS[0]: server "gh": secret_env[1]: "gh" is not a variable of this server's env`}},
		{name: "http server", toml: "[mcp_servers.web]\nurl = \"https://mcp.example/mcp\"\nsecret_env = [\"TOKEN\"]\n",
			wantErr: []string{`server "web": secret_env[0]: "TOKEN" is not a variable of this server's env`}},
		{name: "toml wrong type", toml: "[mcp_servers.gh]\ncommand = \"x\"\nenv = { GH = \"v\" }\nsecret_env = \"GH\"\n",
			wantErr: []string{`[mcp_servers.gh] field "secret_env": a string is not allowed here; write a list of strings`}},
		{name: "json wrong type", json: `[{"name":"gh","command":"x","env":{"GH":"v"},"secret_env":"GH"}]`,
			wantErr: []string{`HARNESS_MCP_SERVERS[0]: field "secret_env": a JSON string is not allowed here; write a list of strings`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.toml != "" {
				writeFile(t, home, "config.toml", tt.toml)
			}
			env := map[string]string{}
			if tt.json != "" {
				env["HARNESS_MCP_SERVERS"] = tt.json
			}
			_, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(env)})
			for _, want := range tt.wantErr {
				if !strings.Contains(errString(err), want) {
					t.Errorf("loadConfig() error = %v, want it to contain %q", err, want)
				}
			}
		})
	}
}

// TestConfigSecretValues loads a configuration with a secret in each
// place outside a server that holds one, and an ordinary value beside
// each: the daemon's redactor hides the secrets and nothing else.
func TestConfigSecretValues(t *testing.T) {
	t.Parallel()
	const (
		apiToken      = "api-token-0123456789abcdef"
		webhookSecret = "webhook-secret-7788"
		basePass      = "model-proxy-pass-1"
		hookPass      = "hook-pass-4455"
		modelKey      = "sk-model-key-667788"
	)
	home := t.TempDir()
	writeFile(t, home, "config.toml", fmt.Sprintf(`[model]
name = "openai/gpt-x"
base_url = "https://proxy:%s@models.example/v1"

[webhooks]
url = "https://hooks:%s@hooks.example/run-end"
secret = %q

[mcp_servers.s]
command = "x"
env = { NODE_ENV = "production" }
`, basePass, hookPass, webhookSecret))
	getenv := fakeEnv(map[string]string{
		"HARNESS_API_KEYS": fmt.Sprintf(`[{"name":"ops","token":%q,"scopes":["admin"]}]`, apiToken),
		"OPENAI_API_KEY":   modelKey,
	})
	cfg, err := loadConfig(loadOptions{Home: home, Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	rd := newRedactor(daemonSecrets(cfg, getenv)...)
	for _, secret := range []string{apiToken, webhookSecret, basePass, hookPass, modelKey} {
		if got := rd.redact("saw " + secret); got != "saw [redacted]" {
			t.Errorf("redact(%q) = %q, want the secret redacted", "saw "+secret, got)
		}
	}
	for _, ordinary := range []string{"production", "models.example", "hooks.example", "gpt-x"} {
		if got := rd.redact("saw " + ordinary); got != "saw "+ordinary {
			t.Errorf("redact(%q) = %q, want it as written", "saw "+ordinary, got)
		}
	}
}

// TestServerViewMasksOnlySecrets checks what mcp get shows of a server's
// configuration: ordinary env values as written, secret ones masked,
// other secrets redacted from the command line.
func TestServerViewMasksOnlySecrets(t *testing.T) {
	t.Parallel()
	servers, err := parseServerJSON("test", []byte(`[{"name":"s","command":"srv","args":["--token","${GITHUB_TOKEN}","--db","postgres://app:pg-pass-112233@db/x"],
		"env":{"NODE_ENV":"production","API_KEY":"key-value-0099","TARGET":"blue-cluster-7","DATABASE_URL":"postgres://app:pg-pass-112233@db/x"},"secret_env":["TARGET"]}]`),
		fakeEnv(map[string]string{"GITHUB_TOKEN": "ghp-view-secret-0123"}))
	if err != nil {
		t.Fatal(err)
	}
	view := viewOf(servers[0])
	wantEnv := map[string]string{"NODE_ENV": "production", "API_KEY": maskedValue, "TARGET": maskedValue, "DATABASE_URL": "postgres://app:[redacted]@db/x"}
	wantArgs := []string{"--token", "[redacted]", "--db", "postgres://app:[redacted]@db/x"}
	if fmt.Sprint(view.Env) != fmt.Sprint(wantEnv) || !slices.Equal(view.Args, wantArgs) {
		t.Errorf("viewOf() env %v, args %q; want %v, %q", view.Env, view.Args, wantEnv, wantArgs)
	}
}
