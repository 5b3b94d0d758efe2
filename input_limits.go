package main

import (
	"fmt"
)

// This file holds the bound on what servers may ask of a run: the
// questions of input-required results over the run. The throttle that
// keeps a flood of refusals from flooding the log is logThrottle, in
// log.go.

// maxInputsPerRun bounds the questions of input-required results over a
// whole run. The bounds per round and per call are the client's
// (client_inputrequired.go).
const maxInputsPerRun = 256

// takeQuestions counts n more questions of input-required results against
// the run of p, and returns an error once they pass maxInputsPerRun; a nil
// p bounds nothing. Safe for concurrent use.
func (p *inputPolicy) takeQuestions(server string, n int) error {
	if p == nil {
		return nil
	}
	p.questionsMu.Lock()
	defer p.questionsMu.Unlock()
	if p.questions+n > maxInputsPerRun {
		return fmt.Errorf("server %q asks %d more questions; the run's servers have asked %d, and the limit is %d per run; giving up on the call", server, n, p.questions, maxInputsPerRun)
	}
	p.questions += n
	return nil
}
