package main

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestRunLimitsSources(t *testing.T) {
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
				if want := *s.field(&tt.want); want != 0 && *s.field(&got) != want {
					t.Errorf("%s = %d, want %d", s.key, *s.field(&got), want)
				}
			}
		})
	}
}
