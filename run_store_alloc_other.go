//go:build !linux

package main

import (
	"errors"
	"os"
)

// This file holds the stand-in for preallocate (run_store_alloc_linux.go)
// where fallocate(2) is not offered: a segment grows as it is written.

// preallocate gives f no space ahead.
func preallocate(f *os.File, n int64) error { return errors.ErrUnsupported }
