package main

import (
	"os"
	"syscall"
	"unsafe"
)

// This file holds the terminal test on Linux: a terminal is a file that
// answers the TCGETS ioctl, which /dev/null and other character devices
// do not.

// isTerminalFile reports whether f is a terminal.
func isTerminalFile(f *os.File) bool {
	var termios syscall.Termios
	_, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), syscall.TCGETS, uintptr(unsafe.Pointer(&termios)))
	return errno == 0
}
