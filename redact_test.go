package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file tests the redactor, the logging wrapper, the per-run caps on
// secret values, and every path a secret could leave harnessd by.

func TestRedactor(t *testing.T) {
	t.Parallel()
	basic := base64.StdEncoding.EncodeToString([]byte("alice-user:pw-secret-77"))
	rd := newRedactor("Bearer tok-12345678", "Basic "+basic, "x", "ollama", "abcdefgh1234", "abcdefgh1234-longer")
	tests := []struct{ in, want string }{
		{"denied for tok-12345678", "denied for [redacted]"},
		{"header Bearer tok-12345678 refused", "header [redacted] refused"},
		{"user alice-user pass pw-secret-77", "user [redacted] pass [redacted]"},
		{"creds alice-user:pw-secret-77", "creds [redacted]"},
		{"Authorization: Basic " + basic, "Authorization: [redacted]"},
		{"unexpected ollama answer", "unexpected ollama answer"},
		{"key=abcdefgh1234.", "key=[redacted]."},
		{"xabcdefgh1234 is another word", "xabcdefgh1234 is another word"},
		{"abcdefgh1234-longer wins", "[redacted] wins"},
		{"abcdefgh12345", "abcdefgh12345"},
		{"", ""},
	}
	for _, tt := range tests {
		if got := rd.redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := (*redactor)(nil).redact("tok-12345678"); got != "tok-12345678" {
		t.Errorf("nil redactor: redact = %q, want the text unchanged", got)
	}
	// Redact, then cut: no prefix of a secret survives the cut.
	s := strings.Repeat("a ", 10) + "tok-12345678 end"
	for n := 15; n < len(s); n++ {
		if got := rd.cut(s, n); strings.Contains(got, "tok-") {
			t.Errorf("cut(%q, %d) = %q: a prefix of the secret survived", s, n, got)
		}
		if got := rd.tail(s, n); strings.Contains(got, "345678") {
			t.Errorf("tail(%q, %d) = %q: a suffix of the secret survived", s, n, got)
		}
	}
}

func TestRedactingHandler(t *testing.T) {
	t.Parallel()
	const secret = "log-secret-4b2d9e"
	var buf bytes.Buffer
	logger := redactLoggerLive(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), newLiveRedactor(newRedactor(secret)))
	logger = logger.With("server", "s", "context", "with "+secret)
	logger.Debug("message "+secret, "line", "a "+secret, "err", errors.New("failed: "+secret),
		slog.Group("g", "inner", secret), "any", []string{secret})
	logger.WithGroup("grp").Info("x", "k", secret)
	if strings.Contains(buf.String(), secret) || !strings.Contains(buf.String(), "[redacted]") {
		t.Errorf("logs = %s, want the secret redacted everywhere", buf.String())
	}
}

func TestRunServerValueCaps(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	many := map[string]string{}
	for i := range maxRunServerValues + 1 {
		many[fmt.Sprintf("X-H%d", i)] = "v"
	}
	tests := []struct {
		name   string
		server map[string]any
		want   string
	}{
		{"too many headers", map[string]any{"name": "s", "url": "http://127.0.0.1:1/mcp", "headers": many}, "headers: 65 entries, over the limit of 64"},
		{"too many env", map[string]any{"name": "s", "command": "x", "env": many}, "env: 65 entries, over the limit of 64"},
		{"long value", map[string]any{"name": "s", "url": "http://127.0.0.1:1/mcp", "headers": map[string]string{"A": strings.Repeat("v", maxRunValueBytes+1)}}, `headers \"A\": the value is 4097 bytes, over the limit of 4096`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"prompt": "x", "mcp_servers": []any{tt.server}})
			resp, data := at.do(t, "POST", "/v1/runs", "", string(body))
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), tt.want) {
				t.Errorf("POST /v1/runs = %d %s, want 400 containing %q", resp.StatusCode, data, tt.want)
			}
		})
	}
}

// TestSecretLeakPaths plants a secret in every source (a server's env, a
// Bearer header, a Basic header, the model key, an API token) and makes
// each path that once leaked one quote it: a non-JSON stdout line (WARN),
// a stderr line crossing the log cut and the 4096-byte chunk, the stderr
// tail's cut, an HTTP error body quoting the token alone or each Basic
// half, a model error with the key near its 300-byte cut, and a model that
// echoes the key in its answer. No 12-byte piece of any secret may appear
// in the logs (debug level), events, run records, /v1/mcp/servers or
// /metrics.
func TestSecretLeakPaths(t *testing.T) {
	t.Parallel()
	const (
		envSecret    = "env-secret-a81f3c9d"
		bearerSecret = "bearer-secret-77c2e1"
		basicUser    = "basic-user-31d0"
		basicPass    = "basic-pass-9e4a"
		apiToken     = "api-token-secret-5c3b8f"
	)
	basic := base64.StdEncoding.EncodeToString([]byte(basicUser + ":" + basicPass))
	secrets := []string{envSecret, bearerSecret, basicUser, basicPass, basic, apiToken, fakeModelKey}

	script := `echo "not json $S"; printf '%485s%s%4000s\n' '' "$S" '' >&2; printf '%s%2035s' "$S" '' >&2; exit 3`
	echoing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		msg := "denied for " + strings.TrimPrefix(auth, "Bearer ")
		if user, pass, ok := r.BasicAuth(); ok {
			msg = "user " + user + " pass " + pass
		}
		http.Error(w, msg, http.StatusInternalServerError)
	}))
	t.Cleanup(echoing.Close)
	globals := []serverConfig{
		{Name: "printer", Transport: transportStdio, Command: "/bin/sh", Args: []string{"-c", script},
			Env: map[string]string{"S": envSecret}, SecretEnv: []string{"S"}, Timeout: 5 * time.Second, StartupTimeout: 5 * time.Second, Enabled: true},
		{Name: "bearer", Transport: transportHTTP, URL: echoing.URL, Headers: map[string]string{"Authorization": "Bearer " + bearerSecret},
			Timeout: 5 * time.Second, StartupTimeout: 5 * time.Second, Enabled: true},
	}

	echoKey, failModel := "echo the key", "fail near the cut"
	turn := fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		switch req.Messages[0].Content {
		case failModel:
			return fakeTurn{Status: http.StatusBadRequest, Text: strings.Repeat("m ", 145) + fakeModelKey}
		case echoKey:
			return fakeTurn{Text: "your key is " + fakeModelKey}
		}
		return fakeTurn{Text: "done"}
	}}
	f := newFakeModel(t, providerOpenAI, turn, turn, turn)
	getenv := func(key string) (string, bool) {
		if key == "HARNESS_API_KEYS" {
			return fmt.Sprintf(`[{"name":"ops","token":%q,"scopes":["admin"]}]`, apiToken), true
		}
		return f.getenv(key)
	}
	cfg := &config{Servers: globals}
	if err := cfg.addEnvKeys(getenv); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	logger := redactLoggerLive(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), newLiveRedactor(newRedactor(daemonSecrets(cfg, getenv)...)))
	reg := newRegistry(globals, registryOptions{Logger: logger, Client: clientOptions{}})
	t.Cleanup(reg.close)
	if err := reg.waitReady(t.Context()); err != nil {
		t.Fatal(err)
	}
	store := newTestRunStore(t)
	runs := newRunManager(runManagerOptions{
		Registry: reg, Logger: logger, Home: t.TempDir(), Getenv: getenv, Model: modelSpec{Provider: providerOpenAI, Model: "fake-model"}, Metrics: newMetrics(), Store: store,
		newProvider: func(spec modelSpec, getenv func(string) (string, bool), logger *slog.Logger) (modelProvider, error) {
			p, err := newModelProvider(spec, getenv, logger)
			if err == nil {
				modelEndpointOf(t, p).retry = retryPolicy{attempts: 1}
			}
			return p, err
		},
	})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		runs.shutdown(ctx)
	})
	keys := []authKey{testKey("ops", apiToken, scopeAdmin)}
	srv := httptest.NewServer(newAPI(runs, reg, keys, runs.opts.Metrics, logger, nil))
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client()}

	var answers strings.Builder
	get := func(path string) {
		resp, data := at.do(t, "GET", path, "Bearer "+apiToken, "")
		fmt.Fprintf(&answers, "GET %s -> %d\n%s\n", path, resp.StatusCode, data)
	}
	basicServer, _ := json.Marshal([]any{map[string]any{"name": "basic", "url": echoing.URL, "headers": map[string]string{"Authorization": "Basic " + basic}, "required": false}})
	for _, body := range []string{
		fmt.Sprintf(`{"prompt":%q,"mcp_servers":%s}`, "basic", basicServer),
		fmt.Sprintf(`{"prompt":%q}`, failModel),
		fmt.Sprintf(`{"prompt":%q}`, echoKey),
	} {
		resp, data := at.do(t, "POST", "/v1/runs", "Bearer "+apiToken, body)
		var started struct {
			RunID string `json:"run_id"`
		}
		if err := json.Unmarshal(data, &started); err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("POST /v1/runs %s = %d %s", body, resp.StatusCode, data)
		}
		get("/v1/runs/" + started.RunID + "/events")
		get("/v1/runs/" + started.RunID)
	}
	get("/v1/runs")
	get("/v1/mcp/servers")
	get("/metrics")

	// The scenario must have run as planned.
	for _, want := range []string{"denied for [redacted]", "user [redacted] pass [redacted]", "your key is [redacted]", "m m [redacted]", "exited with status 3"} {
		if !strings.Contains(answers.String(), want) {
			t.Errorf("answers lack %q:\n%s", want, answers.String())
		}
	}
	for _, want := range []string{"ignoring non-JSON line", "server stderr"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
	var records strings.Builder
	filepath.WalkDir(store.dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(path)
			fmt.Fprintf(&records, "%s\n%s\n", path, b)
		}
		return nil
	})
	if !strings.Contains(records.String(), "your key is [redacted]") {
		t.Errorf("run records lack the echoing run's output:\n%s", records.String())
	}
	for what, text := range map[string]string{"API answers": answers.String(), "logs": logs.String(), "run records": records.String()} {
		for _, secret := range secrets {
			for i := 0; i+12 <= len(secret); i++ {
				if j := strings.Index(text, secret[i:i+12]); j >= 0 {
					t.Errorf("%s hold %q of the secret %q: …%s…", what, secret[i:i+12], secret, text[max(0, j-200):min(len(text), j+50)])
					break
				}
			}
		}
	}
}

// BenchmarkGetRunManySecrets reads GET /v1/runs/{id} and GET /v1/runs for
// a run that declared 32 per-run servers with 64 header values each (the
// most a request may send): the answer is redacted of 2,048 secrets.
func BenchmarkGetRunManySecrets(b *testing.B) {
	reg := newRegistry(nil, registryOptions{Logger: slog.New(slog.DiscardHandler)})
	b.Cleanup(reg.close)
	runs := newRunManager(runManagerOptions{
		Registry: reg, Logger: slog.New(slog.DiscardHandler), Home: b.TempDir(), Model: modelSpec{Provider: providerOpenAI, Model: "fake-model"},
		Getenv: func(string) (string, bool) { return "", false },
		newProvider: func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error) {
			return refusingModel{}, nil
		},
	})
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		runs.shutdown(ctx)
	})
	var servers []any
	for i := range 32 {
		headers := map[string]string{}
		for j := range 64 {
			headers[fmt.Sprintf("X-H%d", j)] = fmt.Sprintf("secret-value-%02d-%02d-0123456789", i, j)
		}
		servers = append(servers, map[string]any{"name": fmt.Sprintf("s%d", i), "url": "http://127.0.0.1:1/mcp", "headers": headers})
	}
	raw, _ := json.Marshal(servers)
	r, err := runs.start(runRequest{Prompt: "x", MCPServers: raw}, true)
	if err != nil {
		b.Fatal(err)
	}
	<-r.done
	a := newAPI(runs, reg, nil, nil, nil, nil)
	for _, path := range []string{"/v1/runs/" + r.id, "/v1/runs"} {
		b.Run(strings.TrimPrefix(strings.ReplaceAll(path, r.id, "id"), "/v1/"), func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Host = "127.0.0.1:8080"
				a.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
				}
			}
		})
	}
}
