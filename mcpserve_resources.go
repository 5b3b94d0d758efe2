package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// This file holds the MCP server's resources: a run, its messages and a
// conversation as resource templates, the caller's recent runs as the
// resource list, reads through the REST routes' own answers (runBody,
// messagesBody, conversationBody, redacted like them), and subscriptions
// that tell a session when a run changes.

// mcpResourcePrefix starts every resource URI of the MCP server.
const mcpResourcePrefix = "harnessd://"

// mcpResourceListLimit is the page size of resources/list.
const mcpResourceListLimit = 50

// mcpUpdateInterval spaces the updates of one subscription: a run's events
// (the model's text, say) come far faster than a reader re-reads.
const mcpUpdateInterval = 250 * time.Millisecond

// mcpResourceTemplates are the server's resource templates.
var mcpResourceTemplates = []map[string]string{
	{"uriTemplate": mcpResourcePrefix + "runs/{run_id}", "name": "run", "title": "A harnessd run",
		"description": "The run as GET /v1/runs/{id} shows it: status, output, error, steps, approvals, usage.", "mimeType": "application/json"},
	{"uriTemplate": mcpResourcePrefix + "runs/{run_id}/messages", "name": "run-messages", "title": "A run's messages",
		"description": "The run's conversation with the model: messages, tool calls and results.", "mimeType": "application/json"},
	{"uriTemplate": mcpResourcePrefix + "conversations/{conversation_id}", "name": "conversation", "title": "A harnessd conversation",
		"description": "A conversation: its runs and every message of theirs.", "mimeType": "application/json"},
}

// An mcpResourceRef is a resource URI taken apart: the run or the
// conversation it names, and whether it is a run's messages.
type mcpResourceRef struct {
	uri            string
	runID          string
	messages       bool
	conversationID string
}

// parseResourceURI takes a harnessd:// URI apart; ok is false for any
// other URI.
func parseResourceURI(uri string) (mcpResourceRef, bool) {
	rest, ok := strings.CutPrefix(uri, mcpResourcePrefix)
	if !ok {
		return mcpResourceRef{}, false
	}
	parts := strings.Split(rest, "/")
	ref := mcpResourceRef{uri: uri}
	switch {
	case len(parts) == 2 && parts[0] == "runs" && parts[1] != "":
		ref.runID = parts[1]
	case len(parts) == 3 && parts[0] == "runs" && parts[1] != "" && parts[2] == "messages":
		ref.runID, ref.messages = parts[1], true
	case len(parts) == 2 && parts[0] == "conversations" && parts[1] != "":
		ref.conversationID = parts[1]
	default:
		return mcpResourceRef{}, false
	}
	return ref, true
}

// resourceParams decodes the {uri} of resources/read and subscriptions.
func resourceParams(method string, params json.RawMessage) (mcpResourceRef, *rpcError) {
	var p struct {
		URI string `json:"uri"`
	}
	if json.Unmarshal(params, &p) != nil || p.URI == "" {
		return mcpResourceRef{}, rpcFail(codeInvalidParams, "%s: want params {uri}", method)
	}
	ref, ok := parseResourceURI(p.URI)
	if !ok {
		return ref, &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("%s: resource %q: not found: harnessd's resources are harnessd://runs/{run_id}, harnessd://runs/{run_id}/messages and harnessd://conversations/{conversation_id}", method, p.URI),
			Data: encodeJSON(map[string]string{"uri": p.URI})}
	}
	return ref, nil
}

// notFoundResource is the error for a resource the caller does not see,
// the same as for none.
func notFoundResource(method string, ref mcpResourceRef) *rpcError {
	return &rpcError{Code: codeResourceNotFound, Message: fmt.Sprintf("%s: resource %q: not found (resources/list lists your runs)", method, ref.uri),
		Data: encodeJSON(map[string]string{"uri": ref.uri})}
}

// listResources serves resources/list: the caller's recent runs, newest
// first, a page at a time.
func (s *mcpServer) listResources(call *mcpCall, params json.RawMessage) (any, *rpcError) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	json.Unmarshal(params, &p) // lenient: no params is the first page
	lq := listQuery{limit: mcpResourceListLimit}
	if p.Cursor != "" {
		k, ok := parseCursor(p.Cursor)
		if !ok {
			return nil, rpcFail(codeInvalidParams, "resources/list: cursor %q: not a cursor of this list; pass nextCursor as it is", p.Cursor)
		}
		lq.after = &k
	}
	runs, next := s.api.runSummaries(call.info, lq, runFilter{})
	resources := make([]resourceInfo, 0, len(runs))
	for _, r := range runs {
		resources = append(resources, resourceInfo{URI: mcpResourcePrefix + "runs/" + r.ID, Name: r.ID, Title: "run " + r.ID,
			Description: fmt.Sprintf("%s run of %s, created %s", r.Status, r.Model, r.CreatedAt.Format(time.RFC3339)), MIMEType: "application/json"})
	}
	out := map[string]any{"resources": resources}
	if next != "" {
		out["nextCursor"] = next
	}
	return out, nil
}

// readResource serves resources/read.
func (s *mcpServer) readResource(call *mcpCall, params json.RawMessage) (any, *rpcError) {
	ref, rpcErr := resourceParams("resources/read", params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	var body []byte
	var err error
	switch {
	case ref.conversationID != "":
		c := s.api.visibleConversation(ref.conversationID, call.info)
		if c == nil {
			return nil, notFoundResource("resources/read", ref)
		}
		body, err = s.api.conversationBody(c, call.info)
	default:
		run := s.api.visibleRun(ref.runID, call.info)
		if run == nil {
			return nil, notFoundResource("resources/read", ref)
		}
		if ref.messages {
			body, err = run.messagesBody()
		} else {
			body = s.api.runBody(run, call.info)
		}
	}
	if err != nil {
		return nil, rpcFail(codeInternalError, "resources/read: %s: %v", ref.uri, err)
	}
	return map[string]any{"contents": []resourceBody{{URI: ref.uri, MIMEType: "application/json", Text: string(body)}}}, nil
}

// subscribe serves resources/subscribe and resources/unsubscribe: a
// subscribed run (or its messages) sends notifications/resources/updated
// on the session's GET stream when it changes, until it ends.
func (s *mcpServer) subscribe(call *mcpCall, on bool, params json.RawMessage) (any, *rpcError) {
	method := "resources/unsubscribe"
	if on {
		method = "resources/subscribe"
	}
	sess := call.sess
	if sess == nil {
		return nil, rpcFail(codeMethodNotFound, "%s: needs a session (revisions up to %s, with initialize)", method, latestProtocolVersion)
	}
	ref, rpcErr := resourceParams(method, params)
	if rpcErr != nil {
		return nil, rpcErr
	}
	sess.mu.Lock()
	if stop := sess.subs[ref.uri]; stop != nil {
		stop()
		delete(sess.subs, ref.uri)
	}
	sess.mu.Unlock()
	if !on {
		return struct{}{}, nil
	}
	if ref.runID == "" {
		return nil, rpcFail(codeInvalidParams, "%s: %s: only runs (harnessd://runs/{run_id} and its messages) can be subscribed to", method, ref.uri)
	}
	run := s.api.visibleRun(ref.runID, call.info)
	if run == nil {
		return nil, notFoundResource(method, ref)
	}
	ctx, stop := context.WithCancel(sess.ctx)
	sess.mu.Lock()
	sess.subs[ref.uri] = stop
	sess.mu.Unlock()
	// Owned by the session; ends when the run ends (after its last
	// update), at unsubscribe, or when the session ends.
	go s.watch(ctx, run, ref.uri, sess.notify)
	return struct{}{}, nil
}

// watch sends notifications/resources/updated for uri through notify each
// time run changes, at most once per mcpUpdateInterval, and once more when
// it ends.
func (s *mcpServer) watch(ctx context.Context, run *run, uri string, notify func(method string, params any)) {
	var cursor followCursor
	defer run.unfollow(&cursor)
	_, _, changed := run.follow(&cursor)
	for {
		if !s.api.waitRun(ctx, run, changed, nil, nil) {
			return
		}
		notify("notifications/resources/updated", map[string]string{"uri": uri})
		if isClosed(run.done) {
			return
		}
		pause := time.NewTimer(mcpUpdateInterval)
		select {
		case <-pause.C:
		case <-ctx.Done():
			pause.Stop()
			return
		}
		_, _, changed = run.follow(&cursor)
	}
}
