package main

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
)

// This file holds which configured values are secrets, handed to the
// redactor (redact.go), which knows nothing of the configuration: a value
// that grants access, not any value. Always secret: header values, the
// OAuth client secrets and assertions, the plaintext API tokens, the
// webhook secret, the password in a URL's userinfo anywhere in the
// configuration, env values whose name says they are secret, and values
// expanded from a ${VAR} whose name says so. Marked by the operator: the
// env names of a server's secret_env. Nothing else: NODE_ENV=production
// stays "production" in every output.

// secretNameWords are the words that make a variable's name say its value
// is secret, wherever they occur in the name, in any case.
var secretNameWords = []string{"KEY", "TOKEN", "SECRET", "PASS", "PWD", "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "PRIVATE", "SIGNATURE", "DSN"}

// isSecretName reports whether the name of an environment variable says
// its value is secret: it contains one of secretNameWords, in any case
// (GITHUB_TOKEN, db_password, SENTRY_DSN, X_API_KEY).
func isSecretName(name string) bool {
	upper := strings.ToUpper(name)
	return slices.ContainsFunc(secretNameWords, func(w string) bool { return strings.Contains(upper, w) })
}

// secretValues returns the values of cfg that are secrets (see the file's
// comment): its header values, its env values whose name says so or that
// secret_env names, the values its ${VAR}s with such names expanded to,
// the URL passwords in its command, args, url and env values, and its
// OAuth secrets. newRedactor keeps those long enough to be secrets, and
// the credential after a scheme such as "Bearer".
func (cfg serverConfig) secretValues() []string {
	values := slices.Collect(maps.Values(cfg.Headers))
	for name, v := range cfg.Env {
		if cfg.isSecretEnv(name) {
			values = append(values, v)
		}
		values = append(values, urlPasswords(v)...)
	}
	values = append(values, cfg.ExpandedSecrets...)
	for _, s := range append([]string{cfg.Command, cfg.URL}, cfg.Args...) {
		values = append(values, urlPasswords(s)...)
	}
	return append(values, cfg.OAuth.secrets()...)
}

// isSecretEnv reports whether the value of cfg's env variable name is a
// secret as a whole: its name says so, or secret_env names it.
func (cfg serverConfig) isSecretEnv(name string) bool {
	return isSecretName(name) || slices.Contains(cfg.SecretEnv, name)
}

// serverSecrets returns the secret values of servers (see secretValues).
func serverSecrets(servers ...[]serverConfig) []string {
	var values []string
	for _, list := range servers {
		for _, s := range list {
			values = append(values, s.secretValues()...)
		}
	}
	return values
}

// secretValues returns the secrets cfg holds, for the redactor of
// everything the daemon logs, stores and answers: the global servers'
// secret values, the plaintext API tokens of HARNESS_API_KEYS, the
// webhook secret, the telemetry export's header values, and the URL
// passwords of the model's base URL, the webhook URLs and the telemetry
// endpoint. The model's API key is not configuration; modelSecrets
// gives it.
func (cfg *config) secretValues() []string {
	values := append(serverSecrets(cfg.Servers), cfg.APITokens...)
	values = append(values, cfg.Webhooks.Secret)
	values = append(values, cfg.Telemetry.secretValues()...)
	urls := []string{cfg.Model.BaseURL, cfg.Webhooks.URL, cfg.Telemetry.Endpoint}
	for _, s := range cfg.Schedules {
		urls = append(urls, s.WebhookURL)
	}
	for _, u := range urls {
		values = append(values, urlPasswords(u)...)
	}
	return values
}

// serverLogger returns logger for the server cfg: with its name, and with
// its secret values redacted from every line (their redactor is built at
// the first line).
func serverLogger(logger *slog.Logger, cfg serverConfig) *slog.Logger {
	logger = logger.With("server", cfg.Name)
	values := cfg.secretValues()
	if len(values) == 0 {
		return logger
	}
	return redactLoggerLive(logger, (*liveRedactor)(nil).derive(values...))
}
