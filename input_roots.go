package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
)

// This file holds the roots a server is answered with (roots/list): which
// directories each session answers, how a run's roots replace them, and the
// check of a run request's roots.

// A root is one entry of roots/list.
type root struct {
	URI  string `json:"uri"`
	Name string `json:"name,omitempty"`
}

// rootsFor returns the roots answered to server: its configured roots (a
// run-local server's carry its run's, see runScope.withRunRoots), else
// none, never nil. Nothing is answered by default: a server that replaces
// its own directories with the client's roots (server-filesystem, given
// /tmp on its command line) would otherwise serve what the operator did
// not write. The roots depend on the session only, never on the run whose
// call is in flight: a server that keeps its roots (server-filesystem
// reads them once, and again on notifications/roots/list_changed) would
// otherwise keep one run's directories for the next run's calls.
func rootsFor(server serverConfig) []root {
	roots := make([]root, 0, len(server.Roots))
	for _, dir := range server.Roots {
		abs, err := filepath.Abs(dir)
		if err != nil {
			continue
		}
		u := url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}
		roots = append(roots, root{URI: u.String(), Name: filepath.Base(abs)})
	}
	return roots
}

// rootsConfig returns the session's configuration with the roots it
// answers now: those setRoots gave, else the configured ones.
func (c *conn) rootsConfig() serverConfig {
	cfg := c.cfg
	if dirs := c.roots.Load(); dirs != nil {
		cfg.Roots = *dirs
	}
	return cfg
}

// setRoots changes the roots answered to the server (nil: none) and, on the older revisions, tells it with
// notifications/roots/list_changed, so a server that keeps its roots
// (server-filesystem) asks for them again. The current revision has no
// notification for it: a server asks for roots with each request that
// needs them.
func (c *client) setRoots(ctx context.Context, dirs []string) error {
	c.roots.Store(&dirs)
	if isSessionlessVersion(c.protocolVersion()) {
		return nil
	}
	return c.notify(ctx, "notifications/roots/list_changed", nil)
}

// withRunRoots returns cfg with the roots it gets as a server of the
// scope's run: the run's roots, when the run request names any, replace
// what its profile or connect_mcp server configures; a per-run server
// that names its own roots in the same request keeps them.
func (s *runScope) withRunRoots(cfg serverConfig) serverConfig {
	if s.roots == nil || (cfg.Origin == originPerRun && cfg.Roots != nil) {
		return cfg
	}
	cfg.Roots = s.roots
	return cfg
}

// validateRoots checks the roots of a run request: each the absolute path
// of an existing directory. field names the list in errors; every bad
// entry is reported.
func validateRoots(field string, dirs []string) error {
	var errs []error
	for i, dir := range dirs {
		if dir == "" || !filepath.IsAbs(dir) {
			errs = append(errs, fmt.Errorf("%s[%d]: %q is not an absolute directory path; write the full path", field, i, dir))
			continue
		}
		switch info, err := os.Stat(dir); {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s[%d]: %q does not exist on the daemon's host; roots must be existing directories", field, i, dir))
		case !info.IsDir():
			errs = append(errs, fmt.Errorf("%s[%d]: %q is a file; roots must be directories", field, i, dir))
		}
	}
	return errors.Join(errs...)
}
