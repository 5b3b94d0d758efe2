package main

import (
	"testing"
	"time"
)

// This file holds the configuration of the fake stdio MCP server,
// testdata/fakeserver: a misbehaving server whose mode the
// environment names. The numbers below are what that server does; a test
// that counts its children or its tokens uses them.

// fakeServerEnv names the fake server's mode.
const fakeServerEnv = "HARNESSD_FAKE_SERVER"

// fakeInitGateEnv names the FIFO a server in mode gate-initialize holds
// its answer to initialize on: the test knows the server is starting when
// its open for writing returns, and lets it answer by closing.
const fakeInitGateEnv = "HARNESSD_FAKE_INIT_GATE"

// fakeDescFileEnv names the file a server in mode rug-pull reads the
// description of its echo tool from, at each tools/list.
const fakeDescFileEnv = "HARNESSD_FAKE_DESC_FILE"

// broodSize is how many children a server in mode brood starts.
const broodSize = 4

// burstMaxTokens is the maxTokens of each sampling request of the fake
// server's tool burst.
const burstMaxTokens = 1000

// fakeServerConfig returns the config of a fake stdio server in mode.
func fakeServerConfig(t testing.TB, mode string) serverConfig {
	t.Helper()
	return serverConfig{
		Name:            "fake",
		Transport:       transportStdio,
		Command:         fakeServerBinary(t),
		Env:             map[string]string{fakeServerEnv: mode},
		Timeout:         5 * time.Second,
		StartupTimeout:  10 * time.Second,
		Enabled:         true,
		MaxMessageBytes: defaultMaxMessageBytes,
	}
}
