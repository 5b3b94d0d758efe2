package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
)

// This file holds input-required results (multi round-trip requests, protocol
// revision 2026-07-28): a tools/call, prompts/get or resources/read answered
// with resultType "input_required" has its input requests answered by the
// machinery that answers server requests (the session's inputAnswerer,
// client_input.go, and its roots), then is sent again with a new id, the answers as inputResponses
// and the server's requestState echoed byte for byte.

// maxInputRounds bounds the retries of one request: a server that still
// asks for input after this many answered rounds is given up on, so a
// server that asks forever cannot hold a run.
const maxInputRounds = 8

const (
	// maxInputsPerRound bounds the questions of one input-required result,
	// as 16 server requests in flight do for a connection.
	maxInputsPerRound = 16
	// maxInputsPerCall bounds the questions of every round of one call.
	maxInputsPerCall = 64
)

// checkRoundInputs returns an error saying why a round of n questions of
// server is refused, asked after askedBefore in the same call: over
// maxInputsPerRound or maxInputsPerCall. The call fails with it.
func checkRoundInputs(server string, n, askedBefore int) error {
	switch {
	case n > maxInputsPerRound:
		return fmt.Errorf("server %q asks %d questions in one input-required result, over the limit of %d per round; giving up on the call", server, n, maxInputsPerRound)
	case askedBefore+n > maxInputsPerCall:
		return fmt.Errorf("server %q asks %d questions in one call, over the limit of %d per call; giving up on the call", server, askedBefore+n, maxInputsPerCall)
	}
	return nil
}

// resultTypeInputRequired is the resultType of a result that asks for input
// before the request can complete. A result without resultType is complete.
const resultTypeInputRequired = "input_required"

// An inputRequiredResult is the part of an input-required result the retry
// needs. RequestState is kept as the JSON the server sent, so it goes back
// unchanged; it is empty when the server sent none.
type inputRequiredResult struct {
	ResultType    string                     `json:"resultType"`
	InputRequests map[string]embeddedRequest `json:"inputRequests"`
	RequestState  json.RawMessage            `json:"requestState"`
}

// An embeddedRequest is one question of an input-required result: a server
// request in all but its id.
type embeddedRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// asInputRequired decodes raw as an input-required result; ok is false for
// any other result, including one without resultType. Results that cannot
// be one are told apart without decoding them.
func asInputRequired(raw json.RawMessage) (inputRequiredResult, bool) {
	if !bytes.Contains(raw, []byte(resultTypeInputRequired)) {
		return inputRequiredResult{}, false
	}
	var res inputRequiredResult
	if json.Unmarshal(raw, &res) != nil || res.ResultType != resultTypeInputRequired {
		return inputRequiredResult{}, false
	}
	if string(res.RequestState) == "null" {
		res.RequestState = nil
	}
	return res, true
}

// requestWithInput sends req like request and returns its raw result; an
// input-required result is answered and req sent again (a new id each
// time), at most maxInputRounds times. Each retry carries only the answers
// to the previous round's questions and that round's requestState, never
// anything of another request. It may block while a question waits for an
// answer (a person, the run's model); ctx bounds it.
func (c *mcpClient) requestWithInput(ctx context.Context, req rpcRequest) (json.RawMessage, error) {
	retry := req
	asked := 0 // questions answered in this call so far
	for round := 0; ; round++ {
		var raw json.RawMessage
		if err := c.request(ctx, retry, &raw); err != nil {
			return nil, err
		}
		res, ok := asInputRequired(raw)
		if !ok {
			return raw, nil
		}
		if round == maxInputRounds {
			return nil, fmt.Errorf("%s: server %q still asks for input after %d answered rounds; giving up", req.method, c.cfg.Name, maxInputRounds)
		}
		if err := c.boundQuestions(ctx, len(res.InputRequests), asked); err != nil {
			return nil, fmt.Errorf("%s: %w", req.method, err)
		}
		asked += len(res.InputRequests)
		answers, err := c.answerInputRequests(ctx, res.InputRequests)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", req.method, err)
		}
		retry = withInputResponses(req, answers, res.RequestState)
	}
}

// boundQuestions refuses a round of n questions, after askedBefore in the
// same call, past the bounds per round, per call and (for a call of a run)
// per run; nothing of a refused round is asked.
func (c *mcpClient) boundQuestions(ctx context.Context, n, askedBefore int) error {
	if err := checkRoundInputs(c.cfg.Name, n, askedBefore); err != nil {
		return err
	}
	if run := inputAnswererOf(ctx); run != nil {
		return run.takeQuestions(c.cfg.Name, n)
	}
	return nil
}

// answerInputRequests answers each question of an input-required result,
// in the order of their keys, as a server request of the same method would
// be answered: by the conformance hook (HandleRequest) when it knows the
// method, else by the policy of the run making the call (from ctx) or the
// session's own. A question that cannot be answered (sampling refused, a
// method harnessd does not know) fails the request: its error names the
// question.
func (c *mcpClient) answerInputRequests(ctx context.Context, questions map[string]embeddedRequest) (map[string]json.RawMessage, error) {
	keys := make([]string, 0, len(questions))
	for key := range questions {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	answerer := inputAnswererOf(ctx)
	if answerer == nil {
		answerer = c.opts.Input
	}
	answers := make(map[string]json.RawMessage, len(questions))
	for _, key := range keys {
		q := questions[key]
		var (
			result  any
			rpcErr  *rpcError
			handled bool
		)
		if c.opts.HandleRequest != nil {
			result, rpcErr, handled = c.opts.HandleRequest(q.Method, q.Params)
		}
		if !handled {
			result, rpcErr, handled = c.answerServerInput(ctx, answerer, q.Method, q.Params)
		}
		switch {
		case !handled:
			return nil, fmt.Errorf("server %q asks for input %q by %s, which harnessd does not answer", c.cfg.Name, key, q.Method)
		case rpcErr != nil:
			return nil, fmt.Errorf("server %q asks for input %q (%s): %s", c.cfg.Name, key, q.Method, rpcErr.Message)
		}
		answer, err := json.Marshal(result)
		if err != nil {
			return nil, fmt.Errorf("input %q (%s): encode answer: %w", key, q.Method, err)
		}
		answers[key] = answer
	}
	return answers, nil
}

// withInputResponses returns req with inputResponses and, when the server
// sent one, requestState added to its params (those built for each id,
// with withProgress, too). req itself is not changed.
func withInputResponses(req rpcRequest, answers map[string]json.RawMessage, state json.RawMessage) rpcRequest {
	add := func(params any) any {
		fields := map[string]json.RawMessage{}
		if params != nil {
			// params are our own request params: always a JSON object.
			raw, err := marshalJSON(params)
			if err == nil {
				json.Unmarshal(raw, &fields)
			}
		}
		responses, _ := marshalJSON(answers) // raw answers, already valid JSON
		fields["inputResponses"] = responses
		delete(fields, "requestState")
		if len(state) > 0 {
			fields["requestState"] = state
		}
		return fields
	}
	if build := req.withProgress; build != nil {
		req.withProgress = func(token int64) any { return add(build(token)) }
		return req
	}
	req.params = add(req.params)
	return req
}
