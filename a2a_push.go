package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
)

// This file holds A2A push notifications: the push configs of tasks
// (Create, Get, List, DeleteTaskPushNotificationConfig, and a send's
// configuration.taskPushNotificationConfig), and their deliveries: each
// time a task's state changes (it starts working, needs input, ends),
// every config of the task gets {"task": <the task>} POSTed through the
// runs' webhook machinery (run_webhook.go): signed with Harness-Signature
// when [webhooks] secret is set, retried with backoff, a newer state
// superseding an older still pending, and, for a URL a key without the
// admin scope chose, the connect_mcp checks at creation and the guarded
// dialer and redirect rules at every attempt. The config's token goes as
// X-A2A-Notification-Token, its authentication as Authorization; neither
// is ever shown back. A config lasts until the task ends (it gets the end)
// or it is deleted. Configs live in memory: a restart forgets them (the
// run's own webhook_url is the durable way).

// a2aTokenHeader carries a push config's token.
const a2aTokenHeader = "X-A2A-Notification-Token"

// An a2aPushConfig is a TaskPushNotificationConfig.
type a2aPushConfig struct {
	Tenant         string       `json:"tenant,omitempty"`
	ID             string       `json:"id,omitempty"`
	TaskID         string       `json:"taskId,omitempty"`
	URL            string       `json:"url"`
	Token          string       `json:"token,omitempty"`
	Authentication *a2aAuthInfo `json:"authentication,omitempty"`
}

// An a2aAuthInfo is the credentials a push carries: Authorization:
// <scheme> <credentials>.
type a2aAuthInfo struct {
	Scheme      string `json:"scheme"`
	Credentials string `json:"credentials,omitempty"`
}

// An a2aPushStore is the push configs of every task. Safe for concurrent
// use.
type a2aPushStore struct {
	mu sync.Mutex
	// guards tasks and everything in them
	tasks map[string]*a2aTaskPush
}

// An a2aTaskPush is the push configs of one task, in creation order, and
// its watcher.
type a2aTaskPush struct {
	targets []*a2aPushTarget
	// stop is closed when the last config is deleted, ending the watcher.
	stop chan struct{}
}

// An a2aPushTarget is one config and its deliveries.
type a2aPushTarget struct {
	cfg  a2aPushConfig
	hook *runWebhook
}

// newA2APushStore returns an empty store.
func newA2APushStore() *a2aPushStore {
	return &a2aPushStore{tasks: map[string]*a2aTaskPush{}}
}

// shown returns cfg as Get and List show it: without its token and
// credentials.
func (cfg a2aPushConfig) shown() a2aPushConfig {
	cfg.Token = ""
	if cfg.Authentication != nil {
		cfg.Authentication = &a2aAuthInfo{Scheme: cfg.Authentication.Scheme}
	}
	return cfg
}

// create checks cfg and makes it a config of run (replacing one of the
// same id), sends it the task as it is, and starts the task's watcher when
// the task has not ended and has none.
func (s *a2aPushStore) create(g *a2aAgent, run *run, cfg a2aPushConfig, info authInfo) (a2aPushConfig, error) {
	if err := checkHTTPURL(cfg.URL); err != nil {
		return cfg, rpcErrorf(codeInvalidParams, "url: %v", err)
	}
	untrusted := !info.has(scopeAdmin)
	if untrusted {
		if err := checkUntrustedURL(cfg.URL, g.api.runs.connectAllowHosts()); err != nil {
			return cfg, rpcErrorf(codeInvalidParams, "url: %v: without the admin scope a push URL must pass the connect_mcp checks", err)
		}
	}
	header := http.Header{}
	if cfg.Token != "" {
		header.Set(a2aTokenHeader, cfg.Token)
	}
	if a := cfg.Authentication; a != nil {
		if a.Scheme == "" || strings.ContainsAny(a.Scheme, " \r\n") || strings.ContainsAny(a.Credentials, "\r\n") {
			return cfg, rpcErrorf(codeInvalidParams, "authentication: want a scheme (like \"Bearer\") without spaces and credentials on one line")
		}
		header.Set("Authorization", strings.TrimSpace(a.Scheme+" "+a.Credentials))
	}
	if cfg.ID == "" {
		cfg.ID = newID("push_")
	}
	cfg.TaskID, cfg.Tenant = run.id, ""
	target := &a2aPushTarget{cfg: cfg, hook: newRunWebhook("", webhookRecord{webhookStatus: webhookStatus{URL: cfg.URL}, Untrusted: untrusted})}
	target.hook.header = header
	v := run.view()
	watch := false
	if !isTerminal(v.Status) {
		s.mu.Lock()
		tp := s.tasks[run.id]
		if tp == nil {
			tp = &a2aTaskPush{stop: make(chan struct{})}
			s.tasks[run.id] = tp
			watch = true
		}
		tp.targets = append(removeTarget(tp.targets, cfg.ID), target)
		s.mu.Unlock()
	}
	// An ended task's config gets the end and is not kept: A2A keeps a
	// config until the task ends.
	g.deliverPush(run, v, []*a2aPushTarget{target})
	if watch {
		// Owned by the store; exits when the task ends (after its last
		// delivery is handed over), when its last config is deleted, or
		// at shutdown.
		go g.watchPush(run, statusKey(v))
	}
	g.api.logger.Info("a2a push config created", "run", run.id, "config", cfg.ID, "url", redactedURL(cfg.URL), "key", info.key)
	return cfg.shown(), nil
}

// removeTarget returns targets without the one of config id.
func removeTarget(targets []*a2aPushTarget, id string) []*a2aPushTarget {
	out := targets[:0:0]
	for _, t := range targets {
		if t.cfg.ID != id {
			out = append(out, t)
		}
	}
	return out
}

// watchPush delivers run's task to every config the task has each time
// its state changes from last, following the run's events. Once the task
// has ended, its configs are dropped.
func (g *a2aAgent) watchPush(run *run, last string) {
	var cur followCursor
	defer run.unfollow(&cur)
	g.push.mu.Lock()
	tp := g.push.tasks[run.id]
	g.push.mu.Unlock()
	if tp == nil {
		return // deleted already
	}
	for {
		_, _, changed := run.follow(&cur)
		v := run.view()
		ended := isTerminal(v.Status)
		if key := statusKey(v); key != last || ended {
			last = key
			// The configs to tell and, at the end, their removal, under
			// one lock: a config created after it belongs to a new watch.
			g.push.mu.Lock()
			targets := append([]*a2aPushTarget(nil), tp.targets...)
			if ended && g.push.tasks[run.id] == tp {
				delete(g.push.tasks, run.id)
			}
			g.push.mu.Unlock()
			g.deliverPush(run, v, targets)
		}
		if ended {
			return
		}
		select {
		case <-changed:
		case <-run.done:
		case <-tp.stop:
			return
		case <-g.api.stopping:
			return
		}
	}
}

// deliverPush hands {"task": <run seen as v>} to the webhook sender for
// each target.
func (g *a2aAgent) deliverPush(run *run, v runView, targets []*a2aPushTarget) {
	noHistory := 0
	t, err := taskOf(run, v, &noHistory)
	if err != nil {
		run.logger.Warn("a2a push: building the task failed", "err", err)
		return
	}
	body := redacted(run, a2aStreamResponse{Task: &t})
	typ := "a2a." + strings.ToLower(strings.TrimPrefix(t.Status.State, "TASK_STATE_"))
	for _, target := range targets {
		g.api.runs.env.webhooks.sendBody(target.hook, run, run.logger.With("a2a_push", target.cfg.ID), typ, body)
	}
}

// An a2aPushParams is the params of Get and DeleteTaskPushNotificationConfig
// and of ListTaskPushNotificationConfigs.
type a2aPushParams struct {
	Tenant    string `json:"tenant,omitempty"`
	TaskID    string `json:"taskId"`
	ID        string `json:"id,omitempty"`
	PageSize  int    `json:"pageSize,omitempty"`
	PageToken string `json:"pageToken,omitempty"`
}

// createPushConfig serves CreateTaskPushNotificationConfig.
func (g *a2aAgent) createPushConfig(_ http.ResponseWriter, _ *http.Request, info authInfo, _, params json.RawMessage) (any, error) {
	var cfg a2aPushConfig
	if err := decodeParams("CreateTaskPushNotificationConfig", params, &cfg); err != nil {
		return nil, err
	}
	run, err := g.findTask("taskId", cfg.TaskID, info)
	if err != nil {
		return nil, err
	}
	return g.push.create(g, run, cfg, info)
}

// pushTargets returns the configs of the task params name, once info is
// seen to see the task.
func (g *a2aAgent) pushTargets(method string, params json.RawMessage, info authInfo) (a2aPushParams, *run, []*a2aPushTarget, error) {
	var p a2aPushParams
	if err := decodeParams(method, params, &p); err != nil {
		return p, nil, nil, err
	}
	run, err := g.findTask("taskId", p.TaskID, info)
	if err != nil {
		return p, nil, nil, err
	}
	g.push.mu.Lock()
	defer g.push.mu.Unlock()
	var targets []*a2aPushTarget
	if tp := g.push.tasks[run.id]; tp != nil {
		targets = append(targets, tp.targets...)
	}
	return p, run, targets, nil
}

// getPushConfig serves GetTaskPushNotificationConfig.
func (g *a2aAgent) getPushConfig(_ http.ResponseWriter, _ *http.Request, info authInfo, _, params json.RawMessage) (any, error) {
	p, run, targets, err := g.pushTargets("GetTaskPushNotificationConfig", params, info)
	if err != nil {
		return nil, err
	}
	for _, t := range targets {
		if t.cfg.ID == p.ID {
			return t.cfg.shown(), nil
		}
	}
	return nil, rpcErrorf(a2aTaskNotFound, "push config %q of task %q: not found (ListTaskPushNotificationConfigs lists the task's)", p.ID, run.id)
}

// listPushConfigs serves ListTaskPushNotificationConfigs: every config of
// the task, in one page.
func (g *a2aAgent) listPushConfigs(_ http.ResponseWriter, _ *http.Request, info authInfo, _, params json.RawMessage) (any, error) {
	_, _, targets, err := g.pushTargets("ListTaskPushNotificationConfigs", params, info)
	if err != nil {
		return nil, err
	}
	configs := []a2aPushConfig{}
	for _, t := range targets {
		configs = append(configs, t.cfg.shown())
	}
	return map[string]any{"configs": configs, "nextPageToken": ""}, nil
}

// deletePushConfig serves DeleteTaskPushNotificationConfig: idempotent,
// as A2A wants; the last config's deletion ends the task's watcher.
func (g *a2aAgent) deletePushConfig(_ http.ResponseWriter, _ *http.Request, info authInfo, _, params json.RawMessage) (any, error) {
	p, run, _, err := g.pushTargets("DeleteTaskPushNotificationConfig", params, info)
	if err != nil {
		return nil, err
	}
	if p.ID == "" {
		return nil, rpcErrorf(codeInvalidParams, "id: missing: name the push config to delete")
	}
	g.push.mu.Lock()
	defer g.push.mu.Unlock()
	if tp := g.push.tasks[run.id]; tp != nil {
		tp.targets = removeTarget(tp.targets, p.ID)
		if len(tp.targets) == 0 {
			close(tp.stop)
			delete(g.push.tasks, run.id)
		}
	}
	return struct{}{}, nil
}
