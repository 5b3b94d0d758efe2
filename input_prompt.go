package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
)

// This file holds the terminal side of server input for harnessd mcp
// call and mcp list: a person at a terminal answers an elicitation field
// by field; without a terminal every elicitation is declined. mcp call
// also shows its call's progress notifications on a terminal.

// isTTY reports whether r is a terminal.
func isTTY(r io.Reader) bool { return isTerminalValue(r) }

// isTerminalWriter reports whether w is a terminal.
func isTerminalWriter(w io.Writer) bool { return isTerminalValue(w) }

// isTerminalValue reports whether v is an *os.File on a terminal
// (isTerminalFile), or a terminalWriter over one: /dev/null, a pipe or a
// file is none.
func isTerminalValue(v any) bool {
	if tw, ok := v.(terminalWriter); ok {
		v = tw.w
	}
	f, ok := v.(*os.File)
	return ok && f != nil && isTerminalFile(f)
}

// commandInput is the input policy of a command: prompts on the terminal
// when stdin is one, declines otherwise; sampling by the configured
// default model.
func commandInput(stdin io.Reader, prompts io.Writer, model modelSettings, getenv func(string) (string, bool), logger *slog.Logger) *inputPolicy {
	p := outsideRunInput(model, getenv, logger)
	if isTTY(stdin) {
		tp := &terminalPrompter{in: newBufferedLines(stdin), out: prompts}
		p.Prompt = tp.prompt
	} else {
		p.DeclineReason = "stdin is not a terminal: nobody can answer"
	}
	return p
}

// A terminalPrompter asks a person at a terminal, one elicitation at a
// time. Safe for concurrent use.
type terminalPrompter struct {
	mu  sync.Mutex // one elicitation at a time on the terminal
	in  lineReader
	out io.Writer
}

// A lineReader gives the lines a person types. readLine returns one line
// without its newline; io.EOF ends the input, and ctx done ends the wait.
// A line editor on a terminal (harnessd run's chat) implements it.
type lineReader interface {
	readLine(ctx context.Context) (string, error)
}

// A bufferedLines is a lineReader over a plain reader, as a terminal in
// its ordinary (canonical) mode gives whole lines.
type bufferedLines struct{ r *bufio.Reader }

// newBufferedLines returns a lineReader of r's lines.
func newBufferedLines(r io.Reader) bufferedLines { return bufferedLines{r: bufio.NewReader(r)} }

// readLine reads one line; a wait already under way is not cut short by
// ctx.
func (b bufferedLines) readLine(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	line, err := b.r.ReadString('\n')
	if err != nil && line == "" {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// readLine reads one line from the terminal.
func (tp *terminalPrompter) readLine(ctx context.Context) (string, error) {
	return tp.in.readLine(ctx)
}

// prompt asks for one elicitation: URL mode prints the URL and waits for
// Enter; form mode asks each field, an empty line keeping the default (or
// leaving an optional field out). "decline" or "cancel" at any prompt
// answers so.
func (tp *terminalPrompter) prompt(ctx context.Context, server string, req elicitRequest, schema *elicitSchema) (elicitResult, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	fmt.Fprintf(tp.out, "\nServer %q asks: %s\n", server, req.Message)
	if req.Mode == modeURL {
		fmt.Fprintf(tp.out, "Open this URL:\n%s\nPress Enter when done, or type decline or cancel: ", req.URL)
		line, err := tp.readLine(ctx)
		if err != nil {
			return elicitResult{}, err
		}
		if a := strings.TrimSpace(line); a == actionDecline || a == actionCancel {
			return elicitResult{Action: a}, nil
		}
		return elicitResult{Action: actionAccept}, nil
	}
	fmt.Fprintln(tp.out, "(an empty line keeps the default; type decline or cancel to refuse)")
	content := map[string]json.RawMessage{}
	for _, name := range schema.order {
		f := schema.Properties[name]
		for {
			fmt.Fprintf(tp.out, "%s: ", fieldPrompt(name, f, schema))
			line, err := tp.readLine(ctx)
			if err != nil {
				return elicitResult{}, err
			}
			line = strings.TrimSpace(line)
			if line == actionDecline || line == actionCancel {
				return elicitResult{Action: line}, nil
			}
			if line == "" {
				break
			}
			raw := terminalValue(f, line)
			if _, err := f.value(raw); err != nil {
				fmt.Fprintf(tp.out, "  %v; try again\n", err)
				continue
			}
			content[name] = raw
			break
		}
	}
	out, err := schema.validate(content)
	if err != nil {
		fmt.Fprintf(tp.out, "  %v: cancelled\n", err)
		return elicitResult{Action: actionCancel}, nil
	}
	return elicitResult{Action: actionAccept, Content: out}, nil
}

// fieldPrompt describes a field: its title, type or choices, default and
// whether it is required.
func fieldPrompt(name string, f *elicitField, schema *elicitSchema) string {
	var b strings.Builder
	b.WriteString(name)
	if f.Title != "" && f.Title != name {
		fmt.Fprintf(&b, " (%s)", f.Title)
	}
	if f.Description != "" {
		fmt.Fprintf(&b, " - %s", f.Description)
	}
	kind := f.Type
	if f.Format != "" {
		kind = f.Format
	}
	if choices := f.choices(); choices != nil {
		kind = "one of " + strings.Join(choices, ", ")
	}
	if f.Items != nil {
		kind = "comma-separated, from " + strings.Join(f.Items.choices(), ", ")
	}
	fmt.Fprintf(&b, " [%s", kind)
	if len(f.Default) > 0 {
		fmt.Fprintf(&b, ", default %s", f.Default)
	}
	for _, r := range schema.Required {
		if r == name {
			b.WriteString(", required")
		}
	}
	b.WriteString("]")
	return b.String()
}

// terminalValue turns a typed line into the field's JSON value: strings
// quoted, yes/no as booleans, comma-separated choices as an array.
func terminalValue(f *elicitField, line string) json.RawMessage {
	var v any = line
	switch f.Type {
	case "number", "integer":
		return json.RawMessage(line)
	case "boolean":
		switch strings.ToLower(line) {
		case "y", "yes", "true":
			v = true
		case "n", "no", "false":
			v = false
		}
	case "array":
		items := []string{}
		for _, item := range strings.Split(line, ",") {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
		v = items
	}
	raw, _ := json.Marshal(v)
	return raw
}

// printProgress returns a Progress function that writes one line per
// notification to w: "server: progress 2/5: message".
func printProgress(w io.Writer) func(server string, note progressParams) {
	var mu sync.Mutex
	return func(server string, note progressParams) {
		line := fmt.Sprintf("%s: progress %s", server, strconv.FormatFloat(note.Progress, 'f', -1, 64))
		if note.Total > 0 {
			line += "/" + strconv.FormatFloat(note.Total, 'f', -1, 64)
		}
		if note.Message != "" {
			line += ": " + strings.Join(strings.Fields(note.Message), " ")
		}
		mu.Lock()
		fmt.Fprintln(w, line)
		mu.Unlock()
	}
}

// approve asks a person at the terminal to decide the approval that the
// payload of an approval.requested event describes: it shows the tool,
// its server and its arguments, then reads y or yes to approve, n or no
// to deny, and after a denial an optional reason. It returns the approval's
// id and the body to POST to /v1/runs/{id}/approvals/{approval_id}. An
// error is a payload without an approval_id, the end of the input, or ctx
// done; it blocks until the person answers.
func (tp *terminalPrompter) approve(ctx context.Context, payload json.RawMessage) (string, approvalAnswer, error) {
	var a approvalRequest
	if err := json.Unmarshal(payload, &a); err != nil || a.ID == "" {
		return "", approvalAnswer{}, fmt.Errorf("approval request: not an approval.requested payload (%s)", shortText(string(payload), 80))
	}
	tp.mu.Lock()
	defer tp.mu.Unlock()
	if a.Server != "" {
		fmt.Fprintf(tp.out, "\nThe agent wants to call %s (tool %q of server %q).\n", a.Tool, a.ServerTool, a.Server)
	} else {
		fmt.Fprintf(tp.out, "\nThe agent wants to call %s.\n", a.Tool)
	}
	args := a.Arguments
	if a.ArgumentsBytes > 0 {
		args += fmt.Sprintf(" ... (cut; %d bytes in all)", a.ArgumentsBytes)
	}
	fmt.Fprintf(tp.out, "  arguments: %s\n", args)
	if hints := strings.TrimSpace(string(a.Annotations)); hints != "" && hints != "{}" && hints != "null" {
		fmt.Fprintf(tp.out, "  annotations: %s\n", hints)
	}
	for {
		fmt.Fprint(tp.out, "Approve this call? [y/n]: ")
		line, err := tp.readLine(ctx)
		if err != nil {
			return "", approvalAnswer{}, err
		}
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "y", "yes":
			return a.ID, approvalAnswer{Decision: decisionApprove}, nil
		case "n", "no":
			fmt.Fprint(tp.out, "Reason for the agent (Enter for none): ")
			reason, err := tp.readLine(ctx)
			if err != nil {
				return "", approvalAnswer{}, err
			}
			return a.ID, approvalAnswer{Decision: decisionDeny, Reason: strings.TrimSpace(reason)}, nil
		}
		fmt.Fprintln(tp.out, "  answer y or n")
	}
}
