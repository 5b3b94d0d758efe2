package main

import (
	"strings"
	"testing"
)

// This file tests the [[schedules]] and [webhooks] tables: fields,
// defaults, merging across files and every error naming its field.

func TestScheduleConfig(t *testing.T) {
	t.Parallel()
	home, ws := configDirs(t, `
[[schedules]]
name = "nightly"
cron = "0 3 * * *"
timezone = "Europe/Paris"
prompt = "summarise the day"
profile = "ops"
model = "openai/gpt-4o"
max_steps = 10
webhook_url = "https://hooks.example/nightly"
max_tokens = 50000
max_cost_usd = 1
max_duration = "10m"
conversation_id = "conv_nightly"
overlap = "queue"
catch_up = true

[[schedules]]
name = "hourly"
cron = "@hourly"
prompt = "check the queue"
`, `
[[schedules]]
name = "hourly"
cron = "*/30 * * * *"
prompt = "check the queue often"
`)
	cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: fakeEnv(nil)})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Schedules) != 2 {
		t.Fatalf("%d schedules, want 2", len(cfg.Schedules))
	}
	nightly, hourly := cfg.Schedules[0], cfg.Schedules[1]
	want := rawSchedule{Name: "nightly", Cron: "0 3 * * *", Timezone: "Europe/Paris", Prompt: "summarise the day", Profile: "ops",
		Model: "openai/gpt-4o", MaxSteps: 10, WebhookURL: "https://hooks.example/nightly", MaxTokens: 50000, MaxCostUSD: 1,
		MaxDuration: "10m", ConversationID: "conv_nightly", Overlap: overlapQueue, CatchUp: true}
	if nightly.rawSchedule != want || nightly.location.String() != "Europe/Paris" {
		t.Errorf("nightly = %+v in %v, want %+v", nightly.rawSchedule, nightly.location, want)
	}
	if hourly.Cron != "*/30 * * * *" || hourly.Timezone != "UTC" || hourly.Overlap != overlapSkip || !strings.HasSuffix(hourly.Source, ".harness/config.toml") {
		t.Errorf("hourly = %+v from %s, want the workspace's, in UTC, overlap skip", hourly.rawSchedule, hourly.Source)
	}
}

func TestScheduleConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, table string
		want        []string
	}{
		{"missing fields", `[[schedules]]`, []string{`[[schedules]] #1: name: empty`, "cron: missing", "prompt: missing"}},
		{"bad cron names the field", `[[schedules]]
name = "a"
cron = "0 25 * * *"
prompt = "p"`, []string{`[[schedules]] #1 ("a"): cron: cron "0 25 * * *": field 2 (hour)`}},
		{"bad zone", `[[schedules]]
name = "a"
cron = "@daily"
timezone = "Mars/Olympus"
prompt = "p"`, []string{`timezone: "Mars/Olympus" is not an IANA time zone`}},
		{"bad run fields", `[[schedules]]
name = "a b"
cron = "@daily"
prompt = "p"
model = "gpt-4o"
max_steps = 5000
webhook_url = "hooks.example"
max_tokens = -1
max_cost_usd = -0.5
max_duration = "soon"
overlap = "parallel"`, []string{"name: \"a b\" has invalid characters", "model: model \"gpt-4o\"", "max_steps: 5000 is out of range",
			"webhook_url: no scheme", "max_tokens: -1 is negative", "max_cost_usd: not a positive amount", `max_duration: "soon"`, `overlap: "parallel"`}},
		{"twice in a file", `[[schedules]]
name = "a"
cron = "@daily"
prompt = "p"
[[schedules]]
name = "a"
cron = "@daily"
prompt = "q"`, []string{`#2 ("a"): name: defined twice`}},
		{"unknown key", `[[schedules]]
name = "a"
cron = "@daily"
prompt = "p"
promt = "typo"`, []string{`unknown key "schedules.promt"`, "valid keys are name, cron"}},
		{"wrong type", `[[schedules]]
name = "a"
cron = "@daily"
prompt = "p"
max_steps = "ten"
max_duration = 10`, []string{`[[schedules]] #1 field "max_steps": a string is not allowed here; write a whole number`, `field "max_duration": a whole number is not allowed here; write a duration like "30s"`}},
		{"short webhook secret", `[webhooks]
url = "hooks.example/x"
secret = "short"`, []string{"[webhooks] url: no scheme", "[webhooks] secret: 5 characters; use at least 16"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, _ := configDirs(t, tt.table, "")
			_, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(nil)})
			for _, w := range tt.want {
				if !strings.Contains(errString(err), w) {
					t.Errorf("loadConfig error = %v, want it to say %q", err, w)
				}
			}
		})
	}
}

func TestWebhookSettingsConfig(t *testing.T) {
	t.Parallel()
	home, ws := configDirs(t, `
[webhooks]
url = "https://hooks.example/home"
secret = "home-secret-0123456789"
`, `
[webhooks]
url = "https://hooks.example/workspace"
`)
	tests := []struct {
		name       string
		env        map[string]string
		wantSecret string
		wantErr    string
	}{
		{"files", nil, "home-secret-0123456789", ""},
		{"environment wins", map[string]string{"HARNESS_WEBHOOK_SECRET": "env-secret-0123456789"}, "env-secret-0123456789", ""},
		{"short environment secret", map[string]string{"HARNESS_WEBHOOK_SECRET": "tiny"}, "tiny", "HARNESS_WEBHOOK_SECRET: 4 characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: fakeEnv(tt.env)})
			if !strings.Contains(errString(err), tt.wantErr) || (tt.wantErr == "") != (err == nil) {
				t.Fatalf("loadConfig = %v, want error %q", err, tt.wantErr)
			}
			if cfg.Webhooks.URL != "https://hooks.example/workspace" || cfg.Webhooks.Secret != tt.wantSecret {
				t.Errorf("webhooks = %q %q, want the workspace's url and secret %q", cfg.Webhooks.URL, cfg.Webhooks.Secret, tt.wantSecret)
			}
		})
	}
}
