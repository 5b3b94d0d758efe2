package main

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds the HTTP API: routes, auth scopes, JSON errors, run event
// streams (SSE) and the Prometheus metrics.

// Auth scopes. admin implies every scope; runs:write implies runs:read.
const (
	scopeRunsRead  = "runs:read"
	scopeRunsWrite = "runs:write"
	scopeAdmin     = "admin"
)

// API limits.
const (
	maxRequestBody    = 1 << 20
	sseHeartbeat      = 15 * time.Second
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
)

// An api serves harnessd's HTTP routes. Safe for concurrent use.
type api struct {
	runs    *runManager
	reg     *registry
	keys    []authKey
	metrics *metrics
	logger  *slog.Logger
	// stopping is closed at shutdown so event streams end.
	stopping <-chan struct{}
	mux      *http.ServeMux
}

func newAPI(runs *runManager, reg *registry, keys []authKey, m *metrics, logger *slog.Logger, stopping <-chan struct{}) *api {
	a := &api{runs: runs, reg: reg, keys: keys, metrics: m, logger: logger, stopping: stopping, mux: http.NewServeMux()}
	a.route("/v1/runs", map[string]route{
		http.MethodPost: {scopeRunsWrite, a.createRun},
		http.MethodGet:  {scopeRunsRead, a.listRuns},
	})
	a.route("/v1/runs/{id}", map[string]route{http.MethodGet: {scopeRunsRead, a.getRun}})
	a.route("/v1/runs/{id}/events", map[string]route{http.MethodGet: {scopeRunsRead, a.runEvents}})
	a.route("/v1/runs/{id}/cancel", map[string]route{http.MethodPost: {scopeRunsWrite, a.cancelRun}})
	a.route("/v1/mcp/servers", map[string]route{http.MethodGet: {scopeRunsRead, a.listServers}})
	a.route("/healthz", map[string]route{http.MethodGet: {"", a.healthz}})
	a.route("/readyz", map[string]route{http.MethodGet: {"", a.readyz}})
	a.route("/metrics", map[string]route{http.MethodGet: {scopeRunsRead, a.serveMetrics}})
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
	})
	return a
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mux.ServeHTTP(w, r)
}

// A route is one method's handler and the scope it needs ("" for none).
type route struct {
	scope   string
	handler func(http.ResponseWriter, *http.Request, authInfo)
}

// route registers a path whose methods dispatch to handlers; any other
// method is a JSON 405 naming the allowed ones.
func (a *api) route(pattern string, methods map[string]route) {
	allowed := make([]string, 0, len(methods))
	for m := range methods {
		allowed = append(allowed, m)
	}
	sort.Strings(allowed)
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rt, ok := methods[r.Method]
		if !ok {
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
			return
		}
		info, status, err := a.authenticate(r, rt.scope)
		if err != nil {
			if status == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="harnessd"`)
			}
			code := "unauthorized"
			if status == http.StatusForbidden {
				code = "forbidden"
			}
			writeError(w, status, code, err.Error())
			return
		}
		rt.handler(w, r, info)
	})
}

// authInfo is who made a request.
type authInfo struct {
	key    string // the key's name; "" with auth off
	scopes []string
	authOn bool
}

// has reports whether the caller holds scope (auth off holds everything).
func (i authInfo) has(scope string) bool {
	if !i.authOn {
		return true
	}
	for _, s := range i.scopes {
		if s == scopeAdmin || s == scope || (s == scopeRunsWrite && scope == scopeRunsRead) {
			return true
		}
	}
	return false
}

// authenticate checks the bearer token against the configured keys in
// constant time and the key's scopes against need. With no keys
// configured, auth is off.
func (a *api) authenticate(r *http.Request, need string) (authInfo, int, error) {
	if len(a.keys) == 0 {
		return authInfo{}, 0, nil
	}
	if need == "" {
		return authInfo{authOn: true}, 0, nil
	}
	header := r.Header.Get("Authorization")
	token, ok := strings.CutPrefix(header, "Bearer ")
	if !ok || token == "" {
		return authInfo{}, http.StatusUnauthorized, errors.New("missing bearer token: send Authorization: Bearer <token>")
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := -1
	for i := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].TokenSHA256[:]) == 1 {
			match = i
		}
	}
	if match < 0 {
		return authInfo{}, http.StatusUnauthorized, errors.New("invalid bearer token")
	}
	info := authInfo{key: a.keys[match].Name, scopes: a.keys[match].Scopes, authOn: true}
	if !info.has(need) {
		return info, http.StatusForbidden, fmt.Errorf("key %q lacks the %s scope", info.key, need)
	}
	return info, 0, nil
}

// apiError is the body of every error answer.
type apiError struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	var body apiError
	body.Error.Code = code
	body.Error.Message = msg
	writeJSON(w, status, body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// decodeBody decodes a JSON body strictly: at most maxRequestBody bytes,
// no unknown fields, one value.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, maxRequestBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		switch {
		case errors.As(err, &tooBig):
			return fmt.Errorf("request body is over %d bytes", maxRequestBody)
		case errors.Is(err, io.EOF):
			return errors.New("request body is empty: send a JSON object")
		}
		return fmt.Errorf("request body: %v", err)
	}
	if dec.More() {
		return errors.New("request body: more than one JSON value")
	}
	return nil
}

func (a *api) createRun(w http.ResponseWriter, r *http.Request, info authInfo) {
	var req runRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	run, err := a.runs.start(req, info.has(scopeAdmin))
	if err != nil {
		var reqErr *requestError
		if errors.As(err, &reqErr) {
			if reqErr.forbidden {
				writeError(w, http.StatusForbidden, "forbidden", err.Error())
				return
			}
			writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return
		}
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	w.Header().Set("Location", "/v1/runs/"+run.id)
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": run.id, "status": run.view().Status})
}

// runSummary is a run in GET /v1/runs.
type runSummary struct {
	ID        string     `json:"id"`
	Status    string     `json:"status"`
	Model     string     `json:"model"`
	Steps     int        `json:"steps"`
	Error     string     `json:"error,omitempty"`
	CreatedAt time.Time  `json:"created_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
}

func (a *api) listRuns(w http.ResponseWriter, r *http.Request, _ authInfo) {
	status := r.URL.Query().Get("status")
	out := []runSummary{}
	for _, run := range a.runs.list() {
		v := run.view()
		if status != "" && v.Status != status {
			continue
		}
		out = append(out, runSummary{ID: v.ID, Status: v.Status, Model: v.Model, Steps: v.Steps, Error: v.Error, CreatedAt: v.CreatedAt, EndedAt: v.EndedAt})
	}
	writeJSON(w, http.StatusOK, map[string]any{"runs": out})
}

// findRun returns the run named in the path or answers 404.
func (a *api) findRun(w http.ResponseWriter, r *http.Request) *run {
	id := r.PathValue("id")
	run := a.runs.get(id)
	if run == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no run %q (runs are listed at GET /v1/runs)", id))
	}
	return run
}

func (a *api) getRun(w http.ResponseWriter, r *http.Request, _ authInfo) {
	if run := a.findRun(w, r); run != nil {
		writeJSON(w, http.StatusOK, run.view())
	}
}

func (a *api) cancelRun(w http.ResponseWriter, r *http.Request, _ authInfo) {
	run := a.findRun(w, r)
	if run == nil {
		return
	}
	run.cancel()
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": run.id, "status": run.view().Status})
}

// runEvents streams a run's events as SSE: the history after
// Last-Event-ID (or ?after=N) first, then live events, with heartbeat
// comments, ending after the terminal event.
func (a *api) runEvents(w http.ResponseWriter, r *http.Request, _ authInfo) {
	run := a.findRun(w, r)
	if run == nil {
		return
	}
	after := 0
	for _, v := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, "invalid_request", fmt.Sprintf("event id %q: want a non-negative number", v))
			return
		}
		after = n
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	heartbeat := time.NewTicker(sseHeartbeat)
	defer heartbeat.Stop()
	for {
		events, ended, changed := run.eventsAfter(after)
		for _, ev := range events {
			data, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Type, data); err != nil {
				return
			}
			after = ev.Seq
		}
		flusher.Flush()
		if ended && len(events) == 0 {
			return
		}
		if ended {
			continue // deliver anything emitted with the terminal event, then end
		}
		select {
		case <-changed:
		case <-heartbeat.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case <-r.Context().Done():
			return
		case <-a.stopping:
			return
		}
	}
}

func (a *api) listServers(w http.ResponseWriter, r *http.Request, _ authInfo) {
	writeJSON(w, http.StatusOK, map[string]any{"servers": a.reg.statuses()})
}

func (a *api) healthz(w http.ResponseWriter, r *http.Request, _ authInfo) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (a *api) readyz(w http.ResponseWriter, r *http.Request, _ authInfo) {
	if !a.reg.isReady() {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "starting", "message": "global MCP servers are still connecting"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (a *api) serveMetrics(w http.ResponseWriter, r *http.Request, _ authInfo) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	a.metrics.write(w, a.reg.statuses())
}

// latencyBuckets are the tool-call histogram's upper bounds, in seconds.
var latencyBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// metrics counts what /metrics reports. A nil *metrics counts nothing.
// Safe for concurrent use.
type metrics struct {
	mu sync.Mutex
	// guards everything below
	toolCalls   map[[2]string]uint64 // {server, outcome}
	histograms  map[string]*histogram
	runsEnded   map[string]uint64
	runsStarted uint64
	runsActive  int64
}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	count  uint64
}

func newMetrics() *metrics {
	return &metrics{toolCalls: map[[2]string]uint64{}, histograms: map[string]*histogram{}, runsEnded: map[string]uint64{}}
}

func (m *metrics) toolCall(server, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	if server == "" {
		server = "builtin"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.toolCalls[[2]string{server, outcome}]++
	h := m.histograms[server]
	if h == nil {
		h = &histogram{counts: make([]uint64, len(latencyBuckets)+1)}
		m.histograms[server] = h
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(latencyBuckets, s)
	h.counts[i]++
	h.sum += s
	h.count++
}

func (m *metrics) runStarted() {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runsStarted++
	m.runsActive++
}

func (m *metrics) runEnded(status string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runsEnded[status]++
	m.runsActive--
}

// write renders the Prometheus text exposition format.
func (m *metrics) write(w io.Writer, servers []serverStatus) {
	var b strings.Builder
	b.WriteString("# HELP harnessd_mcp_server_up Whether a global MCP server is connected (1) or not (0).\n# TYPE harnessd_mcp_server_up gauge\n")
	for _, s := range servers {
		up := 0
		if s.Status == statusReady {
			up = 1
		}
		fmt.Fprintf(&b, "harnessd_mcp_server_up{server=%s} %d\n", promLabel(s.Name), up)
	}
	b.WriteString("# HELP harnessd_mcp_server_tools Tools a global MCP server offers.\n# TYPE harnessd_mcp_server_tools gauge\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "harnessd_mcp_server_tools{server=%s} %d\n", promLabel(s.Name), len(s.Tools))
	}
	b.WriteString("# HELP harnessd_mcp_server_restarts_total Reconnections of a global MCP server.\n# TYPE harnessd_mcp_server_restarts_total counter\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "harnessd_mcp_server_restarts_total{server=%s} %d\n", promLabel(s.Name), s.Restarts)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b.WriteString("# HELP harnessd_tool_calls_total Tool calls by server and outcome.\n# TYPE harnessd_tool_calls_total counter\n")
	keys := make([][2]string, 0, len(m.toolCalls))
	for k := range m.toolCalls {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i][0] < keys[j][0] || (keys[i][0] == keys[j][0] && keys[i][1] < keys[j][1])
	})
	for _, k := range keys {
		fmt.Fprintf(&b, "harnessd_tool_calls_total{server=%s,outcome=%s} %d\n", promLabel(k[0]), promLabel(k[1]), m.toolCalls[k])
	}
	b.WriteString("# HELP harnessd_tool_call_duration_seconds Tool call latency by server.\n# TYPE harnessd_tool_call_duration_seconds histogram\n")
	names := make([]string, 0, len(m.histograms))
	for n := range m.histograms {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		h := m.histograms[n]
		var cum uint64
		for i, le := range latencyBuckets {
			cum += h.counts[i]
			fmt.Fprintf(&b, "harnessd_tool_call_duration_seconds_bucket{server=%s,le=%q} %d\n", promLabel(n), strconv.FormatFloat(le, 'g', -1, 64), cum)
		}
		cum += h.counts[len(latencyBuckets)]
		fmt.Fprintf(&b, "harnessd_tool_call_duration_seconds_bucket{server=%s,le=\"+Inf\"} %d\n", promLabel(n), cum)
		fmt.Fprintf(&b, "harnessd_tool_call_duration_seconds_sum{server=%s} %s\n", promLabel(n), strconv.FormatFloat(h.sum, 'g', -1, 64))
		fmt.Fprintf(&b, "harnessd_tool_call_duration_seconds_count{server=%s} %d\n", promLabel(n), h.count)
	}
	b.WriteString("# HELP harnessd_runs_started_total Runs started.\n# TYPE harnessd_runs_started_total counter\n")
	fmt.Fprintf(&b, "harnessd_runs_started_total %d\n", m.runsStarted)
	b.WriteString("# HELP harnessd_runs_total Runs ended, by status.\n# TYPE harnessd_runs_total counter\n")
	for _, st := range []string{runCompleted, runFailed, runCancelled} {
		fmt.Fprintf(&b, "harnessd_runs_total{status=%q} %d\n", st, m.runsEnded[st])
	}
	b.WriteString("# HELP harnessd_runs_active Runs queued or running.\n# TYPE harnessd_runs_active gauge\n")
	fmt.Fprintf(&b, "harnessd_runs_active %d\n", max(m.runsActive, 0))
	io.WriteString(w, b.String())
}

// promLabel quotes a label value for the exposition format.
func promLabel(v string) string {
	r := strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	return `"` + r.Replace(v) + `"`
}
