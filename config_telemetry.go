package main

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file holds the tracing settings: the [telemetry] table and the
// standard OTEL_ variables, which override it (the variables the
// OpenTelemetry specification defines for every SDK, so that one
// environment configures harnessd like the other programs it traces
// with; harnessd's own HARNESS_ variables override files the same way).

// A telemetrySettings is [telemetry] as the files set it, merged; nil
// pointers are not set.
type telemetrySettings struct {
	Endpoint       *string
	Headers        map[string]string
	ServiceName    *string
	Sampler        *string
	SamplerArg     *string
	IncludeContent *bool
	// sources name where each value came from, for errors.
	endpointSource, samplerSource string
}

// A tomlTelemetry is the [telemetry] table of one config.toml.
type tomlTelemetry struct {
	Endpoint       *string           `toml:"endpoint"`
	Headers        map[string]string `toml:"headers"`
	ServiceName    *string           `toml:"service_name"`
	Sampler        *string           `toml:"sampler"`
	SamplerArg     *string           `toml:"sampler_arg"`
	IncludeContent *bool             `toml:"include_content"`
}

// settings returns what t sets, its sources named after file.
func (t tomlTelemetry) settings(file string) telemetrySettings {
	return telemetrySettings{Endpoint: t.Endpoint, Headers: t.Headers, ServiceName: t.ServiceName,
		Sampler: t.Sampler, SamplerArg: t.SamplerArg, IncludeContent: t.IncludeContent,
		endpointSource: file + ": [telemetry] endpoint", samplerSource: file + ": [telemetry] sampler"}
}

// merge sets in s every value o sets; headers are replaced whole.
func (s *telemetrySettings) merge(o telemetrySettings) {
	if o.Endpoint != nil {
		s.Endpoint, s.endpointSource = o.Endpoint, o.endpointSource
	}
	if o.Headers != nil {
		s.Headers = o.Headers
	}
	if o.ServiceName != nil {
		s.ServiceName = o.ServiceName
	}
	if o.Sampler != nil {
		s.Sampler, s.samplerSource = o.Sampler, o.samplerSource
	}
	if o.SamplerArg != nil {
		s.SamplerArg = o.SamplerArg
	}
	if o.IncludeContent != nil {
		s.IncludeContent = o.IncludeContent
	}
}

// The OpenTelemetry variables harnessd reads.
const (
	envOTLPTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envOTLPEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envOTLPTracesHeaders  = "OTEL_EXPORTER_OTLP_TRACES_HEADERS"
	envOTLPHeaders        = "OTEL_EXPORTER_OTLP_HEADERS"
	envOTLPTracesTimeout  = "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"
	envOTLPTimeout        = "OTEL_EXPORTER_OTLP_TIMEOUT"
	envOTLPTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
	envOTLPProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envServiceName        = "OTEL_SERVICE_NAME"
	envTracesSampler      = "OTEL_TRACES_SAMPLER"
	envTracesSamplerArg   = "OTEL_TRACES_SAMPLER_ARG"
	envTracesExporter     = "OTEL_TRACES_EXPORTER"
	envSDKDisabled        = "OTEL_SDK_DISABLED"
)

// options resolves s and the OTEL_ variables of getenv into the tracer's
// options, each variable over its [telemetry] key:
//   - endpoint: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
//     OTEL_EXPORTER_OTLP_ENDPOINT or [telemetry] endpoint with /v1/traces
//     appended; none turns tracing off, as do OTEL_SDK_DISABLED=true and
//     OTEL_TRACES_EXPORTER=none;
//   - headers: OTEL_EXPORTER_OTLP_TRACES_HEADERS, else
//     OTEL_EXPORTER_OTLP_HEADERS, else [telemetry] headers, whole;
//   - OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_TRACES_SAMPLER_ARG,
//     OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT (milliseconds).
//
// The errors name the variable or the file and key, never a header value.
func (s telemetrySettings) options(getenv func(string) (string, bool)) (telemetryOptions, error) {
	env := func(name string) string {
		v, _ := getenv(name)
		return strings.TrimSpace(v)
	}
	var errs []error
	opts := telemetryOptions{ServiceName: defaultServiceName, Timeout: defaultExportTimeout}
	endpoint, source, suffix := "", "", true
	if s.Endpoint != nil {
		endpoint, source = strings.TrimSpace(*s.Endpoint), s.endpointSource
	}
	if v := env(envOTLPEndpoint); v != "" {
		endpoint, source = v, envOTLPEndpoint
	}
	if v := env(envOTLPTracesEndpoint); v != "" {
		endpoint, source, suffix = v, envOTLPTracesEndpoint, false
	}
	if endpoint != "" {
		u, err := url.Parse(endpoint)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL; give the collector's OTLP/HTTP address, like http://localhost:4318", source, endpoint))
		} else {
			if suffix {
				u.Path = strings.TrimRight(u.Path, "/") + telemetryTracesSuffix
			}
			opts.Endpoint = u.String()
		}
	}
	for _, name := range []string{envOTLPTracesProtocol, envOTLPProtocol} {
		if v := env(name); v != "" && v != "http/json" && v != "http/protobuf" {
			errs = append(errs, fmt.Errorf("%s: %q is not supported: harnessd exports OTLP over HTTP (JSON); set http/json or unset it", name, v))
		}
	}
	if b, err := strconv.ParseBool(cmp.Or(env(envSDKDisabled), "false")); err != nil {
		errs = append(errs, fmt.Errorf("%s: %q is not a boolean; set true or false", envSDKDisabled, env(envSDKDisabled)))
	} else if b {
		opts.Endpoint = ""
	}
	switch v := env(envTracesExporter); v {
	case "", "otlp":
	case "none":
		opts.Endpoint = ""
	default:
		errs = append(errs, fmt.Errorf("%s: %q is not supported; set otlp or none", envTracesExporter, v))
	}
	opts.Headers = s.Headers
	for _, name := range []string{envOTLPHeaders, envOTLPTracesHeaders} {
		if v := env(name); v != "" {
			h, err := parseOTLPHeaders(name, v)
			errs = append(errs, err)
			opts.Headers = h
		}
	}
	for _, k := range slices.Sorted(maps.Keys(opts.Headers)) {
		if !isHeaderName(k) {
			errs = append(errs, fmt.Errorf("telemetry headers: %q is not a valid HTTP header name; use letters, digits and \"-\"", k))
		}
	}
	if s.ServiceName != nil && strings.TrimSpace(*s.ServiceName) != "" {
		opts.ServiceName = strings.TrimSpace(*s.ServiceName)
	}
	if v := env(envServiceName); v != "" {
		opts.ServiceName = v
	}
	samplerName, samplerArg, samplerSource := "", "", s.samplerSource
	if s.Sampler != nil {
		samplerName = *s.Sampler
	}
	if s.SamplerArg != nil {
		samplerArg = *s.SamplerArg
	}
	if v := env(envTracesSampler); v != "" {
		samplerName, samplerSource = v, envTracesSampler
	}
	if v := env(envTracesSamplerArg); v != "" {
		samplerArg = v
	}
	sampler, err := parseSampler(cmp.Or(samplerSource, envTracesSampler), samplerName, samplerArg)
	errs = append(errs, err)
	opts.Sampler = sampler
	if s.IncludeContent != nil {
		opts.IncludeContent = *s.IncludeContent
	}
	for _, name := range []string{envOTLPTimeout, envOTLPTracesTimeout} {
		if v := env(name); v != "" {
			ms, err := strconv.ParseInt(v, 10, 64)
			if err != nil || ms <= 0 {
				errs = append(errs, fmt.Errorf("%s: %q is not a positive number of milliseconds", name, v))
				continue
			}
			opts.Timeout = time.Duration(ms) * time.Millisecond
		}
	}
	return opts, errors.Join(errs...)
}

// parseOTLPHeaders parses the value of an OTEL_EXPORTER_OTLP_HEADERS
// variable: comma-separated key=value pairs, values percent-decoded. The
// errors name the variable and the key, never a value.
func parseOTLPHeaders(name, v string) (map[string]string, error) {
	h := map[string]string{}
	for i, pair := range strings.Split(v, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, val, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s: entry %d is not key=value; write key1=value1,key2=value2", name, i+1)
		}
		decoded, err := url.PathUnescape(strings.TrimSpace(val))
		if err != nil {
			return nil, fmt.Errorf("%s: the value of %q is not percent-encoded correctly", name, k)
		}
		h[k] = decoded
	}
	return h, nil
}

// equal reports whether o and p configure the same tracing.
func (o telemetryOptions) equal(p telemetryOptions) bool {
	return o.Endpoint == p.Endpoint && maps.Equal(o.Headers, p.Headers) && o.ServiceName == p.ServiceName &&
		o.Sampler == p.Sampler && o.IncludeContent == p.IncludeContent && o.Timeout == p.Timeout
}

// secretValues returns the header values, which the redactor hides.
func (o telemetryOptions) secretValues() []string {
	return slices.Collect(maps.Values(o.Headers))
}

// applyEnvTelemetry sets cfg.Telemetry from the files' [telemetry] and
// the OTEL_ variables.
func (cfg *config) applyEnvTelemetry(getenv func(string) (string, bool)) error {
	var err error
	cfg.Telemetry, err = cfg.telemetryFiles.options(getenv)
	return err
}
