package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// This file tests [model] stream: on by default, off per layer, the
// workspace's value over the home's.

func TestModelSettingsStream(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, home, ws string
		wantNoStream   bool
		wantErr        string
	}{
		{name: "default streams"},
		{name: "off", home: "[model]\nstream = false\n", wantNoStream: true},
		{name: "workspace turns it back on", home: "[model]\nstream = false\n", ws: "[model]\nstream = true\n"},
		{name: "workspace turns it off", home: "[model]\nstream = true\n", ws: "[model]\nstream = false\n", wantNoStream: true},
		{name: "not a boolean", home: "[model]\nstream = \"no\"\n", wantErr: `[model] field "stream": a string is not allowed here; write true or false`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, ws := configDirs(t, tt.home, tt.ws)
			cfg, err := loadConfig(loadOptions{Home: home, Workspace: ws, Getenv: fakeEnv(nil)})
			if tt.wantErr != "" {
				if got := strings.ReplaceAll(errString(err), filepath.Join(home, "config.toml"), "H"); !strings.Contains(got, tt.wantErr) || !strings.Contains(got, "H") {
					t.Fatalf("loadConfig() error = %q, want one naming the file and %q", got, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadConfig() = %v", err)
			}
			if cfg.Model.NoStream != tt.wantNoStream || cfg.Model.spec().NoStream != tt.wantNoStream {
				t.Errorf("NoStream = %v (spec %v), want %v", cfg.Model.NoStream, cfg.Model.spec().NoStream, tt.wantNoStream)
			}
		})
	}
}
