package main

import (
	"os"
	"syscall"
	"unsafe"
)

// This file holds a terminal's raw mode on Linux, with the termios
// ioctls: keys reach the program one at a time, unechoed, so that a line
// editor can act on arrows and backspace itself.

// makeRaw turns off f's line buffering and echo (ICANON, ECHO) and
// returns the function that restores its settings. Signals (Ctrl-C) and
// output processing (\n shown as \r\n) stay as they were. It fails when f
// is not a terminal.
func makeRaw(f *os.File) (restore func(), err error) {
	var old syscall.Termios
	if err := termiosIoctl(f, syscall.TCGETS, &old); err != nil {
		return nil, err
	}
	raw := old
	raw.Lflag &^= syscall.ICANON | syscall.ECHO
	raw.Cc[syscall.VMIN], raw.Cc[syscall.VTIME] = 1, 0
	if err := termiosIoctl(f, syscall.TCSETS, &raw); err != nil {
		return nil, err
	}
	return func() { termiosIoctl(f, syscall.TCSETS, &old) }, nil
}

// termiosIoctl gets or sets f's termios.
func termiosIoctl(f *os.File, request uintptr, t *syscall.Termios) error {
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, f.Fd(), request, uintptr(unsafe.Pointer(t))); errno != 0 {
		return errno
	}
	return nil
}
