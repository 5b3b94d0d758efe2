package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests server input: the requested-schema validation, the
// queue of open requests, sampling's conversion and caps, and the answers
// given to real servers (server-everything) over a session.

const testSchema = `{"type":"object","properties":{
 "name":{"type":"string","minLength":2},
 "email":{"type":"string","format":"email"},
 "site":{"type":"string","format":"uri"},
 "born":{"type":"string","format":"date"},
 "at":{"type":"string","format":"date-time"},
 "age":{"type":"integer","minimum":0,"maximum":150,"default":30},
 "ratio":{"type":"number","maximum":1},
 "ok":{"type":"boolean","default":false},
 "color":{"type":"string","enum":["red","green"]},
 "hero":{"type":"string","oneOf":[{"const":"h1","title":"One"},{"const":"h2","title":"Two"}]},
 "tags":{"type":"array","minItems":1,"maxItems":2,"items":{"type":"string","enum":["a","b","c"]}}
},"required":["name"]}`

func TestElicitSchemaValidate(t *testing.T) {
	t.Parallel()
	schema, err := parseElicitSchema(json.RawMessage(testSchema))
	if err != nil {
		t.Fatalf("parseElicitSchema() = %v", err)
	}
	tests := []struct {
		name    string
		content string
		want    map[string]any // on success
		field   string         // the field a *fieldError names
	}{
		{"defaults applied", `{"name":"Ann"}`, map[string]any{"name": "Ann", "age": int64(30), "ok": false}, ""},
		{"all valid", `{"name":"Ann","email":"a@b.example","site":"https://x.example/p","born":"2000-01-31","at":"2020-01-01T10:00:00Z","age":41,"ratio":0.5,"ok":true,"color":"red","hero":"h2","tags":["a","c"]}`,
			map[string]any{"name": "Ann", "email": "a@b.example", "site": "https://x.example/p", "born": "2000-01-31", "at": "2020-01-01T10:00:00Z", "age": int64(41), "ratio": 0.5, "ok": true, "color": "red", "hero": "h2", "tags": []string{"a", "c"}}, ""},
		{"required missing", `{}`, nil, "name"},
		{"required null", `{"name":null}`, nil, "name"},
		{"unknown field", `{"name":"Ann","nick":"x"}`, nil, "nick"},
		{"string too short", `{"name":"A"}`, nil, "name"},
		{"string wrong type", `{"name":5}`, nil, "name"},
		{"bad email", `{"name":"Ann","email":"not-an-email"}`, nil, "email"},
		{"bad uri", `{"name":"Ann","site":"/relative"}`, nil, "site"},
		{"bad date", `{"name":"Ann","born":"31/01/2000"}`, nil, "born"},
		{"bad date-time", `{"name":"Ann","at":"2020-01-01"}`, nil, "at"},
		{"integer with fraction", `{"name":"Ann","age":4.5}`, nil, "age"},
		{"integer over maximum", `{"name":"Ann","age":200}`, nil, "age"},
		{"number over maximum", `{"name":"Ann","ratio":1.5}`, nil, "ratio"},
		{"boolean as string", `{"name":"Ann","ok":"yes"}`, nil, "ok"},
		{"enum miss", `{"name":"Ann","color":"blue"}`, nil, "color"},
		{"oneOf miss", `{"name":"Ann","hero":"Two"}`, nil, "hero"},
		{"array item miss", `{"name":"Ann","tags":["z"]}`, nil, "tags"},
		{"array too long", `{"name":"Ann","tags":["a","b","c"]}`, nil, "tags"},
		{"array too short", `{"name":"Ann","tags":[]}`, nil, "tags"},
		{"array duplicate", `{"name":"Ann","tags":["a","a"]}`, nil, "tags"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var content map[string]json.RawMessage
			if err := json.Unmarshal([]byte(tt.content), &content); err != nil {
				t.Fatal(err)
			}
			got, err := schema.validate(content)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("validate(%s) = %v, want success", tt.content, err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("validate(%s) = %#v, want %#v", tt.content, got, tt.want)
				}
				return
			}
			var fe *fieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("validate(%s) = %v, want a field error naming %q", tt.content, err, tt.field)
			}
			if !strings.HasPrefix(err.Error(), "content."+tt.field+": ") {
				t.Errorf("validate(%s) error = %q, want it to start with content.%s", tt.content, err, tt.field)
			}
		})
	}
}

func TestParseElicitSchemaRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, schema, want string
	}{
		{"nested object", `{"type":"object","properties":{"a":{"type":"object"}}}`, `property "a": type "object"`},
		{"unknown format", `{"type":"object","properties":{"a":{"type":"string","format":"ipv4"}}}`, `property "a": format "ipv4"`},
		{"array without choices", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"string"}}}}`, `property "a": an array`},
		{"required undefined", `{"type":"object","properties":{},"required":["x"]}`, `required property "x"`},
		{"not an object", `{"type":"string"}`, `type is "string"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseElicitSchema(json.RawMessage(tt.schema))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("parseElicitSchema(%s) = %v, want an error containing %q", tt.schema, err, tt.want)
			}
		})
	}
}

// askAsync opens an elicitation on q and returns the channel of its
// outcome and the request once opened.
func askAsync(t *testing.T, ctx context.Context, q *inputQueue, timeout time.Duration) (<-chan [2]string, *inputRequest) {
	t.Helper()
	schema, err := parseElicitSchema(json.RawMessage(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan *inputRequest, 1)
	out := make(chan [2]string, 1)
	go func() {
		res, how := q.ask(ctx, &inputRequest{Server: "s", Mode: modeForm, schema: schema}, timeout, func(r *inputRequest) { opened <- r })
		out <- [2]string{res.Action, how}
	}()
	return out, <-opened
}

func TestInputQueue(t *testing.T) {
	t.Parallel()
	t.Run("invalid answer keeps the request open", func(t *testing.T) {
		t.Parallel()
		q := &inputQueue{}
		out, req := askAsync(t, t.Context(), q, time.Hour)
		if questions, approvals := q.counts(); questions != 1 || approvals != 0 {
			t.Fatalf("counts() once asked = %d, %d, want 1, 0", questions, approvals)
		}
		_, err := q.answer(req.ID, inputAnswer{Action: actionAccept, Content: map[string]json.RawMessage{"name": json.RawMessage(`7`)}})
		var fe *fieldError
		if !errors.As(err, &fe) || fe.Field != "name" {
			t.Fatalf("answer(bad content) = %v, want a field error naming name", err)
		}
		if open := q.list(); len(open) != 1 || open[0].ID != req.ID {
			t.Fatalf("list() after a bad answer = %v, want %s still open", open, req.ID)
		}
		if _, err := q.answer(req.ID, inputAnswer{Action: "maybe"}); err == nil || !strings.Contains(err.Error(), "action") {
			t.Fatalf("answer(action maybe) = %v, want an error naming action", err)
		}
		res, err := q.answer(req.ID, inputAnswer{Action: actionAccept, Content: map[string]json.RawMessage{"name": json.RawMessage(`"Ann"`)}})
		if err != nil || res.Content["age"] != int64(30) {
			t.Fatalf("answer(valid) = %v, %v, want accepted with the default age", res, err)
		}
		if questions, approvals := q.counts(); questions != 0 || approvals != 0 {
			t.Errorf("counts() once answered = %d, %d, want 0, 0", questions, approvals)
		}
		if got := <-out; got != [2]string{actionAccept, "caller"} {
			t.Errorf("ask() = %v, want accept by caller", got)
		}
		if _, err := q.answer(req.ID, inputAnswer{Action: actionDecline}); !errors.Is(err, errInputNotFound) {
			t.Errorf("second answer = %v, want errInputNotFound", err)
		}
	})
	t.Run("timeout cancels", func(t *testing.T) {
		t.Parallel()
		q := &inputQueue{}
		out, _ := askAsync(t, t.Context(), q, time.Millisecond)
		if got := <-out; got != [2]string{actionCancel, "timeout"} {
			t.Errorf("ask() = %v, want cancel by timeout", got)
		}
		if open := q.list(); len(open) != 0 {
			t.Errorf("list() after timeout = %v, want none", open)
		}
	})
	t.Run("closeAll cancels and refuses", func(t *testing.T) {
		t.Parallel()
		q := &inputQueue{}
		out, _ := askAsync(t, t.Context(), q, time.Hour)
		q.closeAll()
		if got := <-out; got != [2]string{actionCancel, "run ended"} {
			t.Errorf("ask() = %v, want cancel by run ended", got)
		}
		if open := q.list(); len(open) != 0 {
			t.Errorf("list() after closeAll = %v, want none", open)
		}
		res, how := q.ask(t.Context(), &inputRequest{Mode: modeForm}, time.Hour, nil)
		if res.Action != actionCancel || how != "run ended" {
			t.Errorf("ask() after closeAll = %v, %s, want cancel by run ended", res, how)
		}
	})
	t.Run("context cancels", func(t *testing.T) {
		t.Parallel()
		q := &inputQueue{}
		ctx, cancel := context.WithCancel(t.Context())
		out, _ := askAsync(t, ctx, q, time.Hour)
		cancel()
		if got := <-out; got != [2]string{actionCancel, "cancelled"} {
			t.Errorf("ask() = %v, want cancel by cancelled", got)
		}
	})
}

func TestSamplingToModelRequest(t *testing.T) {
	t.Parallel()
	var req samplingRequest
	raw := `{"messages":[
	 {"role":"user","content":{"type":"text","text":"weather?"}},
	 {"role":"assistant","content":[{"type":"tool_use","id":"c1","name":"get_weather","input":{"city":"Paris"}}]},
	 {"role":"user","content":[{"type":"tool_result","toolUseId":"c1","content":[{"type":"text","text":"sunny"}]}]}],
	 "systemPrompt":"be brief","maxTokens":50,"stopSequences":["END"],
	 "tools":[{"name":"get_weather","inputSchema":{"type":"object"}}]}`
	if err := json.Unmarshal([]byte(raw), &req); err != nil {
		t.Fatal(err)
	}
	got, err := req.toModelRequest()
	if err != nil {
		t.Fatalf("toModelRequest() = %v", err)
	}
	want := modelRequest{
		System:        "be brief",
		StopSequences: []string{"END"},
		Messages: []chatMessage{
			{Role: roleUser, Content: "weather?"},
			{Role: roleAssistant, ToolCalls: []toolCall{{ID: "c1", Name: "get_weather", Arguments: json.RawMessage(`{"city":"Paris"}`)}}},
			{Role: roleTool, ToolCallID: "c1", Content: "sunny"},
		},
		Tools: []toolDef{{Name: "get_weather", InputSchema: json.RawMessage(`{"type":"object"}`)}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("toModelRequest() = %+v, want %+v", got, want)
	}

	image := samplingRequest{}
	json.Unmarshal([]byte(`{"messages":[{"role":"user","content":{"type":"image","data":"AA==","mimeType":"image/png"}}],"maxTokens":5}`), &image)
	if _, err := image.toModelRequest(); err == nil || !strings.Contains(err.Error(), "image content is not supported") {
		t.Errorf("toModelRequest(image) = %v, want an error naming image content", err)
	}
}

func TestSamplingBudget(t *testing.T) {
	t.Parallel()
	b := newSamplingBudget(2, 100)
	left, hold, err := b.take(0, 1000)
	if err != nil || left != 100 {
		t.Fatalf("take(0, 1000) = %d, %v, want 100, nil", left, err)
	}
	hold.settle(modelUsage{InputTokens: 60, OutputTokens: 50})
	if _, _, err := b.take(0, 1000); err == nil || !strings.Contains(err.Error(), "100 tokens") {
		t.Errorf("take() over the token cap = %v, want an error naming it", err)
	}
	b = newSamplingBudget(1, 1000)
	b.take(0, 10)
	if _, _, err := b.take(0, 10); err == nil || !strings.Contains(err.Error(), "1 requests") {
		t.Errorf("take() over the request cap = %v, want an error naming it", err)
	}
}

// TestServerInputEverything answers server-everything's elicitation and
// sampling requests over a real session: a form answered through the
// queue (defaults applied), a URL elicitation by both its paths, a
// non-interactive decline, sampling by a scripted model, sampling turned
// off for the server, and roots/list.
func TestServerInputEverything(t *testing.T) {
	t.Parallel()
	requireNode(t) // before the scripted model, whose cleanup wants its turns taken
	dir := t.TempDir()
	model := newFakeModel(t, providerOpenAI, fakeTurn{Text: "sampled hello", Usage: modelUsage{InputTokens: 7, OutputTokens: 3}})
	var mu sync.Mutex
	var events []string
	requested := make(chan *inputRequest, 4)
	var usage modelUsage
	queue := &inputQueue{}
	policy := &inputPolicy{
		Queue:       queue,
		Interactive: true,
		Sampler:     &samplingModel{Provider: model.provider(t), Budget: newSamplingBudget(1, 0), OnUsage: func(u modelUsage) { mu.Lock(); usage.add(u); mu.Unlock() }},
		Events: runInputEvents(func(typ string, data any) {
			mu.Lock()
			events = append(events, typ)
			mu.Unlock()
			if r, ok := data.(*inputRequest); ok {
				requested <- r
			}
		}),
	}
	cfg := stdioPeerConfig("everything", everythingStdioCommand(t))
	cfg.Sampling = true
	cfg.Roots = []string{dir}
	c := connectPeer(t, cfg, clientOptions{})
	ctx := withInputAnswerer(t.Context(), policy)

	call := func(tool, args string) string {
		t.Helper()
		res, err := c.callTool(ctx, tool, json.RawMessage(args))
		if err != nil {
			t.Fatalf("callTool(%s) = %v", tool, err)
		}
		return resultText(t, res)
	}
	answer := func(a inputAnswer) {
		r := <-requested
		if _, err := queue.answer(r.ID, a); err != nil {
			t.Errorf("answer(%s) = %v", r.ID, err)
		}
	}

	go answer(inputAnswer{Action: actionAccept, Content: map[string]json.RawMessage{"name": json.RawMessage(`"Ada Lovelace"`)}})
	got := call("trigger-elicitation-request", `{}`)
	for _, want := range []string{"Name: Ada Lovelace", "Favorite Integer: 42", `"untitledSingleSelectEnum": "Monica"`} {
		if !strings.Contains(got, want) {
			t.Errorf("trigger-elicitation-request = %q, want it to contain %q (answer and defaults)", got, want)
		}
	}

	go answer(inputAnswer{Action: actionAccept})
	if got := call("trigger-url-elicitation", `{"url":"https://example.com/consent"}`); !strings.Contains(got, "accept") {
		t.Errorf("trigger-url-elicitation = %q, want the accept reported", got)
	}
	// The error path asks twice: the -32042 error, then the retried call.
	go func() {
		answer(inputAnswer{Action: actionAccept})
		answer(inputAnswer{Action: actionAccept})
	}()
	if got := call("trigger-url-elicitation", `{"url":"https://example.com/consent","errorPath":true}`); !strings.Contains(got, "accept") {
		t.Errorf("trigger-url-elicitation by the error path = %q, want the retried call's accept", got)
	}

	if got := call("trigger-sampling-request", `{"prompt":"say hi"}`); !strings.Contains(got, "sampled hello") {
		t.Errorf("trigger-sampling-request = %q, want the model's text", got)
	}
	mu.Lock()
	if usage != (modelUsage{InputTokens: 7, OutputTokens: 3}) {
		t.Errorf("usage after sampling = %+v, want 7 in, 3 out", usage)
	}
	mu.Unlock()
	if reqs := model.requests(); len(reqs) != 1 || reqs[0].System != "You are a helpful test server." {
		t.Errorf("model requests = %+v, want one with the server's system prompt", reqs)
	}
	// Over the run's cap of one request: an error answer, not a model call.
	res, err := c.callTool(ctx, "trigger-sampling-request", json.RawMessage(`{"prompt":"again"}`))
	if err == nil && !res.IsError {
		t.Errorf("second sampling = %q, want a failure over the cap", resultText(t, res))
	} else if msg := failureText(t, err, res); !strings.Contains(msg, "sampling cap of 1 requests") {
		t.Errorf("second sampling failed with %q, want it to name the cap", msg)
	}

	// Without a policy (outside a run): declined at once.
	res, err = c.callTool(t.Context(), "trigger-elicitation-request", json.RawMessage(`{}`))
	if err != nil || !strings.Contains(resultText(t, res), "declined") {
		t.Errorf("elicitation outside a run = %v, %v, want declined", res, err)
	}

	rootURI := (&url.URL{Scheme: "file", Path: dir}).String()
	if got := call("get-roots-list", `{}`); !strings.Contains(got, rootURI) {
		t.Errorf("get-roots-list = %q, want it to list %q", got, rootURI)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{"input.requested", "input.answered", "sampling.requested", "sampling.completed", "sampling.refused"} {
		if !slices.Contains(events, want) {
			t.Errorf("events = %v, want %s among them", events, want)
		}
	}
}

// failureText returns the failure text of a call: its error or its error result.
func failureText(t *testing.T, err error, res *callResult) string {
	t.Helper()
	if err != nil {
		return err.Error()
	}
	return resultText(t, res)
}

func TestServerInputConfigFields(t *testing.T) {
	t.Parallel()
	strp := func(s ...string) *[]string { return &s }
	yes, no := true, false
	env := func(k string) (string, bool) {
		if k == "DATA" {
			return "/srv/data", true
		}
		return "", false
	}
	tests := []struct {
		name     string
		raw      rawServer
		roots    []string
		sampling bool
		err      string
	}{
		{"defaults", rawServer{Name: "a", Command: "x"}, nil, true, ""},
		{"roots none", rawServer{Name: "a", Command: "x", Roots: strp()}, []string{}, true, ""},
		{"roots expanded", rawServer{Name: "a", Command: "x", Roots: strp("${DATA}")}, []string{"/srv/data"}, true, ""},
		{"roots relative", rawServer{Name: "a", Command: "x", Roots: strp("/ok", "rel")}, nil, true, "roots[1]"},
		{"sampling off", rawServer{Name: "a", Command: "x", Sampling: &no}, nil, false, ""},
		{"sampling on", rawServer{Name: "a", Command: "x", Sampling: &yes}, nil, true, ""},
		{"bad log level", rawServer{Name: "a", Command: "x", LogLevel: "verbose"}, nil, true, "log_level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := buildServer("test", originGlobal, "test", tt.raw, env)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("buildServer(%+v) = %v, want an error naming %s", tt.raw, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("buildServer(%+v) = %v", tt.raw, err)
			}
			if !reflect.DeepEqual(cfg.Roots, tt.roots) || cfg.Sampling != tt.sampling {
				t.Errorf("buildServer(%+v) roots, sampling = %#v, %v, want %#v, %v", tt.raw, cfg.Roots, cfg.Sampling, tt.roots, tt.sampling)
			}
		})
	}
	cfg, err := connectServer("live", "https://mcp.example.com/mcp")
	if err != nil || cfg.Sampling {
		t.Errorf("connectServer() sampling = %v (%v), want false: connect_mcp servers may not sample", cfg.Sampling, err)
	}
}

func TestTerminalPrompter(t *testing.T) {
	t.Parallel()
	schema, err := parseElicitSchema(json.RawMessage(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, typed string
		req         elicitRequest
		want        elicitResult
	}{
		// Fields in order: age, at, born, color, email, hero, name, ok, ratio, site, tags.
		{"form with a retry and defaults", "abc\n41\n\n\nred\n\n\nAnn\ny\n\n\na, b\n", elicitRequest{Message: "who?"},
			elicitResult{Action: actionAccept, Content: map[string]any{"age": int64(41), "color": "red", "name": "Ann", "ok": true, "tags": []string{"a", "b"}}}},
		{"form declined", "decline\n", elicitRequest{Message: "who?"}, elicitResult{Action: actionDecline}},
		{"url accepted", "\n", elicitRequest{Mode: modeURL, URL: "https://example.com/x"}, elicitResult{Action: actionAccept}},
		{"url cancelled", "cancel\n", elicitRequest{Mode: modeURL, URL: "https://example.com/x"}, elicitResult{Action: actionCancel}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			tp := &terminalPrompter{in: newBufferedLines(strings.NewReader(tt.typed)), out: &out}
			got, err := tp.prompt(t.Context(), "srv", tt.req, schema)
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("prompt(%q) = %#v, %v, want %#v\n%s", tt.typed, got, err, tt.want, out.String())
			}
		})
	}
	if p := commandInput(strings.NewReader(""), io.Discard, modelSettings{}, nil, nil); p.Prompt != nil || !strings.Contains(p.DeclineReason, "not a terminal") {
		t.Errorf("commandInput(not a terminal) = %+v, want a policy that declines", p)
	}
}
