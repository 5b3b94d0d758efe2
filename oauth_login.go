package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// This file holds logging in to a server that needs OAuth, where a person
// approves in a browser on any machine: the two steps (start: the
// authorization URL; complete: the redirected URL), harnessd mcp login
// (loopback callback or the URL pasted on stdin) and harnessd mcp logout.

// probeChallenge POSTs an initialize request to the server without a
// token and returns the challenge of its 401. It fails when the server
// does not ask for authorization.
func (c *oauthClient) probeChallenge(ctx context.Context, header http.Header) (bearerChallenge, error) {
	body := []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"harnessd","version":"` + buildVersion + `"}}}`)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.serverURL, bytes.NewReader(body))
	if err != nil {
		return bearerChallenge{}, fmt.Errorf("server %q: %w", c.server, err)
	}
	maps.Copy(req.Header, header)
	req.Header[headerAccept] = acceptPost
	req.Header[headerContentType] = contentTypeRPC
	resp, err := c.http.Do(req)
	if err != nil {
		return bearerChallenge{}, fmt.Errorf("server %q: %w", c.server, err)
	}
	drainClose(resp.Body)
	if resp.StatusCode != http.StatusUnauthorized {
		return bearerChallenge{}, fmt.Errorf("server %q answered %d without a token: it does not ask for OAuth authorization", c.server, resp.StatusCode)
	}
	return bearerChallengeOf(resp.Header), nil
}

// startLogin begins a login: it discovers the server's authorization and
// returns the URL a person opens, remembering the flow for completeLogin
// (a new start replaces it). With the client credentials grant no person
// is needed: it obtains the token and returns "".
func (c *oauthClient) startLogin(ctx context.Context, header http.Header) (string, error) {
	ch, err := c.probeChallenge(ctx, header)
	if err != nil {
		return "", err
	}
	if err := c.acquire(ctx); err != nil {
		return "", err
	}
	defer c.release()
	c.reload()
	d, err := discover(ctx, c.http, c.serverURL, ch)
	if err != nil {
		return "", fmt.Errorf("server %q: %w", c.server, err)
	}
	switch c.cfg.Grant {
	case grantClientCredentials:
		return "", c.clientCredentials(ctx, d, ch, nil)
	case grantJWTBearer:
		return "", c.jwtBearer(ctx, d, ch, nil)
	}
	p, err := c.begin(ctx, d, ch, nil)
	if err != nil {
		return "", err
	}
	authURL, err := p.URL()
	if err != nil {
		return "", err
	}
	c.pending = p
	return authURL, nil
}

// errNoLogin: completeLogin without a login in progress.
var errNoLogin = errors.New("no login in progress; start one first")

// completeLogin finishes the login started last with the URL the
// authorization server redirected to, and stores the token.
func (c *oauthClient) completeLogin(ctx context.Context, redirected string) error {
	if err := c.acquire(ctx); err != nil {
		return err
	}
	defer c.release()
	p := c.pending
	if p == nil {
		return fmt.Errorf("server %q: %w", c.server, errNoLogin)
	}
	if err := c.finish(ctx, p, redirected); err != nil {
		return err
	}
	c.pending = nil
	return nil
}

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
	redirects := make(chan string, 2)
	stopCallback, err := listenCallback(c.cfg.RedirectURI, redirects)
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

// listenCallback serves the loopback redirect URI: the first request to
// its path is sent to redirects as the full redirected URL. It returns a
// function that stops the listener.
func listenCallback(redirectURI string, redirects chan<- string) (stop func(), err error) {
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

// loginServer answers POST /v1/mcp/servers/{name}/login (admin), for
// appliances where nobody has a shell: the body {} starts a login and
// answers {"authorization_url": ...}; the body {"redirected_url": ...}
// (the URL the browser ended on) completes it and answers
// {"status": "logged_in"}. The server reconnects on its next retry.
func (a *api) loginServer(w http.ResponseWriter, r *http.Request, _ authInfo) {
	name := r.PathValue("name")
	s := a.reg.server(name)
	if s == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no global MCP server %q (see GET /v1/mcp/servers)", name))
		return
	}
	c := a.reg.opts.Client.OAuth.forServer(s.cfg)
	if c == nil {
		writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("server %q is not a Streamable HTTP server with OAuth", name))
		return
	}
	var body struct {
		RedirectedURL string `json:"redirected_url"`
	}
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error()+` (send {} to start, {"redirected_url": "..."} to complete)`)
		return
	}
	if body.RedirectedURL == "" {
		authURL, err := c.startLogin(r.Context(), configuredHeader(s.cfg))
		switch {
		case err != nil:
			writeError(w, http.StatusBadGateway, "login_failed", err.Error())
		case authURL == "":
			writeJSON(w, http.StatusOK, map[string]string{"status": "logged_in"})
		default:
			writeJSON(w, http.StatusOK, map[string]string{"authorization_url": authURL})
		}
		return
	}
	err := c.completeLogin(r.Context(), body.RedirectedURL)
	switch {
	case errors.Is(err, errNoLogin):
		writeError(w, http.StatusConflict, "no_login", err.Error())
	case err != nil:
		writeError(w, http.StatusBadRequest, "login_failed", err.Error())
	default:
		writeJSON(w, http.StatusOK, map[string]string{"status": "logged_in"})
	}
}
