package main

import "os"

// This file holds what every layer that writes files shares: making the
// names in a directory durable.

// syncDir fsyncs a directory, so that the names created, renamed or
// removed in it are durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
