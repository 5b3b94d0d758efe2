package main

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// This file holds harnessd mcp login (a loopback callback, or the
// redirected URL pasted on stdin) and harnessd mcp logout.

const mcpLoginUsage = `Usage: harnessd mcp login [flags] NAME

Logs in to the configured server NAME, which uses OAuth. Prints the
authorization URL alone on a line: open it in a browser on any machine.
The login completes when the browser reaches the loopback callback (the
server's oauth.redirect_uri, default ` + defaultRedirectURI + `; from
another machine forward its port, e.g. ssh -L 8788:127.0.0.1:8788), or
when the URL the browser ended on is pasted here. A server with
oauth.grant = "client_credentials" needs no browser. The tokens are kept
in $HARNESS_HOME/oauth; a running daemon uses them without a restart.

`

const mcpLogoutUsage = `Usage: harnessd mcp logout [flags] NAME

Forgets the OAuth tokens and client registrations kept for server NAME.

`

// oauthServerNamed returns the configured HTTP server name and the token
// store, for mcp login and logout.
func (a *app) oauthServerNamed(f *mcpFlags, name, workspace string) (serverConfig, *tokenStore, error) {
	servers, _, err := a.mcpServers(f, nil, slog.New(slog.DiscardHandler), workspace)
	if err != nil {
		return serverConfig{}, nil, err
	}
	home, err := defaultHome(a.getenv)
	if err != nil {
		return serverConfig{}, nil, usageError("%v", err)
	}
	for _, s := range servers {
		if s.Name == name {
			if s.Transport != transportHTTP {
				return serverConfig{}, nil, usageError("server %q is %s, not http: only Streamable HTTP servers use OAuth", name, s.Transport)
			}
			return s, newTokenStore(oauthDir(home)), nil
		}
	}
	return serverConfig{}, nil, usageError("no server %q is configured", name)
}

// mcpLogin implements "harnessd mcp login".
func (a *app) mcpLogin(ctx context.Context, args []string) error {
	var f mcpFlags
	fs := a.mcpFlagSet("mcp login", mcpLoginUsage, &f)
	logger, workspace, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("mcp login: want exactly one server name")
	}
	server, store, err := a.oauthServerNamed(&f, fs.Arg(0), workspace)
	if err != nil {
		return err
	}
	c := newOAuthClient(server, store, clientFor(server), logger.With("server", server.Name))
	authURL, err := c.startLogin(ctx, configuredHeader(server))
	if err != nil {
		return err
	}
	if authURL == "" {
		fmt.Fprintf(a.stdout, "logged in to %s (client credentials)\n", server.Name)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, loginTimeout)
	defer cancel()
	redirects := make(chan string, 2)
	stopCallback, err := listenCallback(c.cfg.RedirectURI, c.pendingState(), redirects)
	if err != nil {
		fmt.Fprintf(a.stderr, "cannot listen for the callback (%v): paste the URL the browser ends on\n", err)
	} else {
		defer stopCallback()
	}
	fmt.Fprintf(a.stderr, "Open this URL in a browser to log in to %s, then approve; or paste here the URL the browser ends on:\n", server.Name)
	fmt.Fprintln(a.stdout, authURL)
	go readPastedRedirect(a.stdinOrDefault(), redirects)
	select {
	case redirected := <-redirects:
		if err := c.completeLogin(ctx, redirected); err != nil {
			return err
		}
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("mcp login %s: no authorization within %s; run the login again", server.Name, loginTimeout)
		}
		return ctx.Err()
	}
	fmt.Fprintf(a.stdout, "logged in to %s\n", server.Name)
	return nil
}

// mcpLogout implements "harnessd mcp logout".
func (a *app) mcpLogout(_ context.Context, args []string) error {
	var f mcpFlags
	fs := a.mcpFlagSet("mcp logout", mcpLogoutUsage, &f)
	_, workspace, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("mcp logout: want exactly one server name")
	}
	server, store, err := a.oauthServerNamed(&f, fs.Arg(0), workspace)
	if err != nil {
		return err
	}
	if err := store.remove(server.Name); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "logged out of %s\n", server.Name)
	return nil
}

func (a *app) stdinOrDefault() io.Reader {
	if a.stdin != nil {
		return a.stdin
	}
	return os.Stdin
}

// readPastedRedirect sends the first line of in that looks like an
// authorization response (it has code= or error=).
func readPastedRedirect(in io.Reader, redirects chan<- string) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.Contains(line, "code=") || strings.Contains(line, "error=") {
			redirects <- line
			return
		}
	}
}

// loginTimeout bounds how long "mcp login" waits for the authorization.
const loginTimeout = 10 * time.Minute

// listenCallback serves the loopback redirect URI: the first request to
// its path that carries state is sent to redirects as the full redirected
// URL. Any other request (a forged callback from another local process or
// a web page) is answered 400 and the wait goes on. It returns a function
// that stops the listener.
func listenCallback(redirectURI, state string, redirects chan<- string) (stop func(), err error) {
	u, err := url.Parse(redirectURI)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return nil, fmt.Errorf("redirect uri %s has no port", redirectURI)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(u.Hostname(), strconv.Itoa(port)))
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc(cmpPath(u.Path), func(w http.ResponseWriter, r *http.Request) {
		got := r.URL.Query().Get("state")
		if state == "" || subtle.ConstantTimeCompare([]byte(got), []byte(state)) != 1 {
			http.Error(w, "harnessd: this is not the answer to the login in progress (state differs); the login goes on waiting.", http.StatusBadRequest)
			return
		}
		select {
		case redirects <- redirectURI + "?" + r.URL.RawQuery:
		default:
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "harnessd received the authorization; you can close this window.")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	// Owned by the login; ends when stop closes the server.
	go srv.Serve(ln)
	return func() { srv.Close() }, nil
}

// cmpPath returns p, or "/" when it is empty.
func cmpPath(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
