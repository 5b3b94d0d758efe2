package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// This file holds the roots a session answers (roots/list): which
// directories each session answers, how they change, the check of a run
// request's roots, and the settle a one-shot command gives a server that
// asked for roots: servers apply the roots they asked for asynchronously
// (the reference filesystem server resolves and checks each directory
// after the answer), so a call sent at once can meet the roots of before.

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
func (c *mcpClient) setRoots(ctx context.Context, dirs []string) error {
	c.roots.Store(&dirs)
	if isSessionlessVersion(c.protocolVersion()) {
		return nil
	}
	return c.notify(ctx, "notifications/roots/list_changed", nil)
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

// rootsSettle is how long after answering roots/list a one-shot call
// waits before its first request.
const rootsSettle = 250 * time.Millisecond

// settleRoots waits, when the server asked for roots, until rootsSettle
// has passed since the answer, or since now when the answer is still
// being sent; it returns at once for a server that did not ask (or was
// answered long enough ago), and early with ctx's error. The ask is
// marked by the reader as it comes: the answer, sent by another
// goroutine, was once 15 ms behind on a loaded machine, and a call that
// saw no answer yet went first and met no roots.
func (c *conn) settleRoots(ctx context.Context) error {
	asked, answered := c.rootsAsked.Load(), c.rootsAnswered.Load()
	if asked == 0 {
		return nil
	}
	since := time.Unix(0, answered)
	if answered < asked {
		since = time.Now()
	}
	wait := time.Until(since.Add(rootsSettle))
	if wait <= 0 {
		return nil
	}
	c.logger.Debug("letting the server apply its roots", "wait", wait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
