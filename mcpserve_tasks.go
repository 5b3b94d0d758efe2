package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file holds the MCP server's tasks extension
// (io.modelcontextprotocol/tasks, SEP-2663): with the extension declared
// by the client, run answers at once with a task whose id is the run id;
// tasks/get gives the task's state from the run (the run tool's result
// inlined once it ended, its open approvals and questions as
// inputRequests while it waits), tasks/update answers those, and
// tasks/cancel cancels the run, through the same code as the run tools
// and the REST API. A session that created a task hears its status
// changes as notifications/tasks on its GET stream. A task lives as long
// as its run: across restarts, until the run is pruned.

// The tasks extension's names and harnessd's settings for it.
const (
	// extTasks names the extension in capabilities.
	extTasks = "io.modelcontextprotocol/tasks"
	// taskPollInterval is the polling interval a task suggests.
	taskPollInterval = time.Second
	// codeTasksNotDeclared is the error SEP-2663 names for a request that
	// needs the extension from a client that did not declare it.
	codeTasksNotDeclared = -32003
)

// Task statuses (SEP-2663).
const (
	mcpTaskWorking       = "working"
	mcpTaskInputRequired = "input_required"
	mcpTaskCompleted     = "completed"
	mcpTaskCancelled     = "cancelled"
)

// An mcpTask is a task as CreateTaskResult, tasks/get and
// notifications/tasks give it (the extension's DetailedTask): the run's
// state as a task, with its open requests while it waits and its result
// once it ended.
type mcpTask struct {
	// ResultType is "task" in a CreateTaskResult, "complete" in a
	// tasks/get result, and absent in a notification.
	ResultType    string `json:"resultType,omitempty"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	// TTLMs is always null: a task lasts as long as its run is kept.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	// InputRequests are the run's open approvals and questions, by their
	// ids, while the task is input_required.
	InputRequests map[string]mcpTaskInput `json:"inputRequests,omitempty"`
	// Result is the run tool's result once the task completed.
	Result *mcpToolResult `json:"result,omitempty"`
}

// An mcpTaskInput is one request a task waits for the client to answer:
// an elicitation/create, answered by tasks/update with its ElicitResult.
type mcpTaskInput struct {
	Method string         `json:"method"`
	Params map[string]any `json:"params"`
}

// mcpTaskOf returns run as a task. A failed run is a completed task whose
// result is the run tool's isError result, as the extension wants for a
// tool's own errors (failed is for JSON-RPC errors); a cancelled run is a
// cancelled task.
func mcpTaskOf(run *run) mcpTask {
	v := run.view()
	rd := run.redactor()
	updated := v.CreatedAt
	for _, at := range []*time.Time{v.StartedAt, v.EndedAt} {
		if at != nil && at.After(updated) {
			updated = *at
		}
	}
	t := mcpTask{TaskID: run.id, CreatedAt: v.CreatedAt.UTC().Format(time.RFC3339Nano),
		PollIntervalMs: taskPollInterval.Milliseconds()}
	switch v.Status {
	case runCompleted, runFailed:
		t.Status = mcpTaskCompleted
		t.Result = runOutcome(run)
		if v.Status == runFailed {
			t.StatusMessage = "run failed: " + rd.redact(v.Error)
		}
	case runCancelled:
		t.Status = mcpTaskCancelled
		t.StatusMessage = "run cancelled: " + rd.redact(v.Error)
	default:
		t.Status = mcpTaskWorking
		t.StatusMessage = "run is " + v.Status
		var open []inputRequest
		if run.input != nil && run.input.Queue != nil {
			questions, approvals := run.input.Queue.snapshot()
			open = append(questions, approvals...)
		}
		if len(open) == 0 {
			break
		}
		t.Status = mcpTaskInputRequired
		t.InputRequests = map[string]mcpTaskInput{}
		var waits []string
		for _, req := range open {
			t.InputRequests[req.ID] = mcpTaskInput{Method: "elicitation/create", Params: elicitParams(run, req)}
			if req.CreatedAt.After(updated) {
				updated = req.CreatedAt
			}
			if req.approval != nil {
				waits = append(waits, "approval of tool "+req.approvalView().Tool)
			} else {
				waits = append(waits, "an answer to: "+rd.redact(req.Message))
			}
		}
		t.StatusMessage = "run waits for " + strings.Join(waits, "; ")
	}
	t.LastUpdatedAt = updated.UTC().Format(time.RFC3339Nano)
	return t
}

// key sums up what notifications/tasks reports a change of: the
// status and the open requests.
func (t mcpTask) key() string {
	ids := make([]string, 0, len(t.InputRequests))
	for id := range t.InputRequests {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return t.Status + " " + strings.Join(ids, ",")
}

// createTask starts the run the run tool's arguments ask for and returns
// its task (a CreateTaskResult), or the isError result saying why no run
// started. A session's GET stream hears the task's status changes.
func (s *mcpServer) createTask(call *mcpCall, args json.RawMessage) any {
	run, bad := s.startRun("run", call, args)
	if bad != nil {
		return bad
	}
	t := mcpTaskOf(run)
	t.ResultType = "task"
	if sess := call.sess; sess != nil {
		// Owned by the session; ends when the run ends (after its last
		// notification), when the session ends, or at shutdown.
		go s.notifyTask(sess.ctx, run, t.key(), func(msg []byte) { sess.push(msg) })
	}
	s.api.logger.Info("mcp task created", "run", run.id, "key", call.info.key)
	return t
}

// notifyTask sends notifications/tasks through send each time run's task
// changes status or open requests (from last, the key of the state the
// client has; "" sends the current state first), until the run ends, ctx
// is done, or harnessd shuts down.
func (s *mcpServer) notifyTask(ctx context.Context, run *run, last string, send func([]byte)) {
	var cursor followCursor
	defer run.unfollow(&cursor)
	for {
		_, _, changed := run.follow(&cursor)
		if t := mcpTaskOf(run); t.key() != last {
			last = t.key()
			send(s.api.globalSecrets.load().marshal(mcpOutgoing{JSONRPC: "2.0", Method: "notifications/tasks", Params: t}, false))
		}
		if isClosed(run.done) {
			if t := mcpTaskOf(run); t.key() != last {
				continue // ended after the state above was taken
			}
			return
		}
		if !s.api.waitRun(ctx, run, changed, nil, nil) {
			return
		}
	}
}

// taskParams are the params of tasks/get, tasks/update and tasks/cancel.
type taskParams struct {
	TaskID         string                     `json:"taskId"`
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
}

// findTask decodes a tasks/* request's params and returns the run its
// taskId names, when the caller sees it; else the JSON-RPC error to
// answer, the same for another key's task as for none. Changing a task
// needs the runs:write scope.
func (s *mcpServer) findTask(method string, call *mcpCall, params json.RawMessage) (*run, taskParams, *rpcError) {
	var p taskParams
	if err := json.Unmarshal(params, &p); err != nil || p.TaskID == "" {
		return nil, p, rpcFail(codeInvalidParams, "%s: want params {taskId} with the taskId run gave", method)
	}
	if method != "tasks/get" && !call.info.has(scopeRunsWrite) {
		return nil, p, rpcFail(codeInvalidRequest, "%s: key %q lacks the %s scope it needs; use a key with %s or admin", method, call.info.key, scopeRunsWrite, scopeRunsWrite)
	}
	run := s.api.visibleRun(p.TaskID, call.info)
	if run == nil {
		return nil, p, rpcFail(codeInvalidParams, "%s: task %q: not found (a task's id is its run's; list_runs lists yours)", method, p.TaskID)
	}
	return run, p, nil
}

// getTask serves tasks/get: the task's current state.
func (s *mcpServer) getTask(call *mcpCall, params json.RawMessage) (any, *rpcError) {
	run, _, rpcErr := s.findTask("tasks/get", call, params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	t := mcpTaskOf(run)
	t.ResultType = "complete"
	return t, nil
}

// taskAck is the empty acknowledgement of tasks/update and tasks/cancel.
var taskAck = map[string]string{"resultType": "complete"}

// updateTask serves tasks/update: each of inputResponses answers the open
// approval or question of its key, through the same code as elicitation
// (answerRequest); keys that are not open are ignored, as the extension
// wants. An answer the request does not take (one that fails its schema,
// or a malformed decision) is an error naming its key; the request stays
// open and the other answers are delivered.
func (s *mcpServer) updateTask(call *mcpCall, params json.RawMessage) (any, *rpcError) {
	run, p, rpcErr := s.findTask("tasks/update", call, params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	if len(p.InputResponses) == 0 {
		return nil, rpcFail(codeInvalidParams, "tasks/update: task %q: inputResponses: missing: answer the inputRequests tasks/get gave, by their keys", run.id)
	}
	if err := s.answerResponses(run, p.InputResponses, call.info); err != nil {
		return nil, rpcFail(codeInvalidParams, "tasks/update: task %q: inputResponses: %v (want {action, content} following the request's requestedSchema)", run.id, err)
	}
	return taskAck, nil
}

// cancelTask serves tasks/cancel: the run is cancelled as the REST API
// and cancel_run do (cancelAndWait). Cancelling a task that already ended
// is acknowledged and changes nothing, as the extension wants.
func (s *mcpServer) cancelTask(ctx context.Context, call *mcpCall, params json.RawMessage) (any, *rpcError) {
	run, _, rpcErr := s.findTask("tasks/cancel", call, params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	if !isClosed(run.done) {
		s.api.cancelAndWait(ctx, run, call.info) // an ended run's 409 is no error here
	}
	return taskAck, nil
}

// subscriptionsListen serves subscriptions/listen (2026-07-28): notifications.taskIds
// (with the tasks extension) streams notifications/tasks for those tasks,
// notifications.resourceSubscriptions streams
// notifications/resources/updated for those runs' resources, each until
// its run ends; the acknowledgement names what the key may follow. The
// request ends once everything it follows has ended.
func (s *mcpServer) subscriptionsListen(ctx context.Context, call *mcpCall, params json.RawMessage) (any, *rpcError) {
	var p struct {
		Notifications struct {
			TaskIDs               []string `json:"taskIds"`
			ResourceSubscriptions []string `json:"resourceSubscriptions"`
		} `json:"notifications"`
	}
	json.Unmarshal(params, &p) // lenient: what is not understood is not agreed to
	want := p.Notifications
	if len(want.TaskIDs) == 0 && len(want.ResourceSubscriptions) == 0 {
		return nil, rpcFail(codeMethodNotFound, "subscriptions/listen: harnessd sends task and resource notifications this way: name notifications.taskIds (with the %s extension) or notifications.resourceSubscriptions (harnessd://runs/... URIs)", extTasks)
	}
	if len(want.TaskIDs) > 0 && !call.tasks {
		return nil, &rpcError{Code: codeTasksNotDeclared, Message: fmt.Sprintf("subscriptions/listen: taskIds need the %s extension: declare it in _meta's io.modelcontextprotocol/clientCapabilities", extTasks),
			Data: encodeJSON(map[string]any{"requiredCapabilities": map[string]any{"extensions": map[string]any{extTasks: struct{}{}}}})}
	}
	if call.stream == nil {
		return nil, rpcFail(codeInvalidRequest, "subscriptions/listen: needs an SSE answer: send Accept: text/event-stream")
	}
	var wg sync.WaitGroup
	follow := func(f func()) {
		wg.Add(1)
		// Owned by this request; ends when its run ends (after its last
		// notification), with the request, or at shutdown.
		go func() {
			defer wg.Done()
			f()
		}()
	}
	taskIDs, uris := []string{}, []string{}
	var runs []*run
	for _, id := range want.TaskIDs {
		if run := s.api.visibleRun(id, call.info); run != nil && !slices.Contains(taskIDs, id) {
			taskIDs = append(taskIDs, id)
			runs = append(runs, run)
		}
	}
	var watched []*run
	for _, uri := range want.ResourceSubscriptions {
		ref, ok := parseResourceURI(uri)
		if !ok || ref.runID == "" || slices.Contains(uris, uri) {
			continue
		}
		if run := s.api.visibleRun(ref.runID, call.info); run != nil {
			uris = append(uris, uri)
			watched = append(watched, run)
		}
	}
	call.send("notifications/subscriptions/acknowledged", map[string]any{"notifications": map[string]any{"taskIds": taskIDs, "resourceSubscriptions": uris}})
	send := func(msg []byte) { call.stream.write(msg) }
	for _, run := range runs {
		follow(func() { s.notifyTask(ctx, run, "", send) })
	}
	for i, run := range watched {
		follow(func() { s.watch(ctx, run, uris[i], call.send) })
	}
	ended := make(chan struct{})
	// Owned by this request; ends once every follower has.
	go func() {
		wg.Wait()
		close(ended)
	}()
	heartbeat := time.NewTicker(s.api.heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-ended:
			return struct{}{}, nil
		case <-heartbeat.C:
			call.stream.comment("keep-alive")
		case <-ctx.Done():
			<-ended
			return struct{}{}, nil
		}
	}
}
