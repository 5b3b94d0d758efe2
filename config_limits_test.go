package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestRunLimitsSources(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		toml    string
		env     map[string]string
		flags   []string
		want    runLimits // after resolve; zero fields are not compared
		wantErr string
	}{
		{name: "toml", toml: "max_concurrent_runs = 3\nmax_output_bytes = 1024\n",
			want: runLimits{MaxConcurrentRuns: 3, MaxOutputBytes: 1024, MaxQueuedRuns: 256}},
		{name: "env wins over toml", toml: "max_queued_runs = 5\n", env: map[string]string{"HARNESS_MAX_QUEUED_RUNS": "7"},
			want: runLimits{MaxQueuedRuns: 7}},
		{name: "flag wins over env", env: map[string]string{"HARNESS_MAX_PROMPT_BYTES": "100"}, flags: []string{"--max-prompt-bytes", "50"},
			want: runLimits{MaxPromptBytes: 50}},
		{name: "zero is the default", toml: "max_output_bytes = 0\n", want: runLimits{MaxOutputBytes: 256 << 10}},
		{name: "sampling caps", toml: "max_sampling_requests = 3\n", env: map[string]string{"HARNESS_MAX_SAMPLING_TOKENS": "500"},
			want: runLimits{MaxSamplingRequests: 3, MaxSamplingTokens: 500}},
		{name: "sampling defaults", want: runLimits{MaxSamplingRequests: defaultSamplingRequests, MaxSamplingTokens: defaultSamplingTokens}},
		{name: "negative toml", toml: "max_starting_servers = -1\n", wantErr: "max_starting_servers: -1 is negative"},
		{name: "bad env", env: map[string]string{"HARNESS_MAX_CONCURRENT_RUNS": "lots"}, wantErr: `HARNESS_MAX_CONCURRENT_RUNS: "lots" is not a number`},
		{name: "negative flag", flags: []string{"--max-queued-runs=-2"}, wantErr: "--max-queued-runs: -2 is negative"},
		{name: "approval timeout default", want: runLimits{ApprovalTimeout: 15 * time.Minute}},
		{name: "approval timeout toml", toml: "approval_timeout = \"1h\"\n", want: runLimits{ApprovalTimeout: time.Hour}},
		{name: "approval timeout env wins over toml", toml: "approval_timeout = \"1h\"\n", env: map[string]string{"HARNESS_APPROVAL_TIMEOUT": "90s"},
			want: runLimits{ApprovalTimeout: 90 * time.Second}},
		{name: "approval timeout flag wins over env", env: map[string]string{"HARNESS_APPROVAL_TIMEOUT": "90s"}, flags: []string{"--approval-timeout", "2m"},
			want: runLimits{ApprovalTimeout: 2 * time.Minute}},
		{name: "approval timeout zero is the default", env: map[string]string{"HARNESS_APPROVAL_TIMEOUT": "0"}, want: runLimits{ApprovalTimeout: 15 * time.Minute}},
		{name: "approval timeout a bare number in toml", toml: "approval_timeout = 900\n", wantErr: `approval_timeout: 900ns is out of range; set a duration from 1s`},
		{name: "approval timeout of the wrong type", toml: "approval_timeout = true\n", wantErr: `field "approval_timeout": true or false is not allowed here; write a duration like "30s"`},
		{name: "approval timeout too short in toml", toml: "approval_timeout = \"10ms\"\n", wantErr: `approval_timeout: 10ms is out of range; set a duration from 1s to 24h0m0s like "15m", or 0 for the default (15m0s)`},
		{name: "approval timeout bad env", env: map[string]string{"HARNESS_APPROVAL_TIMEOUT": "soon"}, wantErr: `HARNESS_APPROVAL_TIMEOUT: "soon" is not a duration; set a duration from 1s`},
		{name: "approval timeout too long flag", flags: []string{"--approval-timeout=48h"}, wantErr: "--approval-timeout: 48h0m0s is out of range"},
		{name: "approval timeout negative flag", flags: []string{"--approval-timeout=-1m"}, wantErr: "--approval-timeout: -1m0s is negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, _ := configDirs(t, tt.toml, "")
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(tt.env)})
			var flagLimits runLimits
			fs := flag.NewFlagSet("serve", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			registerLimitFlags(fs, &flagLimits)
			if err == nil {
				err = fs.Parse(tt.flags)
			}
			if err == nil {
				for _, e := range flagLimits.checkFlags() {
					err = e
				}
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("limits error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			cfg.Limits.overlay(flagLimits)
			got := cfg.Limits.resolve()
			for _, s := range limitSettings {
				if want := s.value(&tt.want); want != 0 && s.value(&got) != want {
					t.Errorf("%s = %s, want %s", s.key, s.text(s.value(&got)), s.text(want))
				}
			}
		})
	}
}
