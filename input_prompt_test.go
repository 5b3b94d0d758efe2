package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// This file tests the terminal side of approvals: a person at a terminal
// deciding an approval.requested payload.

func TestTerminalPrompterApprove(t *testing.T) {
	t.Parallel()
	// A payload as approval.requested carries it, built by the daemon's
	// own constructor.
	payload, err := json.Marshal(approvalRequestedEvent(approvalRequest{
		ID: "approval_3", Tool: "mcp_files_delete", Server: "files", ServerTool: "delete",
		Arguments: `{"path":"/tmp/x"}`, ArgumentsBytes: 9000, Annotations: json.RawMessage(`{"destructiveHint":true}`),
	}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, typed string
		want        approvalAnswer
		wantErr     bool
	}{
		{name: "yes", typed: "yes\n", want: approvalAnswer{Decision: decisionApprove}},
		{name: "y", typed: " Y \n", want: approvalAnswer{Decision: decisionApprove}},
		{name: "no with a reason", typed: "n\nnot on production\n", want: approvalAnswer{Decision: decisionDeny, Reason: "not on production"}},
		{name: "retry then no without reason", typed: "maybe\nno\n\n", want: approvalAnswer{Decision: decisionDeny}},
		{name: "end of input", typed: "", wantErr: true},
		{name: "end of input before the reason", typed: "n\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			tp := &terminalPrompter{in: newBufferedLines(strings.NewReader(tt.typed)), out: &out}
			id, got, err := tp.approve(t.Context(), payload)
			if tt.wantErr {
				if err == nil {
					t.Errorf("approve(%q) = %s %+v, want an error", tt.typed, id, got)
				}
				return
			}
			if err != nil || id != "approval_3" || got != tt.want {
				t.Errorf("approve(%q) = %q %+v, %v, want approval_3 %+v\n%s", tt.typed, id, got, err, tt.want, out.String())
			}
			shown := out.String()
			for _, want := range []string{`mcp_files_delete (tool "delete" of server "files")`, `arguments: {"path":"/tmp/x"} ... (cut; 9000 bytes in all)`, `annotations: {"destructiveHint":true}`} {
				if !strings.Contains(shown, want) {
					t.Errorf("the terminal shows %q, want it to contain %q", shown, want)
				}
			}
		})
	}
	var out strings.Builder
	tp := &terminalPrompter{in: newBufferedLines(strings.NewReader("y\n")), out: &out}
	if _, _, err := tp.approve(t.Context(), json.RawMessage(`{"tool":"x"}`)); err == nil || !strings.Contains(err.Error(), "not an approval.requested payload") {
		t.Errorf("approve(payload without approval_id) = %v, want an error saying so", err)
	}
}
