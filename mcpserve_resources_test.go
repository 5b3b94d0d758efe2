package main

import (
	"encoding/json"
	"testing"
)

// This file tests the run resources' updates at 2026-07-28: a
// subscriptions/listen with resourceSubscriptions.

// TestMCPServeListenResources: at 2026-07-28, subscriptions/listen with
// resourceSubscriptions (no extension needed) acknowledges only the
// key's runs' URIs, sends notifications/resources/updated for them as the
// run goes, and ends once the run has ended.
func TestMCPServeListenResources(t *testing.T) {
	t.Parallel()
	at := newMCPTest(t, findThenEcho()...)
	c := newTaskClient(t, at, mcpAliceToken, sessionlessProtocolVersion)
	c.caps = map[string]any{}
	started := c.call(t, "tools/call", map[string]any{"name": "start_run", "arguments": json.RawMessage(`{"prompt":"echo hello"}`)})
	var res mcpToolResult
	if started.Error != nil || json.Unmarshal(started.Result, &res) != nil {
		t.Fatalf("start_run = %s %v", started.Result, started.Error)
	}
	ids, _ := res.StructuredContent.(map[string]any)
	id, _ := ids["run_id"].(string)
	if id == "" {
		t.Fatalf("start_run = %s, want a run_id", started.Result)
	}
	uri := "harnessd://runs/" + id
	listen := c.raw.post(t, `{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["`+uri+`","harnessd://runs/run_nope","harnessd://nothing"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
	var acked []string
	updates := 0
	readSSE(t, listen.Body, func(msg wireMessage) bool {
		switch msg.Method {
		case "notifications/subscriptions/acknowledged":
			var p struct {
				Notifications struct {
					ResourceSubscriptions []string `json:"resourceSubscriptions"`
				} `json:"notifications"`
			}
			json.Unmarshal(msg.Params, &p)
			acked = p.Notifications.ResourceSubscriptions
		case "notifications/resources/updated":
			var p struct {
				URI string `json:"uri"`
			}
			if json.Unmarshal(msg.Params, &p); p.URI != uri {
				t.Errorf("notifications/resources/updated = %s, want %s", msg.Params, uri)
			}
			updates++
		}
		return string(msg.ID) == "9"
	})
	if len(acked) != 1 || acked[0] != uri {
		t.Errorf("acknowledged resourceSubscriptions = %v, want only %s", acked, uri)
	}
	if updates == 0 {
		t.Error("no notifications/resources/updated before the listen ended, want the run's changes")
	}
	if r := at.runs.get(id); r == nil || r.view().Status != runCompleted {
		t.Errorf("the listen ended before the run did")
	}
}
