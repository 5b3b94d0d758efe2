package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// This file holds the HTTP API's routes: run creation, events (SSE),
// cancellation, servers, health and readiness, and the JSON error and body
// helpers they share. The lists are in api_list.go.

// API limits.
const (
	maxRequestBody    = 1 << 20
	sseHeartbeat      = 15 * time.Second
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
	// bodyReadTimeout bounds reading a request body (the server has no
	// ReadTimeout: it would cut event streams).
	bodyReadTimeout = 30 * time.Second
	// cancelWait is how long POST /v1/runs/{id}/cancel waits for the run
	// to end before answering 202 with the status it still has.
	cancelWait = 5 * time.Second
)

// An api serves harnessd's HTTP routes. Safe for concurrent use.
type api struct {
	runs    *runManager
	reg     *registry
	metrics *metrics
	logger  *slog.Logger
	// audit records admin actions and counts refused requests; nil
	// records nothing. Set once before serving.
	audit *auditLog
	// stopping is closed at shutdown so event streams end.
	stopping <-chan struct{}
	// heartbeat is the interval of SSE keep-alive comments.
	heartbeat time.Duration
	// streamWriteTimeout bounds each write of an event stream
	// (max_stream_write_seconds).
	streamWriteTimeout time.Duration
	// replays bounds the replays from disk streaming at once
	// (max_concurrent_replays).
	replays replayGate
	// hosts says which Host headers the API answers; the zero policy
	// allows loopback only.
	hosts hostPolicy
	// globalSecrets hides what every run may quote (see baseSecrets).
	globalSecrets *liveRedactor
	mux           *http.ServeMux
	// tracer starts the spans of requests (api_telemetry.go); nil when
	// tracing is off.
	tracer *tracer

	// schedules starts the runs of [[schedules]]; nil when harnessd runs
	// none (tests), which lists none.
	schedules *scheduler
	// manager edits and reloads the configuration (api_manage.go); nil
	// when the API runs without a daemon, which refuses such changes.
	manager configManager
	// routes are the methods of each pattern registered, so that a
	// pattern registered again gains methods.
	routes map[string]map[string]route

	keysMu sync.Mutex
	// guards keys, which a reload replaces; empty means auth is off
	keys []authKey
}

// apiSurfaces mount the surfaces for other agents that serve the API's
// runs beside it (the MCP server at /mcp, A2A at /a2a); each adds itself
// from its own file, so the API names none of them.
var apiSurfaces []func(*api)

// newAPI returns the handler of every route. keys empty turns auth off. A
// nil logger discards logs; a nil m counts into a fresh metrics.
func newAPI(runs *runManager, reg *registry, keys []authKey, m *metrics, logger *slog.Logger, stopping <-chan struct{}) *api {
	logger = orDiscard(logger)
	if m == nil {
		m = newMetrics()
	}
	secrets := reg.secrets()
	if runs != nil {
		secrets = runs.env.secrets
	}
	limits := runLimits{}.resolve()
	if runs != nil {
		limits = runs.opts.Limits
	}
	a := &api{runs: runs, reg: reg, keys: keys, metrics: m, logger: logger, stopping: stopping,
		heartbeat: sseHeartbeat, globalSecrets: secrets, mux: http.NewServeMux(),
		streamWriteTimeout: time.Duration(limits.MaxStreamWriteSeconds) * time.Second,
		replays:            make(replayGate, limits.MaxConcurrentReplays)}
	a.route("/v1/runs", map[string]route{
		http.MethodPost: {scopeRunsWrite, a.createRun},
		http.MethodGet:  {scopeRunsRead, a.listRuns},
	})
	a.route("/v1/runs/{id}", map[string]route{http.MethodGet: {scopeRunsRead, a.getRun}})
	a.route("/v1/runs/{id}/events", map[string]route{http.MethodGet: {scopeRunsRead, a.runEvents}})
	a.route("/v1/runs/{id}/messages", map[string]route{http.MethodGet: {scopeRunsRead, a.runMessages}})
	a.route("/v1/runs/{id}/cancel", map[string]route{http.MethodPost: {scopeRunsWrite, a.cancelRun}})
	a.route("/v1/runs/{id}/input/{request_id}", map[string]route{http.MethodPost: {scopeRunsWrite, a.answerRunInput}})
	a.route("/v1/conversations", map[string]route{http.MethodGet: {scopeRunsRead, a.listConversations}})
	a.route("/v1/conversations/{id}", map[string]route{
		http.MethodGet:    {scopeRunsRead, a.getConversation},
		http.MethodDelete: {scopeRunsWrite, a.deleteConversation},
	})
	a.route("/v1/runs/{id}/approvals/{approval_id}", map[string]route{http.MethodPost: {scopeRunsWrite, a.answerRunApproval}})
	a.route("/v1/mcp/servers", map[string]route{http.MethodGet: {scopeRunsRead, a.listServers}})
	a.route("/v1/schedules", map[string]route{http.MethodGet: {scopeAdmin, a.listSchedules}})
	a.route("/v1/schedules/{name}/run", map[string]route{http.MethodPost: {scopeAdmin, a.runSchedule}})
	a.route("/v1/mcp/servers/{name}", map[string]route{http.MethodGet: {scopeRunsRead, a.getServer}})
	a.route("/v1/mcp/servers/{name}/accept", map[string]route{http.MethodPost: {scopeAdmin, a.acceptServerTools}})
	a.route("/v1/mcp/servers/{name}/login", map[string]route{http.MethodPost: {scopeAdmin, a.loginServer}})
	a.route("/v1/audit", map[string]route{http.MethodGet: {scopeAdmin, a.listAudit}})
	a.routeManagement()
	a.route("/healthz", map[string]route{http.MethodGet: {"", a.healthz}})
	a.route("/readyz", map[string]route{http.MethodGet: {"", a.readyz}})
	a.route("/metrics", map[string]route{http.MethodGet: {scopeRunsRead, a.serveMetrics}})
	a.route("/v1/whoami", map[string]route{http.MethodGet: {scopeRunsRead, a.whoami}})
	for _, mount := range apiSurfaces {
		mount(a)
	}
	a.mux.HandleFunc("/ui/", a.serveConsole)
	a.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			http.Redirect(w, r, "/ui/", http.StatusFound)
			return
		}
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s %s: the API lives under /v1/runs, /v1/conversations, /v1/schedules and /v1/mcp/servers, the console at /ui/", r.Method, r.URL.Path))
	})
	return a
}

// ServeHTTP refuses what must not reach a route (refuseRequest), routes
// the rest, traces each request (api_telemetry.go) and logs it at debug
// level.
func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	r, sp := a.startHTTPSpan(r)
	if !a.refuseRequest(rec, r) {
		a.mux.ServeHTTP(rec, r)
	}
	endHTTPSpan(sp, rec.status)
	a.logger.Debug("http request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
}

// A statusRecorder remembers the status a handler wrote. Unwrap lets
// http.ResponseController reach the connection's Flush.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(status int) {
	s.status = status
	s.ResponseWriter.WriteHeader(status)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// A route is one method's handler and the scope it needs ("" for none).
type route struct {
	scope   string
	handler func(http.ResponseWriter, *http.Request, authInfo)
}

// route registers a path whose methods dispatch to handlers; any other
// method is a JSON 405 naming the allowed ones.
// A pattern registered again gains the methods given (before serving).
func (a *api) route(pattern string, methods map[string]route) {
	if known, ok := a.routes[pattern]; ok {
		maps.Copy(known, methods)
		return
	}
	if a.routes == nil {
		a.routes = make(map[string]map[string]route)
	}
	a.routes[pattern] = methods
	a.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		rt, ok := methods[r.Method]
		if !ok {
			allowed := slices.Sorted(maps.Keys(methods))
			w.Header().Set("Allow", strings.Join(allowed, ", "))
			writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s %s: method not allowed: use %s", r.Method, r.URL.Path, strings.Join(allowed, " or ")))
			return
		}
		info, status, err := a.authenticate(r, rt.scope)
		if err != nil {
			code := "forbidden"
			if status == http.StatusUnauthorized {
				code = "unauthorized"
				w.Header().Set("WWW-Authenticate", `Bearer realm="harnessd", error_description="send an API key ([[auth.keys]] or HARNESS_API_KEYS) as Authorization: Bearer <token>"`)
			}
			a.audit.refuse(code)
			writeError(w, status, code, err.Error())
			return
		}
		rt.handler(w, r, info)
		if rt.scope == scopeAdmin && r.Method != http.MethodGet {
			a.auditAdmin(w, r, pattern, info)
		}
	})
}

// apiError is the body of every error answer.
type apiError struct {
	Error apiErrorBody `json:"error"`
}

// apiErrorBody is the inside of an apiError.
type apiErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// writeError answers {"error":{"code","message"}} with status.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, apiError{Error: apiErrorBody{Code: code, Message: msg}})
}

// writeJSON answers v as indented JSON (for curl) with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeBody(w, status, (*redactor)(nil).marshal(v, true))
}

// writeBody answers a JSON body with status.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(body)
}

// decodeBody decodes a JSON body strictly into v: at most maxRequestBody
// bytes, no unknown fields, exactly one value. Its errors are for the
// caller and start with "request body".
func decodeBody(w http.ResponseWriter, r *http.Request, v any) error {
	// Unsupported by some writers (tests' recorders): then only the
	// server's own limits apply.
	http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout))
	return decodeStrictJSON(http.MaxBytesReader(w, r.Body, maxRequestBody), v)
}

// decodeStrictJSON decodes exactly one JSON value from body into v,
// refusing unknown fields and trailing data; the hint of an unknown field
// lists v's own fields.
func decodeStrictJSON(body io.Reader, v any) error {
	err := decodeStrict(body, v)
	var tooBig *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &tooBig):
		return fmt.Errorf("request body: over the %d byte limit (1 MiB): send a smaller request", maxRequestBody)
	case errors.Is(err, io.EOF):
		return errors.New("request body: empty: send a JSON object")
	}
	return fmt.Errorf("request body: %v", strings.TrimPrefix(err.Error(), "json: "))
}

// createRun answers POST /v1/runs: 202 with {run_id, status} once the
// request is validated (synchronously) and the run started in the
// background or queued; 400 for what the caller got wrong, 403 for a
// per-run server with a command without the admin scope, 429 with
// Retry-After when the queue is full, 503 once shutdown has begun or
// while the run store cannot write.
func (a *api) createRun(w http.ResponseWriter, r *http.Request, info authInfo) {
	var req runRequest
	if err := decodeBody(w, r, &req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	req.parent = contextSpan(r.Context())
	run, err := a.startRun(req, info, nil)
	if err != nil {
		a.writeStartError(w, err)
		return
	}
	w.Header().Set("Location", "/v1/runs/"+run.id)
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": run.id, "status": run.view().Status, "conversation_id": run.conversationID()})
}

// startRun starts req as info's: its owner and tenant are info's, the
// conversation it names must be one info sees (a
// *conversationNotFoundError otherwise), and only an admin key may give a
// per-run server a command. Its errors are runManager.start's
// (writeStartError tells them apart); cur, when not nil, is a follower
// attached before the run begins (runManager.startFollowed). POST /v1/runs,
// the MCP server's run tools and A2A's sends start runs here.
func (a *api) startRun(req runRequest, info authInfo, cur *followCursor) (*run, error) {
	if req.ConversationID != "" && a.visibleConversation(req.ConversationID, info) == nil {
		return nil, &conversationNotFoundError{id: req.ConversationID}
	}
	info.stamp(&req)
	run, err := a.runs.startFollowed(req, info.has(scopeAdmin), cur)
	if err != nil {
		return nil, err
	}
	a.logger.Info("run started", "run", run.id, "key", info.key)
	return run, nil
}

// writeStartError answers err, runManager.start's: 400 for what the caller
// got wrong, 403 for what it may not do, 429 with Retry-After when the
// queue is full, 503 once shutdown has begun or while the run store
// cannot write, else 500.
func (a *api) writeStartError(w http.ResponseWriter, err error) {
	var reqErr *requestError
	var busy *busyError
	var rated *rateError
	switch {
	case writeConversationError(w, err):
	case errors.As(err, &reqErr) && reqErr.forbidden:
		writeError(w, http.StatusForbidden, "forbidden", err.Error())
	case errors.As(err, &reqErr):
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
	case errors.As(err, &busy):
		w.Header().Set("Retry-After", strconv.Itoa(int(busy.retryAfter.Seconds())))
		writeError(w, http.StatusTooManyRequests, "too_many_runs", err.Error())
	case errors.As(err, &rated):
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(rated.retryAfter.Seconds()))))
		writeError(w, http.StatusTooManyRequests, "rate_limited", err.Error())
	case errors.Is(err, errShuttingDown):
		writeError(w, http.StatusServiceUnavailable, "shutting_down", err.Error())
	case errors.As(err, new(*storeUnavailableError)):
		writeError(w, http.StatusServiceUnavailable, "store_unavailable", err.Error())
	default:
		a.logger.Error("starting a run failed", "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "start run: "+err.Error())
	}
}

// findRun returns the run named in the path if info may see it (a key of
// its tenant, an admin key, or anyone with auth off: authInfo.sees);
// otherwise it answers 404, the same for a run of another tenant as for no
// run, so
// ids are not confirmed, and returns nil. Every route about one run, and
// everything that belongs to a run (its questions, messages, events),
// finds it here.
func (a *api) findRun(w http.ResponseWriter, r *http.Request, info authInfo) *run {
	id := r.PathValue("id")
	run := a.visibleRun(id, info)
	if run == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("run %q: not found (runs are listed at GET /v1/runs)", id))
	}
	return run
}

// visibleRun returns run id if info may see it (authInfo.sees), else nil,
// the same for a run of another tenant as for no run.
func (a *api) visibleRun(id string, info authInfo) *run {
	run := a.runs.get(id)
	if run != nil && !info.sees(run.req.Tenant) {
		a.audit.refuse("not_owner")
		return nil
	}
	return run
}

// getRun answers GET /v1/runs/{id} with the run as one flat object.
func (a *api) getRun(w http.ResponseWriter, r *http.Request, info authInfo) {
	if run := a.findRun(w, r, info); run != nil {
		writeBody(w, http.StatusOK, a.runBody(run, info))
	}
}

// runBody returns run as GET /v1/runs/{id} shows it to info: the flat
// view, redacted, with the webhook's detail and the error's detail for
// admin keys.
func (a *api) runBody(run *run, info authInfo) []byte {
	v := run.view()
	admin := info.has(scopeAdmin)
	v.Webhook = run.webhook.status(admin)
	if detail := run.errorDetail(); admin && detail != "" {
		v.Error = detail
	}
	return run.redactor().marshal(v, true)
}

// answerRunInput answers POST /v1/runs/{id}/input/{request_id}: 200 with
// the answer as delivered (defaults applied); 400 naming the field of an
// answer that fails the requested schema, the request staying open; 404
// for a request that is not open (answered, timed out, cancelled).
func (a *api) answerRunInput(w http.ResponseWriter, r *http.Request, info authInfo) {
	run := a.findRun(w, r, info)
	if run == nil {
		return
	}
	var body inputAnswer
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id := r.PathValue("request_id")
	res, err := a.deliverInput(run, id, body, info)
	if err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": run.id, "request_id": id, "action": res.Action, "content": res.Content})
}

// deliverInput answers run's open input request id with body, as info's
// key. It returns the answer as delivered, or an *apiFailure: 404 for a
// request that is not open, 400 for an answer that fails the requested
// schema (the request stays open).
func (a *api) deliverInput(run *run, id string, body inputAnswer, info authInfo) (elicitResult, error) {
	if run.input == nil || run.input.Queue == nil || !run.input.Interactive {
		return elicitResult{}, notFound(fmt.Sprintf("run %q: input request %q: not open (the run is not interactive: its requests were declined)", run.id, id))
	}
	res, err := run.input.Queue.answer(id, body)
	switch {
	case errors.Is(err, errInputNotFound):
		return res, notFound(fmt.Sprintf("run %q: input request %q: not open (answered, timed out or cancelled; open ones are in GET /v1/runs/%s)", run.id, id, run.id))
	case err != nil:
		return res, &apiFailure{http.StatusBadRequest, "invalid_request", fmt.Sprintf("input request %q: %v", id, err)}
	}
	a.logger.Info("run input answered", "run", run.id, "request", id, "action", res.Action, "key", info.key)
	return res, nil
}

// answerRunApproval answers POST /v1/runs/{id}/approvals/{approval_id}:
// 200 with the decision as delivered; 400 for a malformed decision, the
// approval staying open; 404 for an approval that is not open (decided,
// timed out, or the run ended). The decision is made by the key's name.
func (a *api) answerRunApproval(w http.ResponseWriter, r *http.Request, info authInfo) {
	run := a.findRun(w, r, info)
	if run == nil {
		return
	}
	var body approvalAnswer
	if err := decodeBody(w, r, &body); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	id := r.PathValue("approval_id")
	if err := a.deliverApproval(run, id, body, info); err != nil {
		writeFailure(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"run_id": run.id, "approval_id": id, "decision": body.Decision})
}

// deliverApproval decides run's open approval id with body, made by
// info's key. It returns nil once delivered, or an *apiFailure: 404 for
// an approval that is not open, 400 for a malformed decision (the approval
// stays open).
func (a *api) deliverApproval(run *run, id string, body approvalAnswer, info authInfo) error {
	if run.input == nil || run.input.Queue == nil {
		return notFound(fmt.Sprintf("run %q: approval %q: not open (the run has ended or never asked)", run.id, id))
	}
	by := info.key
	if by == "" {
		by = resolvedByCaller // auth is off: no key names the caller
	}
	err := run.input.Queue.answerApproval(id, body, by)
	switch {
	case errors.Is(err, errInputNotFound):
		return notFound(fmt.Sprintf("run %q: approval %q: not open (decided, timed out or the run ended; open ones are in GET /v1/runs/%s)", run.id, id, run.id))
	case err != nil:
		return &apiFailure{http.StatusBadRequest, "invalid_request", fmt.Sprintf("approval %q: %v", id, err)}
	}
	a.logger.Info("run approval answered", "run", run.id, "approval", id, "decision", body.Decision, "key", info.key)
	return nil
}

// cancelRun cancels a queued or running run and waits up to cancelWait
// for it to end: 200 with the final status, or 202 while it still ends.
// A run that has already ended is a 409.
func (a *api) cancelRun(w http.ResponseWriter, r *http.Request, info authInfo) {
	run := a.findRun(w, r, info)
	if run == nil {
		return
	}
	status, err := a.cancelAndWait(r.Context(), run, info)
	if err != nil {
		writeFailure(w, err)
		return
	}
	code := http.StatusOK
	if !isTerminal(status) {
		code = http.StatusAccepted
	}
	writeJSON(w, code, map[string]string{"run_id": run.id, "status": status})
}

// cancelAndWait cancels run, as info's key, and waits up to cancelWait (or
// until ctx is done) for it to end; it returns the status the run has
// then, or a 409 *apiFailure for a run that had already ended.
func (a *api) cancelAndWait(ctx context.Context, run *run, info authInfo) (string, error) {
	if status := run.view().Status; isTerminal(status) {
		return "", &apiFailure{http.StatusConflict, "conflict", fmt.Sprintf("run %q: already %s; only queued or running runs can be cancelled", run.id, status)}
	}
	a.logger.Info("run cancel requested", "run", run.id, "key", info.key)
	run.cancel()
	timer := time.NewTimer(cancelWait)
	defer timer.Stop()
	select {
	case <-run.done:
	case <-timer.C:
	case <-ctx.Done():
	}
	return run.view().Status, nil
}

// waitRun waits until run has an event after changed (from its follow)
// or ends. When heartbeat is not nil, its tick writes an SSE keep-alive
// comment to w and ends the wait too. It reports false when ctx is done,
// harnessd shuts down or the keep-alive cannot be written: the follower
// stops. The event stream, A2A's streams and waits, and the MCP server's
// task notifications and resource watches follow runs with it.
func (a *api) waitRun(ctx context.Context, run *run, changed <-chan struct{}, heartbeat <-chan time.Time, w io.Writer) bool {
	select {
	case <-changed:
	case <-run.done:
	case <-heartbeat:
		if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
			return false
		}
	case <-ctx.Done():
		return false
	case <-a.stopping:
		return false
	}
	return true
}

// An apiFailure is an error a handler answers as it is: its status, code
// and message. The helpers that REST handlers and the MCP server share
// return it; the MCP server reports its message.
type apiFailure struct {
	status int
	code   string
	msg    string
}

func (e *apiFailure) Error() string { return e.msg }

// notFound returns a 404 apiFailure saying msg.
func notFound(msg string) *apiFailure {
	return &apiFailure{http.StatusNotFound, "not_found", msg}
}

// writeFailure answers err: an *apiFailure as it is, anything else as a
// 500.
func writeFailure(w http.ResponseWriter, err error) {
	var f *apiFailure
	if errors.As(err, &f) {
		writeError(w, f.status, f.code, f.msg)
		return
	}
	writeError(w, http.StatusInternalServerError, "internal", err.Error())
}

// eventCursor returns the sequence number a stream resumes after: the
// Last-Event-ID header (sent by reconnecting EventSource clients, so it
// wins), else ?after=, else 0.
func eventCursor(r *http.Request) (int, error) {
	v := r.Header.Get("Last-Event-ID")
	name := "Last-Event-ID"
	if v == "" {
		v, name = r.URL.Query().Get("after"), "after"
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%s %q: want the non-negative id of the last event received", name, v)
	}
	return n, nil
}

// runEvents streams a run's events as SSE: the history after the cursor
// first, then live events, with heartbeat comments; it ends after the
// terminal event, when the client goes away or stops reading (each write
// waits at most max_stream_write_seconds), or at shutdown. The history of
// a run kept on disk is replayed from there, a window at a time, by at
// most max_concurrent_replays streams at once: 429 beyond.
func (a *api) runEvents(w http.ResponseWriter, r *http.Request, info authInfo) {
	run := a.findRun(w, r, info)
	if run == nil {
		return
	}
	after, err := eventCursor(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	cursor := followCursor{seq: after, resumed: r.Header.Get("Last-Event-ID") != ""}
	defer run.unfollow(&cursor)
	// done is closed after the terminal event is recorded: seen closed
	// before reading the history, the history is complete.
	ended := isClosed(run.done)
	frames, skipped, changed := run.follow(&cursor)
	if cursor.onDisk {
		if !a.replays.enter() {
			a.metrics.replayRefused()
			refuseReplay(w, run.id, cap(a.replays))
			return
		}
		a.metrics.replay(1)
		defer func() {
			a.replays.leave()
			a.metrics.replay(-1)
		}()
	}
	sw := newStreamWriter(w, a.streamWriteTimeout)
	defer func() {
		// The response's last bytes, written once this returns, get a
		// deadline of their own.
		sw.extend()
		if sw.stalled() {
			a.metrics.streamDropped()
			a.logger.Info("event stream dropped: its client took nothing for max_stream_write_seconds", "run", run.id, "seconds", a.streamWriteTimeout.Seconds())
		}
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := sw.Flush(); err != nil {
		return
	}
	heartbeat := time.NewTicker(a.heartbeat)
	defer heartbeat.Stop()
	for {
		if skipped > 0 {
			if _, err := fmt.Fprintf(sw, ": %d live events dropped: this stream fell behind\n\n", skipped); err != nil {
				return
			}
		}
		for _, f := range frames {
			if err := writeEventFrame(sw, f); err != nil {
				return
			}
			// The terminal event is the last: it goes out before the
			// run's servers are closed, and the stream ends with it.
			ended = ended || isTerminalEvent(f.ev.Type)
		}
		if cursor.onDisk {
			// An ended run's whole history: the stream ends with it.
			if run.replay(&cursor, func(ev runEvent) error { return writeEventFrame(sw, followFrame{ev: ev}) }) != nil {
				return
			}
			ended = true
		}
		if err := sw.Flush(); err != nil || ended {
			return
		}
		if !a.waitRun(r.Context(), run, changed, heartbeat.C, sw) {
			return
		}
		ended = isClosed(run.done)
		frames, skipped, changed = run.follow(&cursor)
	}
}

// isClosed reports whether ch is closed, without waiting.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// writeEventFrame writes one event of a run's stream: its frame, encoded
// and redacted once, when it was emitted or read from disk. A live event's
// frame has no id line, so that a reconnecting client resumes after the
// last history event, and no seq.
func writeEventFrame(w io.Writer, f followFrame) error {
	_, err := w.Write(f.ev.frame)
	return err
}
