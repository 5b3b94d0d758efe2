package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
)

// TestMCPLoginIgnoresForgedCallback runs "mcp login" against the test
// authorization server. A forged callback (any local process or web page
// can request the loopback URL) is answered 400 and the login keeps
// waiting; the real redirect then completes it.
func TestMCPLoginIgnoresForgedCallback(t *testing.T) {
	t.Parallel()
	as := newTestAS(t)
	callback := fmt.Sprintf("http://127.0.0.1:%d/callback", freeLoopbackPort(t))
	home := t.TempDir()
	env := map[string]string{
		"PATH": os.Getenv("PATH"), "HOME": t.TempDir(), "HARNESS_HOME": home, "HARNESS_WORKSPACE": t.TempDir(),
		"HARNESS_MCP_SERVERS": serversJSON(t, map[string]any{"name": "docs", "url": as.srv.URL + "/mcp", "oauth": map[string]any{"redirect_uri": callback}}),
	}
	stdin, stdinW := io.Pipe() // nothing is pasted
	t.Cleanup(func() { stdinW.Close() })
	var out, errOut lockedBuffer
	a := &app{stdout: &out, stderr: &errOut, stdin: stdin, getenv: fakeEnv(env)}
	done := make(chan int, 1)
	// Owned by the test; ends when the login ends.
	go func() { done <- exitCode(a.run(t.Context(), []string{"mcp", "login", "docs"}), &errOut) }()
	var authURL string
	waitUntil(t, "the authorization URL is printed", func() bool {
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.HasPrefix(line, as.srv.URL+"/authorize") {
				authURL = line
			}
		}
		return authURL != ""
	})

	for _, forged := range []string{"?code=x&state=forged", "?code=x", "?error=access_denied"} {
		resp, err := http.Get(callback + forged)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "state differs") {
			t.Errorf("forged callback %s = %d %s, want 400", forged, resp.StatusCode, body)
		}
	}
	select {
	case code := <-done:
		t.Fatalf("the login ended (%d) after a forged callback:\n%s%s", code, out.String(), errOut.String())
	default:
	}

	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	redirected, err := readRedirect(t.Context(), noRedirects, authURL)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(redirected)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("the real callback = %d, want 200", resp.StatusCode)
	}
	if code := <-done; code != 0 || !strings.Contains(out.String(), "logged in to docs") {
		t.Errorf("mcp login = %d\nstdout: %s\nstderr: %s", code, out.String(), errOut.String())
	}
}
