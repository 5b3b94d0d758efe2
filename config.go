package main

import (
	"errors"
	"path/filepath"
	"strings"
)

// This file holds what the configuration is: the config every table's
// parsing fills, what one TOML file contributes to it (a configLayer), a
// setting's value with where it came from, and where it lives
// ($HARNESS_HOME). Reading and layering the sources is in
// config_load.go.

// Names of built-in tools the configuration names: find_tool, which keys'
// tool limits always leave (config_keylimits.go), and connect_mcp, which
// connects a server mid-run and whose server configuration is built in
// config_load.go.
const (
	toolFindTool   = "find_tool"
	toolConnectMCP = "connect_mcp"
)

// A config is everything harnessd reads at startup. Servers holds the
// global servers (TOML first, in file order, then HARNESS_MCP_SERVERS),
// including disabled ones (Enabled false), which the registry must not start
// but whose names stay reserved.
type config struct {
	Servers []serverConfig
	Model   modelSettings
	// AuthKeys is empty when auth is off.
	AuthKeys []authKey
	// APITokens are the plaintext tokens of HARNESS_API_KEYS, kept only to
	// be redacted (secretValues); AuthKeys holds their hashes.
	APITokens []string
	// ConnectAllowHosts is nil when [connect_mcp].allow_hosts is not set.
	ConnectAllowHosts []string
	// AllowedHosts are the Host names the API answers besides the listen
	// address and loopback (allowed_hosts).
	AllowedHosts []string
	// MaxConnections caps open API connections (max_connections,
	// HARNESS_MAX_CONNECTIONS); 0 when not set.
	MaxConnections int
	// KeptRuns are the retention settings of the files and environment.
	KeptRuns keptRunsSettings
	// OutsideSampling are the settings of the budget of sampling outside
	// runs' calls, of the files and environment.
	OutsideSampling outsideSamplingSettings
	// Limits are the run limits the files and environment set (see
	// config_limits.go); unset ones are 0.
	Limits runLimits
	// Webhooks is the [webhooks] table, HARNESS_WEBHOOK_SECRET applied.
	Webhooks webhookSettings
	// Schedules are the [[schedules]] of every file, merged by name.
	Schedules []scheduleConfig
	// Budgets are the default budgets of runs (run_budget.go) the files
	// and environment set.
	Budgets budgetSettings
	// Audit is the [audit] table of every file, over defaultAudit.
	Audit auditSettings
	// telemetryFiles is the [telemetry] of the files, merged; Telemetry
	// the tracing options with the OTEL_ variables applied
	// (config_telemetry.go).
	telemetryFiles telemetrySettings
	Telemetry      telemetryOptions
	// Files lists the TOML files that existed and were read, in order.
	Files []string
}

// A configLayer is what one TOML file contributes, already validated.
type configLayer struct {
	servers    []serverConfig
	model      modelSettings
	modelSet   tomlModel // which model fields the file set
	authKeys   []authKey
	allowHosts *[]string
	// allowedHosts and maxConnections are nil when the file does not set them.
	allowedHosts   *[]string
	maxConnections *int
	keptRuns       keptRunsSettings
	limits         runLimits
	webhooks       webhookSettings
	audit          tomlAudit
	schedules      []scheduleConfig
	budgets        budgetSettings
	telemetry      telemetrySettings
	// outsideSampling is what the file sets of the budget of sampling
	// outside runs' calls.
	outsideSampling outsideSamplingSettings
}

// defaultHome returns $HARNESS_HOME, or $HOME/.harness when it is unset or
// empty, or an error when neither is set.
func defaultHome(getenv func(string) (string, bool)) (string, error) {
	if h, ok := getenv("HARNESS_HOME"); ok && h != "" {
		return filepath.Clean(h), nil
	}
	if h, ok := getenv("HOME"); ok && h != "" {
		return filepath.Join(h, ".harness"), nil
	}
	return "", errors.New("find config home: neither HARNESS_HOME nor HOME is set; set HARNESS_HOME")
}

// A settingValue is one value as configured, as text (a count, a Go
// duration, a byte count, an amount; "0" for no bound), with where it
// came from (a file and its key, a variable, a flag); an empty value is
// not set. Retention, the default budgets and the outside sampling limits
// are configured with them.
type settingValue struct{ value, source string }

// override sets s to o when o is set: a later source wins.
func (s *settingValue) override(o settingValue) {
	if o.value != "" {
		*s = o
	}
}

// envSetting returns the setting of the environment variable name.
func envSetting(getenv func(string) (string, bool), name string) settingValue {
	v, _ := getenv(name)
	return settingValue{value: strings.TrimSpace(v), source: name}
}
