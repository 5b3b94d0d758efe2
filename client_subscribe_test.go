package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

// This file tests subscriptions/listen against a scripted server of revision
// 2026-07-28 that ends each subscription itself; the Go SDK server's
// subscriptions are tested in client_sdkpeer_test.go.

// A listenServer is a scripted Streamable HTTP server of revision
// 2026-07-28: on subscriptions/listen it acknowledges, sends one tools
// list_changed and ends the subscription with its result.
type listenServer struct {
	listens atomic.Int32
	asked   atomic.Value // the notifications the last subscription asked for, as JSON
}

func (s *listenServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "POST only", http.StatusMethodNotAllowed)
		return
	}
	var msg struct {
		ID     json.RawMessage            `json:"id"`
		Method string                     `json:"method"`
		Params map[string]json.RawMessage `json:"params"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil || len(msg.ID) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	answer := func(result string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
	}
	switch msg.Method {
	case "server/discover":
		answer(`{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{"listChanged":true}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"listener","version":"1"}}}`)
	case "tools/list":
		answer(`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`)
	case "subscriptions/listen":
		s.listens.Add(1)
		s.asked.Store(string(msg.Params["notifications"]))
		w.Header().Set("Content-Type", "text/event-stream")
		meta := fmt.Sprintf(`{"io.modelcontextprotocol/subscriptionId":%s}`, msg.ID)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/subscriptions/acknowledged\",\"params\":{\"_meta\":%s,\"notifications\":{\"toolsListChanged\":true}}}\n\n", meta)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\",\"params\":{\"_meta\":%s}}\n\n", meta)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"_meta\":%s}}\n\n", msg.ID, meta)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no %s"}}`, msg.ID, msg.Method)
	}
}

func TestSubscriptionReopened(t *testing.T) {
	srv := &listenServer{}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	changes := make(chan struct{}, 8)
	c := connectPeer(t, httpPeerConfig("listener", transportHTTP, hs.URL), clientOptions{OnToolsChanged: func() { changes <- struct{}{} }})
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
