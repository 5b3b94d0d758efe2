package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// This file holds how harnessd run answers what a run waits for while it
// follows it: a tool call's approval and a server's question, asked at
// the terminal, or, without one, printed with the curl command that
// answers them elsewhere.

// howToAnswer prints the curl command that posts body to path, then what
// else body may say; the command keeps following the run meanwhile.
func (f *runFollower) howToAnswer(path, body, other string) {
	auth := ""
	if f.c.token != "" {
		auth = ` -H "Authorization: Bearer $HARNESS_TOKEN"`
	}
	f.line("  curl -X POST %s%s -H 'Content-Type: application/json'%s -d '%s'", f.c.base, path, auth, body)
	f.line("  %s; this command goes on once it is answered", other)
}

// decide asks for the decision on a tool call waiting for approval at the
// terminal and posts it. Without a terminal, or when the terminal gives
// no answer, it prints how to decide it elsewhere and returns, so the
// run's events go on being shown: a decision made elsewhere, or the
// timeout's denial, follows as approval.resolved.
func (f *runFollower) decide(ctx context.Context, payload json.RawMessage) {
	var a approvalRequest
	json.Unmarshal(payload, &a)
	elsewhere := func(why string) {
		until := ""
		if !a.ExpiresAt.IsZero() {
			until = ", denied if undecided by " + a.ExpiresAt.UTC().Format(time.DateTime) + " UTC"
		}
		f.line("tool call %s %s waits for approval %s%s; %s, so decide it with:", a.Tool, shortText(a.Arguments, 160), a.ID, until, why)
		f.howToAnswer("/v1/runs/"+f.runID+"/approvals/"+a.ID, `{"decision":"approve"}`, `or "deny", with a "reason"`)
	}
	if f.c.prompter == nil {
		elsewhere("stdin is not a terminal")
		return
	}
	type decision struct {
		id     string
		answer approvalAnswer
		err    error
	}
	decided := make(chan decision, 1)
	// Owned by decide; ends when the terminal gives a line (or EOF), as
	// ask's reader does.
	go func() {
		id, answer, err := f.c.prompter.approve(ctx, payload)
		decided <- decision{id, answer, err}
	}()
	var d decision
	select {
	case d = <-decided:
	case <-ctx.Done():
		return
	}
	if d.err != nil {
		elsewhere(fmt.Sprintf("the terminal gave no decision (%v)", d.err))
		return
	}
	status, data, err := f.c.do(ctx, http.MethodPost, "/v1/runs/"+f.runID+"/approvals/"+d.id, d.answer)
	switch {
	case err != nil:
		f.line("deciding the approval failed: %v", err)
	case status != http.StatusOK:
		f.line("deciding the approval failed: %v", f.c.answerError("decide", status, data))
	}
}

// ask answers a server's question at the terminal and posts the answer.
// For a question already declined it says what was asked; for an open one
// without a terminal, how to answer it elsewhere.
func (f *runFollower) ask(ctx context.Context, d runEventFields) {
	if d.ID == "" {
		f.line("server %s asked: %s (declined: %s)", d.Server, shortText(d.Message, 300), d.Reason)
		return
	}
	if f.c.prompter == nil {
		f.line("server %s asks: %s (question %s); stdin is not a terminal, so answer it with:", d.Server, shortText(d.Message, 300), d.ID)
		f.howToAnswer("/v1/runs/"+f.runID+"/input/"+d.ID, `{"action":"accept","content":{...}}`, `or "decline" or "cancel", without content`)
		return
	}
	f.line("")
	schema, err := parseElicitSchema(d.Schema)
	if err != nil {
		f.line("server %s asked with a form harnessd cannot show: %v", d.Server, err)
		return
	}
	answered := make(chan elicitResult, 1)
	// Owned by ask; ends when the terminal gives a line (or EOF). The
	// command may exit first (an interrupt): it is then left blocked on
	// stdin, with the process.
	go func() {
		res, err := f.c.prompter.prompt(ctx, d.Server, elicitRequest{Mode: d.Mode, Message: d.Message, URL: d.URL}, schema)
		if err != nil {
			res = elicitResult{Action: actionCancel}
		}
		answered <- res
	}()
	var res elicitResult
	select {
	case res = <-answered:
	case <-ctx.Done():
		return
	}
	status, data, err := f.c.do(ctx, http.MethodPost, "/v1/runs/"+f.runID+"/input/"+d.ID, res)
	switch {
	case err != nil:
		f.line("answering the question failed: %v", err)
	case status != http.StatusOK:
		f.line("answering the question failed: %v", f.c.answerError("answer", status, data))
	}
}
