package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// This file tests the parts of a run's input queue that approvals use:
// ids for requests refused at once, approvals kept apart from
// elicitations, and their answers.

func TestInputQueueRefusedAtOnceKeepsAnID(t *testing.T) {
	t.Parallel()
	q := &inputQueue{}
	for range maxOpenInputs {
		// Owned by the test; ends at closeAll below.
		go q.ask(context.Background(), &inputRequest{Mode: modeForm}, time.Hour, nil)
	}
	waitUntil(t, "the queue is full", func() bool { n, _ := q.counts(); return n == maxOpenInputs })
	full := &inputRequest{approval: &approvalRequest{Tool: "t"}}
	if out := q.wait(t.Context(), full, "approval_", time.Hour, func(*inputRequest) { t.Error("a full queue opened a request") }); out.how != "too many open requests" || full.ID == "" {
		t.Errorf("wait(full queue) = %q with id %q, want refused with an id", out.how, full.ID)
	}
	q.closeAll()
	closed := &inputRequest{approval: &approvalRequest{Tool: "t"}}
	if out := q.wait(t.Context(), closed, "approval_", time.Hour, nil); out.how != "run ended" || closed.ID == "" || closed.ID == full.ID {
		t.Errorf("wait(closed queue) = %q with id %q, want refused with a new id", out.how, closed.ID)
	}
}

func TestInputQueueApprovals(t *testing.T) {
	t.Parallel()
	q := &inputQueue{}
	opened := make(chan *inputRequest, 2)
	outcomes := make(chan inputOutcome, 2)
	for _, req := range []*inputRequest{{Mode: modeForm}, {approval: &approvalRequest{Tool: "t"}}} {
		// Owned by the test; ends when the request is answered.
		prefix := "input_"
		if req.approval != nil {
			prefix = "approval_"
		}
		go func() {
			outcomes <- q.wait(t.Context(), req, prefix, time.Hour, func(r *inputRequest) { opened <- r })
		}()
	}
	var question, approval *inputRequest
	for range 2 {
		if r := <-opened; r.approval != nil {
			approval = r
		} else {
			question = r
		}
	}
	if got := q.list(); len(got) != 1 || got[0].ID != question.ID {
		t.Errorf("list() = %+v, want the elicitation alone", got)
	}
	if got := q.listKind(true); len(got) != 1 || got[0].ID != approval.ID {
		t.Errorf("listKind(approvals) = %+v, want the approval alone", got)
	}
	if questions, approvals := q.counts(); questions != 1 || approvals != 1 {
		t.Errorf("counts() = %d, %d, want 1, 1", questions, approvals)
	}
	tests := []struct {
		name    string
		id      string
		answer  approvalAnswer
		wantErr string
	}{
		{"bad decision", approval.ID, approvalAnswer{Decision: "yes"}, `decision: "yes": want approve or deny`},
		{"long reason", approval.ID, approvalAnswer{Decision: decisionDeny, Reason: strings.Repeat("x", maxApprovalReasonBytes+1)}, "reason: 1025 bytes, over the limit of 1024"},
		{"an elicitation's id", question.ID, approvalAnswer{Decision: decisionApprove}, errInputNotFound.Error()},
		{"unknown id", "approval_99", approvalAnswer{Decision: decisionApprove}, errInputNotFound.Error()},
	}
	for _, tt := range tests {
		if err := q.answerApproval(tt.id, tt.answer, "ops"); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("%s: answerApproval(%s, %+v) = %v, want an error containing %q", tt.name, tt.id, tt.answer, err, tt.wantErr)
		}
	}
	if _, err := q.answer(approval.ID, inputAnswer{Action: actionAccept}); err != errInputNotFound {
		t.Errorf("answer(an approval's id) = %v, want errInputNotFound", err)
	}
	if err := q.answerApproval(approval.ID, approvalAnswer{Decision: decisionDeny, Reason: "no"}, "ops"); err != nil {
		t.Fatalf("answerApproval(deny) = %v", err)
	}
	if out := <-outcomes; out.how != "ops" || out.decision != (approvalAnswer{Decision: decisionDeny, Reason: "no"}) {
		t.Errorf("outcome = %+v, want deny by ops with its reason", out)
	}
	q.closeAll()
	if out := <-outcomes; out.how != "run ended" {
		t.Errorf("the elicitation's outcome after closeAll = %+v, want run ended", out)
	}
}
