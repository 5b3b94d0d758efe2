package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
)

// This file holds the OAuth token store: one JSON file per server under
// $HARNESS_HOME/oauth, in a 0700 directory, files created 0600 and
// replaced whole (temporary file, fsync, rename), so a token is never
// readable by others, not even for an instant, and never half-written.

// An oauthRecord is what is stored for one server: the client identities
// registered at each authorization server (keyed by issuer) and the
// current token. ServerURL binds the record to the server's address: a
// record for another URL is ignored.
type oauthRecord struct {
	ServerURL string                   `json:"server_url"`
	Clients   map[string]oauthClientID `json:"clients,omitempty"`
	Token     *oauthToken              `json:"token,omitempty"`
	// DPoPKey is the server's DPoP proof key (oauth_dpop.go), made at
	// its first DPoP token request.
	DPoPKey string `json:"dpop_key,omitempty"`
}

// A tokenStore reads and writes oauthRecords in one directory. Its
// methods are safe for concurrent use by one process as long as each
// server's record has one writer (its oauthClient); a login from another
// process replaces the file whole, so a reader sees the old or the new
// record, never a mix.
type tokenStore struct {
	dir string
}

// newTokenStore returns the store in dir (normally $HARNESS_HOME/oauth).
// The directory is created on the first save.
func newTokenStore(dir string) *tokenStore { return &tokenStore{dir: dir} }

// storeFileName keeps server names (already restricted by the config
// rules) safe as file names.
var storeFileName = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func (s *tokenStore) path(server string) string {
	return filepath.Join(s.dir, storeFileName.ReplaceAllString(server, "_")+".json")
}

// load returns the record of server for serverURL; an empty record (no
// error) when there is none or it was made for another URL.
func (s *tokenStore) load(server, serverURL string) (oauthRecord, error) {
	empty := oauthRecord{ServerURL: serverURL}
	data, err := os.ReadFile(s.path(server))
	if errors.Is(err, fs.ErrNotExist) {
		return empty, nil
	}
	if err != nil {
		return empty, fmt.Errorf("oauth store: %w", err)
	}
	var rec oauthRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return empty, fmt.Errorf("oauth store: %s: %v; run harnessd mcp logout %s", s.path(server), err, server)
	}
	if rec.ServerURL != serverURL {
		return empty, nil
	}
	return rec, nil
}

// save replaces the record of server: it writes a temporary file created
// 0600 in the store's directory (created 0700), fsyncs it, renames it over
// the old file and fsyncs the directory.
func (s *tokenStore) save(server string, rec oauthRecord) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	// MkdirAll leaves an existing directory's mode alone.
	if err := os.Chmod(s.dir, 0o700); err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	if err := replaceFile(s.path(server), data); err != nil {
		return fmt.Errorf("oauth store: %w", err)
	}
	return nil
}

// remove forgets server's record. Removing a missing record is not an
// error.
func (s *tokenStore) remove(server string) error {
	err := os.Remove(s.path(server))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("oauth store: %w", err)
	}
	return nil
}
