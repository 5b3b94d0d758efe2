package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// This file holds the OpenAI Chat Completions wire format: encoding a
// modelRequest and decoding the answer.

// An openaiProvider calls an OpenAI-compatible Chat Completions API.
type openaiProvider struct {
	*modelEndpoint
	model     string
	maxTokens int // not sent when zero
	tuning    modelTuning
	// maxCompletionTokens: send the limit as max_completion_tokens, which
	// OpenAI's own API wants (newer models refuse max_tokens); compatible
	// servers know max_tokens.
	maxCompletionTokens bool
}

type openaiRequest struct {
	Model               string          `json:"model"`
	Messages            []openaiMessage `json:"messages"`
	Tools               []openaiTool    `json:"tools,omitempty"`
	MaxTokens           int             `json:"max_tokens,omitempty"`
	MaxCompletionTokens int             `json:"max_completion_tokens,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	// StreamOptions asks for the usage in the last chunk of a stream.
	StreamOptions *openaiStreamOptions `json:"stream_options,omitempty"`
}

type openaiStreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type openaiMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"` // null: an assistant message with only tool calls
	ToolCalls  []openaiToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openaiToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"` // sent as a JSON string; read leniently
	} `json:"function"`
}

type openaiTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// openaiUsage is a Chat Completions answer's usage, whole or in a
// stream's last chunk.
type openaiUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type openaiResponse struct {
	Model   string          `json:"model"`
	Choices []openaiChoice  `json:"choices"`
	Usage   openaiUsage     `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

func (p *openaiProvider) complete(ctx context.Context, req modelRequest) (*modelResponse, error) {
	return p.call(ctx, modelCall{
		encode:  func(stream bool) ([]byte, error) { return p.encodeStream(req, stream) },
		decode:  decodeOpenAIResponse,
		stream:  func() streamDecoder { return newOpenAIStream() },
		onText:  req.OnText,
		onRetry: req.OnRetry,
	})
}

// encodeStream returns the Chat Completions body for req, asking for a
// stream with the usage in its last chunk when stream is set.
func (p *openaiProvider) encodeStream(req modelRequest, stream bool) ([]byte, error) {
	out := openaiRequest{Model: cmp.Or(req.Model, p.model), Messages: []openaiMessage{}, Stop: req.StopSequences,
		Temperature: p.tuning.Temperature, TopP: p.tuning.TopP, ReasoningEffort: p.tuning.ReasoningEffort}
	if stream {
		out.Stream, out.StreamOptions = true, &openaiStreamOptions{IncludeUsage: true}
	}
	if maxTokens := cmp.Or(max(req.MaxTokens, 0), p.maxTokens); p.maxCompletionTokens {
		out.MaxCompletionTokens = maxTokens
	} else {
		out.MaxTokens = maxTokens
	}
	if req.System != "" {
		out.Messages = append(out.Messages, openaiMessage{Role: "system", Content: &req.System})
	}
	for i, m := range req.Messages {
		msg := openaiMessage{Role: m.Role, Content: &m.Content}
		switch m.Role {
		case roleUser:
		case roleAssistant:
			if m.Content == "" && len(m.ToolCalls) > 0 {
				msg.Content = nil
			}
			for _, tc := range m.ToolCalls {
				call := openaiToolCall{ID: tc.ID, Type: "function"}
				call.Function.Name = tc.Name
				args, _ := json.Marshal(string(argumentsOrEmpty(tc.Arguments)))
				call.Function.Arguments = args
				msg.ToolCalls = append(msg.ToolCalls, call)
			}
		case roleTool:
			msg.ToolCallID = m.ToolCallID
			if m.IsError {
				// Chat Completions has no error flag for tool results.
				text := "Error: " + m.Content
				msg.Content = &text
			}
		default:
			return nil, p.errorf("message %d: unknown role %q", i, m.Role)
		}
		out.Messages = append(out.Messages, msg)
	}
	for _, t := range req.Tools {
		tool := openaiTool{Type: "function"}
		tool.Function.Name, tool.Function.Description = t.Name, t.Description
		tool.Function.Parameters = schemaOrObject(t.InputSchema)
		out.Tools = append(out.Tools, tool)
	}
	body, err := marshalJSON(out)
	if err != nil {
		return nil, p.errorf("encode the request: %v", err)
	}
	return body, nil
}

// An openaiChoice is one choice of a Chat Completions answer.
type openaiChoice struct {
	Message struct {
		Content   json.RawMessage  `json:"content"` // a string, null, or an array of parts
		ToolCalls []openaiToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason string `json:"finish_reason"`
}

// decodeOpenAIResponse reads a Chat Completions answer. It is lenient with
// compatible servers: content may be null or an array of parts, a tool call
// may lack its ID, arguments may be empty, an object, or not JSON at all
// (then toolCall.ArgumentsError says so).
func decodeOpenAIResponse(body []byte) (*modelResponse, error) {
	var r openaiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%v; the answer begins %q", err, shortText(string(body), 80))
	}
	return openaiResult(r, body)
}

// openaiResult turns a Chat Completions answer, whole or assembled from a
// stream, into a modelResponse; body is the answer as sent, for the
// message of an error answer.
func openaiResult(r openaiResponse, body []byte) (*modelResponse, error) {
	if len(r.Choices) == 0 {
		if len(r.Error) > 0 && string(r.Error) != "null" {
			return nil, fmt.Errorf("the server reported an error: %s", errorBodyMessage(body))
		}
		return nil, errors.New("the answer has no choices")
	}
	choice := r.Choices[0]
	resp := &modelResponse{
		Model:   r.Model,
		Content: openaiContentText(choice.Message.Content),
		Usage: modelUsage{InputTokens: r.Usage.PromptTokens, OutputTokens: r.Usage.CompletionTokens,
			CachedInputTokens: r.Usage.PromptTokensDetails.CachedTokens},
	}
	for _, tc := range choice.Message.ToolCalls {
		args, argsErr := normalizeArguments(tc.Function.Arguments)
		resp.ToolCalls = append(resp.ToolCalls, toolCall{
			ID:             cmp.Or(tc.ID, "call_"+strconv.FormatUint(rand.Uint64(), 36)),
			Name:           tc.Function.Name,
			Arguments:      args,
			ArgumentsError: argsErr,
		})
	}
	switch choice.FinishReason {
	case "stop":
		resp.StopReason = stopEndTurn
	case "tool_calls", "function_call":
		resp.StopReason = stopToolUse
	case "length":
		resp.StopReason = stopMaxTokens
	case "":
		resp.StopReason = stopEndTurn
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = stopToolUse
		}
	default:
		resp.StopReason = choice.FinishReason
	}
	return resp, nil
}

// openaiContentText returns the text of a message's content: a string, or
// the text parts of an array; "" for null or anything else.
func openaiContentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, part := range parts {
		if part.Type == "text" {
			b.WriteString(part.Text)
		}
	}
	return b.String()
}
