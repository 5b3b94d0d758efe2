package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// This file tests what the API shows of servers: their status and
// stderr tail, with every secret redacted and the JSON kept valid.

func TestAPINeverShowsSecrets(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-value"
	leak := func(name, env, value string) serverConfig {
		return serverConfig{
			Name: name, Transport: transportStdio, Command: "/bin/sh",
			// It reads the initialize request before it fails, so that
			// the failure is the exit (with its stderr), not the write.
			Args:    []string{"-c", `read -r request; echo "starting with token=$` + env + ` header=hdr-` + secret + `" >&2; exit 1`},
			Env:     map[string]string{env: value},
			Headers: map[string]string{"Authorization": "Bearer hdr-" + secret},
			Timeout: 5 * time.Second, StartupTimeout: 10 * time.Second, Enabled: true, MaxMessageBytes: defaultMaxMessageBytes,
		}
	}
	good := fakeServerConfig(t, "normal")
	good.Env["SECRET"] = secret
	good.Headers = map[string]string{"X-Api-Key": "hdr-" + secret}
	f := newFakeModel(t, "openai", fakeTurn{Text: "done"})
	at := newAPITest(t, f, nil, good, leak("leaky", "SECRET", secret))
	// Per-run values are literal: "$$" is how a request writes "$".
	runLeak := leak("runleak", "RUN_SECRET", "run-"+secret)
	perRun, err := json.Marshal(map[string]any{"prompt": "x", "mcp_servers": []any{map[string]any{
		"name": runLeak.Name, "command": runLeak.Command, "env": runLeak.Env,
		"args":     []string{runLeak.Args[0], strings.ReplaceAll(runLeak.Args[1], "$", "$$")},
		"required": false,
	}}})
	if err != nil {
		t.Fatal(err)
	}
	r := at.startRun(t, string(perRun))
	waitRun(t, r)

	redacted := 0
	for _, path := range []string{"/v1/mcp/servers", "/v1/runs", "/v1/runs/" + r.id, "/v1/runs/" + r.id + "/events", "/metrics", "/healthz", "/readyz"} {
		resp, data := at.do(t, http.MethodGet, path, "", "")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, resp.StatusCode, data)
		}
		if bytes.Contains(data, []byte(secret)) {
			t.Errorf("GET %s = %s: shows the secret %q", path, data, secret)
		}
		redacted += bytes.Count(data, []byte("[redacted]"))
		if path == "/v1/mcp/servers" && !bytes.Contains(data, []byte("starting with token=[redacted]")) {
			t.Errorf("GET %s = %s: want leaky's error with the token redacted", path, data)
		}
		if strings.HasSuffix(path, "/events") && !bytes.Contains(data, []byte("token=[redacted]")) {
			t.Errorf("GET %s = %s: want runleak's failure with the token redacted", path, data)
		}
	}
	if redacted == 0 {
		t.Errorf("no answer needed redaction: the test no longer exercises it")
	}
}

func TestRedactorKeepsJSONValid(t *testing.T) {
	t.Parallel()
	rd := newRedactor(`quote"d<&>value`, "12345678", "short")
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"escaped secret", map[string]string{"error": `saw quote"d<&>value here`}, `{"error":"saw [redacted] here"}`},
		{"number that looks like a secret", map[string]any{"steps": 12345678, "note": "id 12345678"}, `{"note":"id [redacted]","steps":12345678}`},
		{"short values stay", map[string]string{"error": "short"}, `{"error":"short"}`},
		{"nothing to hide keeps order", struct{ Z, A string }{"z", "a"}, `{"Z":"z","A":"a"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(rd.marshal(tt.in, false))
			if got != tt.want {
				t.Errorf("marshal(%v) = %s, want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestServerStatusStderrTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		calls  []string // tools called before the server's crash tool
		status string
		want   string // "" wants no tail
	}{
		{name: "ready shows no tail", status: statusReady},
		{name: "restarting shows the last words", status: statusRestarting, want: "panic: boom"},
		{name: "failed shows the last words", status: statusFailed, want: "panic: boom"},
		{name: "long stderr is cut", calls: []string{"stderr-flood"}, status: statusRestarting, want: "eeee\npanic: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := fakeServerConfig(t, "normal")
			c, err := connect(t.Context(), cfg, clientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.close() })
			for _, name := range tt.calls {
				if _, err := c.callTool(t.Context(), name, json.RawMessage(`{}`)); err != nil {
					t.Fatalf("call %s: %v", name, err)
				}
			}
			if tt.status != statusReady {
				c.callTool(t.Context(), "crash", json.RawMessage(`{}`))
				select {
				case <-c.ended:
				case <-t.Context().Done():
					t.Fatal("the server did not crash")
				}
			}
			ms := &managedServer{cfg: cfg, status: tt.status, client: c, lastErr: c.endErr()}
			got := ms.snapshot().StderrTail
			if len(got) > statusStderrTail {
				t.Errorf("stderr_tail is %d bytes, want at most %d", len(got), statusStderrTail)
			}
			if tt.want == "" && got != "" || !strings.HasSuffix(got, tt.want) {
				t.Errorf("stderr_tail = %.80q…, want it to end with %q", got, tt.want)
			}
		})
	}
}
