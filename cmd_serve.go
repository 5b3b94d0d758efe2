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
	"sync"
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

// serve implements "harnessd serve": it parses the flags, starts the
// daemon and runs it until ctx ends or the API server fails.
func (a *app) serve(ctx context.Context, args []string) error {
	o, err := a.parseServe(args)
	if err != nil {
		return err
	}
	// From here SIGHUP reloads the configuration instead of ending the
	// process; it is taken once the daemon serves.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	d, err := a.startDaemon(o)
	if err != nil {
		return err
	}
	defer d.store.close()
	return d.run(ctx, hup)
}

// serveOptions are the flags of harnessd serve, parsed and checked.
type serveOptions struct {
	addr     string
	insecure bool
	// flags are the flags that override configuration settings.
	flags       serveFlags
	workspace   string
	logPayloads bool
	logger      *slog.Logger
}

// parseServe parses and checks the flags of harnessd serve. Errors are
// usage errors.
func (a *app) parseServe(args []string) (serveOptions, error) {
	var (
		o serveOptions
		f commonFlags
	)
	fs := newFlagSet("serve", a.stderr, serveUsage)
	f.register(fs, a.getenv)
	fs.StringVar(&o.addr, "addr", defaultAddr(a.getenv), "address to listen on (env HARNESS_ADDR)")
	fs.BoolVar(&o.insecure, "insecure", false, "allow a non-loopback --addr without API keys")
	fs.IntVar(&o.flags.maxConns, "max-connections", 0, fmt.Sprintf("cap on open API connections (env HARNESS_MAX_CONNECTIONS, max_connections; default %d)", defaultMaxConnections))
	registerTextFlags(fs, &o.flags)
	registerLimitFlags(fs, &o.flags.limits)
	registerBudgetFlags(fs, &o.flags.budgets)
	logPayloads, payloadsErr := registerLogPayloadsFlag(fs, a.getenv)
	logger, workspace, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return o, err
	}
	if payloadsErr != nil {
		return o, usageError("%v", payloadsErr)
	}
	if fs.NArg() > 0 {
		return o, usageError("serve: unexpected argument %q", fs.Arg(0))
	}
	o.workspace, o.logPayloads, o.logger = workspace, *logPayloads, logger
	return o, nil
}

// checkAuth refuses API keys serve would refuse to start with: none on an
// address that is not loopback, unless --insecure.
func (o serveOptions) checkAuth(keys []authKey) error {
	if len(keys) == 0 && !o.insecure && !isLoopbackAddr(o.addr) {
		return fmt.Errorf("--addr %s is not a loopback address and no API keys are configured: add [[auth.keys]] or HARNESS_API_KEYS, or pass --insecure", o.addr)
	}
	return nil
}

// A daemon is harnessd serve once started: the API server on its
// listener, the registry of global servers, the runs and their store.
// Only serve's goroutine calls its methods, but for reload and editConfig,
// which the API calls too; what they change is safe for concurrent use by
// the API and the runs.
type daemon struct {
	opts serveOptions
	// load reads the configuration again on reload.
	load loadOptions
	// started is the configuration serve started with, flags applied: the
	// settings a reload does not apply are compared with it.
	started *config
	reg     *registry
	api     *api
	runs    *runManager
	metrics *metrics
	store   *runStore
	// audit is the audit trail (audit.go); nil with [audit] enabled = false.
	audit *auditLog
	// schedules starts the runs of [[schedules]]; nil in tests that build
	// a daemon without serving.
	schedules *scheduler
	// tracer exports the spans of requests, runs and MCP calls; nil when
	// tracing is off. shutdown flushes it.
	tracer *tracer
	// secrets are those the daemon's logger hides.
	secrets *liveRedactor
	logger  *slog.Logger
	srv     *http.Server
	// serveErr gets the API server's error when it stops serving.
	serveErr chan error
	// stopping is closed at shutdown, once the runs ended: it ends the
	// event streams that are left.
	stopping chan struct{}

	// reloadMu serialises reloads (SIGHUP, the API) and edits of the
	// config files through the API (editConfig).
	reloadMu sync.Mutex
}

// startDaemon loads the configuration, listens, stops what a previous
// instance left, opens the run store, starts the global servers (in the
// background) and serves the API. Errors in the configuration or the
// flags it checks are usage errors. The caller closes d.store.
func (a *app) startDaemon(o serveOptions) (*daemon, error) {
	d := &daemon{opts: o, logger: o.logger}
	home, err := defaultHome(a.getenv)
	if err != nil {
		return nil, usageError("%v", err)
	}
	// Resolved once: the runs' profiles expand ${HARNESS_WORKSPACE} as
	// the files do.
	d.load, err = loadOptions{Home: home, Workspace: o.workspace, Getenv: a.getenv, Logger: d.logger}.resolve()
	if err != nil {
		return nil, usageError("%v", err)
	}
	cfg, err := loadConfig(d.load)
	if err != nil {
		return nil, usageError("%v", err)
	}
	// Every line the daemon logs passes here; servers' loggers add their
	// own values (serverLogger), a reload the new servers' values.
	d.secrets = newLiveRedactor(newRedactor(daemonSecrets(cfg, a.getenv)...))
	d.logger = redactLoggerLive(d.logger, d.secrets)
	d.load.Logger = d.logger
	if err := o.checkAuth(cfg.AuthKeys); err != nil {
		return nil, usageError("%v", err)
	}
	if o.flags.maxConns < 0 {
		return nil, usageError("--max-connections %d: not positive; give a positive number", o.flags.maxConns)
	}
	if err := errors.Join(o.flags.limits.checkFlags()...); err != nil {
		return nil, usageError("%v", err)
	}
	o.flags.overlay(cfg)
	d.started = cfg
	keep, err := cfg.KeptRuns.retention()
	if err != nil {
		return nil, usageError("%v", err)
	}
	runBudgets, err := cfg.Budgets.limits()
	if err != nil {
		return nil, usageError("%v", err)
	}
	// Requests outside any run's call get the daemon-wide budget.
	outsideInput, err := outsideInputOf(cfg, a.getenv, d.logger)
	if err != nil {
		return nil, usageError("%v", err)
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", o.addr, err)
	}
	ln = newLimitListener(ln, cmp.Or(cfg.MaxConnections, defaultMaxConnections))
	// Before any server starts: stop what a previous instance left.
	groups, err := openProcGroups(filepath.Join(home, "servers"), d.logger)
	if err != nil {
		ln.Close()
		return nil, err
	}
	groups.stopLeftovers()
	if d.store, err = openRunStore(filepath.Join(home, "runs"), d.logger); err != nil {
		ln.Close()
		return nil, err
	}
	if !cfg.Audit.Off {
		if d.audit, err = openAuditLog(filepath.Join(home, "audit"), cfg.Audit, d.logger); err != nil {
			ln.Close()
			return nil, err
		}
	}
	d.startServing(a, cfg, groups, &keep, runBudgets, outsideInput, ln)
	return d, nil
}

// noModelHint says how to give the daemon a model; a daemon started
// without one logs it.
const noModelHint = "set HARNESS_MODEL=provider/model (like openai/gpt-4o, anthropic/claude-sonnet-4-5 or google/gemini-2.5-flash) and the provider's key " +
	"(OPENAI_API_KEY, ANTHROPIC_API_KEY, GEMINI_API_KEY, ...; OPENAI_BASE_URL for a compatible server), or [model] name in config.toml; " +
	"under systemd put the variables in /etc/harnessd/env, then restart"

// startServing builds the registry (answering requests outside runs' calls
// by outside), the runs (with the default budgets) and the API over cfg and
// serves the API on ln.
func (d *daemon) startServing(a *app, cfg *config, groups *procGroups, keep *retention, budgets budgetLimits, outside *inputPolicy, ln net.Listener) {
	logger := d.logger
	// Tokens, DPoP keys and assertions join the daemon's live redactor
	// (d.secrets, which every run's and session's derives from) before
	// their first use: newRegistry hands it to the OAuth clients.
	oauth := newOAuthClients(newTokenStore(oauthDir(d.load.Home)), logger)
	d.tracer = newTracer(cfg.Telemetry, logger)
	d.metrics = newMetrics()
	d.metrics.outsideSampling = outside.Outside
	d.metrics.tracer = d.tracer
	d.reg = newRegistry(cfg.Servers, registryOptions{
		Logger: logger,
		Client: clientOptions{Getenv: a.getenv, ProcessGroups: groups,
			OAuth: oauth, Tracer: d.tracer,
			Input: outside, Cache: newResponseCache(),
			LogPayloads: d.opts.logPayloads, Secrets: d.secrets},
		Restart: true,
		Pins:    newPinStore(pinsDir(d.load.Home), logger, d.metrics, d.audit),
	})
	model := cfg.Model.spec()
	d.runs = newRunManager(runManagerOptions{
		Registry:   d.reg,
		Tracer:     d.tracer,
		Logger:     logger,
		Home:       d.load.Home,
		Getenv:     d.load.Getenv,
		Model:      model,
		MaxSteps:   cfg.Model.MaxSteps,
		AllowHosts: cfg.ConnectAllowHosts,
		Metrics:    d.metrics,
		Audit:      d.audit,
		Store:      d.store,
		Retention:  keep,
		Limits:     cfg.Limits,
		Webhooks:   cfg.Webhooks,
		Budgets:    budgets,
		Prices:     cfg.Model.Prices,

		SamplingModels: cfg.Model.SamplingModels,
	})
	d.stopping = make(chan struct{})
	d.api = newAPI(d.runs, d.reg, cfg.AuthKeys, d.metrics, logger, d.stopping)
	d.api.hosts = newHostPolicy(d.opts.addr, cfg.AllowedHosts)
	d.api.audit = d.audit
	d.api.tracer = d.tracer
	d.schedules = newScheduler(d.runs, cfg.Schedules, nil, logger)
	d.api.schedules = d.schedules
	d.api.manager = d
	// The API and the servers are starting: a schedule that names another
	// tenant's conversation is not worth stopping them for (a reload
	// refuses it); each of its runs is refused and says why.
	if err := d.runs.checkScheduleConversations(cfg.Schedules); err != nil {
		logger.Error("schedules name conversations of other tenants; their runs will be refused", "err", err)
	}
	d.srv = newHTTPServer(d.api, logger, readHeaderTimeout)
	d.serveErr = make(chan error, 1)
	// Owned by the daemon; exits when the server is shut down.
	go func() { d.serveErr <- d.srv.Serve(ln) }()
	logger.Info("harnessd listening", "addr", ln.Addr().String(), "version", buildVersion, "servers", len(cfg.Servers),
		"auth", len(cfg.AuthKeys) > 0, "config_files", cfg.Files, "model", model.name(), "traces", cfg.Telemetry.Endpoint)
	if model.Provider == "" {
		logger.Warn("no model configured: POST /v1/runs is refused until one is set", "how", noModelHint)
	}
	d.schedules.start()
}

// run serves until ctx ends or the API server fails, reloading the
// configuration on each value of hup, then shuts the daemon down. It
// returns the API server's failure, if that ended it.
func (d *daemon) run(ctx context.Context, hup <-chan os.Signal) error {
	var serveFailed error
wait:
	for {
		select {
		case <-ctx.Done():
			d.logger.Info("shutting down")
			break wait
		case err := <-d.serveErr:
			serveFailed = fmt.Errorf("serve: %w", err)
			break wait
		case <-hup:
			d.reload() // it logs its outcome
		}
	}
	d.schedules.close()
	d.shutdown()
	if serveFailed != nil {
		return serveFailed
	}
	d.logger.Info("stopped")
	return nil
}

// shutdown stops the daemon within shutdownBudget: it stops accepting at
// once, but cancels the runs while their event streams are still open, so
// followers see each run end; then it ends the streams that are left and
// closes the servers. It blocks until then.
func (d *daemon) shutdown() {
	budget, cancel := context.WithTimeout(context.Background(), shutdownBudget)
	defer cancel()
	runsCtx, cancelRuns := context.WithTimeout(budget, shutdownBudget-serverCloseBound)
	defer cancelRuns()
	httpDone := make(chan error, 1)
	// Owned by shutdown; exits when every connection is closed or runsCtx
	// is done.
	go func() { httpDone <- d.srv.Shutdown(runsCtx) }()
	if err := d.runs.shutdown(runsCtx); err != nil {
		d.logger.Warn("runs still ending at shutdown", "err", err)
	}
	close(d.stopping)
	if err := <-httpDone; err != nil {
		d.srv.Close()
	}
	closed := make(chan struct{})
	// Owned by shutdown; exits when every server is closed (bounded by the
	// stop ladder).
	go func() {
		d.reg.close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-budget.Done():
		d.logger.Warn("servers still closing at the shutdown deadline")
	}
	d.audit.close()
	// Last, so that the spans of the runs' and servers' ends go too,
	// within what is left of the budget.
	if err := d.tracer.shutdown(budget); err != nil {
		d.logger.Warn("spans still queued at the shutdown deadline were dropped", "err", err)
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

// daemonSecrets returns what the daemon hides from every line it logs and
// everything it stores and answers, before anything else is added: the
// secrets of cfg and the model's keys that getenv holds.
func daemonSecrets(cfg *config, getenv func(string) (string, bool)) []string {
	return append(cfg.secretValues(), modelSecrets(getenv)...)
}
