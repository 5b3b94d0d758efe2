package main

import "fmt"

// This file holds the error of a request that the caller got wrong: the
// API answers it with 400 (or 403). Runs, server input and approvals
// return it; the API maps it to its status (api.go).

// A requestError is a request the API answers with 400 (or 403 when
// forbidden is set); its message names the field and says what to do.
type requestError struct {
	msg       string
	forbidden bool
}

func (e *requestError) Error() string { return e.msg }

// badRequest returns a *requestError (a 400) about field.
func badRequest(field, format string, args ...any) error {
	return &requestError{msg: field + ": " + fmt.Sprintf(format, args...)}
}

// invalidRequest returns a *requestError (a 400) for err, which already
// names the field it is about (model "x": ..., profile "x": ...,
// mcp_servers[2]: ...).
func invalidRequest(err error) error {
	return &requestError{msg: err.Error()}
}
