package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// This file holds the Anthropic Messages stream: message_start,
// content_block_start/delta/stop for text and tool_use (input_json_delta),
// message_delta with the stop reason and usage, message_stop, error and
// ping.

// An anthropicEvent is one event of a Messages stream; which fields are
// set depends on Type.
type anthropicEvent struct {
	Type    string `json:"type"`
	Message struct {
		Model string         `json:"model"`
		Usage anthropicUsage `json:"usage"`
	} `json:"message"` // message_start
	Index        int            `json:"index"`
	ContentBlock anthropicBlock `json:"content_block"` // content_block_start
	Delta        struct {
		Type        string `json:"type"`
		Text        string `json:"text"`         // text_delta
		PartialJSON string `json:"partial_json"` // input_json_delta
		Thinking    string `json:"thinking"`     // thinking_delta
		Signature   string `json:"signature"`    // signature_delta
		StopReason  string `json:"stop_reason"`  // message_delta
	} `json:"delta"`
	Usage *anthropicUsage `json:"usage"` // message_delta
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

// An anthropicStream assembles a streamed Messages answer.
type anthropicStream struct {
	result  anthropicResponse
	blocks  map[int]int              // event index → index in result.Content
	inputs  map[int]*strings.Builder // tool_use input from input_json_delta, by result index
	texts   int                      // text blocks started so far
	stopped bool                     // message_stop came
}

// newAnthropicStream returns a decoder for one streamed answer.
func newAnthropicStream() *anthropicStream {
	return &anthropicStream{blocks: map[int]int{}, inputs: map[int]*strings.Builder{}}
}

// anthropicFatalErrors are the error types of a stream that another
// attempt would meet again.
var anthropicFatalErrors = map[string]bool{
	"invalid_request_error": true, "authentication_error": true, "permission_error": true,
	"not_found_error": true, "request_too_large": true,
}

func (s *anthropicStream) event(data []byte) (string, bool, error) {
	var ev anthropicEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return "", false, fmt.Errorf("%v; the event begins %q", err, shortText(string(data), 80))
	}
	switch ev.Type {
	case "message_start":
		s.result.Usage, s.result.Model = ev.Message.Usage, ev.Message.Model
	case "content_block_start":
		s.blocks[ev.Index] = len(s.result.Content)
		block := ev.ContentBlock
		s.result.Content = append(s.result.Content, block)
		if block.Type == "text" {
			s.texts++
			// Whole answers join text blocks with a newline: so do the
			// pieces of a stream.
			if s.texts > 1 {
				return "\n" + block.Text, false, nil
			}
			return block.Text, false, nil
		}
	case "content_block_delta":
		i, ok := s.blocks[ev.Index]
		if !ok {
			return "", false, fmt.Errorf("content_block_delta for block %d, which never started", ev.Index)
		}
		switch ev.Delta.Type {
		case "text_delta":
			s.result.Content[i].Text += ev.Delta.Text
			return ev.Delta.Text, false, nil
		case "thinking_delta":
			s.result.Content[i].Thinking += ev.Delta.Thinking
		case "signature_delta":
			s.result.Content[i].Signature += ev.Delta.Signature
		case "input_json_delta":
			if s.inputs[i] == nil {
				s.inputs[i] = &strings.Builder{}
			}
			s.inputs[i].WriteString(ev.Delta.PartialJSON)
		}
	case "message_delta":
		if ev.Delta.StopReason != "" {
			s.result.StopReason = ev.Delta.StopReason
		}
		if u := ev.Usage; u != nil {
			s.result.Usage.OutputTokens = u.OutputTokens
			if u.InputTokens > 0 {
				s.result.Usage.InputTokens = u.InputTokens
			}
		}
	case "message_stop":
		s.stopped = true
		return "", true, nil
	case "error":
		return "", false, &streamFailure{msg: fmt.Sprintf("the server reported an error: %s (%s)", ev.Error.Message, ev.Error.Type),
			retry: !anthropicFatalErrors[ev.Error.Type]}
	}
	return "", false, nil // ping, content_block_stop and what is new
}

func (s *anthropicStream) response() (*modelResponse, error) {
	if !s.stopped {
		return nil, errors.New("the stream ended without message_stop")
	}
	for i, input := range s.inputs {
		s.result.Content[i].Input = json.RawMessage(input.String())
	}
	return anthropicResult(s.result), nil
}
