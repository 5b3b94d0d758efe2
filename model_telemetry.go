package main

import (
	"context"
	"strings"
)

// This file holds the span of each model call: a client span with the
// GenAI semantic conventions' chat attributes (provider, models, tokens,
// finish reason), covering the call's attempts.

// genAIProviderNames maps harnessd's provider names to the conventions'
// gen_ai.provider.name values where they differ.
var genAIProviderNames = map[string]string{"google": "gcp.gemini", "mistral": "mistral_ai", "xai": "x_ai"}

// startModelSpan starts the span of one call to e, when ctx is traced.
func (e *modelEndpoint) startModelSpan(ctx context.Context) (context.Context, *traceSpan) {
	if contextSpan(ctx) == nil {
		return ctx, nil
	}
	model := strings.TrimPrefix(e.modelName, e.provider+"/")
	provider := e.provider
	if v, ok := genAIProviderNames[provider]; ok {
		provider = v
	}
	return startSpan(ctx, nil, "chat "+model, spanClient,
		stringAttr("gen_ai.operation.name", "chat"),
		stringAttr("gen_ai.provider.name", provider),
		stringAttr("gen_ai.request.model", model))
}

// endModelSpan ends the span of a model call that returned resp or err.
func endModelSpan(sp *traceSpan, resp *modelResponse, err error) {
	if sp == nil {
		return
	}
	if err != nil {
		sp.failErr("", err)
	} else {
		sp.set(intAttr("gen_ai.usage.input_tokens", int64(resp.Usage.InputTokens)),
			intAttr("gen_ai.usage.output_tokens", int64(resp.Usage.OutputTokens)))
		if resp.Model != "" {
			sp.set(stringAttr("gen_ai.response.model", resp.Model))
		}
		if resp.StopReason != "" {
			sp.set(stringsAttr("gen_ai.response.finish_reasons", []string{resp.StopReason}))
		}
	}
	sp.end()
}
