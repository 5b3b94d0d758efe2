package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// This file holds the OpenAI Chat Completions stream: chunks of text and
// of tool calls (assembled by index from their deltas), the finish reason,
// the usage in the last chunk, and "[DONE]".

// An openaiChunk is one event of a Chat Completions stream.
type openaiChunk struct {
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *openaiUsage    `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// An openaiStream assembles a streamed Chat Completions answer (choice 0).
type openaiStream struct {
	text     strings.Builder
	calls    []openaiToolCall
	args     []strings.Builder // the arguments of calls, by index
	finish   string
	finished bool // a finish_reason came
	result   openaiResponse
}

// newOpenAIStream returns a decoder for one streamed answer.
func newOpenAIStream() *openaiStream { return &openaiStream{} }

func (s *openaiStream) event(data []byte) (string, bool, error) {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return "", true, nil
	}
	var c openaiChunk
	if err := json.Unmarshal(data, &c); err != nil {
		return "", false, fmt.Errorf("%v; the event begins %q", err, shortText(string(data), 80))
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return "", false, &streamFailure{msg: "the server reported an error: " + errorBodyMessage(data), retry: true}
	}
	if c.Usage != nil {
		s.result.Usage = *c.Usage
	}
	if c.Model != "" {
		s.result.Model = c.Model
	}
	text := ""
	for _, choice := range c.Choices {
		if choice.Index != 0 {
			continue
		}
		if choice.Delta.Content != nil {
			text = *choice.Delta.Content
			s.text.WriteString(text)
		}
		for _, tc := range choice.Delta.ToolCalls {
			if tc.Index < 0 || tc.Index > 1024 {
				return "", false, fmt.Errorf("tool call index %d is out of range", tc.Index)
			}
			for len(s.calls) <= tc.Index {
				s.calls = append(s.calls, openaiToolCall{Type: "function"})
				s.args = append(s.args, strings.Builder{})
			}
			call := &s.calls[tc.Index]
			if tc.ID != "" {
				call.ID = tc.ID
			}
			call.Function.Name += tc.Function.Name
			s.args[tc.Index].WriteString(tc.Function.Arguments)
		}
		if choice.FinishReason != nil && *choice.FinishReason != "" {
			s.finish, s.finished = *choice.FinishReason, true
		}
	}
	return text, false, nil
}

func (s *openaiStream) response() (*modelResponse, error) {
	if !s.finished {
		return nil, errors.New("the stream ended without a finish_reason")
	}
	var choice openaiChoice
	content, _ := json.Marshal(s.text.String())
	choice.Message.Content = content
	choice.FinishReason = s.finish
	for i, call := range s.calls {
		args, _ := json.Marshal(s.args[i].String())
		call.Function.Arguments = args
		choice.Message.ToolCalls = append(choice.Message.ToolCalls, call)
	}
	r := s.result
	r.Choices = []openaiChoice{choice}
	return openaiResult(r, nil)
}
