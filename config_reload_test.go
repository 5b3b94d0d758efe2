package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file tests the reload of the global servers: the diff of two
// configurations, and a registry swapping its servers while runs use them.

func TestDiffServers(t *testing.T) {
	t.Parallel()
	base := func(name string) serverConfig {
		return serverConfig{Name: name, Transport: transportStdio, Command: "srv", Args: []string{"--flag"},
			Env: map[string]string{"TOKEN": "one"}, Timeout: time.Minute, StartupTimeout: 30 * time.Second,
			Enabled: true, Source: "/home/config.toml"}
	}
	web := func(name string) serverConfig {
		return serverConfig{Name: name, Transport: transportHTTP, URL: "https://example.com/mcp",
			Headers: map[string]string{"Authorization": "Bearer one"}, Enabled: true}
	}
	with := func(cfg serverConfig, change func(*serverConfig)) serverConfig {
		cfg.Env = maps.Clone(cfg.Env)
		cfg.Headers = maps.Clone(cfg.Headers)
		change(&cfg)
		return cfg
	}
	tests := []struct {
		name      string
		old, next []serverConfig
		want      serverDiff
	}{
		{"nothing", nil, nil, serverDiff{}},
		{"same", []serverConfig{base("a"), web("b")}, []serverConfig{base("a"), web("b")},
			serverDiff{Unchanged: []string{"a", "b"}}},
		{"added", []serverConfig{base("a")}, []serverConfig{base("a"), base("b")},
			serverDiff{Added: []string{"b"}, Unchanged: []string{"a"}}},
		{"removed", []serverConfig{base("a"), base("b")}, []serverConfig{base("b")},
			serverDiff{Removed: []string{"a"}, Unchanged: []string{"b"}}},
		{"env value", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Env["TOKEN"] = "two" })},
			serverDiff{Restarted: []string{"a"}}},
		{"env key added", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Env["DEBUG"] = "1" })},
			serverDiff{Restarted: []string{"a"}}},
		{"header value", []serverConfig{web("w")}, []serverConfig{with(web("w"), func(c *serverConfig) { c.Headers["Authorization"] = "Bearer two" })},
			serverDiff{Restarted: []string{"w"}}},
		{"request timeout", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Timeout = 2 * time.Minute })},
			serverDiff{Restarted: []string{"a"}}},
		{"startup timeout", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.StartupTimeout = time.Minute })},
			serverDiff{Restarted: []string{"a"}}},
		{"args", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Args = []string{"--other"} })},
			serverDiff{Restarted: []string{"a"}}},
		{"tool filter", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.ExcludeTools = []string{"rm"} })},
			serverDiff{Restarted: []string{"a"}}},
		{"disabled", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Enabled = false })},
			serverDiff{Restarted: []string{"a"}}},
		{"oauth scopes", []serverConfig{with(web("w"), func(c *serverConfig) { c.OAuth = &oauthConfig{Scopes: []string{"read"}} })},
			[]serverConfig{with(web("w"), func(c *serverConfig) { c.OAuth = &oauthConfig{Scopes: []string{"read", "write"}} })},
			serverDiff{Restarted: []string{"w"}}},
		{"same oauth, another pointer", []serverConfig{with(web("w"), func(c *serverConfig) { c.OAuth = &oauthConfig{Scopes: []string{"read"}} })},
			[]serverConfig{with(web("w"), func(c *serverConfig) { c.OAuth = &oauthConfig{Scopes: []string{"read"}} })},
			serverDiff{Unchanged: []string{"w"}}},
		{"moved to another file", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Source = "/ws/.harness/config.toml" })},
			serverDiff{Restarted: []string{"a"}}},
		{"roots only", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Roots = []string{"/srv"} })},
			serverDiff{Rerooted: []string{"a"}}},
		{"no roots to an empty list", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Roots = []string{} })},
			serverDiff{Rerooted: []string{"a"}}},
		{"roots and env", []serverConfig{base("a")}, []serverConfig{with(base("a"), func(c *serverConfig) { c.Roots = []string{"/srv"}; c.Env["X"] = "1" })},
			serverDiff{Restarted: []string{"a"}}},
		{"reordered", []serverConfig{base("a"), base("b")}, []serverConfig{base("b"), base("a")},
			serverDiff{Unchanged: []string{"b", "a"}}},
		{"everything at once", []serverConfig{base("keep"), base("change"), base("drop")},
			[]serverConfig{base("new"), with(base("change"), func(c *serverConfig) { c.Env["TOKEN"] = "rotated" }), base("keep")},
			serverDiff{Added: []string{"new"}, Removed: []string{"drop"}, Restarted: []string{"change"}, Unchanged: []string{"keep"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diffServers(tt.old, tt.next)
			if !slices.Equal(got.Added, tt.want.Added) || !slices.Equal(got.Removed, tt.want.Removed) ||
				!slices.Equal(got.Restarted, tt.want.Restarted) || !slices.Equal(got.Rerooted, tt.want.Rerooted) ||
				!slices.Equal(got.Unchanged, tt.want.Unchanged) {
				t.Errorf("diffServers() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// gateCall is a call of the fake server's gate tool in flight: the server
// holds it until release.
type gateCall struct {
	fifo   *os.File
	result chan error
}

// startGateCall calls the gate tool of server in scope and returns once
// the server is inside the call.
func startGateCall(t *testing.T, scope *runScope, server string) *gateCall {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gate")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	args, _ := json.Marshal(map[string]string{"message": path})
	g := &gateCall{result: make(chan error, 1)}
	go func() {
		res, err := scope.callTool(t.Context(), server, "gate", args)
		if err == nil && resultToText(res) != "released" {
			err = errors.New("gate answered " + resultToText(res))
		}
		g.result <- err
	}()
	// Opening the FIFO for writing returns once the server opened it: the
	// call is in flight.
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	g.fifo = f
	return g
}

// release lets the server answer and returns the call's error.
func (g *gateCall) release(t *testing.T) error {
	t.Helper()
	g.fifo.Close()
	select {
	case err := <-g.result:
		return err
	case <-time.After(waitLimit):
		t.Fatal("gate call did not end after release")
		return nil
	}
}

// TestRegistryReload swaps the global servers while a run scope uses them:
// calls in flight on a restarted and a removed server finish on their old
// connections; later calls of the old scope go to the replacement or say
// the server was removed; the old scope does not see the added server, a
// new scope does; the unchanged server is the same, never restarted.
func TestRegistryReload(t *testing.T) {
	t.Parallel()
	keep := namedFake(t, "keep", "gate")
	change := namedFake(t, "change", "gate")
	drop := namedFake(t, "drop", "gate")
	reg := startRegistry(t, []serverConfig{keep, change, drop}, registryOptions{Restart: true})
	waitRegistryReady(t, reg)
	kept := reg.server("keep")
	old := reg.newScope(discardLogger())
	t.Cleanup(old.close)

	inChange := startGateCall(t, old, "change")
	inDrop := startGateCall(t, old, "drop")

	changed := change
	changed.Env = maps.Clone(change.Env)
	changed.Env["ROTATED"] = "yes"
	added := namedFake(t, "added", "gate")
	d, started, err := reg.reload([]serverConfig{keep, changed, added})
	if err != nil {
		t.Fatalf("reload() = %v", err)
	}
	want := serverDiff{Added: []string{"added"}, Removed: []string{"drop"}, Restarted: []string{"change"}, Unchanged: []string{"keep"}}
	if !slices.Equal(d.Added, want.Added) || !slices.Equal(d.Removed, want.Removed) || !slices.Equal(d.Restarted, want.Restarted) || !slices.Equal(d.Unchanged, want.Unchanged) {
		t.Fatalf("reload() = %+v, want %+v", d, want)
	}

	// The replacements start while the old servers finish their calls.
	select {
	case <-started:
	case <-time.After(waitLimit):
		t.Fatal("the started servers made no first attempt")
	}
	for _, name := range []string{"change", "added"} {
		if st := statusOf(t, reg, name); st.Status != statusReady {
			t.Errorf("status of %q after the reload = %q (%s), want %q", name, st.Status, st.Error, statusReady)
		}
	}

	if err := inChange.release(t); err != nil {
		t.Errorf("call in flight on the restarted server: %v", err)
	}
	if err := inDrop.release(t); err != nil {
		t.Errorf("call in flight on the removed server: %v", err)
	}

	if reg.server("keep") != kept || kept.snapshot().Restarts != 0 {
		t.Errorf("the unchanged server was replaced or restarted")
	}
	if reg.server("drop") != nil {
		t.Errorf("server(drop) after the reload is not nil")
	}
	if got := reg.server("change").cfg.Env["ROTATED"]; got != "yes" {
		t.Errorf("server(change) runs the old configuration")
	}

	echo := json.RawMessage(`{"message":"hi"}`)
	if _, err := old.callTool(t.Context(), "change", "echo", echo); err != nil {
		t.Errorf("old scope: call of the restarted server = %v, want its replacement's answer", err)
	}
	_, err = old.callTool(t.Context(), "drop", "echo", echo)
	if !errors.Is(err, errRemovedByReload) || !errors.Is(err, errServerUnavailable) {
		t.Errorf("old scope: call of the removed server = %v, want errRemovedByReload", err)
	}
	if _, err := old.callTool(t.Context(), "added", "echo", echo); err == nil {
		t.Errorf("old scope: call of the added server succeeded; a run keeps the servers it started with")
	}
	if got, want := old.serverNames(), []string{"change", "drop", "keep"}; !slices.Equal(got, want) {
		t.Errorf("old scope: serverNames() = %v, want %v", got, want)
	}

	fresh := reg.newScope(discardLogger())
	t.Cleanup(fresh.close)
	if got, want := fresh.serverNames(), []string{"added", "change", "keep"}; !slices.Equal(got, want) {
		t.Errorf("new scope: serverNames() = %v, want %v", got, want)
	}
	if _, err := fresh.callTool(t.Context(), "added", "echo", echo); err != nil {
		t.Errorf("new scope: call of the added server = %v", err)
	}
	names := make([]string, 0, 3)
	for _, st := range reg.statuses() {
		names = append(names, st.Name)
	}
	if want := []string{"keep", "change", "added"}; !slices.Equal(names, want) {
		t.Errorf("statuses() names = %v, want %v", names, want)
	}
}

// TestRegistryReloadAfterClose: a closed registry refuses a reload and
// starts nothing.
func TestRegistryReloadAfterClose(t *testing.T) {
	t.Parallel()
	reg := newRegistry(nil, registryOptions{Logger: discardLogger()})
	reg.close()
	if _, _, err := reg.reload([]serverConfig{namedFake(t, "late", "echo")}); err == nil {
		t.Fatal("reload() after close = nil, want an error")
	}
	if reg.server("late") != nil {
		t.Error("reload() after close added a server")
	}
}

// TestRetireWaitsForCallsInFlight: a retired server refuses new calls at
// once, and its drained channel closes only when the last call acquired
// before retire is released.
func TestRetireWaitsForCallsInFlight(t *testing.T) {
	t.Parallel()
	ms := newManagedServer(namedFake(t, "srv", "echo"), false, discardLogger())
	if _, err := ms.open(t.Context(), clientOptions{Logger: discardLogger()}, func() {}); err != nil {
		t.Fatalf("open() = %v", err)
	}
	t.Cleanup(ms.stop)
	_, first, err := ms.acquire()
	if err != nil {
		t.Fatalf("acquire() = %v", err)
	}
	_, second, err := ms.acquire()
	if err != nil {
		t.Fatalf("acquire() = %v", err)
	}
	drained := ms.retire(errRemovedByReload)
	if _, _, err := ms.acquire(); !errors.Is(err, errRemovedByReload) || !strings.Contains(err.Error(), `server "srv"`) {
		t.Errorf("acquire() after retire = %v, want errRemovedByReload naming the server", err)
	}
	first()
	first() // a second release of the same call counts once
	select {
	case <-drained:
		t.Fatal("drained closed with a call still in flight")
	default:
	}
	second()
	select {
	case <-drained:
	default:
		t.Fatal("drained still open once every call was released")
	}
	select {
	case <-ms.retire(errRestartedByReload):
	default:
		t.Fatal("retire() of an idle server returned an open channel")
	}
}

// TestReloaderAppliesSettings reloads a daemon's parts in process: the
// API keys, [connect_mcp] allow_hosts and the runs' default model and
// max_steps change, the new servers' secrets are redacted, settings that
// need a restart are named in a warning, and a configuration that is bad,
// or that would leave a public address without keys, is refused with the
// running one kept.
func TestReloaderAppliesSettings(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	path := filepath.Join(home, "config.toml")
	write := func(config string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key := func(name, token string) string {
		sum := sha256.Sum256([]byte(token))
		return fmt.Sprintf("[[auth.keys]]\nname = %q\ntoken_sha256 = %q\nscopes = [\"admin\"]\n\n", name, hex.EncodeToString(sum[:]))
	}
	getenv := func(string) (string, bool) { return "", false }
	write("[model]\nname = \"openai/first\"\n\n" + key("old", "old-token-0123456789"))
	load := loadOptions{Home: home, Getenv: getenv}
	cfg, _, err := checkConfig(load)
	if err != nil {
		t.Fatal(err)
	}
	reg := startRegistry(t, cfg.Servers, registryOptions{})
	f := newFakeModel(t, "openai")
	opts := runOptionsOver(t, reg, f, home, nil)
	opts.Model = cfg.Model.spec()
	runs := newRunsWith(t, opts)
	a := newAPI(runs, reg, cfg.AuthKeys, runs.opts.Metrics, nil, nil)
	logs := newLogRecorder()
	rl := &daemon{opts: serveOptions{addr: "0.0.0.0:8080"}, load: load, started: cfg, reg: reg, api: a, runs: runs, metrics: runs.opts.Metrics,
		secrets: reg.secrets(), logger: logs.logger()} // as in serve: one live redactor
	keyNames := func() []string {
		var names []string
		for _, k := range a.authKeys() {
			names = append(names, k.Name)
		}
		return names
	}

	const header = "Bearer reload-secret-0123456789"
	write("max_concurrent_runs = 3\nallowed_hosts = [\"harness.internal\"]\n\n[model]\nname = \"openai/second\"\nmax_steps = 7\n\n" +
		"[connect_mcp]\nallow_hosts = [\"*.tools.example\"]\n\n" +
		key("new", "new-token-0123456789") +
		"[mcp_servers.web]\nurl = \"http://127.0.0.1:1/mcp\"\nenabled = false\nheaders = { Authorization = \"" + header + "\" }\n\n" +
		"[telemetry]\nendpoint = \"http://collector.internal:4318\"\n")
	if err := rl.reload(); err != nil {
		t.Fatalf("reload() = %v", err)
	}
	if got := keyNames(); !slices.Equal(got, []string{"new"}) {
		t.Errorf("API keys after the reload = %v, want [new]", got)
	}
	if model, steps := runs.defaults(); model.Model != "second" || steps != 7 {
		t.Errorf("run defaults after the reload = %s, %d steps, want second, 7", model.Model, steps)
	}
	if got := runs.env.allowHosts(); !slices.Equal(got, []string{"*.tools.example"}) {
		t.Errorf("[connect_mcp] allow_hosts after the reload = %v, want [*.tools.example]", got)
	}
	for what, rd := range map[string]*redactor{"daemon log": rl.secrets.load(), "runs": runs.env.secrets.load(), "API": a.globalSecrets.load()} {
		if got := rd.redact("sent " + header); strings.Contains(got, "reload-secret") {
			t.Errorf("%s redactor after the reload: %q, want the new server's header hidden", what, got)
		}
	}
	var warned string
	for _, r := range logs.snapshot() {
		if strings.HasPrefix(r.Message, "settings changed that apply only after a restart") {
			warned = r.Attrs["settings"]
		}
	}
	if warned != "[max_concurrent_runs allowed_hosts telemetry]" {
		t.Errorf("restart warning names %q, want [max_concurrent_runs allowed_hosts telemetry]", warned)
	}

	for _, tt := range []struct {
		name, config, want string
	}{
		{"no keys on a public address", "[model]\nname = \"openai/third\"\n", "no API keys are configured"},
		{"wrong type", key("other", "other-token-0123456789") + "[mcp_servers.bad]\ncommand = \"x\"\nargs = \"one\"\n", path},
	} {
		write(tt.config)
		err := rl.reload()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: reload() = %v, want an error containing %q", tt.name, err, tt.want)
		}
		if got := keyNames(); !slices.Equal(got, []string{"new"}) {
			t.Errorf("%s: API keys after the refused reload = %v, want [new] kept", tt.name, got)
		}
		if model, _ := runs.defaults(); model.Model != "second" {
			t.Errorf("%s: default model after the refused reload = %s, want second kept", tt.name, model.Model)
		}
		if reg.server("web") == nil || reg.server("bad") != nil {
			t.Errorf("%s: servers after the refused reload changed", tt.name)
		}
	}
}

// BenchmarkRegistryReload restarts every one of n fake stdio servers per
// iteration (their env changes) and reports how long the swap takes
// (reload returns) and how long until every replacement has connected.
func BenchmarkRegistryReload(b *testing.B) {
	for _, n := range []int{1, 10, 50} {
		b.Run(fmt.Sprintf("servers=%d", n), func(b *testing.B) {
			configs := func(generation int) []serverConfig {
				out := make([]serverConfig, n)
				for i := range out {
					cfg := fakeServerConfig(b, "echo")
					cfg.Name = fmt.Sprintf("s%d", i)
					cfg.Env = maps.Clone(cfg.Env)
					cfg.Env["GENERATION"] = strconv.Itoa(generation)
					out[i] = cfg
				}
				return out
			}
			reg := newRegistry(configs(0), registryOptions{Logger: discardLogger(), Restart: true})
			b.Cleanup(reg.close)
			if err := reg.waitReady(b.Context()); err != nil {
				b.Fatal(err)
			}
			var swap, ready time.Duration
			b.ResetTimer()
			for i := range b.N {
				start := time.Now()
				d, started, err := reg.reload(configs(i + 1))
				swap += time.Since(start)
				if err != nil || len(d.Restarted) != n {
					b.Fatalf("reload() = %+v, %v; want %d restarted", d, err, n)
				}
				<-started
				ready += time.Since(start)
				for _, st := range reg.statuses() {
					if st.Status != statusReady {
						b.Fatalf("server %s is %s after the reload: %s", st.Name, st.Status, st.Error)
					}
				}
			}
			b.ReportMetric(float64(swap.Microseconds())/float64(b.N), "swap-µs/op")
			b.ReportMetric(float64(ready.Milliseconds())/float64(b.N), "ready-ms/op")
		})
	}
}

// racingReloads is how many reloads TestRegistryReloadRacesClose makes
// before it closes the registry, the reloads going on meanwhile: enough to
// have servers starting and retiring as close begins, few enough that
// close does not wait on hundreds of them.
const racingReloads = 20

// TestRegistryReloadRacesClose reloads over and over while scopes read the
// set and the registry closes: close waits for what reloads started and
// retired (no goroutine or process is left), and every reload after it is
// refused.
func TestRegistryReloadRacesClose(t *testing.T) {
	tag := checkNoLeaks(t)
	a, b := namedFake(t, "a", "echo"), namedFake(t, "b", "echo")
	for _, cfg := range []*serverConfig{&a, &b} {
		cfg.Env = maps.Clone(cfg.Env)
		cfg.Env[faultTagEnv] = tag
	}
	reg := newRegistry([]serverConfig{a}, registryOptions{Logger: discardLogger(), Restart: true})
	done, racing := make(chan struct{}), make(chan struct{})
	// Owned by the test; exits once a reload is refused after close.
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			next := []serverConfig{a}
			if i%2 == 0 {
				next = append(next, b)
			}
			if _, _, err := reg.reload(next); err != nil {
				return
			}
			if i == racingReloads {
				close(racing)
			}
			scope := reg.newScope(discardLogger())
			scope.toolSets()
			scope.close()
		}
	}()
	select {
	case <-racing:
	case <-done:
		t.Fatal("a reload was refused before close")
	case <-time.After(waitLimit):
		t.Fatalf("%d reloads did not happen within %v", racingReloads, waitLimit)
	}
	reg.close()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("reloads went on after close")
	}
	for _, st := range reg.statuses() {
		// One stopped while it connected stays failed.
		if st.Status != statusClosed && st.Status != statusFailed {
			t.Errorf("server %s is %s after close, want closed or failed", st.Name, st.Status)
		}
	}
}
