package main

import (
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
)

// This file holds the tests of the process group records: a stdio server's
// group is recorded while it runs, a group left by a dead instance is
// stopped at start-up, and a group whose id was reused is left alone.

// skipUnlessLinux skips tests of what only Linux offers.
func skipUnlessLinux(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("process identities come from /proc")
	}
}

// newTestProcGroups opens a records directory in a fresh home.
func newTestProcGroups(t *testing.T) *procGroups {
	t.Helper()
	g, err := openProcGroups(filepath.Join(t.TempDir(), "servers"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("openProcGroups: %v", err)
	}
	return g
}

// startGroup starts the test binary as a fake server in mode, in its own
// process group, as a previous harnessd would have, and kills the group
// at the end of the test.
func startGroup(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(fakeServerBinary(t))
	cmd.Env = append(os.Environ(), fakeServerEnv+"="+mode)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe() // held open: EOF is not what stops it
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	reaped := make(chan struct{})
	// Owned by the test; exits when the process is reaped.
	go func() {
		cmd.Wait()
		close(reaped)
	}()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		stdin.Close()
		<-reaped
	})
	return cmd
}

// waitGroupSize polls until group pgid has want live processes (zombies
// do not count), or fails the test at the deadline.
func waitGroupSize(t *testing.T, pgid, want int, why string) {
	t.Helper()
	live := 0
	if !eventually(waitLimit, func() bool {
		live = 0
		for _, pid := range groupMembers(pgid) {
			if processAlive(pid) {
				live++
			}
		}
		return live == want
	}) {
		t.Fatalf("group %d has %d live processes, want %d: %s", pgid, live, want, why)
	}
}

// deadPID returns the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatalf("run true: %v", err)
	}
	return cmd.Process.Pid
}

func TestProcGroupsStopLeftovers(t *testing.T) {
	t.Parallel()
	skipUnlessLinux(t)
	cmd := startGroup(t, "brood")
	pgid := cmd.Process.Pid
	waitGroupSize(t, pgid, 1+broodSize, "the server and its children start")

	// The instance that started the group recorded it, then died.
	before := newTestProcGroups(t)
	before.add("brood", pgid, cmd.Path)
	if n := before.stopLeftovers(); n != 0 {
		t.Fatalf("stopLeftovers() by the instance that recorded the group = %d, want 0: its groups are its own", n)
	}
	var rec groupRecord
	b, err := os.ReadFile(before.path(pgid))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil {
		t.Fatalf("no record of group %d: %v", pgid, err)
	}
	rec.Owner = deadPID(t)
	b, _ = json.Marshal(rec)
	os.WriteFile(before.path(pgid), b, 0o600)

	after, err := openProcGroups(before.dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if n := after.stopLeftovers(); n != 1+broodSize {
		t.Errorf("stopLeftovers() = %d, want %d (the server and its children)", n, 1+broodSize)
	}
	waitGroupSize(t, pgid, 0, "stopLeftovers killed the group")
	if _, err := os.Stat(before.path(pgid)); !os.IsNotExist(err) {
		t.Errorf("the record of group %d is still there after stopLeftovers (stat: %v)", pgid, err)
	}
}

func TestProcGroupsLeaveOthersAlone(t *testing.T) {
	t.Parallel()
	skipUnlessLinux(t)
	tests := []struct {
		name   string
		change func(*groupRecord)
	}{
		{name: "pid reused: another start time", change: func(r *groupRecord) { r.StartTime-- }},
		{name: "another session", change: func(r *groupRecord) { r.Session++ }},
		{name: "another boot", change: func(r *groupRecord) { r.BootID = "00000000-0000-0000-0000-000000000000" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := startGroup(t, "brood")
			pgid := cmd.Process.Pid
			waitGroupSize(t, pgid, 1+broodSize, "the server and its children start")
			id, err := processIdentity(pgid)
			if err != nil {
				t.Fatal(err)
			}
			rec := groupRecord{PGID: pgid, Server: "brood", Command: cmd.Path, procIdentity: id, Owner: deadPID(t)}
			tt.change(&rec)
			g := newTestProcGroups(t)
			b, _ := json.Marshal(rec)
			if err := os.WriteFile(g.path(pgid), b, 0o600); err != nil {
				t.Fatal(err)
			}
			if n := g.stopLeftovers(); n != 0 {
				t.Errorf("stopLeftovers() = %d, want 0: the group is not the one recorded", n)
			}
			waitGroupSize(t, pgid, 1+broodSize, "a group that is not ours is left alone")
			if _, err := os.Stat(g.path(pgid)); !os.IsNotExist(err) {
				t.Errorf("the stale record is still there (stat: %v)", err)
			}
		})
	}
}

func TestStdioRecordsItsGroup(t *testing.T) {
	t.Parallel()
	skipUnlessLinux(t)
	g := newTestProcGroups(t)
	cfg := fakeServerConfig(t, "brood")
	tr, err := startStdio(cfg, stdioEnv(cfg, os.LookupEnv), g, testStopGrace, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pgid := tr.cmd.Process.Pid
	t.Cleanup(func() { syscall.Kill(-pgid, syscall.SIGKILL) })
	var rec groupRecord
	b, err := os.ReadFile(g.path(pgid))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.PGID != pgid || rec.Server != cfg.Name || rec.StartTime == 0 {
		t.Fatalf("record of the server's group = %+v, %v; want pgid %d, server %q, a start time", rec, err, pgid, cfg.Name)
	}
	waitGroupSize(t, pgid, 1+broodSize, "the server and its children start")
	if err := tr.close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	waitGroupSize(t, pgid, 0, "close stops the whole group")
	if _, err := os.Stat(g.path(pgid)); !os.IsNotExist(err) {
		t.Errorf("the group's record is still there after close (stat: %v)", err)
	}
}
