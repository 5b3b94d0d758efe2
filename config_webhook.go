package main

import (
	"errors"
	"fmt"
	"strings"
)

// This file holds the [webhooks] settings: the URL every run's end is
// posted to unless the run names its own, and the secret that signs the
// deliveries (HARNESS_WEBHOOK_SECRET overrides the files').

// minWebhookSecret is the shortest secret accepted: long enough to sign
// and to be hidden by the redactor.
const minWebhookSecret = 16

// A webhookSettings is the [webhooks] table as harnessd applies it. Empty
// fields are not set: runs without a webhook_url send nothing, and
// deliveries go unsigned without a secret.
type webhookSettings struct {
	URL    string
	Secret string
	// urlSource and secretSource name where each value came from, for
	// errors.
	urlSource, secretSource string
}

// A tomlWebhooks is the [webhooks] table of one config.toml.
type tomlWebhooks struct {
	URL    *string `toml:"url"`
	Secret *string `toml:"secret"`
}

// parseTOMLWebhooks returns the settings one file's [webhooks] table sets,
// checked; file names it in errors.
func parseTOMLWebhooks(file string, t tomlWebhooks) (webhookSettings, error) {
	var s webhookSettings
	if t.URL != nil {
		s.URL, s.urlSource = strings.TrimSpace(*t.URL), file+": [webhooks] url"
	}
	if t.Secret != nil {
		s.Secret, s.secretSource = *t.Secret, file+": [webhooks] secret"
	}
	return s, s.check()
}

// merge sets in s every value o sets.
func (s *webhookSettings) merge(o webhookSettings) {
	if o.urlSource != "" {
		s.URL, s.urlSource = o.URL, o.urlSource
	}
	if o.secretSource != "" {
		s.Secret, s.secretSource = o.Secret, o.secretSource
	}
}

// applyEnvWebhooks lets HARNESS_WEBHOOK_SECRET override the files' secret.
func (cfg *config) applyEnvWebhooks(getenv func(string) (string, bool)) error {
	v, ok := getenv("HARNESS_WEBHOOK_SECRET")
	if !ok || v == "" {
		return nil
	}
	env := webhookSettings{Secret: v, secretSource: "HARNESS_WEBHOOK_SECRET"}
	cfg.Webhooks.merge(env)
	return env.check()
}

// check returns an error naming the source of each bad value: a URL that
// is not an absolute http(s) URL, a secret shorter than minWebhookSecret.
// The errors never repeat the values.
func (s webhookSettings) check() error {
	var errs []error
	if s.URL != "" {
		if err := checkHTTPURL(s.URL); err != nil {
			errs = append(errs, fmt.Errorf("%s: %v", s.urlSource, err))
		}
	}
	if s.secretSource != "" && len(s.Secret) < minWebhookSecret {
		errs = append(errs, fmt.Errorf("%s: %d characters; use at least %d (like the output of openssl rand -hex 32)", s.secretSource, len(s.Secret), minWebhookSecret))
	}
	return errors.Join(errs...)
}
