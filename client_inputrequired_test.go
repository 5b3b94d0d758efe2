package main

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// This file tests input-required results against a scripted Streamable HTTP
// server whose tools/call and resources/read answers a test sets.

// A mrtrRecorded is one tools/call or resources/read the server received.
type mrtrRecorded struct {
	ID     string
	Params map[string]json.RawMessage
}

// mrtrCalls returns the tools/call and resources/read requests s
// received, in order.
func mrtrCalls(s *fakeMCP) []mrtrRecorded {
	var out []mrtrRecorded
	for _, r := range s.requests() {
		if r.msg.Method == "tools/call" || r.msg.Method == "resources/read" {
			var params map[string]json.RawMessage
			json.Unmarshal(r.msg.Params, &params)
			out = append(out, mrtrRecorded{ID: string(r.msg.ID), Params: params})
		}
	}
	return out
}

// startMRTRServer starts a fake server with the tool ask that answers
// tools/call and resources/read with what answer returns for each, and
// returns it and a session to it whose questions are answered by policy.
func startMRTRServer(t *testing.T, policy *inputPolicy, answer func(method string, params map[string]json.RawMessage) any) (*fakeMCP, *mcpClient) {
	t.Helper()
	s := newFakeMCP(t, fakeMCPConfig{
		Name:         "mrtr",
		Tools:        []string{"ask"},
		Capabilities: map[string]any{"tools": map[string]any{}, "resources": map[string]any{}},
		Script: func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
			if m.Method != "tools/call" && m.Method != "resources/read" || len(m.ID) == 0 {
				return false
			}
			var params map[string]json.RawMessage
			json.Unmarshal(m.Params, &params)
			writeRPCResult(w, m.ID, answer(m.Method, params))
			return true
		},
	})
	cfg := httpPeerConfig("mrtr", transportHTTP, s.URL)
	cfg.Roots = []string{"/srv/data"}
	c := connectPeer(t, cfg, clientOptions{Input: policy})
	return s, c
}

// acceptingPolicy accepts every elicitation with content.
func acceptingPolicy(content map[string]any) *inputPolicy {
	return &inputPolicy{
		Prompt: func(context.Context, string, elicitRequest, *elicitSchema) (elicitResult, error) {
			return elicitResult{Action: actionAccept, Content: content}, nil
		},
		NoSampling: "no model in this test",
	}
}

func inputRequired(state string, questions map[string]any) map[string]any {
	res := map[string]any{"resultType": "input_required", "inputRequests": questions}
	if state != "" {
		res["requestState"] = state
	}
	return res
}

func elicitQuestion(message string) map[string]any {
	return map[string]any{"method": "elicitation/create", "params": map[string]any{
		"message":         message,
		"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}},
	}}
}

func textResult(text string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}}
}

func TestInputRequiredRounds(t *testing.T) {
	t.Parallel()
	// Round 1 asks an elicitation and the roots with a state full of
	// characters that escaping could change; round 2 asks again without
	// a state; round 3 completes.
	const state = `s1 <&> "quoted" é \u2028`
	srv, c := startMRTRServer(t, acceptingPolicy(map[string]any{"ok": true}), func(_ string, params map[string]json.RawMessage) any {
		switch {
		case params["inputResponses"] == nil:
			return inputRequired(state, map[string]any{"confirm": elicitQuestion("Sure?"), "where": map[string]any{"method": "roots/list"}})
		case params["requestState"] != nil:
			return inputRequired("", map[string]any{"again": elicitQuestion("Really?")})
		}
		return textResult("done")
	})
	res, err := c.callTool(t.Context(), "ask", json.RawMessage(`{"x":1}`))
	if err != nil || resultToText(res) != "done" {
		t.Fatalf("callTool(ask) = %v, %v, want done", res, err)
	}
	got := mrtrCalls(srv)
	if len(got) != 3 {
		t.Fatalf("server got %d tools/call requests, want 3", len(got))
	}
	ids := map[string]bool{}
	for i, r := range got {
		if ids[r.ID] {
			t.Errorf("request %d reuses id %s", i, r.ID)
		}
		ids[r.ID] = true
		if string(r.Params["name"]) != `"ask"` || string(r.Params["arguments"]) != `{"x":1}` {
			t.Errorf("request %d name, arguments = %s, %s, want the original ones", i, r.Params["name"], r.Params["arguments"])
		}
	}
	if got[0].Params["inputResponses"] != nil || got[0].Params["requestState"] != nil {
		t.Errorf("first request carries inputResponses or requestState: %v", got[0].Params)
	}
	sent, err := marshalJSON(state)
	if err != nil {
		t.Fatal(err)
	}
	if string(got[1].Params["requestState"]) != string(sent) {
		t.Errorf("round 2 requestState = %s, want %s echoed byte for byte", got[1].Params["requestState"], sent)
	}
	var answers map[string]map[string]any
	if err := json.Unmarshal(got[1].Params["inputResponses"], &answers); err != nil {
		t.Fatalf("round 2 inputResponses %s: %v", got[1].Params["inputResponses"], err)
	}
	if answers["confirm"]["action"] != "accept" {
		t.Errorf("round 2 inputResponses.confirm = %v, want accepted", answers["confirm"])
	}
	if roots, _ := answers["where"]["roots"].([]any); len(roots) != 1 || !strings.HasSuffix(roots[0].(map[string]any)["uri"].(string), "/srv/data") {
		t.Errorf("round 2 inputResponses.where = %v, want the root /srv/data", answers["where"])
	}
	if got[2].Params["requestState"] != nil {
		t.Errorf("round 3 carries requestState %s, but round 2's result had none", got[2].Params["requestState"])
	}
	if strings.Contains(string(got[2].Params["inputResponses"]), "confirm") {
		t.Errorf("round 3 inputResponses = %s, want only round 2's answers", got[2].Params["inputResponses"])
	}
}

func TestInputRequiredOtherResults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		policy *inputPolicy
		answer any
		// wantErr is a part of the error; "" for success.
		wantErr   string
		wantCalls int
	}{
		{"no resultType is complete", nil, textResult("plain"), "", 1},
		{"complete resultType", nil, map[string]any{"resultType": "complete", "content": []any{}}, "", 1},
		{"text mentioning input_required", nil, textResult("input_required"), "", 1},
		{"asks forever", acceptingPolicy(map[string]any{"ok": true}), inputRequired("s", map[string]any{"q": elicitQuestion("Again?")}),
			`server "mrtr" still asks for input after 8 answered rounds`, maxInputRounds + 1},
		{"state only, asks forever", nil, inputRequired("s", nil), `still asks for input after 8`, maxInputRounds + 1},
		{"sampling refused", nil, inputRequired("", map[string]any{"draft": map[string]any{"method": "sampling/createMessage", "params": map[string]any{}}}),
			`server "mrtr" asks for input "draft" (sampling/createMessage)`, 1},
		{"unknown method", nil, inputRequired("", map[string]any{"odd": map[string]any{"method": "tasks/get"}}),
			`asks for input "odd" by tasks/get, which harnessd does not answer`, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := startMRTRServer(t, tt.policy, func(string, map[string]json.RawMessage) any { return tt.answer })
			_, err := c.callTool(t.Context(), "ask", nil)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("callTool() error = %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("callTool() error = %v, want one containing %q", err, tt.wantErr)
			}
			if n := len(mrtrCalls(srv)); n != tt.wantCalls {
				t.Errorf("server got %d calls, want %d", n, tt.wantCalls)
			}
		})
	}
}

func TestInputRequiredResourceRead(t *testing.T) {
	t.Parallel()
	srv, c := startMRTRServer(t, acceptingPolicy(map[string]any{"ok": true}), func(_ string, params map[string]json.RawMessage) any {
		if params["inputResponses"] == nil {
			return inputRequired("r", map[string]any{"confirm": elicitQuestion("Read it?")})
		}
		return map[string]any{"contents": []any{map[string]any{"uri": "mem://a", "text": "secret"}}}
	})
	res, err := c.readResource(t.Context(), "mem://a")
	if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != "secret" {
		t.Fatalf("readResource(mem://a) = %+v, %v, want its text", res, err)
	}
	if got := mrtrCalls(srv); len(got) != 2 || string(got[1].Params["uri"]) != `"mem://a"` || string(got[1].Params["requestState"]) != `"r"` {
		t.Errorf("resources/read requests = %+v, want two, the retry with the uri and requestState", got)
	}
}
