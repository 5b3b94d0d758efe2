package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// This file holds the Anthropic Messages wire format: encoding a
// modelRequest and decoding the answer.

// An anthropicProvider calls the Anthropic Messages API.
type anthropicProvider struct {
	*modelEndpoint
	model     string
	maxTokens int
	tuning    modelTuning
}

type anthropicRequest struct {
	Model     string             `json:"model"`
	MaxTokens int                `json:"max_tokens"`
	System    string             `json:"system,omitempty"`
	Messages  []anthropicMessage `json:"messages"`
	Tools     []anthropicTool    `json:"tools,omitempty"`
	// StopSequences end the answer early (sampling requests may ask).
	StopSequences []string           `json:"stop_sequences,omitempty"`
	Stream        bool               `json:"stream,omitempty"`
	Temperature   *float64           `json:"temperature,omitempty"`
	TopP          *float64           `json:"top_p,omitempty"`
	Thinking      *anthropicThinking `json:"thinking,omitempty"`
}

// An anthropicThinking turns on extended thinking, the Messages API's
// reasoning effort: the model may think with up to BudgetTokens of the
// call's max_tokens before it answers.
type anthropicThinking struct {
	Type         string `json:"type"` // "enabled"
	BudgetTokens int    `json:"budget_tokens"`
}

type anthropicMessage struct {
	Role    string           `json:"role"`
	Content []anthropicBlock `json:"content"`
}

// An anthropicBlock is a content block: text, tool_use, tool_result, or
// thinking and redacted_thinking (extended thinking, sent back as they
// came, with their signature or data).
type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   string          `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  string          `json:"thinking,omitempty"`
	Signature string          `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type anthropicResponse struct {
	Model      string           `json:"model"`
	Content    []anthropicBlock `json:"content"`
	StopReason string           `json:"stop_reason"`
	Usage      anthropicUsage   `json:"usage"`
	Type       string           `json:"type"`
	Error      json.RawMessage  `json:"error"`
}

// An anthropicUsage is the usage of a Messages answer.
type anthropicUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

func (p *anthropicProvider) complete(ctx context.Context, req modelRequest) (*modelResponse, error) {
	return p.call(ctx, modelCall{
		encode:  func(stream bool) ([]byte, error) { return p.encodeStream(req, stream) },
		decode:  decodeAnthropicResponse,
		stream:  func() streamDecoder { return newAnthropicStream() },
		onText:  req.OnText,
		onRetry: req.OnRetry,
	})
}

// encodeStream returns the Messages body for req, streamed when stream is
// set. Consecutive tool messages become one user message of tool_result
// blocks, as the API requires.
func (p *anthropicProvider) encodeStream(req modelRequest, stream bool) ([]byte, error) {
	out := anthropicRequest{
		Model:         cmp.Or(req.Model, p.model),
		MaxTokens:     cmp.Or(max(req.MaxTokens, 0), p.maxTokens),
		System:        req.System,
		Messages:      []anthropicMessage{},
		StopSequences: req.StopSequences,
		Stream:        stream,
		Temperature:   p.tuning.Temperature,
		TopP:          p.tuning.TopP,
	}
	// Extended thinking needs max_tokens above its budget. A call whose
	// cap was cut lower (a sampling request asking for fewer tokens, or
	// one a budget leaves little room) is made without thinking.
	if budget := anthropicThinkingBudgets[p.tuning.ReasoningEffort]; budget > 0 && out.MaxTokens > budget {
		out.Thinking = &anthropicThinking{Type: "enabled", BudgetTokens: budget}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case roleUser:
			out.Messages = append(out.Messages, anthropicMessage{Role: roleUser, Content: []anthropicBlock{{Type: "text", Text: m.Content}}})
		case roleAssistant:
			msg := anthropicMessage{Role: roleAssistant, Content: []anthropicBlock{}}
			// The API wants the thinking of a turn that called tools back,
			// first, untouched.
			for _, raw := range m.Thinking {
				var block anthropicBlock
				if err := json.Unmarshal(raw, &block); err != nil {
					return nil, p.errorf("message %d: thinking block: %v", i, err)
				}
				msg.Content = append(msg.Content, block)
			}
			if m.Content != "" {
				msg.Content = append(msg.Content, anthropicBlock{Type: "text", Text: m.Content})
			}
			for _, tc := range m.ToolCalls {
				msg.Content = append(msg.Content, anthropicBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: argumentsOrEmpty(tc.Arguments)})
			}
			if len(msg.Content) == 0 {
				continue // the API refuses empty text; nothing was said
			}
			out.Messages = append(out.Messages, msg)
		case roleTool:
			block := anthropicBlock{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: m.IsError}
			if i > 0 && req.Messages[i-1].Role == roleTool {
				last := &out.Messages[len(out.Messages)-1]
				last.Content = append(last.Content, block)
				continue
			}
			out.Messages = append(out.Messages, anthropicMessage{Role: roleUser, Content: []anthropicBlock{block}})
		default:
			return nil, p.errorf("message %d: unknown role %q", i, m.Role)
		}
	}
	for _, t := range req.Tools {
		out.Tools = append(out.Tools, anthropicTool{Name: t.Name, Description: t.Description, InputSchema: schemaOrObject(t.InputSchema)})
	}
	body, err := marshalJSON(out)
	if err != nil {
		return nil, p.errorf("encode the request: %v", err)
	}
	return body, nil
}

// decodeAnthropicResponse reads a Messages answer: text blocks joined by
// newlines, tool_use blocks as tool calls, thinking blocks kept to be sent
// back; other blocks are ignored.
func decodeAnthropicResponse(body []byte) (*modelResponse, error) {
	var r anthropicResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%v; the answer begins %q", err, shortText(string(body), 80))
	}
	if r.Type == "error" {
		return nil, fmt.Errorf("the server reported an error: %s", errorBodyMessage(body))
	}
	return anthropicResult(r), nil
}

// anthropicResult turns a Messages answer, whole or assembled from a
// stream, into a modelResponse.
func anthropicResult(r anthropicResponse) *modelResponse {
	u := r.Usage
	resp := &modelResponse{
		Usage: modelUsage{InputTokens: u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens, OutputTokens: u.OutputTokens,
			CachedInputTokens: u.CacheReadInputTokens},
		StopReason: r.StopReason,
		Model:      r.Model,
	}
	var texts []string
	for _, b := range r.Content {
		switch b.Type {
		case "text":
			texts = append(texts, b.Text)
		case "tool_use":
			args, argsErr := normalizeArguments(b.Input)
			resp.ToolCalls = append(resp.ToolCalls, toolCall{ID: b.ID, Name: b.Name, Arguments: args, ArgumentsError: argsErr})
		case "thinking", "redacted_thinking":
			if raw, err := json.Marshal(b); err == nil {
				resp.Thinking = append(resp.Thinking, raw)
			}
		}
	}
	resp.Content = strings.Join(texts, "\n")
	if resp.StopReason == "" {
		resp.StopReason = stopEndTurn
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = stopToolUse
		}
	}
	return resp
}
