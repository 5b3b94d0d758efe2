package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

// This file tests the API's authentication: which key may call which
// route, and serve's refusal of an open address without keys.

func TestAPIAuthMatrix(t *testing.T) {
	t.Parallel()
	const (
		readToken  = "read-token-0123456789abcdef"
		writeToken = "write-token-0123456789abcdef"
		adminToken = "admin-token-0123456789abcdef"
	)
	done := fakeTurn{Text: "done"}
	// One turn for the setup run, one per 202 below.
	f := newFakeModel(t, "openai", done, done, done, done, done, done)
	at := newAPITest(t, f, []authKey{
		testKey("reader", readToken, scopeRunsRead),
		testKey("writer", writeToken, scopeRunsWrite),
		testKey("root", adminToken, scopeAdmin),
	}, fakeServerConfig(t, "normal"))
	// The run is the writer's: the reader, another key, gets 404 for it.
	setup, err := at.runs.start(runRequest{Prompt: "setup", Owner: "writer"}, false)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, setup)
	exe := fakeServerConfig(t, "normal").Command
	withCommand := fmt.Sprintf(`{"prompt":"x","mcp_servers":[{"name":"mine","command":%q,"env":{%q:"normal"}}]}`, exe, fakeServerEnv)

	creds := []struct{ name, header string }{
		{"no token", ""},
		{"bad token", "Bearer wrong-token-0123456789abcdef"},
		{"basic auth", "Basic " + readToken},
		{"reader", "Bearer " + readToken},
		{"writer", "Bearer " + writeToken},
		{"admin", "Bearer " + adminToken},
		{"admin lowercase scheme", "bearer " + adminToken},
	}
	routes := []struct {
		method, path, body string
		// want is the status for each of creds, in order.
		want [7]int
	}{
		{"GET", "/healthz", "", [7]int{200, 200, 200, 200, 200, 200, 200}},
		{"GET", "/readyz", "", [7]int{200, 200, 200, 200, 200, 200, 200}},
		{"GET", "/metrics", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/mcp/servers", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/runs", "", [7]int{401, 401, 401, 200, 200, 200, 200}},
		{"GET", "/v1/runs/" + setup.id, "", [7]int{401, 401, 401, 404, 200, 200, 200}},
		{"GET", "/v1/runs/" + setup.id + "/events", "", [7]int{401, 401, 401, 404, 200, 200, 200}},
		{"GET", "/v1/runs/" + setup.id + "/messages", "", [7]int{401, 401, 401, 404, 200, 200, 200}},
		{"GET", "/v1/runs/run_missing", "", [7]int{401, 401, 401, 404, 404, 404, 404}},
		{"GET", "/v1/runs/run_missing/messages", "", [7]int{401, 401, 401, 404, 404, 404, 404}},
		{"POST", "/v1/runs/" + setup.id + "/cancel", "", [7]int{401, 401, 401, 403, 409, 409, 409}},
		{"POST", "/v1/runs", `{"prompt":"x"}`, [7]int{401, 401, 401, 403, 202, 202, 202}},
		{"POST", "/v1/runs", withCommand, [7]int{401, 401, 401, 403, 403, 202, 202}},
		{"DELETE", "/v1/runs", "", [7]int{405, 405, 405, 405, 405, 405, 405}},
	}
	for _, rt := range routes {
		for i, cred := range creds {
			t.Run(rt.method+" "+rt.path+" "+cred.name, func(t *testing.T) {
				resp, data := at.do(t, rt.method, rt.path, cred.header, rt.body)
				if resp.StatusCode != rt.want[i] {
					t.Fatalf("%s %s as %s = %d %s, want %d", rt.method, rt.path, cred.name, resp.StatusCode, data, rt.want[i])
				}
				if resp.StatusCode < 400 {
					return
				}
				e, err := decodeAPIError(data)
				if err != nil {
					t.Fatalf("%s %s as %s = %s: not an error object: %v", rt.method, rt.path, cred.name, data, err)
				}
				switch resp.StatusCode {
				case 401:
					if e.Error.Code != "unauthorized" || resp.Header.Get("WWW-Authenticate") == "" {
						t.Errorf("401 = %+v, WWW-Authenticate %q: want code unauthorized and the header", e, resp.Header.Get("WWW-Authenticate"))
					}
				case 403:
					want := "lacks the runs:write scope"
					if cred.name == "writer" {
						want = "needs the admin scope"
					}
					if e.Error.Code != "forbidden" || !strings.Contains(e.Error.Message, want) {
						t.Errorf("403 = %+v, want code forbidden and a message containing %q", e, want)
					}
				}
			})
		}
	}
	at.waitAllRuns(t)
}

// A lineWatcher is a log writer that closes seen when a line contains
// want. It is safe for concurrent use.
type lineWatcher struct {
	want string
	seen chan struct{}

	mu sync.Mutex
	// guards buf and closed
	buf    strings.Builder
	closed bool
}

func (w *lineWatcher) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.closed && strings.Contains(w.buf.String(), w.want) {
		w.closed = true
		close(w.seen)
	}
	return len(p), nil
}

func (w *lineWatcher) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func TestServeRefusesOpenAddrWithoutAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		keys    string
		wantErr string // "" wants the server to start
	}{
		{name: "all interfaces", args: []string{"--addr", "0.0.0.0:0"}, wantErr: "--addr 0.0.0.0:0 is not a loopback address and no API keys are configured"},
		{name: "empty host", args: []string{"--addr", ":0"}, wantErr: "is not a loopback address"},
		{name: "loopback", args: []string{"--addr", "127.0.0.1:0"}},
		{name: "localhost", args: []string{"--addr", "localhost:0"}},
		{name: "insecure", args: []string{"--addr", "0.0.0.0:0", "--insecure"}},
		{name: "with keys", args: []string{"--addr", "0.0.0.0:0"}, keys: `[{"name":"ops","token":"0123456789abcdef0123","scopes":["admin"]}]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := t.TempDir()
			env := map[string]string{"HARNESS_HOME": home, "HOME": home}
			if tt.keys != "" {
				env["HARNESS_API_KEYS"] = tt.keys
			}
			stderr := &lineWatcher{want: "harnessd listening", seen: make(chan struct{})}
			a := &app{stdout: io.Discard, stderr: stderr, getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 1)
			args := append([]string{"serve", "--workspace", home}, tt.args...)
			// Owned by the test; exits when serve returns (cancel stops it).
			go func() { errc <- a.run(ctx, args) }()
			if tt.wantErr != "" {
				err := <-errc
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != 2 || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("serve %v = %v, want exit 2 with %q", args, err, tt.wantErr)
				}
				return
			}
			select {
			case <-stderr.seen:
			case err := <-errc:
				t.Fatalf("serve %v = %v before listening, want it to serve; log:\n%s", args, err, stderr)
			}
			cancel()
			if err := <-errc; err != nil {
				t.Errorf("serve %v after cancel = %v, want nil", args, err)
			}
		})
	}
}

func TestIsLoopbackAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2:80", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"0.0.0.0:8080", false},
		{":8080", false},
		{"[::]:8080", false},
		{"192.168.1.10:8080", false},
		{"example.com:80", false},
		{"127.0.0.1", false},
	}
	for _, tt := range tests {
		if got := isLoopbackAddr(tt.addr); got != tt.want {
			t.Errorf("isLoopbackAddr(%q) = %v, want %v", tt.addr, got, tt.want)
		}
	}
}
