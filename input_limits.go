package main

import (
	"fmt"
)

// This file holds the bounds on what servers may ask of a run: the
// questions of input-required results (per round, per call, per run). The
// throttle that keeps a flood of refusals from flooding the log is
// logThrottle, in log.go.

const (
	// maxInputsPerRound bounds the questions of one input-required result,
	// as 16 server requests in flight do for a connection.
	maxInputsPerRound = 16
	// maxInputsPerCall bounds the questions of every round of one call.
	maxInputsPerCall = 64
	// maxInputsPerRun bounds the questions of input-required results over
	// a whole run.
	maxInputsPerRun = 256
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

// takeQuestions counts n more questions of input-required results against
// the run of p, and returns an error once they pass maxInputsPerRun. Safe
// for concurrent use.
func (p *inputPolicy) takeQuestions(server string, n int) error {
	p.questionsMu.Lock()
	defer p.questionsMu.Unlock()
	if p.questions+n > maxInputsPerRun {
		return fmt.Errorf("server %q asks %d more questions; the run's servers have asked %d, and the limit is %d per run; giving up on the call", server, n, p.questions, maxInputsPerRun)
	}
	p.questions += n
	return nil
}
