package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// This file tests server input through the API, with a scripted model and
// server-everything as a global server: an interactive run answered by
// POST /v1/runs/{id}/input/{request_id}, a non-interactive run, a schema
// failure, a timeout, a cancel while waiting, sampling and its cap.

const elicitTool = "mcp_everything_trigger_elicitation_request"

// newInputAPITest serves the API over a global server-everything with
// sampling on, and a model scripted with turns.
func newInputAPITest(t *testing.T, turns ...fakeTurn) *apiTest {
	t.Helper()
	cfg := stdioPeerConfig("everything", everythingStdioCommand(t))
	cfg.Sampling = true
	return newAPITest(t, newFakeModel(t, providerOpenAI, turns...), nil, cfg)
}

// openInputs returns the run's input_requests as GET /v1/runs/{id} shows them.
func (at *apiTest) openInputs(t *testing.T, r *run) (string, []inputRequest) {
	t.Helper()
	resp, data := at.do(t, http.MethodGet, "/v1/runs/"+r.id, "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/runs/%s = %d %s", r.id, resp.StatusCode, data)
	}
	var v struct {
		Status        string         `json:"status"`
		InputRequests []inputRequest `json:"input_requests"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	return v.Status, v.InputRequests
}

// requestedID waits for the run's first input.requested event and returns
// the request's id.
func requestedID(t *testing.T, r *run) string {
	t.Helper()
	ev := waitEvent(t, r, "input.requested")
	req, ok := ev.Data.(*inputRequest)
	if !ok {
		t.Fatalf("input.requested data = %#v, want an open request", ev.Data)
	}
	return req.ID
}

func TestInputInteractiveRunAnsweredOverHTTP(t *testing.T) {
	t.Parallel()
	at := newInputAPITest(t, fakeTurn{ToolCalls: calls(elicitTool, `{}`)}, answerWithResults)
	r := at.startRun(t, `{"prompt":"ask me","interactive":true}`)
	id := requestedID(t, r)

	status, open := at.openInputs(t, r)
	if status != runWaitingInput || len(open) != 1 || open[0].ID != id || open[0].Server != "everything" || len(open[0].RequestedSchema) == 0 {
		t.Fatalf("GET run = %s %+v, want waiting_input with request %s from everything and its schema", status, open, id)
	}
	path := fmt.Sprintf("/v1/runs/%s/input/%s", r.id, id)
	resp, data := at.do(t, http.MethodPost, path, "", `{"action":"accept","content":{"name":"Ada","integer":500}}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "content.integer") {
		t.Fatalf("POST %s (integer over its maximum) = %d %s, want 400 naming content.integer", path, resp.StatusCode, data)
	}
	if _, open := at.openInputs(t, r); len(open) != 1 {
		t.Fatalf("open requests after a refused answer = %+v, want the request still open", open)
	}
	resp, data = at.do(t, http.MethodPost, path, "", `{"action":"accept","content":{"name":"Ada Lovelace","check":true}}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST %s = %d %s, want 200", path, resp.StatusCode, data)
	}
	v := waitRun(t, r)
	requireCompleted(t, v)
	for _, want := range []string{"Name: Ada Lovelace", "Agreed to terms: true", "Favorite Integer: 42"} {
		if !strings.Contains(v.Output, want) {
			t.Errorf("output = %q, want %q (the answer, defaults applied, in the tool's result)", v.Output, want)
		}
	}
	if resp, _ := at.do(t, http.MethodPost, path, "", `{"action":"decline"}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST %s after the answer = %d, want 404", path, resp.StatusCode)
	}
}

func TestInputNonInteractiveDeclines(t *testing.T) {
	t.Parallel()
	at := newInputAPITest(t, fakeTurn{ToolCalls: calls(elicitTool, `{}`)}, answerWithResults)
	r := at.startRun(t, `{"prompt":"ask me"}`)
	v := waitRun(t, r)
	requireCompleted(t, v)
	if !strings.Contains(v.Output, "declined") {
		t.Errorf("output = %q, want the tool to report the decline", v.Output)
	}
	data := eventData(r, "input.requested")
	if len(data) != 1 || data[0]["action"] != actionDecline || !strings.Contains(fmt.Sprint(data[0]["reason"]), "not interactive") {
		t.Errorf("input.requested events = %v, want one saying it was declined as not interactive", data)
	}
}

func TestInputTimeoutAndCancel(t *testing.T) {
	t.Parallel()
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		at := newInputAPITest(t, fakeTurn{ToolCalls: calls(elicitTool, `{}`)}, answerWithResults)
		r := at.startRun(t, `{"prompt":"ask me","interactive":true,"input_timeout":"100ms"}`)
		v := waitRun(t, r)
		requireCompleted(t, v)
		if !strings.Contains(v.Output, "cancelled") {
			t.Errorf("output = %q, want the tool to report the cancel of the timed-out request", v.Output)
		}
		if data := eventData(r, "input.answered"); len(data) != 1 || data[0]["by"] != "timeout" {
			t.Errorf("input.answered events = %v, want one by timeout", data)
		}
	})
	t.Run("cancel while waiting", func(t *testing.T) {
		t.Parallel()
		at := newInputAPITest(t, fakeTurn{ToolCalls: calls(elicitTool, `{}`)})
		r := at.startRun(t, `{"prompt":"ask me","interactive":true}`)
		requestedID(t, r)
		if resp, data := at.do(t, http.MethodPost, "/v1/runs/"+r.id+"/cancel", "", ""); resp.StatusCode != http.StatusOK {
			t.Fatalf("POST cancel = %d %s, want 200", resp.StatusCode, data)
		}
		if status, open := at.openInputs(t, r); status != runCancelled || len(open) != 0 {
			t.Errorf("after cancel: %s with %+v open, want cancelled with none", status, open)
		}
	})
	t.Run("bad input_timeout", func(t *testing.T) {
		t.Parallel()
		at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
		resp, data := at.do(t, http.MethodPost, "/v1/runs", "", `{"prompt":"x","input_timeout":"soon"}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "input_timeout") {
			t.Errorf("POST /v1/runs with input_timeout soon = %d %s, want 400 naming input_timeout", resp.StatusCode, data)
		}
		resp, data = at.do(t, http.MethodPost, "/v1/runs", "", `{"prompt":"x","roots":["relative"]}`)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "roots[0]") {
			t.Errorf("POST /v1/runs with a relative root = %d %s, want 400 naming roots[0]", resp.StatusCode, data)
		}
	})
}

func TestInputSamplingThroughRun(t *testing.T) {
	t.Parallel()
	const samplingTool = "mcp_everything_trigger_sampling_request"
	at := newInputAPITest(t,
		fakeTurn{ToolCalls: calls(samplingTool, `{"prompt":"one"}`, samplingTool+"#2", `{"prompt":"two"}`), Usage: modelUsage{InputTokens: 10, OutputTokens: 1}},
		fakeTurn{Text: "sampled by the run's model", Usage: modelUsage{InputTokens: 100, OutputTokens: 20}},
		answerWithResults,
	)
	at.runs.opts.Limits.MaxSamplingRequests = 1
	r := at.startRun(t, `{"prompt":"sample twice"}`)
	v := waitRun(t, r)
	requireCompleted(t, v)
	if !strings.Contains(v.Output, "ok: LLM sampling result") || !strings.Contains(v.Output, "sampled by the run's model") {
		t.Errorf("output = %q, want one call answered by the model", v.Output)
	}
	if !strings.Contains(v.Output, "error:") || !strings.Contains(v.Output, "sampling cap of 1 requests") {
		t.Errorf("output = %q, want the other call refused over the cap", v.Output)
	}
	if want := (modelUsage{InputTokens: 110, OutputTokens: 21}); v.Usage != want {
		t.Errorf("usage = %+v, want %+v (the run's steps and the sampling)", v.Usage, want)
	}
	completed := eventData(r, "sampling.completed")
	if len(completed) != 1 || completed[0]["server"] != "everything" {
		t.Errorf("sampling.completed events = %v, want one from everything", completed)
	}
	if refused := eventData(r, "sampling.refused"); len(refused) != 1 {
		t.Errorf("sampling.refused events = %v, want one", refused)
	}
}

func TestInputWebhookTellsWaiting(t *testing.T) {
	t.Parallel()
	at := newInputAPITest(t, fakeTurn{ToolCalls: calls(elicitTool, `{}`)}, answerWithResults)
	at.runs.setWebhooks(webhookSettings{Secret: testWebhookSecret})
	rcv := newWebhookReceiver(t)
	r := at.startRun(t, fmt.Sprintf(`{"prompt":"ask me","interactive":true,"webhook_url":%q}`, rcv.srv.URL))
	id := requestedID(t, r)
	waitUntil(t, "the waiting delivery", func() bool { return len(rcv.received()) == 1 })
	d := rcv.received()[0]
	if !d.signedOK || d.Type != "run.waiting_input" || d.Run.Status != runWaitingInput || len(d.Run.InputRequests) != 1 || d.Run.InputRequests[0].ID != id {
		t.Fatalf("delivery = %s (signed %v) of a %s run with questions %+v, want a signed run.waiting_input listing %s",
			d.Type, d.signedOK, d.Run.Status, d.Run.InputRequests, id)
	}
	if resp, data := at.do(t, http.MethodPost, fmt.Sprintf("/v1/runs/%s/input/%s", r.id, id), "", `{"action":"decline"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("POST decline = %d %s, want 200", resp.StatusCode, data)
	}
	requireCompleted(t, waitRun(t, r))
	waitUntil(t, "the end's delivery", func() bool { return len(rcv.received()) == 2 })
	if d := rcv.received()[1]; !d.signedOK || d.Type != "run.completed" || d.Run.ID != r.id {
		t.Errorf("second delivery = %s of run %s (signed %v), want run.completed of %s, signed", d.Type, d.Run.ID, d.signedOK, r.id)
	}
}
