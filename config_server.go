package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
)

// This file holds one server's configuration: the serverConfig type, its
// defaults, and the building of one raw entry into it (names, ${VAR}
// expansion, transport inference, validation).

// Transport names as they appear in configuration.
const (
	transportStdio = "stdio"
	transportHTTP  = "http"
	transportSSE   = "sse"
)

// Defaults for a server's limits.
const (
	defaultTimeout         = 30 * time.Second
	defaultStartupTimeout  = 30 * time.Second
	defaultMaxMessageBytes = 4 << 20
)

// Bounds on configuration values.
const (
	minMaxMessageBytes = 1 << 10
	maxMaxMessageBytes = 1 << 30
	maxNameLength      = 64
	// maxRunServers bounds the mcp_servers of one run request.
	maxRunServers = 32
	// maxRunServerValues bounds the headers and the env entries of each
	// server of a run request, and maxRunValueBytes each of their values:
	// every value is a secret to hide from all the run shows.
	maxRunServerValues = 64
	maxRunValueBytes   = 4096
	// minTokenLength is the shortest plaintext API token accepted.
	minTokenLength = 16
)

// A serverConfig is one validated MCP server definition, whatever its source.
// Every field is resolved: Transport is one of the transport constants, the
// durations and limits are positive. It is a value type: copies share only
// the slices and maps, which are never modified after validation.
type serverConfig struct {
	Name      string
	Transport string
	// TransportInferred is true when the source did not name the transport;
	// an inferred "http" server may fall back to legacy SSE.
	TransportInferred bool
	Command           string
	Args              []string
	URL               string
	Env               map[string]string
	// SecretEnv names the variables of Env whose values the operator
	// marked secret (secret_env), besides those whose name says so.
	SecretEnv []string
	// ExpandedSecrets are the values that ${VAR}s whose name says they are
	// secret expanded to, in any field (config_secrets.go).
	ExpandedSecrets []string
	Cwd             string
	Headers         map[string]string
	Timeout         time.Duration
	StartupTimeout  time.Duration
	Enabled         bool
	IncludeTools    []string
	ExcludeTools    []string
	MaxMessageBytes int
	// Untrusted marks a server whose URL the operator did not write: one
	// the model named through connect_mcp or a run request of a non-admin
	// key gave. Its HTTP client refuses blocked addresses at dial time
	// (guardedClient), and its error bodies are not echoed.
	Untrusted bool
	// OAuth is the server's oauth table; nil when it has none.
	OAuth *oauthConfig
	// Required says the server must start: a required global keeps
	// /readyz at 503 while it is down, a required run-local server fails
	// its run when it cannot start. Per-run servers are required unless
	// they say "required": false; others only when they say true.
	Required bool
	// Roots are the directories answered to roots/list; nil means none
	// configured (a run-local server then gets its run's roots, see
	// withRunRoots), empty means none either way. Nothing else is
	// answered: a server given its directories on its command line keeps
	// them (server-filesystem replaces them only with a non-empty list).
	Roots []string
	// Sampling allows the server to ask the run's model for completions
	// (default true, false for connect_mcp servers).
	Sampling bool
	// LogLevel, when set, is sent with logging/setLevel after the handshake.
	LogLevel string
	// ProtocolVersion, when set, pins the protocol revision: no probe, no
	// fallback. Empty negotiates (see client_revision.go).
	ProtocolVersion string
	// Origin says where the definition came from; its defaults and run
	// behaviour follow from it (config_origin.go).
	Origin serverOrigin
	// Approval says which of the server's tool calls wait for an
	// operator's approval in a run: approvalNever ("" means it too),
	// approvalWrites or approvalAlways (input_approval.go).
	Approval string
	// ApprovalTools are globs of the server's own tool names whose calls
	// always need approval.
	ApprovalTools []string
	// PinTools says what a change of a pinned tool definition does
	// (tools_pins.go): pinHold, pinWarn or pinOff; resolved from the
	// transport when the entry does not say (pinToolsDefault).
	PinTools string
	// Unset are the ${VAR}s without default the server uses whose
	// variables were not set when the configuration was read
	// (config_problems.go): the server is valid but is not started; its
	// status is failed, naming the first. The fields that use them keep
	// their text unexpanded.
	Unset []unsetVar
	// Source labels where the definition came from, for display only: a
	// file path, "HARNESS_MCP_SERVERS", "profile <name>", "run",
	// "connect_mcp" or "command line".
	Source string
}

// requestTimeout returns the deadline of one request to the server. A
// config built by this file always sets it; a zero one (a literal in a
// test, say) means the default.
func (cfg serverConfig) requestTimeout() time.Duration {
	return cmp.Or(cfg.Timeout, defaultTimeout)
}

// startupTimeout returns the bound of start-up and the handshake, or the
// default for a zero one.
func (cfg serverConfig) startupTimeout() time.Duration {
	return cmp.Or(cfg.StartupTimeout, defaultStartupTimeout)
}

// messageLimit returns the largest message accepted from the server, or
// the default for a zero one.
func (cfg serverConfig) messageLimit() int {
	return cmp.Or(cfg.MaxMessageBytes, defaultMaxMessageBytes)
}

// inheritedEnv lists the variables a stdio server inherits from harnessd.
var inheritedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LC_ALL", "TERM", "TMPDIR", "TZ"}

// A rawServer is one server definition as written in TOML or JSON. Pointer
// fields tell "absent" from "empty". In TOML the name is the table key.
type rawServer struct {
	Name      string  `json:"name" toml:"-"`
	Transport *string `json:"transport" toml:"transport"`
	// Type is other clients' name for the transport (JSON only; see
	// typeTransport).
	Type            *string           `json:"type" toml:"-"`
	Command         string            `json:"command" toml:"command"`
	Args            []string          `json:"args" toml:"args"`
	URL             string            `json:"url" toml:"url"`
	Env             map[string]string `json:"env" toml:"env"`
	SecretEnv       []string          `json:"secret_env" toml:"secret_env"`
	Cwd             string            `json:"cwd" toml:"cwd"`
	Headers         map[string]string `json:"headers" toml:"headers"`
	Timeout         *string           `json:"timeout" toml:"timeout"`
	StartupTimeout  *string           `json:"startup_timeout" toml:"startup_timeout"`
	Enabled         *bool             `json:"enabled" toml:"enabled"`
	IncludeTools    []string          `json:"include_tools" toml:"include_tools"`
	ExcludeTools    []string          `json:"exclude_tools" toml:"exclude_tools"`
	MaxMessageBytes *int              `json:"max_message_bytes" toml:"max_message_bytes"`
	OAuth           *rawOAuth         `json:"oauth" toml:"oauth"`
	Required        *bool             `json:"required" toml:"required"`
	Roots           *[]string         `json:"roots" toml:"roots"`
	Sampling        *bool             `json:"sampling" toml:"sampling"`
	LogLevel        string            `json:"log_level" toml:"log_level"`
	ProtocolVersion string            `json:"protocol_version" toml:"protocol_version"`
	Approval        *string           `json:"approval" toml:"approval"`
	ApprovalTools   []string          `json:"approval_tools" toml:"approval_tools"`
	PinTools        *string           `json:"pin_tools" toml:"pin_tools"`
}

// serverFields lists the JSON fields of a server object, for error hints.
var serverFields = jsonFields(rawServer{})

// buildServer validates raw and resolves its defaults and transport. label
// prefixes every error; the error joins all the entry's problems, sorted.
// The steps: the name, ${VAR} expansion of every expanding field, the
// transport (inferred or checked), what only one transport takes, the
// limits and the tool filters.
func buildServer(label string, origin serverOrigin, source string, raw rawServer, getenv func(string) (string, bool)) (serverConfig, error) {
	b := &serverBuilder{label: label, raw: raw, getenv: getenv, unexpanded: make(map[string]bool), shapeOnly: isAnyVarSet(getenv)}
	if err := checkServerName(raw.Name); err != nil {
		b.bad("name", "%v", err)
	}
	s := serverConfig{
		Name:            raw.Name,
		Command:         b.expand("command", raw.Command),
		URL:             b.expand("url", raw.URL),
		Cwd:             b.expand("cwd", raw.Cwd),
		Enabled:         raw.Enabled == nil || *raw.Enabled,
		Required:        (raw.Required == nil && origin.requiredByDefault()) || (raw.Required != nil && *raw.Required),
		IncludeTools:    raw.IncludeTools,
		ExcludeTools:    raw.ExcludeTools,
		Sampling:        origin.samplingByDefault(),
		LogLevel:        raw.LogLevel,
		Origin:          origin,
		Source:          source,
		ProtocolVersion: raw.ProtocolVersion,
		ApprovalTools:   raw.ApprovalTools,
	}
	if raw.Approval != nil {
		s.Approval = *raw.Approval
	}
	if raw.Sampling != nil {
		s.Sampling = *raw.Sampling
	}
	if raw.Roots != nil {
		s.Roots = []string{}
		for i, dir := range *raw.Roots {
			field := fmt.Sprintf("roots[%d]", i)
			dir = b.expand(field, dir)
			s.Roots = append(s.Roots, dir)
			if !filepath.IsAbs(dir) && !b.unexpanded[field] {
				b.bad(field, "%q is not an absolute directory path; write full paths (${HARNESS_WORKSPACE} and ${HOME}/dir work), or roots = [] for none", dir)
			}
		}
	}
	if raw.LogLevel != "" && !slices.Contains(mcpLogLevels, raw.LogLevel) {
		b.bad("log_level", "%q is not an MCP log level; use one of %s", raw.LogLevel, strings.Join(mcpLogLevels, ", "))
	}
	for i, a := range raw.Args {
		s.Args = append(s.Args, b.expand(fmt.Sprintf("args[%d]", i), a))
	}
	s.Env = b.expandMap("env", raw.Env, envRule)
	s.SecretEnv = b.secretEnv()
	s.Headers = b.expandMap("headers", raw.Headers, headerRule)
	s.Transport, s.TransportInferred = resolveTransport(raw.Transport, s.Command, s.URL, b.bad)
	b.checkTransportFields(s)
	if raw.OAuth != nil {
		s.OAuth = buildOAuth(*raw.OAuth, s.Transport, b.expand, b.bad)
	}
	s.Timeout = parseDuration("timeout", raw.Timeout, defaultTimeout, b.bad)
	s.StartupTimeout = parseDuration("startup_timeout", raw.StartupTimeout, defaultStartupTimeout, b.bad)
	s.MaxMessageBytes = b.messageLimit()
	b.checkToolFilters()
	b.checkApproval()
	s.PinTools = b.pinTools(s.Transport)
	b.checkProtocolVersion(s.Transport)
	s.Unset = b.unset
	s.ExpandedSecrets = b.expandedSecrets
	slices.SortFunc(b.errs, func(x, y error) int { return strings.Compare(x.Error(), y.Error()) })
	return s, errors.Join(b.errs...)
}

// A serverBuilder collects the problems of one raw server while
// buildServer resolves it. It is used by one goroutine.
type serverBuilder struct {
	label  string
	raw    rawServer
	getenv func(string) (string, bool)
	errs   []error
	// unset are the fields' variables that getenv does not set.
	unset []unsetVar
	// unexpanded holds the fields whose ${VAR} expansion failed: they keep
	// their raw text, so that inference still sees which of command and
	// url is set, and get no further complaint.
	unexpanded map[string]bool
	// shapeOnly: variables stand for values not known yet (anyVarSet), so
	// a field that starts with one is not checked further.
	shapeOnly bool
	// expandedSecrets collects what ${VAR}s whose name says they are
	// secret expanded to.
	expandedSecrets []string
}

// bad records a problem with field.
func (b *serverBuilder) bad(field, format string, args ...any) {
	b.errs = append(b.errs, fmt.Errorf("%s: server %q: %s: %s", b.label, b.raw.Name, field, fmt.Sprintf(format, args...)))
}

// expand returns s with its variables expanded, or s itself (marking
// field unexpanded) when expansion fails: an unset variable is recorded in
// unset (the server is valid but cannot start here), any other failure is
// a problem of the configuration.
func (b *serverBuilder) expand(field, s string) string {
	v, secrets, err := expandVars(s, b.getenv)
	b.expandedSecrets = append(b.expandedSecrets, secrets...)
	if err != nil {
		var u *unsetVarError
		if errors.As(err, &u) {
			b.unset = append(b.unset, unsetVar{Field: field, Name: u.name})
		} else {
			b.bad(field, "%v", err)
		}
		b.unexpanded[field] = true
		return s
	}
	b.unexpanded[field] = b.shapeOnly && strings.HasPrefix(s, "${")
	return v
}

// A mapRule says what the keys and values of env or headers may hold.
type mapRule struct {
	validKey     func(string) bool
	keyHint      string // the problem with an invalid key and what to do
	invalidChars string // characters no value may hold
	valueHint    string // the problem with such a value and what to do
}

var (
	envRule = mapRule{
		validKey: func(k string) bool { return k != "" && !strings.ContainsAny(k, "=\x00") },
		keyHint:  "invalid variable name; use a name without \"=\"", invalidChars: "\x00",
		valueHint: "value contains a NUL byte; remove it",
	}
	headerRule = mapRule{
		validKey: isHeaderName, keyHint: "invalid header name; use letters, digits and \"-\"",
		invalidChars: "\r\n\x00", valueHint: "value contains a line break or NUL byte; remove it",
	}
)

// expandMap checks the keys of m by rule and returns m with its values
// expanded and checked, or nil when m is empty. Fields are named
// "<field>.<key>".
func (b *serverBuilder) expandMap(field string, m map[string]string, rule mapRule) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		name := field + "." + k
		if !rule.validKey(k) {
			b.bad(name, "%s", rule.keyHint)
		}
		v := b.expand(name, m[k])
		if strings.ContainsAny(v, rule.invalidChars) {
			b.bad(name, "%s", rule.valueHint)
		}
		out[k] = v
	}
	return out
}

// secretEnv returns the raw secret_env, recording a problem for each name
// that is not a variable of the server's env: a misspelt name would leave
// a secret shown.
func (b *serverBuilder) secretEnv() []string {
	for i, name := range b.raw.SecretEnv {
		if _, ok := b.raw.Env[name]; !ok {
			b.bad(fmt.Sprintf("secret_env[%d]", i), "%q is not a variable of this server's env; name one of its env keys, or remove it", name)
		}
	}
	return b.raw.SecretEnv
}

// checkTransportFields checks what depends on s's resolved transport: an
// http or sse server's URL and the fields only a stdio server takes (and
// the reverse), and that cwd is absolute.
func (b *serverBuilder) checkTransportFields(s serverConfig) {
	raw := b.raw
	if s.Transport == transportHTTP || s.Transport == transportSSE {
		if err := checkHTTPURL(s.URL); err != nil && !b.unexpanded["url"] {
			b.bad("url", "%v", err)
		}
		if len(raw.Args) > 0 || len(raw.Env) > 0 || raw.Cwd != "" {
			b.bad("args/env/cwd", "only a stdio server takes them; remove them or use command instead of url")
		}
	}
	if s.Transport == transportStdio && len(raw.Headers) > 0 {
		b.bad("headers", "only an http or sse server takes headers; remove them or use url instead of command")
	}
	if s.Cwd != "" && !filepath.IsAbs(s.Cwd) && !b.unexpanded["cwd"] {
		b.bad("cwd", "not an absolute path; write a full path (${HOME}/dir works)")
	}
}

// messageLimit returns max_message_bytes, or the default when it is unset.
func (b *serverBuilder) messageLimit() int {
	n := b.raw.MaxMessageBytes
	if n == nil {
		return defaultMaxMessageBytes
	}
	if *n < minMaxMessageBytes || *n > maxMaxMessageBytes {
		b.bad("max_message_bytes", "%d is out of range; use %d (1 KiB) to %d (1 GiB)", *n, minMaxMessageBytes, maxMaxMessageBytes)
	}
	return *n
}

// checkToolFilters checks that include_tools, exclude_tools and
// approval_tools are globs.
func (b *serverBuilder) checkToolFilters() {
	for field, globs := range map[string][]string{"include_tools": b.raw.IncludeTools, "exclude_tools": b.raw.ExcludeTools, "approval_tools": b.raw.ApprovalTools} {
		for i, g := range globs {
			if _, err := path.Match(g, ""); g == "" || err != nil {
				b.bad(fmt.Sprintf("%s[%d]", field, i), "%q is not a valid glob; use *, ? and [a-z] as in path.Match", g)
			}
		}
	}
}

// resolveTransport applies the one inference rule of every source: command
// alone means stdio, url alone means http; an explicit transport must agree.
// It reports problems through bad and returns the transport ("" if none
// fits) and whether it was inferred.
func resolveTransport(explicit *string, command, rawURL string, bad func(field, format string, args ...any)) (string, bool) {
	var inferred string
	switch {
	case command != "" && rawURL != "":
		bad("command/url", "both are set; set command for a stdio server or url for an http server, not both")
		return "", explicit == nil
	case command != "":
		inferred = transportStdio
	case rawURL != "":
		inferred = transportHTTP
	default:
		bad("command/url", "neither is set; set command for a stdio server or url for an http server")
		return "", explicit == nil
	}
	if explicit == nil {
		return inferred, true
	}
	t := *explicit
	switch {
	case t != transportStdio && t != transportHTTP && t != transportSSE:
		bad("transport", "%q is not supported; use stdio, http or sse, or leave it out", t)
		return "", false
	case t == transportStdio && inferred != transportStdio:
		bad("transport", "\"stdio\" needs command, not url; set command or change transport")
		return "", false
	case t != transportStdio && inferred == transportStdio:
		bad("transport", "%q needs url, not command; set url or change transport", t)
		return "", false
	}
	return t, false
}

// parseDuration parses an optional Go duration, reporting problems through
// bad; it returns def when s is nil or invalid.
func parseDuration(field string, s *string, def time.Duration, bad func(field, format string, args ...any)) time.Duration {
	if s == nil {
		return def
	}
	d, err := time.ParseDuration(*s)
	switch {
	case err != nil:
		bad(field, "%q is not a duration; write one like \"30s\" or \"2m\"", *s)
	case d <= 0:
		bad(field, "%q is not positive; write a duration like \"30s\"", *s)
	default:
		return d
	}
	return def
}

// parseHTTPURL parses u and returns an error unless it is an absolute http
// or https URL with a host: the one rule for server URLs, connect_mcp's url
// and the model's base URL. The error never repeats u, which may hold
// credentials.
func parseHTTPURL(u string) (*url.URL, error) {
	if !strings.Contains(u, "://") {
		// "localhost:3001/mcp" parses with scheme "localhost" and
		// "127.0.0.1:3001/mcp" not at all: one hint for both.
		return nil, errors.New("no scheme; write a full URL like http://localhost:3001/mcp")
	}
	parsed, err := url.Parse(u)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("cannot parse: %v; write a full URL like http://localhost:3001/mcp", err)
	}
	if parsed.Scheme != "http" && parsed.Scheme != "https" {
		return nil, fmt.Errorf("scheme %q is not supported; use http or https", parsed.Scheme)
	}
	if parsed.Hostname() == "" {
		return nil, errors.New("no host; write a full URL like http://localhost:3001/mcp")
	}
	return parsed, nil
}

// checkHTTPURL is parseHTTPURL for a caller that needs only the verdict.
func checkHTTPURL(u string) error {
	_, err := parseHTTPURL(u)
	return err
}

// agentServerNameSchema is checkAgentServerName's rule as a JSON Schema
// pattern, for the tool definitions that take a server name.
const agentServerNameSchema = `^[A-Za-z0-9_-]{1,64}$`

// checkServerName returns an error unless name is a valid name for a
// configured server (configuration files, HARNESS_MCP_SERVERS, profiles,
// per-run servers, the command line): 1 to maxNameLength ASCII letters,
// digits, "-", "_" and ".". "." is allowed so that names like
// "api.example" stay valid; like "-", it becomes "_" in tool names.
func checkServerName(name string) error {
	return checkName(name, ".", "letters, digits, \"-\", \"_\" and \".\"")
}

// checkAgentServerName returns an error unless name is a valid name for a
// server the agent connects with connect_mcp: the configured rule without
// ".", as the agent is told (letters, digits, "-" and "_" only).
func checkAgentServerName(name string) error {
	return checkName(name, "", "letters, digits, \"-\" and \"_\"")
}

// sameToolPrefix reports whether servers named a and b give their tools
// the same mcp_ prefix (their sanitized names are equal). Such servers
// collide: no two may be reachable in one run, except a profile server
// that shadows the global server of exactly its name.
func sameToolPrefix(a, b string) bool {
	return sanitizeName(a) == sanitizeName(b)
}

// firstClash returns the index of the first of servers whose name gives
// tools the same mcp_ prefix as name (see sameToolPrefix), or -1.
func firstClash(name string, servers []serverConfig) int {
	return slices.IndexFunc(servers, func(s serverConfig) bool { return sameToolPrefix(s.Name, name) })
}

// checkName returns an error unless name is 1 to maxNameLength ASCII
// letters, digits, "-", "_" or one of extra; allowed describes them.
func checkName(name, extra, allowed string) error {
	if name == "" {
		return errors.New("empty; give a name")
	}
	if len(name) > maxNameLength {
		return fmt.Errorf("longer than %d characters; shorten it", maxNameLength)
	}
	for _, c := range name {
		if !isAlnum(c) && c != '-' && c != '_' && !strings.ContainsRune(extra, c) {
			return fmt.Errorf("%q has invalid characters; use only %s", name, allowed)
		}
	}
	return nil
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c rune) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// isHeaderName reports whether k is a valid HTTP header field name.
func isHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if !isAlnum(c) && !strings.ContainsRune("!#$%&'*+-.^_`|~", c) {
			return false
		}
	}
	return true
}

// checkHostPattern returns an error unless h is a host name or a glob of
// host names, such as "localhost" or "*.internal.example".
func checkHostPattern(h string) error {
	if h == "" {
		return errors.New("empty; give a host name like \"localhost\" or a glob like \"*.example.com\"")
	}
	if strings.ContainsAny(h, "/ \t") {
		return fmt.Errorf("%q is not a host name; give only the host, without scheme or path", h)
	}
	if _, err := path.Match(h, ""); err != nil {
		return fmt.Errorf("%q is not a valid glob; use * and ? as in path.Match", h)
	}
	return nil
}

// hostPatterns lowercases hosts and checks each is a host pattern; label
// names the list in errors, which are joined.
func hostPatterns(label string, hosts []string) ([]string, error) {
	var errs []error
	clean := make([]string, 0, len(hosts))
	for i, h := range hosts {
		h = strings.ToLower(h)
		if err := checkHostPattern(h); err != nil {
			errs = append(errs, fmt.Errorf("%s[%d]: %v", label, i, err))
		}
		clean = append(clean, h)
	}
	return clean, errors.Join(errs...)
}

// sanitizeName maps a server or tool name to its form in tool names
// (SPEC §5): ASCII letters lowercased, digits and "_" kept, every other
// character (including "-", space, "/" and ".") replaced by "_".
func sanitizeName(s string) string {
	return strings.Map(func(c rune) rune {
		switch {
		case 'A' <= c && c <= 'Z':
			return c + 'a' - 'A'
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '_':
			return c
		}
		return '_'
	}, s)
}

// stdioEnv returns the environment of a stdio server's process, as
// "KEY=value" sorted by key: the inheritedEnv variables that harnessd has
// (via getenv), overridden by cfg.Env. Nothing else of harnessd's
// environment is passed on.
func stdioEnv(cfg serverConfig, getenv func(string) (string, bool)) []string {
	env := make(map[string]string, len(inheritedEnv)+len(cfg.Env))
	for _, k := range inheritedEnv {
		if v, ok := getenv(k); ok {
			env[k] = v
		}
	}
	maps.Copy(env, cfg.Env)
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// checkRunServerValues refuses a per-run server with more than
// maxRunServerValues headers or env entries, or a value over
// maxRunValueBytes.
func checkRunServerValues(s serverConfig) error {
	for _, f := range []struct {
		field  string
		values map[string]string
	}{{"headers", s.Headers}, {"env", s.Env}} {
		if len(f.values) > maxRunServerValues {
			return fmt.Errorf("mcp_servers: server %q: %s: %d entries, over the limit of %d per server; send fewer", s.Name, f.field, len(f.values), maxRunServerValues)
		}
		for k, v := range f.values {
			if len(v) > maxRunValueBytes {
				return fmt.Errorf("mcp_servers: server %q: %s %q: the value is %d bytes, over the limit of %d; send a shorter value", s.Name, f.field, k, len(v), maxRunValueBytes)
			}
		}
	}
	return nil
}

// mcpToolPrefix returns how the name of every tool of the server named
// server starts: "mcp_", the sanitized server name, "_". Two servers with
// the same prefix collide (see sameToolPrefix). Where the tool part of one
// server's name and the server part of another's meet ("a_b" with tool "c",
// "a" with tool "b_c"), the full names can still coincide: warnToolClashes
// reports those, and the server listed first wins.
func mcpToolPrefix(server string) string {
	return "mcp_" + sanitizeName(server) + "_"
}

// checkProtocolVersion records a protocol_version harnessd does not speak,
// or the current revision pinned on legacy SSE, which cannot carry it.
func (b *serverBuilder) checkProtocolVersion(transport string) {
	v := b.raw.ProtocolVersion
	switch {
	case v == "" || slices.Contains(knownProtocolVersions, v):
	case !isSessionlessVersion(v):
		b.bad("protocol_version", "%q is not a protocol revision harnessd speaks; use one of %s, or leave it out to negotiate",
			v, strings.Join(append(slices.Clone(sessionlessProtocolVersions), knownProtocolVersions...), ", "))
	case transport == transportSSE:
		b.bad("protocol_version", "%q needs transport http or stdio; legacy sse speaks up to %s", v, latestProtocolVersion)
	}
}

// Approval modes, of a server's approval field and a run's approval.
const (
	approvalNever  = "never"  // no call waits (the default)
	approvalWrites = "writes" // calls of tools not annotated readOnlyHint: true wait
	approvalAlways = "always" // every call waits
)

// approvalModes are the modes from loosest to strictest.
var approvalModes = []string{approvalNever, approvalWrites, approvalAlways}

// Pin modes, of a server's pin_tools field: what a listing that changes
// the definition of a tool seen before does (tools_pins.go).
const (
	pinHold = "hold" // the changed tool is held out of every catalog until an admin accepts it
	pinWarn = "warn" // a warning is logged and counted, the new definition pinned
	pinOff  = "off"  // definitions are not pinned
)

// pinModes are the values pin_tools takes.
var pinModes = []string{pinHold, pinWarn, pinOff}

// pinToolsDefault returns pin_tools' default for a transport: warn for
// stdio, whose binary the operator installed, hold for remote servers.
func pinToolsDefault(transport string) string {
	if transport == transportStdio {
		return pinWarn
	}
	return pinHold
}

// pinTools returns the entry's pin_tools, or the transport's default,
// recording a value that is not a mode.
func (b *serverBuilder) pinTools(transport string) string {
	p := b.raw.PinTools
	if p == nil {
		return pinToolsDefault(transport)
	}
	if !slices.Contains(pinModes, *p) {
		b.bad("pin_tools", "%q is not a pin mode; use hold (the default for http), warn (the default for stdio) or off", *p)
		return pinToolsDefault(transport)
	}
	return *p
}

// checkApproval records an approval that is not a mode. The globs of
// approval_tools are checked with the other tool filters.
func (b *serverBuilder) checkApproval() {
	if a := b.raw.Approval; a != nil && !slices.Contains(approvalModes, *a) {
		b.bad("approval", "%q is not an approval mode; use never (the default), writes or always", *a)
	}
}

// anyVarSet is a getenv for checking the shape of a config that is
// written now and expanded later, in the daemon's environment: every
// variable is set, to a value that fits a URL's host, port or path and a
// path's part, and a field that starts with a variable (${URL},
// ${HOME}/data) is not checked further, since the variable decides its
// shape (see serverBuilder.shapeOnly).
func anyVarSet(name string) (string, bool) {
	return "1", true
}

// isAnyVarSet reports whether getenv is anyVarSet.
func isAnyVarSet(getenv func(string) (string, bool)) bool {
	return getenv != nil && reflect.ValueOf(getenv).Pointer() == reflect.ValueOf(anyVarSet).Pointer()
}
