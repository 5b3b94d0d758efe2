package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file tests what the API refuses before routing (the requests a web
// page makes a browser send) and the cap on open connections.

func TestAPIRefusesWhatAWebPageSends(t *testing.T) {
	t.Parallel()
	pwned := filepath.Join(t.TempDir(), "pwned")
	command, _ := json.Marshal(map[string]any{"prompt": "hi", "mcp_servers": []any{map[string]any{"name": "x", "command": "touch", "args": []string{pwned}}}})
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "same-origin"}, fakeTurn{Text: "curl"}, fakeTurn{Text: "allowed host"})
	at := newAPITest(t, f, nil)
	at.api.hosts = newHostPolicy("127.0.0.1:8080", []string{"harness.internal", "*.corp.example"})
	self := strings.TrimPrefix(at.url, "http://")
	tests := []struct {
		name         string
		method, path string
		host         string
		body         string
		header       []string
		wantStatus   int
		wantCode     string
	}{
		// The request of the report: a cross-site "simple" POST through a
		// DNS-rebinding name.
		{name: "issue curl", method: "POST", path: "/v1/runs", host: "rebind.example:8080", body: string(command),
			header: []string{"Origin", "https://evil.example", "Content-Type", "text/plain;charset=UTF-8"}, wantStatus: 421, wantCode: "host_not_allowed"},
		{name: "rebinding read", method: "GET", path: "/v1/runs", host: "rebind.example:8080", wantStatus: 421, wantCode: "host_not_allowed"},
		{name: "rebinding same-origin fetch", method: "POST", path: "/v1/runs", host: "rebind.example:8080", body: string(command),
			header: []string{"Origin", "http://rebind.example:8080", "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}, wantStatus: 421, wantCode: "host_not_allowed"},
		{name: "cross-site simple POST", method: "POST", path: "/v1/runs", body: string(command),
			header: []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "text/plain;charset=UTF-8"}, wantStatus: 403, wantCode: "cross_origin"},
		{name: "cross-site form POST", method: "POST", path: "/v1/runs", body: "prompt=hi",
			header: []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/x-www-form-urlencoded"}, wantStatus: 403, wantCode: "cross_origin"},
		{name: "older browser: Origin only", method: "POST", path: "/v1/runs", body: string(command),
			header: []string{"Origin", "https://evil.example", "Content-Type", "text/plain"}, wantStatus: 403, wantCode: "cross_origin"},
		{name: "cross-site cancel without body", method: "POST", path: "/v1/runs/run_x/cancel",
			header: []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, wantStatus: 403, wantCode: "cross_origin"},
		{name: "text/plain without Origin", method: "POST", path: "/v1/runs", body: string(command),
			header: []string{"Content-Type", "text/plain;charset=UTF-8"}, wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "no Content-Type", method: "POST", path: "/v1/runs", body: string(command), header: []string{"Content-Type", ""}, wantStatus: 415, wantCode: "unsupported_media_type"},
		{name: "same-origin fetch", method: "POST", path: "/v1/runs", body: `{"prompt":"same-origin"}`,
			header: []string{"Origin", "http://" + self, "Sec-Fetch-Site", "same-origin", "Content-Type", "application/json"}, wantStatus: 202},
		{name: "curl", method: "POST", path: "/v1/runs", body: `{"prompt":"curl"}`, header: []string{"Content-Type", "application/json; charset=utf-8"}, wantStatus: 202},
		{name: "allowed_hosts name", method: "POST", path: "/v1/runs", host: "harness.internal:8080", body: `{"prompt":"allowed host"}`, wantStatus: 202},
		{name: "allowed_hosts glob", method: "GET", path: "/v1/runs", host: "h1.corp.example", wantStatus: 200},
		{name: "localhost", method: "GET", path: "/v1/runs", host: "localhost:8080", wantStatus: 200},
		{name: "cross-site read", method: "GET", path: "/v1/runs", header: []string{"Origin", "https://evil.example", "Sec-Fetch-Site", "cross-site"}, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			header := tt.header
			if tt.host != "" {
				header = append([]string{"Host", tt.host}, header...)
			}
			resp, data := at.do(t, tt.method, tt.path, "", tt.body, header...)
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, resp.StatusCode, data, tt.wantStatus)
			}
			if tt.wantCode != "" {
				var e apiError
				if err := json.Unmarshal(data, &e); err != nil || e.Error.Code != tt.wantCode || resp.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%s %s body = %s, want a JSON error with code %q", tt.method, tt.path, data, tt.wantCode)
				}
			}
		})
	}
	for _, r := range at.runs.list() {
		<-r.done
	}
	if _, err := os.Stat(pwned); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stat %s = %v: a refused request started the server", pwned, err)
	}
}

func TestHostPolicy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		listen  string
		allowed []string
		host    string
		want    bool
	}{
		{"127.0.0.1:8080", nil, "127.0.0.1:8080", true},
		{"127.0.0.1:8080", nil, "127.0.0.2", true},
		{"127.0.0.1:8080", nil, "[::1]:8080", true},
		{"127.0.0.1:8080", nil, "LocalHost:8080", true},
		{"127.0.0.1:8080", nil, "app.localhost", true},
		{"127.0.0.1:8080", nil, "", true},
		{"127.0.0.1:8080", nil, "rebind.example:8080", false},
		{"127.0.0.1:8080", nil, "localhost.evil.example", false},
		{"127.0.0.1:8080", nil, "10.0.0.5:8080", false},
		{"10.0.0.5:8080", nil, "10.0.0.5:8080", true},
		{"harness.lan:8080", nil, "Harness.LAN:8080", true},
		{"0.0.0.0:8080", nil, "10.0.0.5:8080", true},
		{":8080", nil, "[fd00::1]:8080", true},
		{":8080", nil, "rebind.example", false},
		{":8080", []string{"*.corp.example"}, "h.corp.example:8080", true},
		{":8080", []string{"harness.internal"}, "harness.internal.", true},
	}
	for _, tt := range tests {
		if got := newHostPolicy(tt.listen, tt.allowed).allows(tt.host); got != tt.want {
			t.Errorf("newHostPolicy(%q, %q).allows(%q) = %v, want %v", tt.listen, tt.allowed, tt.host, got, tt.want)
		}
	}
}

func TestLimitListener(t *testing.T) {
	t.Parallel()
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := newLimitListener(tcp, 2)
	accepted := make(chan net.Conn, 3)
	acceptErr := make(chan error, 1)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				acceptErr <- err
				return
			}
			accepted <- c
		}
	}()
	for range 3 {
		c, err := net.Dial("tcp", tcp.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	first, second := <-accepted, <-accepted
	select {
	case c := <-accepted:
		t.Fatalf("accepted a third connection (%v) while two were open", c.RemoteAddr())
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close must not free another slot
	third := <-accepted
	second.Close()
	third.Close()
	ln.Close()
	if err := <-acceptErr; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
}

func TestConfigAPISettings(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		toml      string
		env       map[string]string
		wantHosts []string
		wantConns int
		wantErr   string
	}{
		{name: "set", toml: "allowed_hosts = [\"Harness.Internal\", \"*.corp.example\"]\nmax_connections = 64\n", wantHosts: []string{"harness.internal", "*.corp.example"}, wantConns: 64},
		{name: "env wins", toml: "max_connections = 64\n", env: map[string]string{"HARNESS_MAX_CONNECTIONS": "8"}, wantConns: 8},
		{name: "zero", toml: "max_connections = 0\n", wantErr: "max_connections: 0 is not positive"},
		{name: "bad env", env: map[string]string{"HARNESS_MAX_CONNECTIONS": "many"}, wantErr: `HARNESS_MAX_CONNECTIONS: "many" is not a positive number`},
		{name: "bad host", toml: "allowed_hosts = [\"http://x/\"]\n", wantErr: `allowed_hosts[0]: "http://x/" is not a host name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, _ := configDirs(t, tt.toml, "")
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(tt.env)})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("loadConfig() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(cfg.AllowedHosts, ",") != strings.Join(tt.wantHosts, ",") || cfg.MaxConnections != tt.wantConns {
				t.Errorf("loadConfig() = hosts %q, max_connections %d; want %q, %d", cfg.AllowedHosts, cfg.MaxConnections, tt.wantHosts, tt.wantConns)
			}
		})
	}
}

// TestServeGuardsAndCapsConnections runs "harnessd serve" with
// allowed_hosts and --max-connections 1: a second connection waits until
// the first closes, and Host names are checked.
func TestServeGuardsAndCapsConnections(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	writeFile(t, home, "config.toml", "allowed_hosts = [\"harness.internal\"]\n")
	env := map[string]string{"HARNESS_HOME": home, "HOME": home}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	addr := serveUntilCleanup(t, getenv, "serve", "--workspace", home, "--addr", "127.0.0.1:0", "--max-connections", "1")
	get := func(c net.Conn, host string) (*http.Response, error) {
		fmt.Fprintf(c, "GET /v1/runs HTTP/1.1\r\nHost: %s\r\n\r\n", host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}
	first, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	if resp, err := get(first, "harness.internal:8080"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET with an allowed_hosts Host = %v, %v; want 200", resp, err)
	}
	second, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	answered := make(chan int, 1)
	go func() {
		resp, err := get(second, "rebind.example")
		if err != nil {
			answered <- -1
			return
		}
		answered <- resp.StatusCode
	}()
	select {
	case code := <-answered:
		t.Fatalf("second connection answered %d while the first was open, want it to wait", code)
	case <-time.After(100 * time.Millisecond):
	}
	first.Close()
	if code := <-answered; code != http.StatusMisdirectedRequest {
		t.Errorf("GET with a foreign Host = %d, want 421", code)
	}
}
