//go:build !linux

package main

import (
	"errors"
	"os"
)

// This file holds the stand-ins for preallocate and writtenEnd
// (run_store_alloc_linux.go) where fallocate(2) is not offered: a segment
// grows as it is written, and is read whole.

// preallocate gives f no space ahead.
func preallocate(f *os.File, n int64) error { return errors.ErrUnsupported }

// writtenEnd returns size: all of f is read.
func writtenEnd(f *os.File, size int64) int64 { return size }

// freeSpace says that the free space is not known here.
func freeSpace(dir string) (free, total int64, err error) { return 0, 0, errors.ErrUnsupported }
