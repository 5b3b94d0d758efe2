package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// This file tests the model providers against fakeModel and the wire
// encodings against golden bodies.

var modelTestLogger = slog.New(slog.DiscardHandler)

func TestParseModelName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    modelSpec
		wantErr string
	}{
		{name: "openai", in: "openai/gpt-4o", want: modelSpec{Provider: "openai", Model: "gpt-4o"}},
		{name: "anthropic", in: "anthropic/claude-sonnet-4-5", want: modelSpec{Provider: "anthropic", Model: "claude-sonnet-4-5"}},
		{name: "model with slash", in: "openai/meta-llama/Llama-3", want: modelSpec{Provider: "openai", Model: "meta-llama/Llama-3"}},
		{name: "spaces trimmed", in: " openai/gpt-4o\n", want: modelSpec{Provider: "openai", Model: "gpt-4o"}},
		{name: "empty", in: "", wantErr: `model "": want provider/model`},
		{name: "no provider", in: "gpt-4o", wantErr: `model "gpt-4o": want provider/model`},
		{name: "empty model", in: "openai/", wantErr: `model "openai/": want provider/model`},
		{name: "empty provider", in: "/gpt-4o", wantErr: `model "/gpt-4o": want provider/model`},
		{name: "an OpenAI-compatible provider", in: "google/gemini-2.5-flash", want: modelSpec{Provider: "google", Model: "gemini-2.5-flash"}},
		{name: "unknown provider", in: "gemini/pro", wantErr: `model "gemini/pro": ` + unknownProviderGemini},
		{name: "provider is case sensitive", in: "OpenAI/gpt-4o", wantErr: `unknown provider "OpenAI"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseModelName(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseModelName(%q) = %+v, %v, want error containing %q", tt.in, got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("parseModelName(%q) = %+v, %v, want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestNewModelProvider(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		spec    modelSpec
		env     map[string]string
		wantURL string
		wantErr string
	}{
		{name: "openai default", spec: modelSpec{Provider: "openai", Model: "gpt-4o"},
			env: map[string]string{"OPENAI_API_KEY": "k"}, wantURL: "https://api.openai.com/v1/chat/completions"},
		{name: "openai base URL from env, no key", spec: modelSpec{Provider: "openai", Model: "llama"},
			env: map[string]string{"OPENAI_BASE_URL": "http://localhost:8000/v1/"}, wantURL: "http://localhost:8000/v1/chat/completions"},
		{name: "spec base URL wins over env", spec: modelSpec{Provider: "openai", Model: "llama", BaseURL: "http://127.0.0.1:11434/v1"},
			env: map[string]string{"OPENAI_BASE_URL": "http://localhost:8000/v1"}, wantURL: "http://127.0.0.1:11434/v1/chat/completions"},
		{name: "anthropic default", spec: modelSpec{Provider: "anthropic", Model: "claude"},
			env: map[string]string{"ANTHROPIC_API_KEY": "k"}, wantURL: "https://api.anthropic.com/v1/messages"},
		{name: "anthropic proxy without key", spec: modelSpec{Provider: "anthropic", Model: "claude"},
			env: map[string]string{"ANTHROPIC_BASE_URL": "http://proxy:4000"}, wantURL: "http://proxy:4000/v1/messages"},
		{name: "openai key missing", spec: modelSpec{Provider: "openai", Model: "gpt-4o"},
			wantErr: "model openai: OPENAI_API_KEY is not set: set it to your API key, or set OPENAI_BASE_URL for a server that needs none"},
		{name: "openai empty key", spec: modelSpec{Provider: "openai", Model: "gpt-4o"}, env: map[string]string{"OPENAI_API_KEY": ""},
			wantErr: "OPENAI_API_KEY is not set"},
		{name: "anthropic key missing", spec: modelSpec{Provider: "anthropic", Model: "claude"},
			wantErr: "model anthropic: ANTHROPIC_API_KEY is not set"},
		{name: "explicit public base URL needs the key", spec: modelSpec{Provider: "openai", Model: "gpt-4o", BaseURL: "https://API.openai.com/v1"},
			wantErr: "OPENAI_API_KEY is not set"},
		{name: "bad base URL", spec: modelSpec{Provider: "openai", Model: "m"}, env: map[string]string{"OPENAI_BASE_URL": "localhost:8000"},
			wantErr: `model openai: base URL "localhost:8000" from OPENAI_BASE_URL: no scheme; write a full URL like http://localhost:3001/mcp`},
		{name: "unknown provider", spec: modelSpec{Provider: "gemini", Model: "pro"}, wantErr: unknownProviderGemini},
		{name: "google default", spec: modelSpec{Provider: "google", Model: "gemini-2.5-flash"},
			env: map[string]string{"GEMINI_API_KEY": "k"}, wantURL: "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions"},
		{name: "google key missing", spec: modelSpec{Provider: "google", Model: "gemini-2.5-flash"},
			wantErr: "model google: GEMINI_API_KEY is not set: set it to your API key, or set GEMINI_BASE_URL for a server that needs none"},
		{name: "ollama needs no key", spec: modelSpec{Provider: "ollama", Model: "llama3.2"}, wantURL: "http://localhost:11434/v1/chat/completions"},
		{name: "vllm needs no key", spec: modelSpec{Provider: "vllm", Model: "qwen"}, wantURL: "http://localhost:8000/v1/chat/completions"},
		{name: "a sampling setting the provider cannot take", spec: modelSpec{Provider: "anthropic", Model: "claude",
			Tuning: modelTuning{Temperature: floatPtr(1.5)}}, env: map[string]string{"ANTHROPIC_API_KEY": "k"},
			wantErr: `model "anthropic/claude": temperature: 1.5 is over 1, the most Anthropic takes: use 0 to 1`},
		{name: "empty model", spec: modelSpec{Provider: "openai"}, env: map[string]string{"OPENAI_API_KEY": "k"}, wantErr: "the model name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newModelProvider(tt.spec, fakeEnv(tt.env), modelTestLogger)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("newModelProvider(%+v) = %v, want error containing %q", tt.spec, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("newModelProvider(%+v) = %v", tt.spec, err)
			}
			if got := modelEndpointOf(t, p).url; got != tt.wantURL {
				t.Errorf("newModelProvider(%+v) posts to %q, want %q", tt.spec, got, tt.wantURL)
			}
			if got, want := p.name(), tt.spec.Provider+"/"+tt.spec.Model; got != want {
				t.Errorf("name() = %q, want %q", got, want)
			}
		})
	}
}

// goldenConversation exercises every message shape.
var goldenConversation = modelRequest{
	System: "be brief",
	Messages: []chatMessage{
		{Role: roleUser, Content: "list files"},
		{Role: roleAssistant, Content: "Looking.", ToolCalls: []toolCall{
			{ID: "c1", Name: "mcp_fs_list", Arguments: json.RawMessage(`{"path":"/tmp"}`)},
			{ID: "c2", Name: "find_tool"},
		}},
		{Role: roleTool, ToolCallID: "c1", Content: "a.txt"},
		{Role: roleTool, ToolCallID: "c2", Content: "no such tool", IsError: true},
		{Role: roleAssistant, ToolCalls: []toolCall{{ID: "c3", Name: "x", Arguments: json.RawMessage(`{}`)}}},
		{Role: roleTool, ToolCallID: "c3", Content: "ok"},
		{Role: roleAssistant, Content: "Done."},
		{Role: roleUser, Content: "thanks"},
	},
	Tools: []toolDef{
		{Name: "mcp_fs_list", Description: "List a directory", InputSchema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
		{Name: "find_tool"},
	},
	MaxTokens: 1000,
}

func TestModelRequestEncoding(t *testing.T) {
	t.Parallel()
	local := "http://127.0.0.1:9/v1"
	tests := []struct {
		name string
		spec modelSpec
		env  map[string]string
		req  modelRequest
		want string
	}{
		{
			name: "openai conversation",
			spec: modelSpec{Provider: "openai", Model: "m", BaseURL: local},
			req:  goldenConversation,
			want: `{"model":"m","max_tokens":1000,"messages":[
				{"role":"system","content":"be brief"},
				{"role":"user","content":"list files"},
				{"role":"assistant","content":"Looking.","tool_calls":[
					{"id":"c1","type":"function","function":{"name":"mcp_fs_list","arguments":"{\"path\":\"/tmp\"}"}},
					{"id":"c2","type":"function","function":{"name":"find_tool","arguments":"{}"}}]},
				{"role":"tool","content":"a.txt","tool_call_id":"c1"},
				{"role":"tool","content":"Error: no such tool","tool_call_id":"c2"},
				{"role":"assistant","content":null,"tool_calls":[
					{"id":"c3","type":"function","function":{"name":"x","arguments":"{}"}}]},
				{"role":"tool","content":"ok","tool_call_id":"c3"},
				{"role":"assistant","content":"Done."},
				{"role":"user","content":"thanks"}],
				"tools":[
				{"type":"function","function":{"name":"mcp_fs_list","description":"List a directory","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}},
				{"type":"function","function":{"name":"find_tool","parameters":{"type":"object"}}}]}`,
		},
		{
			name: "openai minimal",
			spec: modelSpec{Provider: "openai", Model: "m", BaseURL: local},
			req:  modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}},
			want: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "openai public API limits with max_completion_tokens",
			spec: modelSpec{Provider: "openai", Model: "gpt-5", MaxTokens: 500},
			env:  map[string]string{"OPENAI_API_KEY": "k"},
			req:  modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}},
			want: `{"model":"gpt-5","max_completion_tokens":500,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "openai request model overrides",
			spec: modelSpec{Provider: "openai", Model: "m", BaseURL: local, MaxTokens: 500},
			req:  modelRequest{Model: "other", MaxTokens: 7, Messages: []chatMessage{{Role: roleUser, Content: "hi"}}},
			want: `{"model":"other","max_tokens":7,"messages":[{"role":"user","content":"hi"}]}`,
		},
		{
			name: "anthropic conversation",
			spec: modelSpec{Provider: "anthropic", Model: "m", BaseURL: local},
			req:  goldenConversation,
			want: `{"model":"m","max_tokens":1000,"system":"be brief","messages":[
				{"role":"user","content":[{"type":"text","text":"list files"}]},
				{"role":"assistant","content":[{"type":"text","text":"Looking."},
					{"type":"tool_use","id":"c1","name":"mcp_fs_list","input":{"path":"/tmp"}},
					{"type":"tool_use","id":"c2","name":"find_tool","input":{}}]},
				{"role":"user","content":[
					{"type":"tool_result","tool_use_id":"c1","content":"a.txt"},
					{"type":"tool_result","tool_use_id":"c2","content":"no such tool","is_error":true}]},
				{"role":"assistant","content":[{"type":"tool_use","id":"c3","name":"x","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"c3","content":"ok"}]},
				{"role":"assistant","content":[{"type":"text","text":"Done."}]},
				{"role":"user","content":[{"type":"text","text":"thanks"}]}],
				"tools":[
				{"name":"mcp_fs_list","description":"List a directory","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}},
				{"name":"find_tool","input_schema":{"type":"object"}}]}`,
		},
		{
			name: "anthropic minimal gets the default max_tokens",
			spec: modelSpec{Provider: "anthropic", Model: "m", BaseURL: local},
			req:  modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}},
			want: `{"model":"m","max_tokens":4096,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`,
		},
		{
			name: "anthropic skips an empty assistant message",
			spec: modelSpec{Provider: "anthropic", Model: "m", BaseURL: local, MaxTokens: 10},
			req:  modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}, {Role: roleAssistant}, {Role: roleUser, Content: "again"}}},
			want: `{"model":"m","max_tokens":10,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},
				{"role":"user","content":[{"type":"text","text":"again"}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newModelProvider(tt.spec, fakeEnv(tt.env), modelTestLogger)
			if err != nil {
				t.Fatalf("newModelProvider(%+v) = %v", tt.spec, err)
			}
			got, err := p.(interface {
				encodeStream(modelRequest, bool) ([]byte, error)
			}).encodeStream(tt.req, false)
			if err != nil {
				t.Fatalf("encode(%s) = %v", tt.name, err)
			}
			assertModelBody(t, got, tt.want)
		})
	}
}

func TestModelRequestUnknownRole(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		t.Run(wire, func(t *testing.T) {
			f := newFakeModel(t, wire)
			_, err := f.provider(t).complete(t.Context(), modelRequest{Messages: []chatMessage{{Role: "system", Content: "x"}}})
			want := "model " + wire + `: message 0: unknown role "system"`
			if err == nil || err.Error() != want {
				t.Fatalf("complete(role system) = %v, want %q", err, want)
			}
		})
	}
}

// assertModelBody fails unless got and want hold the same JSON value.
func assertModelBody(t *testing.T, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("body %s is not JSON: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("golden %s is not JSON: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		gi, _ := json.MarshalIndent(g, "", "  ")
		wi, _ := json.MarshalIndent(w, "", "  ")
		t.Errorf("body =\n%s\nwant\n%s", gi, wi)
	}
}

// TestModelToolRoundTrip plays a two-step conversation with parallel tool
// calls through each wire format and checks what each side received.
func TestModelToolRoundTrip(t *testing.T) {
	t.Parallel()
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		t.Run(wire, func(t *testing.T) {
			tools := []toolDef{{Name: "mcp_fs_read", Description: "Read a file"}, {Name: "find_tool"}}
			f := newFakeModel(t, wire,
				fakeTurn{
					Check: func(req fakeRequest) error {
						if got, want := req.toolNames(), []string{"mcp_fs_read", "find_tool"}; !slices.Equal(got, want) {
							return fmt.Errorf("tools offered = %q, want %q", got, want)
						}
						if req.System != "sys" {
							return fmt.Errorf("system = %q, want %q", req.System, "sys")
						}
						return nil
					},
					Text: "Reading both.",
					ToolCalls: []toolCall{
						{Name: "mcp_fs_read", Arguments: json.RawMessage(`{"path":"a"}`)},
						{Name: "mcp_fs_read", Arguments: json.RawMessage(`{"path":"b"}`)},
					},
					Usage: modelUsage{InputTokens: 100, OutputTokens: 20},
				},
				fakeTurn{Reply: func(req fakeRequest) fakeTurn {
					var parts []string
					for _, m := range req.toolResults() {
						parts = append(parts, fmt.Sprintf("%s=%s/%v", m.ToolCallID, m.Content, m.IsError))
					}
					return fakeTurn{Text: strings.Join(parts, " "), Usage: modelUsage{InputTokens: 150, OutputTokens: 5}}
				}},
			)
			p := f.provider(t)
			req := modelRequest{System: "sys", Tools: tools, Messages: []chatMessage{{Role: roleUser, Content: "read a and b"}}}
			var total modelUsage

			first, err := p.complete(t.Context(), req)
			if err != nil {
				t.Fatalf("complete(step 1) = %v", err)
			}
			total.add(first.Usage)
			if first.Content != "Reading both." || first.StopReason != stopToolUse || len(first.ToolCalls) != 2 {
				t.Fatalf("complete(step 1) = %+v, want text, stop %q and 2 tool calls", first, stopToolUse)
			}
			req.Messages = append(req.Messages, chatMessage{Role: roleAssistant, Content: first.Content, ToolCalls: first.ToolCalls})
			for i, tc := range first.ToolCalls {
				if tc.ID == "" || tc.ArgumentsError != "" {
					t.Errorf("tool call %d = %+v, want an ID and no arguments error", i, tc)
				}
				req.Messages = append(req.Messages, chatMessage{Role: roleTool, ToolCallID: tc.ID, Content: "content of " + string(tc.Arguments), IsError: i == 1})
			}

			second, err := p.complete(t.Context(), req)
			if err != nil {
				t.Fatalf("complete(step 2) = %v", err)
			}
			total.add(second.Usage)
			wantText := fmt.Sprintf(`%s=content of {"path":"a"}/false %s=content of {"path":"b"}/true`, first.ToolCalls[0].ID, first.ToolCalls[1].ID)
			if second.Content != wantText || second.StopReason != stopEndTurn || second.ToolCalls != nil {
				t.Errorf("complete(step 2) = %+v, want text %q, stop %q, no tool calls", second, wantText, stopEndTurn)
			}
			if want := (modelUsage{InputTokens: 250, OutputTokens: 25}); total != want {
				t.Errorf("usage total = %+v, want %+v", total, want)
			}
			sent := f.requests()[1]
			if len(sent.Messages) != 4 || !reflect.DeepEqual(sent.Messages[1].ToolCalls, first.ToolCalls) {
				t.Errorf("step 2 sent messages %+v, want the user message, the assistant's 2 calls %+v and 2 results", sent.Messages, first.ToolCalls)
			}
		})
	}
}

func TestDecodeOpenAIResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    modelResponse
		wantErr string
	}{
		{name: "text", body: `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`,
			want: modelResponse{Content: "hi", StopReason: stopEndTurn, Usage: modelUsage{InputTokens: 3, OutputTokens: 1}}},
		{name: "null content with tool calls", body: `{"choices":[{"message":{"content":null,"tool_calls":[
			{"id":"a","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}},
			{"id":"b","type":"function","function":{"name":"g","arguments":""}}]},"finish_reason":"tool_calls"}]}`,
			want: modelResponse{StopReason: stopToolUse, ToolCalls: []toolCall{
				{ID: "a", Name: "f", Arguments: json.RawMessage(`{"x":1}`)},
				{ID: "b", Name: "g", Arguments: json.RawMessage(`{}`)}}}},
		{name: "content parts", body: `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`,
			want: modelResponse{Content: "ab", StopReason: stopEndTurn}},
		{name: "invalid arguments become an arguments error", body: `{"choices":[{"message":{"tool_calls":[
			{"id":"a","function":{"name":"f","arguments":"{\"x\":"}}]},"finish_reason":"tool_calls"}]}`,
			want: modelResponse{StopReason: stopToolUse, ToolCalls: []toolCall{{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`),
				ArgumentsError: "the arguments are not valid JSON (unexpected end of JSON input): send the arguments as one JSON object"}}}},
		{name: "non-object arguments", body: `{"choices":[{"message":{"tool_calls":[
			{"id":"a","function":{"name":"f","arguments":"[1]"}}]},"finish_reason":"tool_calls"}]}`,
			want: modelResponse{StopReason: stopToolUse, ToolCalls: []toolCall{{ID: "a", Name: "f", Arguments: json.RawMessage(`{}`),
				ArgumentsError: "the arguments are not a JSON object: send the arguments as one JSON object"}}}},
		{name: "arguments as an object or doubly encoded", body: `{"choices":[{"message":{"tool_calls":[
			{"id":"a","function":{"name":"f","arguments":{"x":1}}},
			{"id":"b","function":{"name":"f","arguments":"\"{\\\"y\\\":2}\""}}]}}]}`,
			want: modelResponse{StopReason: stopToolUse, ToolCalls: []toolCall{
				{ID: "a", Name: "f", Arguments: json.RawMessage(`{"x":1}`)},
				{ID: "b", Name: "f", Arguments: json.RawMessage(`{"y":2}`)}}}},
		{name: "length", body: `{"choices":[{"message":{"content":"trunc"},"finish_reason":"length"}]}`,
			want: modelResponse{Content: "trunc", StopReason: stopMaxTokens}},
		{name: "other finish reason passes through", body: `{"choices":[{"message":{"content":""},"finish_reason":"content_filter"}]}`,
			want: modelResponse{StopReason: "content_filter"}},
		{name: "no choices", body: `{"choices":[]}`, wantErr: "the answer has no choices"},
		{name: "error in a 200", body: `{"error":{"message":"model overloaded"}}`, wantErr: "the server reported an error: model overloaded"},
		{name: "not JSON", body: `<html>hello</html>`, wantErr: `the answer begins "<html>hello</html>"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeOpenAIResponse([]byte(tt.body))
			checkDecodedResponse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestDecodeOpenAIResponseMissingID(t *testing.T) {
	t.Parallel()
	got, err := decodeOpenAIResponse([]byte(`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f"}},{"function":{"name":"g"}}]}}]}`))
	if err != nil {
		t.Fatalf("decodeOpenAIResponse(no ids) = %v", err)
	}
	if len(got.ToolCalls) != 2 || got.ToolCalls[0].ID == "" || got.ToolCalls[0].ID == got.ToolCalls[1].ID {
		t.Errorf("decodeOpenAIResponse(no ids) calls = %+v, want two distinct generated IDs", got.ToolCalls)
	}
}

func TestDecodeAnthropicResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		body    string
		want    modelResponse
		wantErr string
	}{
		{name: "text and tool use", body: `{"type":"message","content":[{"type":"text","text":"a"},{"type":"thinking","thinking":"hm","signature":"s1"},
			{"type":"text","text":"b"},{"type":"tool_use","id":"t1","name":"f","input":{"x":1}},{"type":"tool_use","id":"t2","name":"g","input":null}],
			"stop_reason":"tool_use","usage":{"input_tokens":10,"output_tokens":4,"cache_creation_input_tokens":5,"cache_read_input_tokens":100}}`,
			want: modelResponse{Content: "a\nb", StopReason: stopToolUse, Usage: modelUsage{InputTokens: 115, OutputTokens: 4, CachedInputTokens: 100}, ToolCalls: []toolCall{
				{ID: "t1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)},
				{ID: "t2", Name: "g", Arguments: json.RawMessage(`{}`)}},
				Thinking: []json.RawMessage{json.RawMessage(`{"type":"thinking","thinking":"hm","signature":"s1"}`)}}},
		{name: "max tokens", body: `{"content":[{"type":"text","text":"tr"}],"stop_reason":"max_tokens"}`,
			want: modelResponse{Content: "tr", StopReason: stopMaxTokens}},
		{name: "missing stop reason", body: `{"content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}`,
			want: modelResponse{StopReason: stopToolUse, ToolCalls: []toolCall{{ID: "t", Name: "f", Arguments: json.RawMessage(`{}`)}}}},
		{name: "error in a 200", body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
			wantErr: "the server reported an error: Overloaded"},
		{name: "not JSON", body: `{"content":`, wantErr: "unexpected end of JSON input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodeAnthropicResponse([]byte(tt.body))
			checkDecodedResponse(t, got, err, tt.want, tt.wantErr)
		})
	}
}

func checkDecodedResponse(t *testing.T, got *modelResponse, err error, want modelResponse, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("decode = %+v, %v, want error containing %q", got, err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatalf("decode = %v", err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("decode = %+v, want %+v", *got, want)
	}
}

// TestModelStatusHandling scripts failing answers and checks the retries
// made and the error returned.
func TestModelStatusHandling(t *testing.T) {
	t.Parallel()
	ok := fakeTurn{Text: "fine"}
	tests := []struct {
		name      string
		wire      string
		script    []fakeTurn
		wantCalls int
		wantErr   string // empty: the call succeeds with "fine"
	}{
		{name: "429 with Retry-After then success", wire: providerOpenAI,
			script: []fakeTurn{{Status: 429, RetryAfter: "0"}, ok}, wantCalls: 2},
		{name: "5xx then success", wire: providerOpenAI,
			script: []fakeTurn{{Status: 500}, {Status: 502}, {Status: 504}, ok}, wantCalls: 4},
		{name: "529 overloaded then success", wire: providerAnthropic,
			script: []fakeTurn{{Status: 529, Text: "Overloaded"}, {Status: 503}, ok}, wantCalls: 3},
		{name: "retries exhausted", wire: providerAnthropic,
			script:    []fakeTurn{{Status: 503}, {Status: 503}, {Status: 503}, {Status: 503, Text: "try later"}},
			wantCalls: 4, wantErr: "model anthropic: server error (503): try later (gave up after 4 attempts)"},
		{name: "rate limit exhausted", wire: providerOpenAI,
			script:    []fakeTurn{{Status: 429, RetryAfter: "1"}, {Status: 429}, {Status: 429}, {Status: 429, Text: "quota"}},
			wantCalls: 4, wantErr: "model openai: rate limited (429): quota (gave up after 4 attempts)"},
		{name: "401 is not retried", wire: providerOpenAI,
			script:    []fakeTurn{{Status: 401, Text: "Incorrect API key provided"}},
			wantCalls: 1, wantErr: "model openai: authentication failed (401): check OPENAI_API_KEY: Incorrect API key provided"},
		{name: "403", wire: providerAnthropic,
			script:    []fakeTurn{{Status: 403, Text: "forbidden"}},
			wantCalls: 1, wantErr: "model anthropic: authentication failed (403): check ANTHROPIC_API_KEY: forbidden"},
		{name: "400 carries the message", wire: providerOpenAI,
			script:    []fakeTurn{{Status: 400, Text: "Invalid schema for function 'x'"}},
			wantCalls: 1, wantErr: "model openai: request rejected (400): Invalid schema for function 'x'"},
		{name: "404 names the URL", wire: providerOpenAI,
			script:    []fakeTurn{{Status: 404, Body: `{"detail":"Not Found"}`}},
			wantCalls: 1, wantErr: "/v1/chat/completions: check the model name and the base URL (from the model's base_url): Not Found"},
		{name: "non-JSON error body", wire: providerAnthropic,
			script:    []fakeTurn{{Status: 418, Body: "<html>\n  teapot\n</html>"}},
			wantCalls: 1, wantErr: "model anthropic: request rejected (418): <html> teapot </html>"},
		{name: "malformed JSON answer is not retried", wire: providerOpenAI,
			script:    []fakeTurn{{Body: `{"choices":[{"message":`}},
			wantCalls: 1, wantErr: "model openai: decode the answer from "},
		{name: "malformed anthropic answer", wire: providerAnthropic,
			script:    []fakeTurn{{Body: `not json`}},
			wantCalls: 1, wantErr: `(is it an anthropic-compatible API?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, tt.wire, tt.script...)
			got, err := f.provider(t).complete(t.Context(), modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}})
			if calls := len(f.requests()); calls != tt.wantCalls {
				t.Errorf("complete made %d requests, want %d", calls, tt.wantCalls)
			}
			if tt.wantErr == "" {
				if err != nil || got.Content != "fine" {
					t.Fatalf("complete = %+v, %v, want %q", got, err, "fine")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("complete = %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestModelRetryAfterOverridesBackoff makes the backoff an hour: only the
// server's Retry-After of 0 lets the call finish.
func TestModelRetryAfterOverridesBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		retryAfter string
	}{
		{name: "seconds", retryAfter: "0"},
		{name: "HTTP date in the past", retryAfter: "Mon, 02 Jan 2006 15:04:05 GMT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, providerAnthropic, fakeTurn{Status: 429, RetryAfter: tt.retryAfter}, fakeTurn{Text: "fine"})
			p := f.provider(t)
			modelEndpointOf(t, p).retry = retryPolicy{attempts: 2, backoffBase: time.Hour, backoffCap: time.Hour, retryAfterCap: time.Hour}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			got, err := p.complete(ctx, modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}})
			if err != nil || got.Content != "fine" {
				t.Fatalf("complete after Retry-After %q = %v, want %q", tt.retryAfter, err, "fine")
			}
		})
	}
}

func TestRetryDelay(t *testing.T) {
	t.Parallel()
	policy := retryPolicy{attempts: 4, backoffBase: time.Second, backoffCap: 3 * time.Second, retryAfterCap: time.Minute}
	tests := []struct {
		name          string
		attempt       int
		retryAfter    time.Duration
		hasRetryAfter bool
		min, max      time.Duration
	}{
		{name: "first backoff", attempt: 1, min: 500 * time.Millisecond, max: time.Second},
		{name: "doubles", attempt: 2, min: time.Second, max: 2 * time.Second},
		{name: "capped", attempt: 9, min: 1500 * time.Millisecond, max: 3 * time.Second},
		{name: "retry-after", attempt: 1, retryAfter: 7 * time.Second, hasRetryAfter: true, min: 7 * time.Second, max: 7 * time.Second},
		{name: "retry-after zero", attempt: 3, hasRetryAfter: true, min: 0, max: 0},
		{name: "retry-after capped", attempt: 1, retryAfter: time.Hour, hasRetryAfter: true, min: time.Minute, max: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 50 {
				if got := policy.delay(tt.attempt, tt.retryAfter, tt.hasRetryAfter); got < tt.min || got > tt.max {
					t.Fatalf("delay(%d, %v, %v) = %v, want within [%v, %v]", tt.attempt, tt.retryAfter, tt.hasRetryAfter, got, tt.min, tt.max)
				}
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		wantOK bool
	}{
		{name: "absent"},
		{name: "seconds", header: map[string]string{"Retry-After": "12"}, want: 12 * time.Second, wantOK: true},
		{name: "fraction", header: map[string]string{"Retry-After": "0.5"}, want: 500 * time.Millisecond, wantOK: true},
		{name: "date", header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, want: 90 * time.Second, wantOK: true},
		{name: "past date", header: map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, want: 0, wantOK: true},
		{name: "milliseconds win", header: map[string]string{"Retry-After": "30", "Retry-After-Ms": "250"}, want: 250 * time.Millisecond, wantOK: true},
		{name: "garbage", header: map[string]string{"Retry-After": "soon"}},
		{name: "negative", header: map[string]string{"Retry-After": "-3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := parseRetryAfter(h, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseRetryAfter(%v) = %v, %v, want %v, %v", tt.header, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// cancelOnWarn is a slog handler that cancels a context at the first
// warning, which the endpoint logs just before it waits to retry.
type cancelOnWarn struct {
	slog.Handler
	cancel context.CancelFunc
}

func (h cancelOnWarn) Enabled(context.Context, slog.Level) bool { return true }

func (h cancelOnWarn) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.cancel()
	}
	return nil
}

func (h cancelOnWarn) WithAttrs([]slog.Attr) slog.Handler { return h }

func TestModelCancellation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		turn func(cancel context.CancelFunc) fakeTurn
	}{
		{name: "while the model hangs", turn: func(cancel context.CancelFunc) fakeTurn {
			return fakeTurn{Hang: true, Check: func(fakeRequest) error { cancel(); return nil }}
		}},
		{name: "during an hour of backoff", turn: func(context.CancelFunc) fakeTurn {
			return fakeTurn{Status: 503}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			f := newFakeModel(t, providerOpenAI, tt.turn(cancel))
			p, err := newModelProvider(f.spec(), f.getenv, slog.New(cancelOnWarn{cancel: cancel}))
			if err != nil {
				t.Fatalf("newModelProvider = %v", err)
			}
			modelEndpointOf(t, p).retry = retryPolicy{attempts: 4, backoffBase: time.Hour, backoffCap: time.Hour, retryAfterCap: time.Hour}
			_, err = p.complete(ctx, modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}})
			if !errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "model openai: ") {
				t.Fatalf("complete(cancelled) = %v, want model openai: context canceled", err)
			}
		})
	}
}

func TestModelUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	l.Close()
	tests := []struct {
		name    string
		spec    modelSpec
		env     map[string]string
		wantErr string
	}{
		{name: "openai from env", spec: modelSpec{Provider: providerOpenAI, Model: "m"}, env: map[string]string{"OPENAI_BASE_URL": closed + "/v1"},
			wantErr: "model openai: cannot reach " + closed + "/v1 (base URL from OPENAI_BASE_URL): "},
		{name: "anthropic from spec", spec: modelSpec{Provider: providerAnthropic, Model: "m", BaseURL: closed},
			wantErr: "model anthropic: cannot reach " + closed + " (base URL from the model's base_url): "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := newModelProvider(tt.spec, fakeEnv(tt.env), modelTestLogger)
			if err != nil {
				t.Fatalf("newModelProvider = %v", err)
			}
			modelEndpointOf(t, p).retry = fakeRetryPolicy
			_, err = p.complete(t.Context(), modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}})
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) || !strings.HasSuffix(err.Error(), "(gave up after 4 attempts)") {
				t.Fatalf("complete(unreachable) = %v, want error starting %q, ending with the attempts", err, tt.wantErr)
			}
			if last := errors.Unwrap(err); last == nil || !strings.HasPrefix(last.Error(), tt.wantErr) {
				t.Errorf("errors.Unwrap(complete(unreachable)) = %v, want the last attempt's error", last)
			}
		})
	}
}

func TestModelHeaders(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		wire string
		key  string
		want map[string]string // "" means absent
	}{
		{name: "openai with key", wire: providerOpenAI, key: "k1", want: map[string]string{"Authorization": "Bearer k1", "Content-Type": "application/json"}},
		{name: "openai without key", wire: providerOpenAI, want: map[string]string{"Authorization": ""}},
		{name: "anthropic with key", wire: providerAnthropic, key: "k2",
			want: map[string]string{"X-Api-Key": "k2", "Anthropic-Version": "2023-06-01", "Authorization": ""}},
		{name: "anthropic without key", wire: providerAnthropic, want: map[string]string{"X-Api-Key": "", "Anthropic-Version": "2023-06-01"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeModel(t, tt.wire, fakeTurn{Text: "ok"})
			env := map[string]string{}
			if tt.key != "" {
				env["OPENAI_API_KEY"], env["ANTHROPIC_API_KEY"] = tt.key, tt.key
			}
			p, err := newModelProvider(f.spec(), fakeEnv(env), modelTestLogger)
			if err != nil {
				t.Fatalf("newModelProvider = %v", err)
			}
			if _, err := p.complete(t.Context(), modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}}); err != nil {
				t.Fatalf("complete = %v", err)
			}
			got := f.requests()[0].Header
			for k, v := range tt.want {
				if got.Get(k) != v {
					t.Errorf("header %s = %q, want %q", k, got.Get(k), v)
				}
			}
		})
	}
}

// TestModelKeyNeverLeaks has servers echo the key back in every way and
// checks no error and no log line holds it.
func TestModelKeyNeverLeaks(t *testing.T) {
	t.Parallel()
	echo := func(status int) fakeTurn {
		return fakeTurn{Reply: func(req fakeRequest) fakeTurn {
			key := strings.TrimPrefix(req.Header.Get("Authorization"), "Bearer ") + req.Header.Get("X-Api-Key")
			return fakeTurn{Status: status, Text: "bad key " + key}
		}}
	}
	tests := []struct {
		name   string
		script []fakeTurn
	}{
		{name: "401", script: []fakeTurn{echo(401)}},
		{name: "400", script: []fakeTurn{echo(400)}},
		{name: "503 retried", script: []fakeTurn{echo(503), echo(503), echo(503), echo(503)}},
		{name: "malformed answer", script: []fakeTurn{{Reply: func(req fakeRequest) fakeTurn {
			return fakeTurn{Body: "oops " + req.Header.Get("Authorization") + req.Header.Get("X-Api-Key")}
		}}}},
	}
	for _, wire := range []string{providerOpenAI, providerAnthropic} {
		for _, tt := range tests {
			t.Run(wire+" "+tt.name, func(t *testing.T) {
				f := newFakeModel(t, wire, tt.script...)
				var logs bytes.Buffer
				logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
				p, err := newModelProvider(f.spec(), f.getenv, logger)
				if err != nil {
					t.Fatalf("newModelProvider = %v", err)
				}
				modelEndpointOf(t, p).retry = fakeRetryPolicy
				_, err = p.complete(t.Context(), modelRequest{Messages: []chatMessage{{Role: roleUser, Content: "hi"}}})
				if err == nil {
					t.Fatalf("complete(%s) succeeded, want an error", tt.name)
				}
				if strings.Contains(err.Error(), fakeModelKey) {
					t.Errorf("complete(%s) error %q holds the API key", tt.name, err)
				}
				if !strings.Contains(err.Error(), "[redacted]") {
					t.Errorf("complete(%s) error %q, want the echoed key shown as [redacted]", tt.name, err)
				}
				if strings.Contains(logs.String(), fakeModelKey) {
					t.Errorf("logs hold the API key:\n%s", logs.String())
				}
			})
		}
	}
}
