package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// This file holds the webhooks of runs: at a run's end harnessd POSTs
// {"type": "run.completed"|"run.failed"|"run.cancelled", "run": <view>},
// signed with Harness-Signature, to the run's webhook_url or [webhooks]
// url, retrying with backoff. Each delivery is a file next to the run's
// (<id>.webhook), written before the run is accepted and rewritten after
// each attempt, so a delivery is never lost between the run's end and its
// outcome: after a restart or a crash every pending one resumes (a
// receiver may then get the same run twice; the run's id tells).

// Webhook delivery defaults. Six attempts: the first at once, then after
// 2, 4, 8, 16 and 32 minutes, about an hour in all.
const (
	webhookMaxAttempts    = 6
	webhookRetryBase      = 2 * time.Minute
	webhookRetryMax       = 32 * time.Minute
	webhookAttemptTimeout = 10 * time.Second
	// webhookErrorBytes bounds what a receiver's answer adds to last_error.
	webhookErrorBytes = 200
	runWebhookExt     = ".webhook"
	// signatureHeader carries "t=<unix seconds>,v1=<hex HMAC-SHA256 of
	// "<t>.<body>">".
	signatureHeader = "Harness-Signature"
)

// Delivery statuses.
const (
	webhookPending   = "pending"
	webhookDelivered = "delivered"
	webhookFailed    = "failed"
)

// A webhookStatus is the webhook of a run as GET /v1/runs/{id} shows it;
// the URL's userinfo and query are redacted.
type webhookStatus struct {
	URL           string     `json:"url"`
	Status        string     `json:"status"`
	Attempts      int        `json:"attempts"`
	LastError     string     `json:"last_error,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"`
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// A webhookRecord is one delivery as kept on disk: its status with the
// whole URL, and whether the URL came from a caller without the admin
// scope (then every attempt goes through the guarded dialer, and
// last_error is a fixed reason whose detail only admins see).
type webhookRecord struct {
	webhookStatus
	Untrusted bool `json:"untrusted,omitempty"`
	// LastErrorDetail is the last attempt's error as the log has it, when
	// LastError is the fixed reason of an untrusted URL.
	LastErrorDetail string `json:"last_error_detail,omitempty"`
}

// A runWebhook is the delivery of one run's end. Safe for concurrent use;
// a nil *runWebhook is a run without a webhook.
type runWebhook struct {
	path string // its file; "" without a store

	mu sync.Mutex
	// guards rec
	rec webhookRecord
}

// status returns what the run view shows of the delivery: nil for a run
// without a webhook. An admin (admin true) sees the detail of the last
// error of a URL a caller without the admin scope chose; others its fixed
// reason.
func (w *runWebhook) status(admin bool) *webhookStatus {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.rec.webhookStatus
	s.URL = redactedURL(s.URL)
	if admin && w.rec.LastErrorDetail != "" {
		s.LastError = w.rec.LastErrorDetail
	}
	return &s
}

// pending reports whether the delivery has neither succeeded nor given
// up; retention keeps such runs.
func (w *runWebhook) pending() bool {
	if w == nil {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rec.Status == webhookPending
}

// update applies change to the record and writes it to disk (when kept
// there), returning the write's error.
func (w *runWebhook) update(change func(*webhookRecord)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	change(&w.rec)
	return w.saveLocked()
}

// saveLocked writes the record durably; called under mu.
func (w *runWebhook) saveLocked() error {
	if w.path == "" {
		return nil
	}
	b, err := json.Marshal(w.rec)
	if err != nil {
		return err
	}
	return writeFileAtomic(w.path, append(b, '\n'))
}

// loadWebhook returns the delivery of run id kept in dir, nil when the
// run has none.
func loadWebhook(dir, id string) (*runWebhook, error) {
	path := filepath.Join(dir, id+runWebhookExt)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	w := &runWebhook{path: path}
	if err := json.Unmarshal(b, &w.rec); err != nil || w.rec.URL == "" {
		return nil, fmt.Errorf("run %s: webhook record %s does not decode (%v); remove it to drop the delivery", id, path, err)
	}
	return w, nil
}

// redactedURL returns u with its userinfo and query replaced by
// "[redacted]" and its fragment dropped: what views and logs show of a
// webhook URL, which may carry a token.
func redactedURL(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return redactedText
	}
	var b strings.Builder
	b.WriteString(parsed.Scheme + "://")
	if parsed.User != nil {
		b.WriteString(redactedText + "@")
	}
	b.WriteString(parsed.Host + parsed.EscapedPath())
	if parsed.RawQuery != "" || parsed.ForceQuery {
		b.WriteString("?" + redactedText)
	}
	return b.String()
}

// webhookFor returns the delivery a run of req gets: to its webhook_url,
// else to [webhooks] url, else none (nil). A webhook_url of a caller
// without the admin scope (allowAny false) must pass the checks of its
// per-run servers' URLs, and its deliveries use the guarded dialer.
// Errors are *requestError.
func (m *runManager) webhookFor(req runRequest, allowAny bool) (*runWebhook, error) {
	target, untrusted := req.WebhookURL, false
	if target == "" {
		target = m.webhookSettings().URL
	} else {
		if err := checkHTTPURL(target); err != nil {
			return nil, badRequest("webhook_url", "%v", err)
		}
		if !allowAny {
			untrusted = true
			if err := checkUntrustedURL(target, m.connectAllowHosts()); err != nil {
				return nil, &requestError{forbidden: true,
					msg: fmt.Sprintf("webhook_url: %v: without the admin scope a webhook_url must pass the connect_mcp checks", err)}
			}
		}
	}
	if target == "" {
		return nil, nil
	}
	return &runWebhook{rec: webhookRecord{webhookStatus: webhookStatus{URL: target, Status: webhookPending}, Untrusted: untrusted}}, nil
}

// webhookSettings returns the [webhooks] settings in force.
func (m *runManager) webhookSettings() webhookSettings {
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	return m.opts.Webhooks
}

// setWebhooks replaces the [webhooks] settings: the default URL for runs
// accepted from then on, the secret for every attempt from then on. The
// secret joins the redactor of the runs.
func (m *runManager) setWebhooks(s webhookSettings) {
	m.env.secrets.add(s.Secret)
	m.defaultsMu.Lock()
	defer m.defaultsMu.Unlock()
	m.opts.Webhooks = s
}

// A webhookSender delivers the webhooks of one manager's runs, one
// goroutine per pending delivery. Safe for concurrent use.
type webhookSender struct {
	ctx     context.Context // the manager's: cancelled at shutdown, leaving deliveries pending
	logger  *slog.Logger
	metrics *metrics
	secret  func() string // the [webhooks] secret now; "" signs nothing
	timing  webhookTiming
	wg      sync.WaitGroup
}

// A webhookTiming is the retry schedule of deliveries; zero fields take
// the defaults (tests shorten them).
type webhookTiming struct {
	MaxAttempts    int
	RetryBase      time.Duration
	RetryMax       time.Duration
	AttemptTimeout time.Duration
}

// resolve returns t with its defaults applied.
func (t webhookTiming) resolve() webhookTiming {
	if t.MaxAttempts <= 0 {
		t.MaxAttempts = webhookMaxAttempts
	}
	if t.RetryBase <= 0 {
		t.RetryBase = webhookRetryBase
	}
	if t.RetryMax <= 0 {
		t.RetryMax = webhookRetryMax
	}
	if t.AttemptTimeout <= 0 {
		t.AttemptTimeout = webhookAttemptTimeout
	}
	return t
}

// webhookClient and guardedWebhookClient post deliveries; the guarded one
// refuses link-local and metadata addresses at dial time. Neither follows
// a redirect to another origin, nor one that would turn the POST into a
// GET.
var (
	webhookClient        = newWebhookClient(nil)
	guardedWebhookClient = newWebhookClient(refuseBlockedAddress)
)

// newWebhookClient returns an HTTP client for deliveries whose dialer
// runs control (nil for none).
func newWebhookClient(control func(network, address string, c syscall.RawConn) error) *http.Client {
	c := newHTTPClient(control)
	c.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if req.Method != http.MethodPost {
			return fmt.Errorf("refusing a redirect that turns the POST into a %s: set the webhook URL to the final address", req.Method)
		}
		return checkRedirect(req, via)
	}
	return c
}

// start delivers r's webhook in the background, unless r has none or its
// delivery is no longer pending. r must have ended.
func (s *webhookSender) start(r *run) {
	if s == nil || !r.webhook.pending() {
		return
	}
	s.wg.Add(1)
	// Owned by the sender; exits once the delivery succeeded or gave up,
	// or at shutdown (ctx), leaving it pending on disk.
	go func() {
		defer s.wg.Done()
		s.deliver(r)
	}()
}

// resumeWebhook loads the delivery of r, a run loaded from the store, and
// resumes it when it is pending: it was interrupted by a restart or a
// crash, possibly before its first attempt.
func (m *runManager) resumeWebhook(r *run) {
	w, err := loadWebhook(m.opts.Store.dir, r.id)
	if err != nil {
		r.logger.Error("loading the webhook delivery failed; it is not resumed", "err", err)
		return
	}
	if w == nil {
		return
	}
	r.webhook = w
	if w.pending() {
		r.logger.Info("resuming webhook delivery", "webhook", redactedURL(w.rec.URL), "attempts", w.rec.Attempts)
	}
	m.env.webhooks.start(r)
}

// wait blocks until every delivery goroutine has exited (after ctx is
// cancelled, each returns within an attempt's timeout).
func (s *webhookSender) wait() { s.wg.Wait() }

// deliver makes the attempts of r's delivery that are left, waiting
// between them as the record says, and records each outcome.
func (s *webhookSender) deliver(r *run) {
	w := r.webhook
	w.mu.Lock()
	target, untrusted := w.rec.URL, w.rec.Untrusted
	w.mu.Unlock()
	logger := r.logger.With("webhook", redactedURL(target))
	body := s.body(r)
	for {
		w.mu.Lock()
		attempt, next := w.rec.Attempts+1, w.rec.NextAttemptAt
		w.mu.Unlock()
		if next != nil && !sleepContext(s.ctx, time.Until(*next)) {
			return
		}
		err := s.post(target, untrusted, body)
		if s.ctx.Err() != nil {
			return // shutdown cut the attempt: it stays pending
		}
		now := time.Now().UTC()
		last := attempt >= s.timing.MaxAttempts
		// Counted before the record shows the outcome, so that whoever
		// sees the outcome in the run view sees it in /metrics too.
		switch {
		case err == nil:
			s.metrics.webhookDelivery(webhookDelivered)
		case last:
			s.metrics.webhookDelivery(webhookFailed)
		default:
			s.metrics.webhookDelivery("retried")
		}
		var reason, detail string
		if err != nil {
			reason, detail = err.Error(), peerDetail(err)
			if detail == reason {
				detail = ""
			}
		}
		saveErr := w.update(func(rec *webhookRecord) {
			rec.Attempts, rec.NextAttemptAt = attempt, nil
			rec.LastError, rec.LastErrorDetail = reason, detail
			switch {
			case err == nil:
				rec.Status, rec.DeliveredAt = webhookDelivered, &now
			case last:
				rec.Status = webhookFailed
			default:
				at := now.Add(backoffDelay(s.timing.RetryBase, s.timing.RetryMax, attempt))
				rec.NextAttemptAt = &at
			}
		})
		if saveErr != nil {
			logger.Error("writing the webhook delivery to disk failed; a restart may repeat or drop it", "err", saveErr)
		}
		switch {
		case err == nil:
			logger.Info("webhook delivered", "attempts", attempt)
			return
		case last:
			logger.Warn("webhook delivery failed; giving up", "attempts", attempt, "err", peerDetail(err))
			return
		}
		logger.Warn("webhook attempt failed; retrying", "attempt", attempt, "err", peerDetail(err))
	}
}

// A webhookBody is what a delivery posts.
type webhookBody struct {
	Type string  `json:"type"`
	Run  runView `json:"run"`
}

// body returns the delivery of ended run r: its terminal event's type and
// its view, with the run's secrets redacted. The same bytes go out on
// every attempt.
func (s *webhookSender) body(r *run) []byte {
	v := r.view()
	return r.redactor().marshal(webhookBody{Type: terminalEventType(v.Status), Run: v}, false)
}

// post makes one attempt: POST body to target within the attempt timeout,
// signed when a secret is set. Any answer but a 2xx is an error, which
// never holds the URL; for an untrusted target it is a *peerError, whose
// message quotes nothing the receiver sent.
func (s *webhookSender) post(target string, untrusted bool, body []byte) error {
	err := s.attempt(target, untrusted, body)
	if untrusted {
		return hidePeer(err)
	}
	return err
}

// attempt is post with the error in full.
func (s *webhookSender) attempt(target string, untrusted bool, body []byte) error {
	ctx, cancel := context.WithTimeout(s.ctx, s.timing.AttemptTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return errors.New("the webhook URL does not parse")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "harnessd/"+buildVersion)
	if secret := s.secret(); secret != "" {
		req.Header.Set(signatureHeader, signWebhook(secret, time.Now(), body))
	}
	client := webhookClient
	if untrusted {
		client = guardedWebhookClient
	}
	resp, err := client.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err // without the URL, which may hold a token
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %s: %w", s.timing.AttemptTimeout, err)
		}
		return fmt.Errorf("post: %w", err)
	}
	defer drainClose(resp.Body)
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	prefix, _ := io.ReadAll(io.LimitReader(resp.Body, webhookErrorBytes))
	return &httpStatusError{StatusCode: resp.StatusCode, Body: shortText(printable(prefix), webhookErrorBytes)}
}

// signWebhook returns the Harness-Signature of body sent at t:
// "t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by secret>".
func signWebhook(secret string, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "."))
	mac.Write(body)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}
