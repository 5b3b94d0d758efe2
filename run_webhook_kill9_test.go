package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// This file holds the crash test of webhooks: the real harnessd binary
// killed with SIGKILL between a run's end and its webhook's delivery,
// while another run with a webhook is active, and while a third waits for
// an approval (its waiting delivery made), then restarted on the same
// home: the three runs' ends are delivered, signed.

func TestWebhookSurvivesKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the harnessd binary")
	}
	skipUnlessLinux(t)
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "finished before the kill"}, fakeTurn{Hang: true},
		fakeTurn{ToolCalls: calls(toolConnectMCP, `{"url":"http://127.0.0.1:9/mcp"}`)})
	// The first delivery hangs until harnessd dies; the others succeed.
	rcv := newWebhookReceiver(t, 0)
	bin := buildHarnessd(t)
	home, workspace := t.TempDir(), t.TempDir()
	config := fmt.Sprintf("[webhooks]\nsecret = %q\n", testWebhookSecret)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	env := fakeModelEnv(f, home, "HARNESS_MODEL=openai/fake-model")
	first, at := serveHarnessd(t, bin, env, workspace)

	hook := rcv.srv.URL + "/hook?token=receiver-token-0123"
	ended := at.postRun(t, "", fmt.Sprintf(`{"prompt":"end","webhook_url":%q}`, hook))
	waitUntil(t, "the first attempt reaches the receiver", func() bool { return len(rcv.received()) == 1 })
	active := at.postRun(t, "", fmt.Sprintf(`{"prompt":"hang","webhook_url":%q}`, hook))
	waitUntil(t, "the second run calls the model", func() bool { return len(f.requests()) == 2 })
	waiter := at.postRun(t, "", fmt.Sprintf(`{"prompt":"connect","approval":"writes","webhook_url":%q}`, hook))
	waitUntil(t, "the third run's waiting delivery is made", func() bool { return len(rcv.received()) == 2 })
	if d := rcv.received()[1]; d.Type != "run.waiting_approval" || d.Run.ID != waiter || !d.signedOK {
		t.Fatalf("second delivery = %s of run %s (signed %v), want run.waiting_approval of %s, signed", d.Type, d.Run.ID, d.signedOK, waiter)
	}
	var v runView
	if err := json.Unmarshal(getOK(t, at, "/v1/runs/"+ended), &v); err != nil {
		t.Fatal(err)
	}
	if v.Status != runCompleted || v.Webhook == nil || v.Webhook.Status != webhookPending || v.Webhook.Attempts != 0 {
		t.Fatalf("before the kill: run %s is %s with webhook %+v, want completed with its delivery pending", ended, v.Status, v.Webhook)
	}

	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-first.exited
	second, at := serveHarnessd(t, bin, env, workspace)

	views := map[string]runView{}
	waitUntil(t, "every run's end is delivered after the restart", func() bool {
		for _, id := range []string{ended, active, waiter} {
			var v runView
			if err := json.Unmarshal(getOK(t, at, "/v1/runs/"+id), &v); err != nil || v.Webhook == nil || v.Webhook.Status == webhookPending {
				return false
			}
			views[id] = v
		}
		return true
	})
	for id, v := range views {
		if v.Webhook.Status != webhookDelivered || v.Webhook.Attempts != 1 || v.Webhook.Type != webhookType(v.Status) {
			t.Errorf("run %s (%s) after the restart: webhook %+v, want its end delivered at its first recorded attempt", id, v.Status, v.Webhook)
		}
	}
	want := map[string]string{ended: "run.completed", active: "run.failed", waiter: "run.failed"}
	got := rcv.received()
	if len(got) != 5 {
		t.Fatalf("receiver got %d deliveries, want 5 (the one cut by the kill, the waiting one, then one per run)", len(got))
	}
	for _, d := range got[2:] {
		if !d.signedOK || want[d.Run.ID] != d.Type {
			t.Errorf("delivery of run %s: %s, signed %v; want %s, signed", d.Run.ID, d.Type, d.signedOK, want[d.Run.ID])
		}
		if d.Run.ID != ended && d.Run.Error != interruptedError {
			t.Errorf("delivery of the interrupted run: error %q, want %q", d.Run.Error, interruptedError)
		}
		delete(want, d.Run.ID)
	}
	if len(want) != 0 {
		t.Errorf("runs never delivered after the restart: %v", want)
	}
	for _, p := range []*harnessdProcess{first, second} {
		if strings.Contains(p.log(), "receiver-token-0123") || strings.Contains(p.log(), testWebhookSecret) {
			t.Errorf("harnessd's log shows the webhook URL's query or the secret:\n%s", p.log())
		}
	}
}
