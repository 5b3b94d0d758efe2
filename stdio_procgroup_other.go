//go:build !linux

package main

import (
	"os/exec"
	"syscall"
)

// This file holds the stand-ins for what only Linux offers
// (stdio_procgroup_linux.go): elsewhere a server gets its own process group but
// no parent-death signal, and groups are not recorded, since a reused pid
// could not be told from the original.

// serverProcAttr puts a server in its own process group.
func serverProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// startServerProcess starts cmd.
func startServerProcess(cmd *exec.Cmd) error { return cmd.Start() }

// processIdentity returns errNoProcessIdentity.
func processIdentity(int) (procIdentity, error) { return procIdentity{}, errNoProcessIdentity }

// currentBootID returns "".
func currentBootID() string { return "" }

// groupMembers returns nil: no group is recorded.
func groupMembers(int) []int { return nil }
