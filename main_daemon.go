package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// This file holds the daemon: harnessd serve, its start-up and its
// shutdown.

const serveUsage = `Usage: harnessd [serve] [flags]

Loads the configuration, connects every global MCP server in the background
and serves the HTTP API.

`

// shutdownBudget bounds shutdown as a whole. Closing the servers is
// bounded by their stop ladder (serverCloseBound), so they get that much
// at the end; the runs and the API's connections get the rest first.
const (
	shutdownBudget   = 10 * time.Second
	serverCloseBound = 3 * stopGrace
)

// serve implements "harnessd serve".
func (a *app) serve(ctx context.Context, args []string) error {
	var (
		f        commonFlags
		addr     string
		insecure bool
		maxConns int
		keepRuns keptRunsSettings
		limits   runLimits
		budgets  budgetSettings
	)
	fs := newFlagSet("serve", a.stderr, serveUsage)
	f.register(fs, a.getenv)
	defaultAddr, ok := a.getenv("HARNESS_ADDR")
	if !ok || defaultAddr == "" {
		defaultAddr = "127.0.0.1:8080"
	}
	fs.StringVar(&addr, "addr", defaultAddr, "address to listen on (env HARNESS_ADDR)")
	fs.BoolVar(&insecure, "insecure", false, "allow a non-loopback --addr without API keys")
	fs.IntVar(&maxConns, "max-connections", 0, fmt.Sprintf("cap on open API connections (env HARNESS_MAX_CONNECTIONS, max_connections; default %d)", defaultMaxConnections))
	for _, k := range []struct {
		set        *keptRunsSetting
		name, help string
	}{
		{&keepRuns.runs, "max-kept-runs", fmt.Sprintf("finished runs kept, newest first; 0 for no bound (env HARNESS_MAX_KEPT_RUNS, max_kept_runs; default %d)", defaultMaxKeptRuns)},
		{&keepRuns.age, "max-kept-run-age", fmt.Sprintf("finished runs older than this are dropped; 0 for no bound (env HARNESS_MAX_KEPT_RUN_AGE, max_kept_run_age; default %s)", defaultMaxKeptRunAge)},
		{&keepRuns.bytes, "max-kept-run-bytes", fmt.Sprintf("bytes the kept runs take on disk; 0 for no bound (env HARNESS_MAX_KEPT_RUN_BYTES, max_kept_run_bytes; default %d)", defaultMaxKeptRunBytes)},
	} {
		k.set.source = "--" + k.name
		fs.StringVar(&k.set.value, k.name, "", k.help)
	}
	registerLimitFlags(fs, &limits)
	registerBudgetFlags(fs, &budgets)
	logPayloads, payloadsErr := registerLogPayloadsFlag(fs, a.getenv)
	logger, workspace, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return err
	}
	if payloadsErr != nil {
		return usageError("%v", payloadsErr)
	}
	if fs.NArg() > 0 {
		return usageError("serve: unexpected argument %q", fs.Arg(0))
	}
	// From here SIGHUP reloads the configuration instead of ending the
	// process; it is taken once the daemon serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	home, err := defaultHome(a.getenv)
	if err != nil {
		return usageError("%v", err)
	}
	load := loadOptions{Home: home, Workspace: workspace, Getenv: a.getenv, Logger: logger}
	cfg, err := loadConfig(load)
	if err != nil {
		return usageError("%v", err)
	}
	// Every line the daemon logs passes here; servers' loggers add their
	// own values (serverLogger), a reload the new servers' values.
	logSecrets := newLiveRedactor(baseSecrets(cfg.Servers, a.getenv))
	logger = redactLoggerLive(logger, logSecrets)
	load.Logger = logger
	checkAuth := func(keys []authKey) error {
		if len(keys) == 0 && !insecure && !isLoopbackAddr(addr) {
			return fmt.Errorf("--addr %s is not a loopback address and no API keys are configured: add [[auth.keys]] or HARNESS_API_KEYS, or pass --insecure", addr)
		}
		return nil
	}
	if err := checkAuth(cfg.AuthKeys); err != nil {
		return usageError("%v", err)
	}
	if maxConns < 0 {
		return usageError("--max-connections %d: not positive; give a positive number", maxConns)
	}
	if err := errors.Join(limits.checkFlags()...); err != nil {
		return usageError("%v", err)
	}
	flags := serveFlags{limits: limits, keepRuns: keepRuns, maxConns: maxConns, budgets: budgets}
	flags.overlay(cfg)
	maxConns = cmp.Or(cfg.MaxConnections, defaultMaxConnections)
	keep, err := cfg.KeptRuns.retention()
	if err != nil {
		return usageError("%v", err)
	}
	runBudgets, err := cfg.Budgets.limits()
	if err != nil {
		return usageError("%v", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	ln = newLimitListener(ln, maxConns)
	// Before any server starts: stop what a previous instance left.
	groups, err := openProcGroups(filepath.Join(home, "servers"), logger)
	if err != nil {
		ln.Close()
		return err
	}
	groups.stopLeftovers()
	store, err := openRunStore(filepath.Join(home, "runs"), logger)
	if err != nil {
		ln.Close()
		return err
	}
	defer store.close()

	reg := newRegistry(cfg.Servers, registryOptions{
		Logger: logger,
		Client: clientOptions{Roots: []string{workspace}, Getenv: a.getenv, ProcessGroups: groups,
			OAuth: newOAuthClients(newTokenStore(oauthDir(home)), logger),
			Input: outsideRunInput(cfg.Model, a.getenv, logger), Cache: newResponseCache(),
			LogPayloads: *logPayloads},
		Restart: true,
	})
	m := newMetrics()
	model := cfg.Model.spec()
	runs := newRunManager(runManagerOptions{
		Registry:   reg,
		Logger:     logger,
		Home:       home,
		Getenv:     a.getenv,
		Model:      model,
		MaxSteps:   cfg.Model.MaxSteps,
		AllowHosts: cfg.ConnectAllowHosts,
		Metrics:    m,
		Store:      store,
		Retention:  &keep,
		Limits:     cfg.Limits,
		Budgets:    runBudgets,
		Prices:     cfg.Model.Prices,

		SamplingModels: cfg.Model.SamplingModels,
	})
	stopping := make(chan struct{})
	api := newAPI(runs, reg, cfg.AuthKeys, m, logger, stopping)
	api.hosts = newHostPolicy(addr, cfg.AllowedHosts)
	srv := newHTTPServer(api, logger, readHeaderTimeout)
	serveErr := make(chan error, 1)
	// Owned by serve; exits when the server is shut down below.
	go func() { serveErr <- srv.Serve(ln) }()
	logger.Info("harnessd listening", "addr", ln.Addr().String(), "version", buildVersion, "servers", len(cfg.Servers),
		"auth", len(cfg.AuthKeys) > 0, "config_files", cfg.Files, "model", model.name())

	rl := &reloader{opts: load, started: cfg, flags: flags,
		checkAuth: checkAuth, reg: reg, api: api, runs: runs, metrics: m, secrets: logSecrets, logger: logger}
	var serveFailed error
wait:
	for {
		select {
		case <-ctx.Done():
			logger.Info("shutting down")
			break wait
		case err := <-serveErr:
			serveFailed = fmt.Errorf("serve: %w", err)
			break wait
		case <-hup:
			rl.reload() // it logs its outcome
		}
	}
	shutdown(logger, srv, runs, reg, stopping)
	if serveFailed != nil {
		return serveFailed
	}
	logger.Info("stopped")
	return nil
}

// shutdown stops the daemon within shutdownBudget: it stops accepting at
// once, but cancels the runs while their event streams are still open, so
// followers see each run end; then it ends the streams that are left and
// closes the servers. It blocks until then.
func shutdown(logger *slog.Logger, srv *http.Server, runs *runManager, reg *registry, stopping chan<- struct{}) {
	budget, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	runsCtx, cancelRuns := context.WithTimeout(budget, shutdownBudget-serverCloseBound)
	defer cancelRuns()
	httpDone := make(chan error, 1)
	// Owned by shutdown; exits when every connection is closed or runsCtx
	// is done.
	go func() { httpDone <- srv.Shutdown(runsCtx) }()
	if err := runs.shutdown(runsCtx); err != nil {
		logger.Warn("runs still ending at shutdown", "err", err)
	}
	close(stopping)
	if err := <-httpDone; err != nil {
		srv.Close()
	}
	closed := make(chan struct{})
	// Owned by shutdown; exits when every server is closed (bounded by the
	// stop ladder).
	go func() {
		reg.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-budget.Done():
		logger.Warn("servers still closing at the shutdown deadline")
	}
}

// newHTTPServer returns the API's server: a client must send its request
// headers within headerTimeout (the daemon's is readHeaderTimeout), and
// idle connections close after idleTimeout. No overall read or write
// timeout: event streams are long.
func newHTTPServer(handler http.Handler, logger *slog.Logger, headerTimeout time.Duration) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: headerTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
}

// isLoopbackAddr reports whether a listen address only binds loopback.
func isLoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
