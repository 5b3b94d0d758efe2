package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file holds the helpers every test family shares: waiting for a
// condition, reading a process's state from /proc, and comparing errors
// as text.

// waitLimit bounds the waits of the tests: generous, as the machine may be
// loaded; it only bounds a failure.
const waitLimit = 15 * time.Second

// testStopGrace is the step of the stop ladder in the tests whose servers
// need the ladder (they ignore SIGTERM or their stdin's end): short, yet
// long enough for a fake server to see its stdin end and exit.
const testStopGrace = 250 * time.Millisecond

// eventually polls cond until it holds or limit has passed, and reports
// whether it held. The interval starts at a millisecond and doubles up to
// 20ms, so a condition that soon holds is seen soon.
func eventually(limit time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(limit)
	interval := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval) // polling interval, not synchronisation
		interval = min(2*interval, 20*time.Millisecond)
	}
	return true
}

// waitUntil polls cond until it holds, failing the test with what after
// a minute (generous: the machine may be loaded; it only bounds a failure).
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !eventually(time.Minute, cond) {
		t.Fatalf("timed out waiting until %s", what)
	}
}

// procStat returns the state letter (R, S, Z, ...) and the parent pid of
// pid from /proc/<pid>/stat; ok is false when pid is gone or its stat
// cannot be read.
func procStat(pid int) (state byte, ppid int, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// The command name, in parentheses, may hold spaces and parentheses:
	// the fields start after the last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 2 || len(fields[0]) != 1 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	return fields[0][0], ppid, true
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != 'Z'
}

// parentPID returns the parent of pid, or 0 when pid is gone.
func parentPID(pid int) int {
	_, ppid, _ := procStat(pid)
	return ppid
}

// errString returns err's message, or "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// fakeServerHome returns a harnessd home whose config.toml declares the
// fake stdio server (this test binary) as [mcp_servers.NAME] in mode, after
// the top-level TOML extra, and a workspace. The server's processes carry
// a marker of their own (returned): every one left is killed when the test
// ends.
func fakeServerHome(t *testing.T, name, mode, extra string) (home, workspace, marker string) {
	t.Helper()
	exe := fakeServerBinary(t)
	var markerBytes [8]byte
	rand.Read(markerBytes[:])
	marker = hex.EncodeToString(markerBytes[:])
	home, workspace = t.TempDir(), t.TempDir()
	config := fmt.Sprintf("%s\n[mcp_servers.%s]\ncommand = %q\nenv = { %s = %q, %s = %q }\n", extra, name, exe, fakeServerEnv, mode, e2eMarkerEnv, marker)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, pid := range markedProcesses(t, marker) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	return home, workspace, marker
}

// serveUntilCleanup runs harnessd in this process with args (a serve
// command listening on 127.0.0.1:0) and the environment getenv, waits
// until it listens and returns its address; it stops when the test ends.
func serveUntilCleanup(t *testing.T, getenv func(string) (string, bool), args ...string) (addr string) {
	t.Helper()
	stderr := &lineWatcher{want: "harnessd listening", seen: make(chan struct{})}
	a := &app{stdout: &lockedBuffer{}, stderr: stderr, getenv: getenv}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	// Owned by the test; exits when serve returns (cancel stops it).
	go func() { errc <- a.run(ctx, args) }()
	t.Cleanup(func() {
		cancel()
		<-errc
	})
	select {
	case <-stderr.seen:
	case err := <-errc:
		t.Fatalf("serve = %v before listening; log:\n%s", err, stderr)
	}
	m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(stderr.String())
	if m == nil {
		t.Fatalf("no listen address in the log:\n%s", stderr)
	}
	return m[1]
}
