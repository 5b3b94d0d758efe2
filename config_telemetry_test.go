package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file tests the tracing settings: [telemetry] and the OTEL_
// variables, which override it.

func TestTelemetrySettings(t *testing.T) {
	t.Parallel()
	const file = `
[telemetry]
endpoint = "http://file-collector:4318"
headers = { "x-file" = "file-secret-value" }
service_name = "from-file"
sampler = "traceidratio"
sampler_arg = "0.25"
include_content = true
`
	tests := []struct {
		name    string
		toml    string
		env     map[string]string
		want    telemetryOptions
		wantErr string
	}{
		{name: "off without an endpoint", want: telemetryOptions{ServiceName: "harnessd", Sampler: traceSampler{ratio: 1, parentBased: true}}},
		{name: "file", toml: file, want: telemetryOptions{Endpoint: "http://file-collector:4318/v1/traces",
			Headers: map[string]string{"x-file": "file-secret-value"}, ServiceName: "from-file",
			Sampler: traceSampler{ratio: 0.25}, IncludeContent: true}},
		{name: "OTEL_EXPORTER_OTLP_ENDPOINT over the file, /v1/traces appended", toml: file,
			env: map[string]string{envOTLPEndpoint: "https://env-collector:4318/base/"},
			want: telemetryOptions{Endpoint: "https://env-collector:4318/base/v1/traces",
				Headers: map[string]string{"x-file": "file-secret-value"}, ServiceName: "from-file",
				Sampler: traceSampler{ratio: 0.25}, IncludeContent: true}},
		{name: "the traces endpoint as is, over the general one", toml: file,
			env: map[string]string{envOTLPEndpoint: "http://general:4318", envOTLPTracesEndpoint: "http://traces:9999/custom"},
			want: telemetryOptions{Endpoint: "http://traces:9999/custom",
				Headers: map[string]string{"x-file": "file-secret-value"}, ServiceName: "from-file",
				Sampler: traceSampler{ratio: 0.25}, IncludeContent: true}},
		{name: "every variable over the file", toml: file,
			env: map[string]string{envOTLPEndpoint: "http://env:4318", envOTLPHeaders: "a=1,b=x%20y",
				envOTLPTracesHeaders: "api-key=env-secret", envServiceName: "from-env",
				envTracesSampler: "parentbased_traceidratio", envTracesSamplerArg: "0.5", envOTLPTracesTimeout: "2500"},
			want: telemetryOptions{Endpoint: "http://env:4318/v1/traces",
				Headers: map[string]string{"api-key": "env-secret"}, ServiceName: "from-env",
				Sampler: traceSampler{ratio: 0.5, parentBased: true}, IncludeContent: true, Timeout: 2500 * time.Millisecond}},
		{name: "general headers decoded", env: map[string]string{envOTLPEndpoint: "http://env:4318", envOTLPHeaders: "a=1, b = x%20y"},
			want: telemetryOptions{Endpoint: "http://env:4318/v1/traces", Headers: map[string]string{"a": "1", "b": "x y"},
				ServiceName: "harnessd", Sampler: traceSampler{ratio: 1, parentBased: true}}},
		{name: "OTEL_SDK_DISABLED turns it off", toml: file, env: map[string]string{envSDKDisabled: "true"},
			want: telemetryOptions{Headers: map[string]string{"x-file": "file-secret-value"}, ServiceName: "from-file",
				Sampler: traceSampler{ratio: 0.25}, IncludeContent: true}},
		{name: "OTEL_TRACES_EXPORTER=none turns it off", env: map[string]string{envOTLPEndpoint: "http://env:4318", envTracesExporter: "none"},
			want: telemetryOptions{ServiceName: "harnessd", Sampler: traceSampler{ratio: 1, parentBased: true}}},
		{name: "bad endpoint", env: map[string]string{envOTLPEndpoint: "collector:4318"},
			wantErr: `OTEL_EXPORTER_OTLP_ENDPOINT: "collector:4318" is not an http(s) URL`},
		{name: "bad file endpoint", toml: "[telemetry]\nendpoint = \"ftp://x\"\n",
			wantErr: `config.toml: [telemetry] endpoint: "ftp://x" is not an http(s) URL`},
		{name: "bad headers never quote the value", env: map[string]string{envOTLPHeaders: "api-key=%zzsecret"},
			wantErr: `OTEL_EXPORTER_OTLP_HEADERS: the value of "api-key" is not percent-encoded correctly`},
		{name: "headers without =", env: map[string]string{envOTLPHeaders: "token"},
			wantErr: `OTEL_EXPORTER_OTLP_HEADERS: entry 1 is not key=value`},
		{name: "bad sampler in the file", toml: "[telemetry]\nsampler = \"sometimes\"\n",
			wantErr: `config.toml: [telemetry] sampler: sampler "sometimes" is not supported`},
		{name: "bad sampler variable", env: map[string]string{envTracesSampler: "xray"},
			wantErr: `OTEL_TRACES_SAMPLER: sampler "xray" is not supported`},
		{name: "grpc protocol", env: map[string]string{envOTLPProtocol: "grpc"},
			wantErr: `OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" is not supported`},
		{name: "bad timeout", env: map[string]string{envOTLPTimeout: "10s"},
			wantErr: `OTEL_EXPORTER_OTLP_TIMEOUT: "10s" is not a positive number of milliseconds`},
		{name: "unknown key", toml: "[telemetry]\nendpoint_url = \"http://x\"\n", wantErr: "endpoint_url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			if tt.toml != "" {
				if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(tt.toml), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			getenv := func(k string) (string, bool) {
				v, ok := tt.env[k]
				return v, ok
			}
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: getenv})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadConfig error = %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "secret") {
					t.Errorf("error %q quotes a header value", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := tt.want
			if want.Timeout == 0 {
				want.Timeout = defaultExportTimeout
			}
			got := cfg.Telemetry
			if !got.equal(want) {
				t.Errorf("telemetry = %+v, want %+v", got, want)
			}
			for _, v := range want.Headers {
				if !strings.Contains(strings.Join(cfg.secretValues(), "\n"), v) {
					t.Errorf("header value %q is not among the config's secrets", v)
				}
			}
		})
	}
}
