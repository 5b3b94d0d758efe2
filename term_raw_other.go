//go:build !linux

package main

import (
	"errors"
	"os"
)

// This file holds the raw mode where term_raw_linux.go's ioctls are not
// used: there is none, and the line editor reads whole lines instead.

// makeRaw fails: raw mode is only made on Linux.
func makeRaw(*os.File) (func(), error) {
	return nil, errors.New("raw terminal mode is only supported on Linux")
}
