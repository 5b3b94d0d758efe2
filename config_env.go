package main

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
)

// This file holds the environment's layer of the configuration: servers
// from HARNESS_MCP_SERVERS, keys from HARNESS_API_KEYS, and the settings
// HARNESS_* variables give (limits, model, connections, kept runs).

// addEnvServers appends the servers of HARNESS_MCP_SERVERS to cfg's TOML
// servers: an entry named like a TOML server is logged and skipped (TOML
// wins); one whose name collides with a TOML server's otherwise is an
// error.
func (cfg *config) addEnvServers(getenv func(string) (string, bool), logger *slog.Logger) error {
	raw, ok := getenv("HARNESS_MCP_SERVERS")
	if !ok || strings.TrimSpace(raw) == "" {
		return nil
	}
	envServers, err := parseServerJSON("HARNESS_MCP_SERVERS", []byte(raw), getenv)
	errs := []error{err}
	fileServers := slices.Clip(cfg.Servers)
	for _, s := range envServers {
		if i := slices.IndexFunc(fileServers, func(t serverConfig) bool { return t.Name == s.Name }); i >= 0 {
			logger.Warn("skipping server from HARNESS_MCP_SERVERS: already defined in TOML",
				"server", s.Name, "toml", fileServers[i].Source)
			continue
		}
		if j := firstClash(s.Name, fileServers); j >= 0 {
			errs = append(errs, clashError(fileServers[j], s))
		}
		cfg.Servers = append(cfg.Servers, s)
	}
	return errors.Join(errs...)
}

// applyEnvLimits lets the HARNESS_ variables of the limits table override
// the files' limits.
func (cfg *config) applyEnvLimits(getenv func(string) (string, bool)) error {
	envLimits, errs := limitsFromEnv(getenv)
	cfg.Limits.overlay(envLimits)
	return errors.Join(errs...)
}

// applyEnvModel lets HARNESS_MODEL override the model's name.
func (cfg *config) applyEnvModel(getenv func(string) (string, bool)) error {
	name, ok := getenv("HARNESS_MODEL")
	if !ok || name == "" {
		return nil
	}
	spec, err := parseModelName(name)
	cfg.Model.Provider, cfg.Model.Model = spec.Provider, spec.Model
	if err != nil {
		return fmt.Errorf("HARNESS_MODEL: %v", err)
	}
	return nil
}

// applyEnvMaxConnections lets HARNESS_MAX_CONNECTIONS override the cap on
// open API connections.
func (cfg *config) applyEnvMaxConnections(getenv func(string) (string, bool)) error {
	v, ok := getenv("HARNESS_MAX_CONNECTIONS")
	if !ok || v == "" {
		return nil
	}
	n, err := strconv.Atoi(v)
	cfg.MaxConnections = n
	if err != nil || n <= 0 {
		return fmt.Errorf("HARNESS_MAX_CONNECTIONS: %q is not a positive number; set a positive number or unset it", v)
	}
	return nil
}

// applyEnvKeptRuns lets the HARNESS_ retention variables override the
// files' settings, and checks the result.
func (cfg *config) applyEnvKeptRuns(getenv func(string) (string, bool)) error {
	cfg.KeptRuns.merge(keptRunsFromEnv(getenv))
	_, err := cfg.KeptRuns.retention()
	return err
}

// addEnvKeys appends the keys of HARNESS_API_KEYS to cfg's TOML keys (and
// their plaintext tokens to cfg.APITokens) and checks that no two of them
// share a name or a token.
func (cfg *config) addEnvKeys(getenv func(string) (string, bool)) error {
	var errs []error
	if raw, ok := getenv("HARNESS_API_KEYS"); ok && strings.TrimSpace(raw) != "" {
		envKeys, tokens, err := parseAuthKeysJSON([]byte(raw))
		errs = append(errs, err)
		cfg.AuthKeys = append(cfg.AuthKeys, envKeys...)
		cfg.APITokens = append(cfg.APITokens, tokens...)
	}
	errs = append(errs, checkAuthKeys(cfg.AuthKeys))
	return errors.Join(errs...)
}
