package main

import (
	"bufio"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file checks contrib/harnessd.service against the daemon: its stop
// timeout matches the shutdown budget, reload sends SIGHUP after a check,
// and its hardening is in place
// (.ci/run also runs systemd-analyze verify on it).

func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	f, err := os.Open("contrib/harnessd.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	settings := make(map[string]string)
	var reload []string // every ExecReload, in order
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			settings[k] = v
			if k == "ExecReload" {
				reload = append(reload, v)
			}
		}
	}
	if want := []string{"/usr/local/bin/harnessd check", "/bin/kill -HUP $MAINPID"}; !slices.Equal(reload, want) {
		t.Errorf("ExecReload = %q, want %q: check first, so systemctl reload fails on a bad configuration, then SIGHUP", reload, want)
	}
	stop, err := time.ParseDuration(settings["TimeoutStopSec"])
	if err != nil || stop < shutdownBudget || stop > shutdownBudget+10*time.Second {
		t.Errorf("TimeoutStopSec = %q, want a little more than the shutdown budget %v", settings["TimeoutStopSec"], shutdownBudget)
	}
	for k, want := range map[string]string{
		"DynamicUser": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "NoNewPrivileges": "yes",
		"StateDirectory": "harnessd", "Restart": "on-failure", "KillMode": "mixed", "CapabilityBoundingSet": "",
	} {
		if got, ok := settings[k]; !ok || got != want {
			t.Errorf("%s = %q (set: %t), want %q", k, got, ok, want)
		}
	}
	if got, want := settings["EnvironmentFile"], "-/etc/harnessd/env"; got != want {
		t.Errorf("EnvironmentFile = %q, want %q: the model's key needs a place outside the unit, optional", got, want)
	}
	if !strings.Contains(settings["Environment"], "HARNESS_HOME=/var/lib/harnessd") {
		t.Errorf("Environment = %q, want HARNESS_HOME in the state directory", settings["Environment"])
	}
}
