package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// This file tests subscriptions/listen against a scripted server of revision
// 2026-07-28 that ends each subscription itself; the Go SDK server's
// subscriptions are tested in client_sdkpeer_test.go.

// A listenServer is a fake server of revision 2026-07-28: on
// subscriptions/listen it acknowledges, sends one tools list_changed and
// ends the subscription with its result.
type listenServer struct {
	*fakeMCP
	listens atomic.Int32
	asked   atomic.Value // the notifications the last subscription asked for, as JSON
}

// newListenServer starts a listenServer, closed at cleanup.
func newListenServer(t *testing.T) *listenServer {
	s := &listenServer{}
	s.fakeMCP = newFakeMCP(t, fakeMCPConfig{Tools: []string{"t"}, Script: s.script})
	return s
}

func (s *listenServer) script(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, m.ID, result)
	}
	switch {
	case len(m.ID) == 0:
		return false
	case m.Method == "server/discover":
		answer(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"listener","version":"1"}}}`)
	case m.Method == "subscriptions/listen":
		var params map[string]json.RawMessage
		json.Unmarshal(m.Params, &params)
		s.listens.Add(1)
		s.asked.Store(string(params["notifications"]))
		w.Header().Set("Content-Type", "text/event-stream")
		meta := fmt.Sprintf(`{"io.modelcontextprotocol/subscriptionId":%s}`, m.ID)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":%s,\"notifications\":{\"toolsListChanged\":true}}}\n\n", meta)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":%s}}\n\n", meta)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"_meta\":%s}}\n\n", m.ID, meta)
	default:
		return false
	}
	return true
}

func TestSubscriptionReopened(t *testing.T) {
	t.Parallel()
	srv := newListenServer(t)
	changes := make(chan struct{}, 8)
	c := connectPeer(t, httpPeerConfig("listener", transportHTTP, srv.URL), clientOptions{
		// Reopened subscriptions keep coming: never block the session on them.
		OnToolsChanged: func() {
			select {
			case changes <- struct{}{}:
			default:
			}
		},
		ListenBackoffMin: 10 * time.Millisecond,
	})
	if got := c.protocolVersion(); got != sessionlessProtocolVersion {
		t.Fatalf("protocol version = %q, want %q", got, sessionlessProtocolVersion)
	}
	// The first subscription's list_changed; the re-list when it is opened
	// again after the server ended it (changes may have gone unnoticed);
	// the second subscription's list_changed.
	for i := range 3 {
		select {
		case <-changes:
		case <-time.After(waitLimit):
			t.Fatalf("change %d: none within the wait limit (subscriptions opened: %d)", i+1, srv.listens.Load())
		}
	}
	if n := srv.listens.Load(); n < 2 {
		t.Errorf("subscriptions/listen requests = %d, want the subscription opened again (>= 2)", n)
	}
	if got := srv.asked.Load(); got != `{"toolsListChanged":true}` {
		t.Errorf("subscription asked for %v, want only toolsListChanged (the server offers no resources)", got)
	}
}
