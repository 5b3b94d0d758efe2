package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests run webhooks against a test receiver that checks every
// signature: the three outcomes, retries, giving up, resuming after a
// restart, the address guard, redirects and the URL's redaction.

// testWebhookSecret signs the deliveries of these tests.
const testWebhookSecret = "whsec-0123456789abcdef"

// A receivedWebhook is one delivery a webhookReceiver got.
type receivedWebhook struct {
	Type     string  `json:"type"`
	Run      runView `json:"run"`
	signedOK bool
	header   http.Header
}

// A webhookReceiver is an httptest server taking deliveries: it answers
// each with the next of its statuses (200 once they run out); a status of
// 0 holds the request until the client gives up. Safe for concurrent use.
type webhookReceiver struct {
	srv *httptest.Server

	mu sync.Mutex
	// guards statuses and got
	statuses []int
	got      []receivedWebhook
}

// newWebhookReceiver starts a receiver answering with statuses, closed
// at cleanup.
func newWebhookReceiver(t *testing.T, statuses ...int) *webhookReceiver {
	t.Helper()
	rcv := &webhookReceiver{statuses: statuses}
	rcv.srv = httptest.NewServer(http.HandlerFunc(rcv.serve))
	t.Cleanup(rcv.srv.Close)
	return rcv
}

func (rcv *webhookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var got receivedWebhook
	json.Unmarshal(body, &got)
	got.signedOK = checkSignature(r.Header.Get(signatureHeader), body, testWebhookSecret, time.Now())
	got.header = r.Header.Clone()
	rcv.mu.Lock()
	rcv.got = append(rcv.got, got)
	status := http.StatusOK
	if len(rcv.statuses) > 0 {
		status, rcv.statuses = rcv.statuses[0], rcv.statuses[1:]
	}
	rcv.mu.Unlock()
	if status == 0 {
		<-r.Context().Done()
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, "answer "+strconv.Itoa(status))
}

// received returns the deliveries so far.
func (rcv *webhookReceiver) received() []receivedWebhook {
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	return append([]receivedWebhook(nil), rcv.got...)
}

// checkSignature verifies a Harness-Signature header as a receiver
// should: the HMAC of "<t>.<body>", with t within five minutes of now.
func checkSignature(header string, body []byte, secret string, now time.Time) bool {
	var ts, sig string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || now.Sub(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(sig), []byte(want))
}

// newWebhookRuns returns a run manager over the fake model f with a
// store in dir ("" for a fresh one), the test secret, and retries
// without waiting.
func newWebhookRuns(t *testing.T, f *fakeModel, dir string, timing webhookTiming) *runManager {
	t.Helper()
	if dir == "" {
		dir = filepath.Join(t.TempDir(), "runs")
	}
	store, err := openRunStoreOnceFree(dir, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	reg := newRegistry(nil, registryOptions{Logger: discardLogger()})
	t.Cleanup(reg.close)
	opts := runOptionsOver(t, reg, f, "", nil)
	opts.Store = store
	opts.Webhooks = webhookSettings{Secret: testWebhookSecret}
	if timing.RetryBase == 0 {
		timing.RetryBase = time.Millisecond
	}
	opts.WebhookTiming = timing
	m := newRunsWith(t, opts)
	t.Cleanup(store.close)
	return m
}

// waitWebhook waits until r's delivery is no longer pending and returns
// its status.
func waitWebhook(t *testing.T, r *run) webhookStatus {
	t.Helper()
	waitRun(t, r)
	waitUntil(t, "the webhook of "+r.id+" is settled", func() bool { return !r.webhook.pending() })
	return *r.webhook.status(true)
}

func TestWebhookDeliversEachOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		turn   fakeTurn
		cancel bool
		want   string
	}{
		{"completed", fakeTurn{Text: "all done"}, false, "run.completed"},
		{"failed", fakeTurn{Status: http.StatusBadRequest, Text: "bad request"}, false, "run.failed"},
		{"cancelled", fakeTurn{Hang: true}, true, "run.cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, providerOpenAI, tt.turn)
			rcv := newWebhookReceiver(t)
			m := newWebhookRuns(t, f, "", webhookTiming{})
			r, err := m.start(runRequest{Prompt: "work", WebhookURL: rcv.srv.URL + "/hook"}, true)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cancel {
				waitUntil(t, "the model is called", func() bool { return len(f.requests()) == 1 })
				r.cancel()
			}
			st := waitWebhook(t, r)
			if st.Status != webhookDelivered || st.Attempts != 1 || st.DeliveredAt == nil || st.LastError != "" {
				t.Errorf("webhook = %+v, want delivered at the first attempt", st)
			}
			got := rcv.received()
			if len(got) != 1 {
				t.Fatalf("receiver got %d deliveries, want 1", len(got))
			}
			if !got[0].signedOK {
				t.Errorf("delivery signature %q does not verify", got[0].header.Get(signatureHeader))
			}
			if got[0].Type != tt.want || got[0].Run.ID != r.id || terminalEventType(got[0].Run.Status) != tt.want {
				t.Errorf("delivery = %s of run %s (%s), want %s of run %s", got[0].Type, got[0].Run.ID, got[0].Run.Status, tt.want, r.id)
			}
			if got[0].Run.Webhook != nil {
				t.Errorf("the delivered run view holds its own webhook status: %+v", got[0].Run.Webhook)
			}
			var onDisk webhookRecord
			b, err := os.ReadFile(m.opts.Store.webhookPath(r.id))
			if err != nil || json.Unmarshal(b, &onDisk) != nil || onDisk.Status != webhookDelivered {
				t.Errorf("webhook record on disk = %s (%v), want delivered", b, err)
			}
		})
	}
}

func TestWebhookRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		statuses     []int
		maxAttempts  int
		wantStatus   string
		wantAttempts int
		wantMetrics  []string
	}{
		{"a 500 then success", []int{500, 503}, 6, webhookDelivered, 3,
			[]string{`harnessd_webhook_deliveries_total{outcome="delivered"} 1`, `harnessd_webhook_deliveries_total{outcome="retried"} 2`}},
		{"gives up after the last attempt", []int{500, 404, 500}, 3, webhookFailed, 3,
			[]string{`harnessd_webhook_deliveries_total{outcome="failed"} 1`, `harnessd_webhook_deliveries_total{outcome="retried"} 2`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
			rcv := newWebhookReceiver(t, tt.statuses...)
			m := newWebhookRuns(t, f, "", webhookTiming{MaxAttempts: tt.maxAttempts})
			r, err := m.start(runRequest{Prompt: "work", WebhookURL: rcv.srv.URL}, true)
			if err != nil {
				t.Fatal(err)
			}
			st := waitWebhook(t, r)
			if st.Status != tt.wantStatus || st.Attempts != tt.wantAttempts {
				t.Errorf("webhook = %+v, want %s after %d attempts", st, tt.wantStatus, tt.wantAttempts)
			}
			if tt.wantStatus == webhookFailed && !strings.Contains(st.LastError, "http status 500: answer 500") {
				t.Errorf("last_error = %q, want the last answer", st.LastError)
			}
			got := rcv.received()
			if len(got) != tt.wantAttempts {
				t.Errorf("receiver got %d deliveries, want %d", len(got), tt.wantAttempts)
			}
			for i, d := range got {
				if !d.signedOK || d.Run.ID != r.id {
					t.Errorf("delivery %d: signed %v, run %s; want a signed delivery of %s", i+1, d.signedOK, d.Run.ID, r.id)
				}
			}
			var metrics strings.Builder
			m.opts.Metrics.write(&metrics, nil, storeHealth{})
			for _, want := range tt.wantMetrics {
				if !strings.Contains(metrics.String(), want) {
					t.Errorf("metrics lack %q:\n%s", want, metrics.String())
				}
			}
		})
	}
}

func TestWebhookResumesAfterRestart(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	// The first attempt hangs until harnessd stops; the next succeeds.
	rcv := newWebhookReceiver(t, 0)
	dir := filepath.Join(t.TempDir(), "runs")
	first := newWebhookRuns(t, f, dir, webhookTiming{})
	r, err := first.start(runRequest{Prompt: "work", WebhookURL: rcv.srv.URL}, true)
	if err != nil {
		t.Fatal(err)
	}
	waitRun(t, r)
	waitUntil(t, "the first attempt reaches the receiver", func() bool { return len(rcv.received()) == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := first.shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if st := r.webhook.status(true); st.Status != webhookPending || st.Attempts != 0 {
		t.Fatalf("webhook after shutdown = %+v, want pending with no attempt recorded", st)
	}
	first.opts.Store.close()

	second := newWebhookRuns(t, f, dir, webhookTiming{})
	again := second.get(r.id)
	if again == nil {
		t.Fatalf("run %s is not in the history after the restart", r.id)
	}
	st := waitWebhook(t, again)
	if st.Status != webhookDelivered || st.Attempts != 1 {
		t.Errorf("webhook after the restart = %+v, want delivered at attempt 1", st)
	}
	got := rcv.received()
	if len(got) != 2 || got[1].Type != "run.completed" || got[1].Run.ID != r.id || got[1].Run.Output != "done" || !got[1].signedOK {
		t.Errorf("deliveries = %+v, want the run's end again, signed, with its output", got)
	}
}

func TestWebhookURLChecks(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI)
	m := newWebhookRuns(t, f, "", webhookTiming{})
	m.setWebhooks(webhookSettings{URL: "https://hooks.example/default", Secret: testWebhookSecret})
	tests := []struct {
		name          string
		url           string
		admin         bool
		allowHosts    []string
		wantErr       string
		wantForbidden bool
		wantURL       string
		wantUntrusted bool
	}{
		{"default for every run", "", false, nil, "", false, "https://hooks.example/default", false},
		{"a key's own", "https://mine.example/hook", false, nil, "", false, "https://mine.example/hook", true},
		{"an admin's own", "https://mine.example/hook", true, nil, "", false, "https://mine.example/hook", false},
		{"metadata address without admin", "http://169.254.169.254/latest/meta-data", false, nil, "link-local or metadata", true, "", false},
		{"metadata address with admin", "http://169.254.169.254/latest/meta-data", true, nil, "", false, "http://169.254.169.254/latest/meta-data", false},
		{"outside allow_hosts", "https://evil.example/hook", false, []string{"*.corp.example"}, "allow_hosts", true, "", false},
		{"no scheme", "hooks.example/x", true, nil, "webhook_url: no scheme", false, "", false},
		{"not http", "ftp://hooks.example/x", true, nil, `webhook_url: scheme "ftp"`, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m.setDefaults(m.opts.Model, 0, tt.allowHosts)
			w, err := m.webhookFor(runRequest{WebhookURL: tt.url}, tt.admin)
			if tt.wantErr != "" {
				var reqErr *requestError
				if !errors.As(err, &reqErr) || !strings.Contains(err.Error(), tt.wantErr) || reqErr.forbidden != tt.wantForbidden {
					t.Fatalf("webhookFor(%q) = %v, want a request error (forbidden %v) saying %q", tt.url, err, tt.wantForbidden, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("webhookFor(%q) = %v", tt.url, err)
			}
			if w.rec.URL != tt.wantURL || w.rec.Untrusted != tt.wantUntrusted || w.rec.Status != webhookPending {
				t.Errorf("webhookFor(%q) = %+v, want %s untrusted %v pending", tt.url, w.rec, tt.wantURL, tt.wantUntrusted)
			}
		})
	}
	// The guarded dialer refuses what resolves to a blocked address, at
	// dial time.
	err := m.env.webhooks.post("http://169.254.169.254:9/hook?token=secret-token-value", true, nil, []byte("{}"))
	if err == nil || !strings.Contains(err.Error(), "link-local or metadata") || strings.Contains(err.Error(), "secret-token-value") {
		t.Errorf("guarded post = %v, want a refusal without the URL's query", err)
	}
}

func TestWebhookRedirects(t *testing.T) {
	t.Parallel()
	other := newWebhookReceiver(t)
	rcv := newWebhookReceiver(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.srv.URL+"/hook", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/final", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/to-get", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/final", http.StatusFound)
	})
	mux.Handle("/final", rcv.srv.Config.Handler)
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	sender := &webhookSender{ctx: t.Context(), secret: func() string { return testWebhookSecret }, timing: webhookTiming{}.resolve()}
	tests := []struct {
		path    string
		wantErr string // "" for delivered
	}{
		{"/away", "refusing redirect to another origin"},
		{"/moved", ""},
		{"/to-get", "turns the POST into a GET"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			err := sender.post(front.URL+tt.path, false, nil, []byte(`{"type":"run.completed"}`))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("post(%s) = %v, want %q", tt.path, err, tt.wantErr)
			}
		})
	}
	if n := len(other.received()); n != 0 {
		t.Errorf("the other origin got %d deliveries, want none", n)
	}
	if got := rcv.received(); len(got) != 1 || !got[0].signedOK {
		t.Errorf("the same-origin redirect delivered %d (%+v), want one signed delivery", len(got), got)
	}
}

func TestWebhookURLRedacted(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://hooks.example/run-end", "https://hooks.example/run-end"},
		{"https://hooks.example/run-end?token=abc", "https://hooks.example/run-end?[redacted]"},
		{"https://user:pass@hooks.example:8443/x?a=1#frag", "https://[redacted]@hooks.example:8443/x?[redacted]"},
	}
	for _, tt := range tests {
		if got := redactedURL(tt.in); got != tt.want {
			t.Errorf("redactedURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}

	// In the API's view, and in last_error when the receiver is down.
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	m := newWebhookRuns(t, f, "", webhookTiming{MaxAttempts: 1})
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	hook := strings.Replace(down.URL, "http://", "http://user:hunter2-password@", 1) + "/hook?token=query-secret-value"
	r, err := m.start(runRequest{Prompt: "work", WebhookURL: hook}, true)
	if err != nil {
		t.Fatal(err)
	}
	waitWebhook(t, r)
	a := newAPI(m, m.opts.Registry, nil, m.opts.Metrics, nil, nil)
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client()}
	body := getOK(t, at, "/v1/runs/"+r.id)
	var v runView
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatal(err)
	}
	if v.Webhook == nil || v.Webhook.Status != webhookFailed || v.Webhook.Attempts != 1 || v.Webhook.LastError == "" ||
		v.Webhook.URL != redactedURL(hook) {
		t.Errorf("run view webhook = %+v, want failed after 1 attempt at %s", v.Webhook, redactedURL(hook))
	}
	for _, secret := range []string{"hunter2-password", "query-secret-value"} {
		if strings.Contains(string(body), secret) {
			t.Errorf("GET /v1/runs/%s shows %q:\n%s", r.id, secret, body)
		}
	}
}

func TestWebhookPendingRunsAreKept(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "one"}, fakeTurn{Text: "two"})
	// Both deliveries hang until the manager shuts down.
	rcv := newWebhookReceiver(t, 0, 0)
	m := newWebhookRuns(t, f, "", webhookTiming{})
	m.opts.Retention = &retention{MaxRuns: 1}
	for _, prompt := range []string{"one", "two"} {
		r, err := m.start(runRequest{Prompt: prompt, WebhookURL: rcv.srv.URL}, true)
		if err != nil {
			t.Fatal(err)
		}
		waitRun(t, r)
	}
	waitUntil(t, "both deliveries are in flight", func() bool { return len(rcv.received()) == 2 })
	m.prune()
	if n := len(m.list()); n != 2 {
		t.Errorf("%d runs kept with max_kept_runs 1 and both webhooks pending, want 2", n)
	}
}

func TestWebhookURLThroughAPI(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
	rcv := newWebhookReceiver(t)
	m := newWebhookRuns(t, f, "", webhookTiming{})
	keys := []authKey{testKey("app", "writer-token-0123", scopeRunsWrite)}
	srv := httptest.NewServer(newAPI(m, m.opts.Registry, keys, m.opts.Metrics, nil, nil))
	t.Cleanup(srv.Close)
	at := &apiTest{url: srv.URL, client: srv.Client()}
	const writer = "Bearer writer-token-0123"
	tests := []struct {
		name, body string
		wantStatus int
		want       string
	}{
		{"metadata address", `{"prompt":"p","webhook_url":"http://169.254.169.254/latest"}`, http.StatusForbidden, `webhook_url: host \"169.254.169.254\" resolves to`},
		{"not a URL", `{"prompt":"p","webhook_url":"hooks"}`, http.StatusBadRequest, "webhook_url: no scheme"},
		{"owner is not the caller's to set", `{"prompt":"p","owner":"schedule:x"}`, http.StatusBadRequest, `unknown field \"owner\"`},
		{"a loopback receiver", `{"prompt":"p","webhook_url":"` + rcv.srv.URL + `"}`, http.StatusAccepted, "run_id"},
	}
	for _, tt := range tests {
		resp, body := at.do(t, http.MethodPost, "/v1/runs", writer, tt.body)
		if resp.StatusCode != tt.wantStatus || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s: POST /v1/runs = %d %s, want %d with %q", tt.name, resp.StatusCode, body, tt.wantStatus, tt.want)
		}
	}
	waitUntil(t, "the delivery", func() bool { return len(rcv.received()) == 1 })
}

func TestWebhookTellsWaitingThenEnd(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		statuses []int // the receiver's answers
		// settled is the waiting delivery's record once its first attempt
		// is recorded: delivered, or pending a retry an hour away.
		settled      string
		wantAttempts int // of the waiting delivery
	}{
		{"each delivered", nil, webhookDelivered, 1},
		{"the end supersedes a waiting delivery that is retried", []int{http.StatusInternalServerError}, webhookPending, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, providerOpenAI,
				fakeTurn{ToolCalls: calls(toolConnectMCP, `{"url":"http://127.0.0.1:9/mcp"}`)}, answerWithResults)
			rcv := newWebhookReceiver(t, tt.statuses...)
			m := newWebhookRuns(t, f, "", webhookTiming{RetryBase: time.Hour, RetryMax: time.Hour})
			// connect_mcp counts as a write: the call waits for approval,
			// though the run is not interactive.
			r, err := m.start(runRequest{Prompt: "connect", Approval: approvalWrites, WebhookURL: rcv.srv.URL}, true)
			if err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the waiting delivery's first attempt is recorded", func() bool { return r.webhook.status(true).Attempts == 1 })
			if st := r.webhook.status(true); st.Type != "run.waiting_approval" || st.Status != tt.settled || st.Attempts != tt.wantAttempts {
				t.Errorf("webhook while the call waits = %+v, want run.waiting_approval %s after %d attempt", st, tt.settled, tt.wantAttempts)
			}
			got := rcv.received()
			if len(got) != 1 {
				t.Fatalf("receiver got %d deliveries while the call waits, want 1", len(got))
			}
			waiting := got[0]
			if !waiting.signedOK || waiting.Type != "run.waiting_approval" || waiting.Run.ID != r.id || waiting.Run.Status != runWaitingApproval ||
				len(waiting.Run.Approvals) != 1 || waiting.Run.Approvals[0].Tool != toolConnectMCP {
				t.Fatalf("waiting delivery = %s (signed %v) of run %s (%s) with approvals %+v, want a signed run.waiting_approval listing the connect_mcp call",
					waiting.Type, waiting.signedOK, waiting.Run.ID, waiting.Run.Status, waiting.Run.Approvals)
			}
			if err := r.input.Queue.answerApproval(waiting.Run.Approvals[0].ID, approvalAnswer{Decision: decisionDeny, Reason: "not now"}, "ops"); err != nil {
				t.Fatal(err)
			}
			if st := waitWebhook(t, r); st.Type != "run.completed" || st.Status != webhookDelivered || st.Attempts != 1 {
				t.Errorf("webhook after the end = %+v, want run.completed delivered at its first attempt", st)
			}
			got = rcv.received()
			if len(got) != 2 || got[1].Type != "run.completed" || !got[1].signedOK || got[1].Run.Status != runCompleted || len(got[1].Run.Approvals) != 0 {
				t.Fatalf("deliveries = %+v, want the waiting one, then the end, signed", got)
			}
			var onDisk webhookRecord
			b, err := os.ReadFile(m.opts.Store.webhookPath(r.id))
			if err != nil || json.Unmarshal(b, &onDisk) != nil || onDisk.Type != "run.completed" || onDisk.Status != webhookDelivered {
				t.Errorf("webhook record on disk = %s (%v), want the end delivered", b, err)
			}
		})
	}
}

func TestWebhookResumeDeliversTheEndAfterAWaitingOne(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		rec  webhookRecord // on disk at the restart
		want string        // the type delivered after it
	}{
		{"a waiting delivery delivered", webhookRecord{webhookStatus: webhookStatus{Type: "run.waiting_approval", Status: webhookDelivered, Attempts: 1}}, "run.completed"},
		{"a waiting delivery pending", webhookRecord{webhookStatus: webhookStatus{Type: "run.waiting_input", Status: webhookPending, Attempts: 2}}, "run.completed"},
		{"a record without a type", webhookRecord{webhookStatus: webhookStatus{Status: webhookPending}}, "run.completed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done"})
			dir := filepath.Join(t.TempDir(), "runs")
			first := newWebhookRuns(t, f, dir, webhookTiming{})
			r, err := first.start(runRequest{Prompt: "work"}, true) // no webhook: nothing is delivered now
			if err != nil {
				t.Fatal(err)
			}
			waitRun(t, r)
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if err := first.shutdown(ctx); err != nil {
				t.Fatal(err)
			}
			first.opts.Store.close()
			// As a crash leaves it: the record of a delivery made before the end.
			rcv := newWebhookReceiver(t)
			rec := tt.rec
			rec.URL = rcv.srv.URL
			b, _ := json.Marshal(rec)
			if err := os.WriteFile(filepath.Join(dir, r.id+runWebhookExt), b, 0o600); err != nil {
				t.Fatal(err)
			}

			second := newWebhookRuns(t, f, dir, webhookTiming{})
			again := second.get(r.id)
			if again == nil {
				t.Fatalf("run %s is not in the history after the restart", r.id)
			}
			st := waitWebhook(t, again)
			if st.Type != tt.want || st.Status != webhookDelivered {
				t.Errorf("webhook after the restart = %+v, want %s delivered", st, tt.want)
			}
			got := rcv.received()
			if len(got) != 1 || got[0].Type != tt.want || got[0].Run.ID != r.id || !got[0].signedOK {
				t.Errorf("deliveries = %+v, want the run's end, signed", got)
			}
		})
	}
}
