package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// This file holds input-required rounds (protocol revision 2026-07-28):
// without a session a server cannot send the client a request, so when
// the run a held run call follows waits on an approval or a server's
// question, and the client takes elicitation, the call ends with
// resultType "input_required": its inputRequests are the elicitations
// (the same as a task's), its requestState names the run. The client
// calls run again with the answers as inputResponses and the
// requestState echoed; harnessd delivers them as the API would and holds
// the same run on.

// A roundsState is the requestState of an input-required round: the run
// the call follows.
type roundsState struct {
	RunID string `json:"run_id"`
}

// An inputRequiredAnswer is a run call's result while its run waits on
// the client.
type inputRequiredAnswer struct {
	ResultType    string                  `json:"resultType"`
	InputRequests map[string]mcpTaskInput `json:"inputRequests"`
	RequestState  roundsState             `json:"requestState"`
}

// roundParams are the parts of a run call's params a round reads.
type roundParams struct {
	InputResponses map[string]json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage            `json:"requestState"`
}

// openRequests returns run's open questions and approvals, by id.
func openRequests(run *run) map[string]inputRequest {
	open := map[string]inputRequest{}
	if run.input != nil && run.input.Queue != nil {
		questions, approvals := run.input.Queue.snapshot()
		for _, req := range append(questions, approvals...) {
			open[req.ID] = req
		}
	}
	return open
}

// answerResponses delivers responses, by the id of the request each
// answers, to run's open requests, as info's key; answers to requests not
// open are ignored. The error names each answer not taken.
func (s *mcpServer) answerResponses(run *run, responses map[string]json.RawMessage, info authInfo) error {
	open := openRequests(run)
	var refused []string
	for _, key := range slices.Sorted(maps.Keys(responses)) {
		req, ok := open[key]
		if !ok {
			continue
		}
		var answer inputAnswer
		err := json.Unmarshal(responses[key], &answer)
		if err == nil {
			err = s.answerRequest(run, req, answer, info)
		}
		if err != nil {
			refused = append(refused, fmt.Sprintf("%s: %v", key, err))
		}
	}
	if len(refused) > 0 {
		return errors.New(strings.Join(refused, "; "))
	}
	return nil
}

// runInRounds serves a run call of a client that takes input-required
// rounds: it starts the run (or, with a requestState, takes up the run it
// names, delivering the inputResponses first) and holds it until it ends,
// answering the run's outcome, or until it waits on a request, answering
// an input-required round.
func (s *mcpServer) runInRounds(ctx context.Context, call *mcpCall, args, params json.RawMessage) any {
	var p roundParams
	json.Unmarshal(params, &p) // its shape was checked by tools/call
	var run *run
	if len(p.RequestState) > 0 && string(p.RequestState) != "null" {
		var st roundsState
		if json.Unmarshal(p.RequestState, &st) != nil || st.RunID == "" {
			return mcpToolError("tool run: requestState: not one harnessd gave: send back the requestState of the input_required result unchanged")
		}
		if run = s.api.visibleRun(st.RunID, call.info); run == nil {
			return mcpToolError("tool run: requestState: run %q: not found (runs are listed by list_runs)", st.RunID)
		}
		if err := s.answerResponses(run, p.InputResponses, call.info); err != nil {
			return mcpToolError("tool run: run %s: inputResponses: %v (want {action, content} following the request's requestedSchema)", run.id, err)
		}
	} else {
		var bad *mcpToolResult
		if run, bad = s.startRun("run", call, args); bad != nil {
			return bad
		}
	}
	call.hold(ctx, run, nil)
	if errors.Is(context.Cause(ctx), errMCPCancelled) && !isClosed(run.done) {
		s.api.cancelAndWait(context.WithoutCancel(ctx), run, call.info)
	}
	if !isClosed(run.done) {
		if t := mcpTaskOf(run); len(t.InputRequests) > 0 {
			return inputRequiredAnswer{ResultType: resultTypeInputRequired, InputRequests: t.InputRequests, RequestState: roundsState{RunID: run.id}}
		}
	}
	return runOutcome(run)
}
