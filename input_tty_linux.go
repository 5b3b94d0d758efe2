package main

import (
	"os"
	"syscall"
)

// This file holds the terminal test on Linux: a terminal is a file that
// answers the TCGETS ioctl, which /dev/null and other character devices
// do not.

// isTerminalFile reports whether f is a terminal.
func isTerminalFile(f *os.File) bool {
	var termios syscall.Termios
	return termiosIoctl(f, syscall.TCGETS, &termios) == nil
}
