package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// This file holds the MCP server's sessions (revisions up to 2025-11-25):
// opening, finding and ending them (DELETE), their GET stream of server
// messages, the calls in flight that notifications/cancelled finds (also
// for clients without a session), and the requests the server sends a
// client within a call (elicitation) with the answers it POSTs back.

// An mcpSession is one client's session (revisions up to 2025-11-25): the
// revision and capabilities initialize settled, the key it belongs to,
// its calls in flight, the server requests waiting for the client's
// answer, its subscriptions and its GET stream. Safe for concurrent use.
type mcpSession struct {
	id      string
	version string
	key     string // the name of the key that opened it; "" with auth off
	// elicitation: the client declared the elicitation capability.
	elicitation bool
	// tasks: the client declared the tasks extension in initialize.
	tasks bool
	// ctx ends when the session does (DELETE, expiry, shutdown of /mcp).
	ctx    context.Context
	cancel context.CancelFunc
	// stream carries server messages to the GET stream.
	stream chan []byte

	mu sync.Mutex
	// guards everything below
	lastUsed  time.Time
	listening bool                            // a GET stream is open
	inflight  map[string]*mcpInflight         // by request id
	pending   map[string]chan json.RawMessage // server requests, by id
	nextID    int
	subs      map[string]context.CancelFunc // resource subscriptions, by URI
}

// open starts a session for info's key, ending the one idle longest when
// maxMCPSessions are open, and those idle over mcpSessionIdle.
func (s *mcpServer) open(version string, info authInfo, elicitation, tasks bool) *mcpSession {
	ctx, cancel := context.WithCancel(context.Background())
	sess := &mcpSession{id: newID("mcp_"), version: version, key: info.key, elicitation: elicitation, tasks: tasks, ctx: ctx, cancel: cancel,
		stream: make(chan []byte, mcpStreamBuffer), lastUsed: time.Now(),
		inflight: map[string]*mcpInflight{}, pending: map[string]chan json.RawMessage{}, subs: map[string]context.CancelFunc{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	var oldest *mcpSession
	for _, other := range s.sessions {
		used := other.used()
		if time.Since(used) > mcpSessionIdle {
			s.closeLocked(other)
			continue
		}
		if oldest == nil || used.Before(oldest.used()) {
			oldest = other
		}
	}
	if len(s.sessions) >= maxMCPSessions && oldest != nil {
		s.closeLocked(oldest)
	}
	s.sessions[sess.id] = sess
	return sess
}

// used returns when the session last served a message.
func (sess *mcpSession) used() time.Time {
	sess.mu.Lock()
	defer sess.mu.Unlock()
	return sess.lastUsed
}

// session returns session id when info's key opened it, marking it used;
// else nil.
func (s *mcpServer) session(id string, info authInfo) *mcpSession {
	s.mu.Lock()
	sess := s.sessions[id]
	s.mu.Unlock()
	if sess == nil || sess.key != info.key {
		return nil
	}
	sess.mu.Lock()
	sess.lastUsed = time.Now()
	sess.mu.Unlock()
	return sess
}

// closeLocked ends sess: its subscriptions and waits end, its calls in
// flight are cancelled (their runs go on). s.mu must be held.
func (s *mcpServer) closeLocked(sess *mcpSession) {
	delete(s.sessions, sess.id)
	sess.cancel()
}

// end answers DELETE /mcp: the session ends (204); 404 for an unknown
// one, 405 without a session.
func (s *mcpServer) end(w http.ResponseWriter, r *http.Request, info authInfo) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		w.Header().Set("Allow", "POST")
		writeRPCStatus(w, http.StatusMethodNotAllowed, nil, rpcFail(codeInvalidRequest, "DELETE /mcp ends a session: send its Mcp-Session-Id"))
		return
	}
	sess := s.session(id, info)
	if sess == nil {
		writeRPCStatus(w, http.StatusNotFound, nil, rpcFail(codeInvalidRequest, "session %q: not found", id))
		return
	}
	s.mu.Lock()
	s.closeLocked(sess)
	s.mu.Unlock()
	s.api.logger.Info("mcp session ended", "session", sess.id, "key", info.key)
	w.WriteHeader(http.StatusNoContent)
}

// listen answers GET /mcp: the session's stream of server messages
// (resource updates), as SSE, until the session ends, the client goes
// away, or harnessd shuts down. One stream per session (409 for a
// second); 405 without a session (2026-07-28 has no such stream).
func (s *mcpServer) listen(w http.ResponseWriter, r *http.Request, info authInfo) {
	id := r.Header.Get(headerSessionID)
	if id == "" {
		w.Header().Set("Allow", "POST")
		writeRPCStatus(w, http.StatusMethodNotAllowed, nil, rpcFail(codeInvalidRequest, "GET /mcp is a session's stream: send its Mcp-Session-Id"))
		return
	}
	sess := s.session(id, info)
	if sess == nil {
		writeRPCStatus(w, http.StatusNotFound, nil, rpcFail(codeInvalidRequest, "session %q: not found", id))
		return
	}
	sess.mu.Lock()
	busy := sess.listening
	sess.listening = true
	sess.mu.Unlock()
	if busy {
		writeRPCStatus(w, http.StatusConflict, nil, rpcFail(codeInvalidRequest, "session %q: a GET stream is already open: keep one", id))
		return
	}
	defer func() {
		sess.mu.Lock()
		sess.listening = false
		sess.mu.Unlock()
	}()
	st := s.openStream(w)
	if st == nil {
		return
	}
	heartbeat := time.NewTicker(s.api.heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case msg := <-sess.stream:
			if st.write(msg) != nil {
				return
			}
		case <-heartbeat.C:
			if st.comment("keep-alive") != nil {
				return
			}
		case <-sess.ctx.Done():
			return
		case <-r.Context().Done():
			return
		case <-s.api.stopping:
			return
		}
	}
}

// notify queues a notification for the session's GET stream; when the
// stream is not read fast enough, it is dropped.
func (sess *mcpSession) notify(method string, params any) {
	sess.push(encodeJSON(mcpOutgoing{JSONRPC: "2.0", Method: method, Params: params}))
}

// push queues an encoded message for the session's GET stream; when the
// stream is not read fast enough, it is dropped.
func (sess *mcpSession) push(msg []byte) {
	select {
	case sess.stream <- msg:
	default:
	}
}

// inflightKey returns where call's request id is kept: in its session, or
// by key name among the stateless calls.
func inflightKey(call *mcpCall, id json.RawMessage) string {
	if call.sess != nil {
		return string(id)
	}
	return call.info.key + "\x00" + string(id)
}

// inflight returns the call in flight that call's client names id, or nil.
func (s *mcpServer) inflight(call *mcpCall, id json.RawMessage) *mcpInflight {
	key := inflightKey(call, id)
	if call.sess != nil {
		call.sess.mu.Lock()
		defer call.sess.mu.Unlock()
		return call.sess.inflight[key]
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stateless[key]
}

// track records call as in flight until the returned func is called; its
// context ends when the client cancels the call (cause errMCPCancelled),
// when the request does, or when the session ends.
func (s *mcpServer) track(ctx context.Context, call *mcpCall) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	in := &mcpInflight{cancel: cancel}
	key := inflightKey(call, call.id)
	if call.sess != nil {
		stop := context.AfterFunc(call.sess.ctx, func() { cancel(errors.New("session ended")) })
		call.sess.mu.Lock()
		call.sess.inflight[key] = in
		call.sess.mu.Unlock()
		return ctx, func() {
			stop()
			call.sess.mu.Lock()
			if call.sess.inflight[key] == in {
				delete(call.sess.inflight, key)
			}
			call.sess.mu.Unlock()
			cancel(nil)
		}
	}
	s.mu.Lock()
	s.stateless[key] = in
	s.mu.Unlock()
	return ctx, func() {
		s.mu.Lock()
		if s.stateless[key] == in {
			delete(s.stateless, key)
		}
		s.mu.Unlock()
		cancel(nil)
	}
}

// ask sends a request to the client on the call's stream and waits for
// its answer (POSTed to the session), until ctx is done. It needs a
// session and a stream.
func (call *mcpCall) ask(ctx context.Context, method string, params any) (json.RawMessage, error) {
	sess := call.sess
	if sess == nil || call.stream == nil {
		return nil, errors.New("no session to answer on")
	}
	reply := make(chan json.RawMessage, 1)
	sess.mu.Lock()
	sess.nextID++
	id := fmt.Sprintf(`"harnessd-%d"`, sess.nextID)
	sess.pending[id] = reply
	sess.mu.Unlock()
	defer func() {
		sess.mu.Lock()
		delete(sess.pending, id)
		sess.mu.Unlock()
	}()
	msg := call.srv.api.globalSecrets.load().marshal(mcpOutgoing{JSONRPC: "2.0", ID: json.RawMessage(id), Method: method, Params: params}, false)
	if err := call.stream.write(msg); err != nil {
		return nil, err
	}
	select {
	case raw := <-reply:
		return raw, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// deliver hands a client's response to the server request waiting for it;
// one nobody waits for is dropped.
func (sess *mcpSession) deliver(msg mcpMessage) {
	sess.mu.Lock()
	reply := sess.pending[string(msg.ID)]
	sess.mu.Unlock()
	if reply == nil {
		return
	}
	result := msg.Result
	if len(msg.Error) > 0 {
		result = nil // the client refused: the question stays open
	}
	select {
	case reply <- result:
	default:
	}
}
