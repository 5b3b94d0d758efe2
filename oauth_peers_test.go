package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// freeLoopbackPort returns a port of 127.0.0.1 that was free a moment ago.
// The TypeScript demo server needs its ports before it starts (they are
// part of its URLs), so it cannot report a kernel-chosen one.
func freeLoopbackPort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startOAuthDemo starts the TypeScript SDK's simpleStreamableHttp example
// with --oauth (an MCP server and its demo authorization server) on
// loopback and returns the MCP endpoint, once both listen.
func startOAuthDemo(t *testing.T) string {
	t.Helper()
	return startSDKOAuthExample(t, "simpleStreamableHttp.js", "--oauth")
}

// startSDKOAuthExample starts one of the TypeScript SDK's example servers
// that run the SDK's demo authorization server beside the MCP server
// (their ports from MCP_PORT and MCP_AUTH_PORT) and returns the MCP
// endpoint, once both listen.
func startSDKOAuthExample(t *testing.T, file string, args ...string) string {
	t.Helper()
	argv := append(sdkExample(t, file, "loopback.mjs"), args...)
	mcpPort, authPort := freeLoopbackPort(t), freeLoopbackPort(t)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("MCP_PORT=%d", mcpPort), fmt.Sprintf("MCP_AUTH_PORT=%d", authPort))
	listening := 0
	return startHTTPPeer(t, file, cmd, false, func(line string) (string, bool) {
		if strings.HasPrefix(line, "loopback.mjs: listening on ") {
			listening++
		}
		return fmt.Sprintf("http://localhost:%d/mcp", mcpPort), listening == 2
	})
}

// loginOAuthDemo logs in to the SDK's demo authorization server in front
// of endpoint the way a person would: browser follows the authorization
// URL, which the demo approves at once (setting its demo_session cookie
// in browser's jar, if it has one), to a loopback callback. It returns
// the server's config and the store holding the login.
func loginOAuthDemo(t *testing.T, endpoint string, browser *http.Client, logger *slog.Logger) (serverConfig, *tokenStore) {
	t.Helper()
	store := newTokenStore(oauthDir(t.TempDir()))
	cfg, err := adhocServer("demo", endpoint, nil)
	if err != nil {
		t.Fatal(err)
	}
	redirectURI := fmt.Sprintf("http://127.0.0.1:%d/callback", freeLoopbackPort(t))
	cfg.OAuth = &oauthConfig{RedirectURI: redirectURI, Grant: grantAuthorizationCode}
	login := newOAuthClient(cfg, store, httpClient, logger)
	authURL, err := login.startLogin(t.Context(), nil)
	if err != nil {
		t.Fatalf("startLogin: %v", err)
	}
	redirects := make(chan string, 1)
	stop, err := listenCallback(redirectURI, login.pendingState(), redirects)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	resp, err := browser.Get(authURL)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	resp.Body.Close()
	if err := login.completeLogin(t.Context(), <-redirects); err != nil {
		t.Fatalf("completeLogin: %v", err)
	}
	return cfg, store
}

// TestOAuthRealServer logs in to the TypeScript SDK's OAuth demo through
// the loopback callback, calls a tool with the token, reuses the stored
// login after a restart, and, once the token expired (the demo issues no
// refresh tokens), reports needs authorization without asking the
// authorization server again.
func TestOAuthRealServer(t *testing.T) {
	t.Parallel()
	endpoint := startOAuthDemo(t)
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg, store := loginOAuthDemo(t, endpoint, http.DefaultClient, logger)
	first, _ := store.load("demo", endpoint)
	if first.Token == nil {
		t.Fatal("no token stored after the login")
	}

	callGreet := func() error {
		t.Helper()
		c, err := connect(t.Context(), cfg, clientOptions{Logger: logger, OAuth: newOAuthClients(store, logger)})
		if err != nil {
			return err
		}
		defer c.close()
		res, err := c.callTool(t.Context(), "greet", json.RawMessage(`{"name":"harness"}`))
		if err != nil {
			return err
		}
		if text := resultToText(res); !strings.Contains(text, "harness") {
			t.Errorf("greet = %q, want a greeting", text)
		}
		return nil
	}
	if err := callGreet(); err != nil {
		t.Fatalf("call with the new login: %v", err)
	}
	// A restarted daemon (new OAuth clients over the same store) reuses it.
	if err := callGreet(); err != nil {
		t.Fatalf("call after restart: %v", err)
	}
	if again, _ := store.load("demo", endpoint); again.Token.AccessToken != first.Token.AccessToken {
		t.Error("the stored login was not reused")
	}

	// Expire the token: without a refresh token, the server needs a login.
	expired := first
	expired.Token.Expiry = time.Now().Add(-time.Minute)
	if err := store.save("demo", expired); err != nil {
		t.Fatal(err)
	}
	err := callGreet()
	if !errors.Is(err, errNeedsAuth) || !strings.Contains(err.Error(), "harnessd mcp login demo") {
		t.Fatalf("call with an expired token = %v, want needs authorization", err)
	}
	if strings.Contains(logs.String(), first.Token.AccessToken) {
		t.Error("the logs show the access token")
	}
}
