package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// This file tests that redaction is one pass over the text whatever the
// secrets: the automaton agrees with the definition (longest whole-token
// secret at each word start, left to right), and the benchmark of the
// attack that made it quadratic.

// referenceRedact is the definition redact implements, searched the slow
// way: at each word start, the longest secret that ends at a boundary.
func referenceRedact(secrets []string, s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if i > 0 && isWordByte(s[i-1]) && isWordByte(s[i]) {
			continue
		}
		best := 0
		for _, sec := range secrets {
			end := i + len(sec)
			if end > len(s) || s[i:end] != sec || len(sec) <= best {
				continue
			}
			if end < len(s) && isWordByte(s[end-1]) && isWordByte(s[end]) {
				continue
			}
			best = len(sec)
		}
		if best > 0 {
			b.WriteString(s[last:i])
			b.WriteString(redactedText)
			last = i + best
			i = last - 1
		}
	}
	b.WriteString(s[last:])
	return b.String()
}

func TestRedactMatchesDefinition(t *testing.T) {
	t.Parallel()
	secrets := []string{"aaaaaaaa", "aaaaaaaaaa", "aaaa-bbbbbbbb", "bbbbbbbb", "abababab", "babababa", "ab ab ab ab", "x.y.z.w.v"}
	rd := newRedactor(secrets...)
	fixed := []string{
		"aaaaaaaa", "aaaaaaaaa", "aaaaaaaaaa", "xaaaaaaaa aaaaaaaa", "aaaa-bbbbbbbb", "aaaa-bbbbbbbbb", "ababababa abababab",
		"ab ab ab ab ab", "(x.y.z.w.v)", "bbbbbbbb-aaaaaaaa", "abababababababab", "",
	}
	for _, s := range fixed {
		if got, want := rd.redact(s), referenceRedact(secrets, s); got != want {
			t.Errorf("redact(%q) = %q, want %q", s, got, want)
		}
	}
	rnd := rand.New(rand.NewPCG(1, 2))
	alphabet := "ab -.xyzwv"
	for range 20000 {
		n := rnd.IntN(40)
		b := make([]byte, n)
		for i := range b {
			b[i] = alphabet[rnd.IntN(len(alphabet))]
		}
		s := string(b)
		if got, want := rd.redact(s), referenceRedact(secrets, s); got != want {
			t.Fatalf("redact(%q) = %q, want %q", s, got, want)
		}
		if got, want := rd.occurs(b), referenceOccurs(secrets, s); got != want {
			t.Fatalf("occurs(%q) = %v, want %v", s, got, want)
		}
	}
}

// referenceOccurs reports whether a secret appears anywhere in s.
func referenceOccurs(secrets []string, s string) bool {
	for _, sec := range secrets {
		if strings.Contains(s, sec) {
			return true
		}
	}
	return false
}

// manySecretLengths returns the run request of the attack: 19 per-run
// servers carrying 1,200 header values of distinct lengths 8 to 1207, and
// a 150,000-character prompt.
func manySecretLengths() string {
	rnd := rand.New(rand.NewPCG(3, 4))
	letters := "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	var servers []any
	n := 8
	for i := range 19 {
		headers := map[string]string{}
		for j := 0; j < maxRunServerValues && n < 1208; j++ {
			v := make([]byte, n)
			for k := range v {
				v[k] = letters[rnd.IntN(len(letters))]
			}
			headers[fmt.Sprintf("X-H%d", j)] = string(v)
			n++
		}
		servers = append(servers, map[string]any{"name": fmt.Sprintf("s%d", i), "url": "http://127.0.0.1:1/mcp", "headers": headers, "required": false})
	}
	body, _ := json.Marshal(map[string]any{"prompt": strings.Repeat("abcdefghij ", 150000/11), "mcp_servers": servers})
	return string(body)
}

// BenchmarkRedactManySecretLengths posts the run of the attack (POST) and
// reads it back (GET id) and the listing (GET list): with one pass per
// distinct secret length these took seconds each.
func BenchmarkRedactManySecretLengths(b *testing.B) {
	logger := slog.New(slog.DiscardHandler)
	reg := newRegistry(nil, registryOptions{Logger: logger})
	b.Cleanup(reg.close)
	store, err := openRunStoreOnceFree(filepath.Join(b.TempDir(), "runs"), logger)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(store.close)
	runs := newRunManager(runManagerOptions{
		Registry: reg, Logger: logger, Home: b.TempDir(), Model: modelSpec{Provider: providerOpenAI, Model: "fake-model"}, Store: store,
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
	a := newAPI(runs, reg, nil, nil, nil, nil)
	body := manySecretLengths()
	serve := func(method, path, body string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Content-Type", "application/json")
		a.ServeHTTP(w, req)
		return w
	}
	var id string
	b.Run("POST", func(b *testing.B) {
		for b.Loop() {
			w := serve(http.MethodPost, "/v1/runs", body)
			if w.Code != http.StatusAccepted {
				b.Fatalf("POST = %d %s", w.Code, w.Body)
			}
			var started struct {
				RunID string `json:"run_id"`
			}
			json.Unmarshal(w.Body.Bytes(), &started)
			id = started.RunID
			b.StopTimer()
			<-runs.get(id).done
			b.StartTimer()
		}
	})
	for _, path := range []string{"/v1/runs/" + id, "/v1/runs"} {
		b.Run("GET "+strings.TrimPrefix(strings.ReplaceAll(path, id, "id"), "/v1/"), func(b *testing.B) {
			for b.Loop() {
				if w := serve(http.MethodGet, path, ""); w.Code != http.StatusOK {
					b.Fatalf("GET %s = %d", path, w.Code)
				}
			}
		})
	}
}
