//go:build !linux

package main

import "os"

// This file holds the terminal test where input_tty_linux.go's ioctl is
// not used: a terminal is taken to be a character device.

// isTerminalFile reports whether f is a character device.
func isTerminalFile(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
