package main

import (
	"os"
	"path/filepath"
)

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

// replaceFile replaces the file path with data durably: a temporary file
// created 0600 in its directory, fsynced, renamed over path, then the
// directory fsynced. A reader sees the old file or the new one, whole.
func replaceFile(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, ".tmp-*") // created 0600
	if err != nil {
		return err
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	ok = true
	return syncDir(dir)
}
