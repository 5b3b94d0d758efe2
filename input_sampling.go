package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
)

// This file holds sampling: a server's sampling/createMessage served by the
// run's own model, within the per-server switch and the per-run caps on
// requests and tokens.

// A samplingBudget is one run's allowance for sampling: requests are
// counted as they come, tokens held for each request's worst case until
// it ends (held) and counted as spent after. Safe for concurrent use.
type samplingBudget struct {
	maxRequests, maxTokens int

	mu sync.Mutex
	// guards requests, tokens and held
	requests, tokens, held int
}

// newSamplingBudget returns a budget; zero or negative limits take the
// defaults.
func newSamplingBudget(maxRequests, maxTokens int) *samplingBudget {
	if maxRequests <= 0 {
		maxRequests = defaultSamplingRequests
	}
	if maxTokens <= 0 {
		maxTokens = defaultSamplingTokens
	}
	return &samplingBudget{maxRequests: maxRequests, maxTokens: maxTokens}
}

// take counts one request of about input tokens that asks for up to
// maxOutput output tokens and holds its worst case. It returns the output
// tokens the request may use, maxOutput cut to what the token cap leaves
// after what was spent and what requests under way hold, and the hold to
// settle or release; or an error when the run is over either cap.
func (b *samplingBudget) take(input, maxOutput int) (int, *budgetHold, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.requests >= b.maxRequests {
		return 0, nil, fmt.Errorf("the run's sampling cap of %d requests is reached", b.maxRequests)
	}
	if b.tokens >= b.maxTokens {
		return 0, nil, fmt.Errorf("the run's sampling cap of %d tokens is reached", b.maxTokens)
	}
	out := min(maxOutput, b.maxTokens-b.tokens-b.held-input)
	if out < 1 {
		return 0, nil, fmt.Errorf("the run's sampling cap of %d tokens is reached: %d spent and %d held by requests under way leave no room for this one's %d input tokens and an answer", b.maxTokens, b.tokens, b.held, input)
	}
	b.requests++
	hold := input + out
	b.held += hold
	return out, newBudgetHold(func(used *modelUsage) {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.held -= hold
		if used != nil {
			b.tokens += used.InputTokens + used.OutputTokens
		}
	}), nil
}

// A samplingModel serves sampling requests with one model, or with another
// that the request's modelPreferences hint at when the operator allows it.
type samplingModel struct {
	Provider modelProvider
	// Spec is Provider's model; another model picked by a hint takes its
	// max_output_tokens and sampling settings, and its base URL when of
	// the same provider (modelSpec.withModel).
	Spec modelSpec
	// Models are the other models a hint may pick ([model]
	// sampling_models); hints matching none of them, nor Spec, are
	// ignored.
	Models []modelSpec
	// NewProvider builds the provider of a picked model; with nil, only
	// Spec's model serves.
	NewProvider func(modelSpec) (modelProvider, error)
	Budget      *samplingBudget
	// MaxTokens caps one request's maxTokens; zero means
	// defaultSamplingMaxTokens.
	MaxTokens int
	// OnUsage adds a served request's usage to the run's; nil for none.
	OnUsage func(modelUsage)
	// RunBudget refuses the requests the run cannot afford and counts
	// what the served ones spent; nil bounds nothing.
	RunBudget budgetReserver
}

// A budgetReserver holds a model call's worst case against a run's
// budget until the call settles: it returns maxOutput, lowered to what
// the budget affords, and the hold to release, or why the call cannot be
// afforded. The run's budget (runBudget, run_budget.go) is one; a nil
// *runBudget bounds nothing.
type budgetReserver interface {
	reserve(model string, input, maxOutput int) (int, *budgetHold, error)
}

// A samplingRequest is the params of sampling/createMessage.
type samplingRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	SystemPrompt  string   `json:"systemPrompt"`
	MaxTokens     int      `json:"maxTokens"`
	StopSequences []string `json:"stopSequences"`
	Tools         []struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"inputSchema"`
	} `json:"tools"`
	ToolChoice *struct {
		Mode string `json:"mode"`
	} `json:"toolChoice"`
	ModelPreferences *struct {
		Hints []struct {
			Name string `json:"name"`
		} `json:"hints"`
	} `json:"modelPreferences"`
}

// hints returns the request's model hints, most preferred first.
func (req *samplingRequest) hints() []string {
	if req.ModelPreferences == nil {
		return nil
	}
	var out []string
	for _, h := range req.ModelPreferences.Hints {
		if h.Name != "" {
			out = append(out, h.Name)
		}
	}
	return out
}

// pickSamplingModel returns the model the hints choose: hints are tried in
// order, each a case-insensitive substring of a "provider/model" name, as
// the specification describes; the first hint that matches current or one
// of allowed wins (current first, then allowed in order). ok is false when
// no hint matches; ignored lists the hints tried that matched nothing.
func pickSamplingModel(hints []string, current modelSpec, allowed []modelSpec) (picked modelSpec, ok bool, ignored []string) {
	for _, hint := range hints {
		h := strings.ToLower(hint)
		for _, m := range slices.Concat([]modelSpec{current}, allowed) {
			if m.Provider != "" && strings.Contains(strings.ToLower(m.name()), h) {
				return m, true, ignored
			}
		}
		ignored = append(ignored, hint)
	}
	return modelSpec{}, false, ignored
}

// providerFor returns the provider that serves req: another allowed model
// when a hint picks one, else the sampler's own. A picked model whose
// provider cannot be built (no API key) is logged and not used.
func (s *samplingModel) providerFor(req *samplingRequest, logger *slog.Logger) modelProvider {
	hints := req.hints()
	if len(hints) == 0 {
		return s.Provider
	}
	picked, ok, ignored := pickSamplingModel(hints, s.Spec, s.Models)
	if len(ignored) > 0 {
		logger.Debug("sampling hints name no allowed model; ignoring them (allow models with [model] sampling_models)", "hints", ignored)
	}
	if !ok || picked.name() == s.Spec.name() || s.NewProvider == nil {
		return s.Provider
	}
	spec := s.Spec.withModel(picked)
	provider, err := s.NewProvider(spec)
	if err != nil {
		logger.Warn("sampling model picked by a hint cannot be used; serving with the run's model", "model", spec.name(), "err", err)
		return s.Provider
	}
	return provider
}

// A samplingBlock is one content block of a sampling message.
type samplingBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"toolUseId,omitempty"`
	Content   []samplingBlock `json:"content,omitempty"`
	IsError   bool            `json:"isError,omitempty"`
	MimeType  string          `json:"mimeType,omitempty"`
}

// decodeBlocks reads content that is one block or an array of blocks.
func decodeBlocks(raw json.RawMessage) ([]samplingBlock, error) {
	raw = json.RawMessage(strings.TrimSpace(string(raw)))
	if len(raw) > 0 && raw[0] == '[' {
		var blocks []samplingBlock
		err := json.Unmarshal(raw, &blocks)
		return blocks, err
	}
	var b samplingBlock
	err := json.Unmarshal(raw, &b)
	return []samplingBlock{b}, err
}

// toModelRequest converts a sampling request into the provider-neutral
// conversation. Only text, tool use and tool results pass: harnessd's
// providers take text, so image and audio content is refused by name.
func (req *samplingRequest) toModelRequest() (modelRequest, error) {
	out := modelRequest{System: req.SystemPrompt, StopSequences: req.StopSequences}
	for i, m := range req.Messages {
		blocks, err := decodeBlocks(m.Content)
		if err != nil {
			return out, fmt.Errorf("messages[%d].content: %v", i, err)
		}
		var text []string
		var calls []toolCall
		for j, b := range blocks {
			switch b.Type {
			case "text":
				text = append(text, b.Text)
			case "tool_use":
				args := b.Input
				if len(args) == 0 {
					args = json.RawMessage("{}")
				}
				calls = append(calls, toolCall{ID: b.ID, Name: b.Name, Arguments: args})
			case "tool_result":
				var parts []string
				for _, c := range b.Content {
					if c.Type == "text" {
						parts = append(parts, c.Text)
					}
				}
				out.Messages = append(out.Messages, chatMessage{Role: roleTool, ToolCallID: b.ToolUseID, Content: strings.Join(parts, "\n"), IsError: b.IsError})
			default:
				return out, fmt.Errorf("messages[%d].content[%d]: %s content is not supported: harnessd's models take text, tool use and tool results", i, j, b.Type)
			}
		}
		switch m.Role {
		case roleUser:
			if len(calls) > 0 {
				return out, fmt.Errorf("messages[%d]: a user message cannot hold tool_use", i)
			}
			if len(text) > 0 {
				out.Messages = append(out.Messages, chatMessage{Role: roleUser, Content: strings.Join(text, "\n")})
			}
		case roleAssistant:
			out.Messages = append(out.Messages, chatMessage{Role: roleAssistant, Content: strings.Join(text, "\n"), ToolCalls: calls})
		default:
			return out, fmt.Errorf("messages[%d].role %q: want user or assistant", i, m.Role)
		}
	}
	if len(out.Messages) == 0 {
		return out, fmt.Errorf("messages: empty; send at least one message")
	}
	if req.ToolChoice == nil || req.ToolChoice.Mode != "none" {
		for _, t := range req.Tools {
			out.Tools = append(out.Tools, toolDef{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema})
		}
	}
	return out, nil
}

// samplingResult builds the CreateMessageResult of a model answer.
func samplingResult(model string, resp *modelResponse) map[string]any {
	var content []samplingBlock
	if resp.Content != "" || len(resp.ToolCalls) == 0 {
		content = append(content, samplingBlock{Type: "text", Text: resp.Content})
	}
	for _, tc := range resp.ToolCalls {
		content = append(content, samplingBlock{Type: "tool_use", ID: tc.ID, Name: tc.Name, Input: tc.Arguments})
	}
	stop := resp.StopReason
	switch stop {
	case stopEndTurn:
		stop = "endTurn"
	case stopToolUse:
		stop = "toolUse"
	case stopMaxTokens:
		stop = "maxTokens"
	case "stop_sequence":
		stop = "stopSequence"
	}
	out := map[string]any{"role": roleAssistant, "model": model, "stopReason": stop}
	if len(content) == 1 && len(resp.ToolCalls) == 0 {
		out["content"] = content[0]
	} else {
		out["content"] = content
	}
	return out
}

// sample serves one sampling/createMessage for server under the policy.
// Refusals (sampling off for the server, no model, over a cap, content
// the model cannot take) are rpc errors whose message says what to set.
func (p *inputPolicy) sample(ctx context.Context, server serverConfig, params json.RawMessage) (any, *rpcError) {
	refuse := func(format string, args ...any) *rpcError {
		msg := fmt.Sprintf(format, args...)
		p.events().samplingRefused(server.Name, msg)
		if ok, held := p.refusals.allow(); ok {
			p.logger().Warn("sampling refused", "server", server.Name, "reason", msg, "held_back", held)
		}
		return &rpcError{Code: codeSamplingRefused, Message: "sampling refused by harnessd: " + msg}
	}
	if !server.Sampling {
		return nil, refuse("sampling is off for server %q (set sampling = true in its config)", server.Name)
	}
	s := p.Sampler
	if s == nil {
		reason := p.NoSampling
		if reason == "" {
			reason = "no model to serve it"
		}
		return nil, refuse("%s", reason)
	}
	var req samplingRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "sampling/createMessage: " + err.Error()}
	}
	mreq, err := req.toModelRequest()
	if err != nil {
		return nil, &rpcError{Code: codeInvalidParams, Message: "sampling/createMessage: " + err.Error()}
	}
	maxTokens := s.MaxTokens
	if maxTokens <= 0 {
		maxTokens = defaultSamplingMaxTokens
	}
	if req.MaxTokens > 0 {
		maxTokens = min(maxTokens, req.MaxTokens)
	}
	// Each budget holds the request's worst case until it ends, so that
	// requests served at once cannot together spend past it; each may cut
	// maxTokens to what it has left. The deferred releases free what a
	// request that fails, or is refused by a later budget, held.
	input := mreq.estimateInputTokens()
	var samplingHold, outsideHold, runHold *budgetHold
	defer func() { samplingHold.release(); outsideHold.release(); runHold.release() }()
	if s.Budget != nil {
		if maxTokens, samplingHold, err = s.Budget.take(input, maxTokens); err != nil {
			return nil, refuse("%v", err)
		}
	}
	if maxTokens, outsideHold, err = p.Outside.take(server.Name, input, maxTokens); err != nil {
		return nil, refuse("%v", err)
	}
	provider := s.providerFor(&req, p.logger().With("server", server.Name))
	if s.RunBudget != nil {
		if maxTokens, runHold, err = s.RunBudget.reserve(provider.name(), input, maxTokens); err != nil {
			return nil, refuse("%v", err)
		}
	}
	mreq.MaxTokens = maxTokens
	p.events().samplingRequested(server.Name, provider.name(), len(req.Messages), len(mreq.Tools), mreq.MaxTokens)
	start := time.Now()
	resp, err := provider.complete(ctx, mreq)
	elapsed := time.Since(start)
	if err != nil {
		p.events().samplingCompleted(server.Name, nil, err, elapsed)
		return nil, &rpcError{Code: codeInternalError, Message: "sampling/createMessage: " + err.Error()}
	}
	samplingHold.settle(resp.Usage)
	resp.Usage = runHold.settle(resp.Usage)
	outsideHold.settle(resp.Usage)
	if s.OnUsage != nil {
		s.OnUsage(resp.Usage)
	}
	p.events().samplingCompleted(server.Name, resp, nil, elapsed)
	p.logger().Info("sampling served", "server", server.Name, "input_tokens", resp.Usage.InputTokens, "output_tokens", resp.Usage.OutputTokens, "duration", elapsed)
	return samplingResult(provider.name(), resp), nil
}
