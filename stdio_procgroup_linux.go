package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// This file holds what Linux offers to keep server processes from
// outliving harnessd: the parent-death signal, forks from one thread that
// never exits, and process identities read from /proc.

// serverProcAttr puts a server in its own process group and has the
// kernel SIGKILL it when harnessd dies (even by SIGKILL). The signal
// reaches the server's own process only: its children are stopped through
// the group, by close or, after a crash, by procGroups.stopLeftovers.
func serverProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// The kernel sends the parent-death signal when the *thread* that forked
// the child exits, not the process. Go threads rarely exit, but one does
// when a goroutine locked to it ends; so every server is forked from one
// goroutine locked to its thread for the life of the process.
var (
	spawnOnce     sync.Once
	spawnRequests chan spawnRequest
)

// A spawnRequest asks the spawning thread to start cmd.
type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// startServerProcess starts cmd from the spawning thread. It blocks for as
// long as cmd.Start does.
func startServerProcess(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnRequests = make(chan spawnRequest)
		// Owned by the process: it lives as long as harnessd, locked to its
		// thread so that the thread never exits while a server runs.
		go func() {
			runtime.LockOSThread()
			for req := range spawnRequests {
				req.done <- req.cmd.Start()
			}
		}()
	})
	req := spawnRequest{cmd: cmd, done: make(chan error, 1)}
	spawnRequests <- req
	return <-req.done
}

// processIdentity reads pid's start time, group and session from
// /proc/PID/stat. The error wraps fs.ErrNotExist when pid is gone.
func processIdentity(pid int) (procIdentity, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procIdentity{}, err
	}
	// The command name, in parentheses, may hold anything: skip past it.
	// Then: state ppid pgrp session ... with starttime the 20th field.
	i := bytes.LastIndexByte(stat, ')')
	fields := strings.Fields(string(stat[i+1:]))
	if i < 0 || len(fields) < 20 {
		return procIdentity{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	pgid, err1 := strconv.Atoi(fields[2])
	session, err2 := strconv.Atoi(fields[3])
	start, err3 := strconv.ParseUint(fields[19], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return procIdentity{}, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return procIdentity{StartTime: start, BootID: currentBootID(), PGID: pgid, Session: session}, nil
}

// currentBootID returns the kernel's id of this boot ("" if unknown).
func currentBootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return strings.TrimSpace(string(b))
}

// groupMembers returns the pids of the live processes in group pgid.
func groupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if id, err := processIdentity(pid); err == nil && id.PGID == pgid {
			pids = append(pids, pid)
		}
	}
	return pids
}
