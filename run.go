package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// This file holds one run: its record and events, the agent loop (model
// call, concurrent tool calls, results back) and how it ends.

// A runEvent is one entry of a run's event history, as the API streams it.
type runEvent struct {
	Seq  int       `json:"seq"`
	Type string    `json:"type"`
	Time time.Time `json:"time"`
	Data any       `json:"data,omitempty"`
}

// A runView is a run as GET /v1/runs/{id} shows it.
type runView struct {
	ID             string         `json:"id"`
	Status         string         `json:"status"`
	Prompt         string         `json:"prompt"`
	Profile        string         `json:"profile,omitempty"`
	ProfileFound   *bool          `json:"profile_found,omitempty"`
	Model          string         `json:"model"`
	Output         string         `json:"output"`
	Error          string         `json:"error,omitempty"`
	Steps          int            `json:"steps"`
	ToolCalls      int            `json:"tool_calls"`
	Usage          modelUsage     `json:"usage"`
	Servers        []serverStatus `json:"servers"`
	ActivatedTools []string       `json:"activated_tools"`
	CreatedAt      time.Time      `json:"created_at"`
	StartedAt      *time.Time     `json:"started_at,omitempty"`
	EndedAt        *time.Time     `json:"ended_at,omitempty"`
}

// A run is one agent run. Its fields below mu change as it progresses;
// readers take views. Safe for concurrent use.
type run struct {
	id        string
	req       runRequest
	model     modelSpec
	provider  modelProvider
	maxSteps  int
	profile   []serverConfig
	perRun    []serverConfig
	createdAt time.Time
	cancel    context.CancelFunc
	done      chan struct{} // closed when the run reached a terminal status
	// connectMu serializes connect_mcp calls, so that two of one step
	// cannot both pass the name check before either is added.
	connectMu sync.Mutex

	mu sync.Mutex
	// guards everything below
	status       string
	profileFound *bool
	output       string
	errMsg       string
	steps        int
	toolCalls    int
	usage        modelUsage
	startedAt    time.Time
	endedAt      time.Time
	events       []runEvent
	changed      chan struct{} // closed and replaced on every new event
	scope        *runScope
	catalog      *catalog
}

// emit appends an event and wakes every follower.
func (r *run) emit(typ string, data any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, runEvent{Seq: len(r.events) + 1, Type: typ, Time: time.Now().UTC(), Data: data})
	close(r.changed)
	r.changed = make(chan struct{})
}

// eventsAfter returns the events with Seq > seq, whether the run has
// ended, and a channel closed at the next event.
func (r *run) eventsAfter(seq int) ([]runEvent, bool, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if seq < 0 {
		seq = 0
	}
	var out []runEvent
	if seq < len(r.events) {
		out = append(out, r.events[seq:]...)
	}
	return out, isTerminal(r.status), r.changed
}

// isTerminal reports whether a run with status has ended.
func isTerminal(status string) bool {
	return status == runCompleted || status == runFailed || status == runCancelled
}

// view returns the run's current state.
func (r *run) view() runView {
	r.mu.Lock()
	defer r.mu.Unlock()
	v := runView{
		ID:           r.id,
		Status:       r.status,
		Prompt:       r.req.Prompt,
		Profile:      r.req.Profile,
		ProfileFound: r.profileFound,
		Model:        r.provider.name(),
		Output:       r.output,
		Error:        r.errMsg,
		Steps:        r.steps,
		ToolCalls:    r.toolCalls,
		Usage:        r.usage,
		Servers:      []serverStatus{},
		CreatedAt:    r.createdAt,
	}
	if !r.startedAt.IsZero() {
		t := r.startedAt
		v.StartedAt = &t
	}
	if !r.endedAt.IsZero() {
		t := r.endedAt
		v.EndedAt = &t
	}
	if r.scope != nil {
		v.Servers = r.scope.localStatuses()
	}
	if r.catalog != nil {
		v.ActivatedTools = r.catalog.activatedNames()
	}
	if v.ActivatedTools == nil {
		v.ActivatedTools = []string{}
	}
	return v
}

// finish closes the run's servers, then records the terminal status, so
// whoever sees the status also sees the servers closed.
func (m *runManager) finish(r *run, status, output, errMsg string) {
	r.mu.Lock()
	scope := r.scope
	r.mu.Unlock()
	if scope != nil {
		scope.close()
	}
	r.mu.Lock()
	r.status = status
	r.output = output
	r.errMsg = errMsg
	r.endedAt = time.Now().UTC()
	r.mu.Unlock()
	data := map[string]any{"status": status}
	if output != "" {
		data["output"] = output
	}
	if errMsg != "" {
		data["error"] = errMsg
	}
	r.emit("run."+status, data)
	m.opts.Metrics.runEnded(status)
	m.logger.Info("run ended", "run", r.id, "status", status, "steps", r.view().Steps)
	close(r.done)
}

// execute runs the agent loop until a terminal status.
func (m *runManager) execute(ctx context.Context, r *run) {
	logger := m.logger.With("run", r.id)
	scope := m.opts.Registry.newScope(logger)
	cat := newCatalog(scope.toolSets)
	r.mu.Lock()
	r.status = runRunning
	r.startedAt = time.Now().UTC()
	r.scope = scope
	r.catalog = cat
	r.mu.Unlock()
	r.emit("run.started", map[string]any{"model": r.provider.name(), "max_steps": r.maxSteps})
	if r.profileFound != nil && !*r.profileFound {
		r.emit("profile.missing", map[string]any{"profile": r.req.Profile, "message": "no profile file found; running without profile servers"})
	}

	onServer := func(ev scopeEvent) {
		if ev.Err != nil {
			r.emit("mcp.server.failed", map[string]any{"server": ev.Server, "source": ev.Source, "error": ev.Err.Error()})
			return
		}
		r.emit("mcp.server.connected", map[string]any{"server": ev.Server, "source": ev.Source, "tools": ev.Tools})
	}
	scope.open(ctx, r.profile, profileServer, onServer)
	scope.open(ctx, r.perRun, perRunServer, onServer)

	messages := []chatMessage{{Role: "user", Content: r.req.Prompt}}
	for step := 1; step <= r.maxSteps; step++ {
		if ctx.Err() != nil {
			m.finish(r, runCancelled, "", "run cancelled")
			return
		}
		offered := cat.offered()
		defs := make([]toolDef, 0, len(offered))
		for _, e := range offered {
			defs = append(defs, toolDef{Name: e.Name, Description: e.Description, InputSchema: e.InputSchema})
		}
		resp, err := r.provider.complete(ctx, modelRequest{
			Model:     r.model.Model,
			System:    r.req.SystemPrompt,
			Messages:  messages,
			Tools:     defs,
			MaxTokens: r.model.MaxTokens,
		})
		if err != nil {
			if ctx.Err() != nil {
				m.finish(r, runCancelled, "", "run cancelled")
				return
			}
			m.finish(r, runFailed, "", fmt.Sprintf("step %d: %v", step, err))
			return
		}
		r.mu.Lock()
		r.steps = step
		r.usage.add(resp.Usage)
		r.mu.Unlock()
		calls := make([]string, 0, len(resp.ToolCalls))
		for _, tc := range resp.ToolCalls {
			calls = append(calls, tc.Name)
		}
		r.emit("model.response", map[string]any{"step": step, "content": resp.Content, "tool_calls": calls, "usage": resp.Usage, "stop_reason": resp.StopReason})
		messages = append(messages, chatMessage{Role: "assistant", Content: resp.Content, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) == 0 {
			m.finish(r, runCompleted, resp.Content, "")
			return
		}
		results := m.runToolCalls(ctx, r, scope, cat, step, resp.ToolCalls)
		if ctx.Err() != nil {
			m.finish(r, runCancelled, "", "run cancelled")
			return
		}
		messages = append(messages, results...)
	}
	m.finish(r, runFailed, "", fmt.Sprintf("max_steps (%d) reached without a final answer: raise max_steps or narrow the prompt", r.maxSteps))
}

// runToolCalls runs one step's tool calls concurrently and returns their
// results in the order of the calls.
func (m *runManager) runToolCalls(ctx context.Context, r *run, scope *runScope, cat *catalog, step int, calls []toolCall) []chatMessage {
	results := make([]chatMessage, len(calls))
	var wg sync.WaitGroup
	for i, tc := range calls {
		wg.Add(1)
		// Owned by runToolCalls; ends when the call returns (each call is
		// bounded by its server's timeout and by ctx).
		go func() {
			defer wg.Done()
			r.emit("tool.call.started", map[string]any{"step": step, "call_id": tc.ID, "name": tc.Name})
			start := time.Now()
			text, isError, server := m.callTool(ctx, r, scope, cat, tc)
			elapsed := time.Since(start)
			outcome := "ok"
			if isError {
				outcome = "error"
			}
			m.opts.Metrics.toolCall(server, outcome, elapsed)
			data := map[string]any{"step": step, "call_id": tc.ID, "name": tc.Name, "duration_ms": float64(elapsed.Microseconds()) / 1000, "is_error": isError}
			if isError {
				data["error"] = truncate(text, 2000)
			}
			r.emit("tool.call.completed", data)
			r.mu.Lock()
			r.toolCalls++
			r.mu.Unlock()
			results[i] = chatMessage{Role: "tool", ToolCallID: tc.ID, Content: text, IsError: isError}
		}()
	}
	wg.Wait()
	return results
}

// callTool runs one tool call and returns the text for the model, whether
// it is an error, and the server it went to ("" for built-ins).
func (m *runManager) callTool(ctx context.Context, r *run, scope *runScope, cat *catalog, tc toolCall) (string, bool, string) {
	if tc.ArgumentsError != "" {
		return fmt.Sprintf("tool %s: the arguments are not valid JSON (%s): send a JSON object", tc.Name, tc.ArgumentsError), true, ""
	}
	args := tc.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	entry, ok := cat.lookup(tc.Name)
	if !ok {
		return fmt.Sprintf("unknown tool %q: use find_tool to search for tools, then call them by the names it returns", tc.Name), true, ""
	}
	var (
		text string
		err  error
	)
	switch entry.Name {
	case toolFindTool:
		text, err = cat.findTool(args)
	case toolConnectMCP:
		text, err = m.connectMCP(ctx, r, scope, cat, args)
	case toolListMCPResources:
		text, err = listResourcesTool(ctx, scope, args)
	case toolReadMCPResource:
		text, err = readResourceTool(ctx, scope, args)
	default:
		cat.activate(entry.Name)
		res, callErr := scope.callTool(ctx, entry.Server, entry.ServerTool, args)
		if callErr != nil {
			return callErr.Error(), true, entry.Server
		}
		text := resultToText(res)
		if text == "" {
			text = "(the tool returned no content)"
		}
		return text, res.IsError, entry.Server
	}
	if err != nil {
		return err.Error(), true, ""
	}
	return text, false, ""
}
