package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// This file holds harnessd run as a chat: on a terminal, without a
// prompt, each line typed is a turn of one conversation, followed as
// harnessd run follows a run (text streamed, tool calls and their results
// shown, approvals and questions asked inline); /new starts another
// conversation and /exit or Ctrl-D ends. It also finds the caller's
// latest conversation for --continue.

// chatHelp is shown when the chat starts and after an unknown command.
const chatHelp = "type a message and Enter; /new starts a new conversation, /exit or Ctrl-D ends"

// chat runs the chat on the terminal stdin (and the terminal stdout),
// starting each turn from req with the line typed as its prompt. It
// returns nil at /exit or the terminal's end, and an *exitError with 130
// when interrupted (a running turn is cancelled).
func (a *app) chat(ctx context.Context, c *runClient, req runRequest, stdin *os.File) error {
	// The terminal's settings as the chat found them are put back at its
	// end, even when an approval's prompt was left reading in raw mode.
	if restore, err := makeRaw(stdin); err == nil {
		restore()
		defer restore()
	}
	ed := newLineEditor(stdin, rawTerminal(a.stdout))
	c.prompter = &terminalPrompter{in: ed, out: a.stderr}
	req.Interactive = true
	fmt.Fprintf(a.stderr, "harnessd chat at %s: %s\n", c.base, chatHelp)
	if req.ConversationID != "" {
		fmt.Fprintf(a.stderr, "continuing conversation %s\n", req.ConversationID)
	}
	for {
		ed.prompt = "> "
		line, err := ed.readLine(ctx)
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return &exitError{code: 130, err: errors.New("interrupted")}
		}
		line = strings.TrimSpace(line)
		switch {
		case line == "":
			continue
		case line == "/exit":
			return nil
		case line == "/new":
			req.ConversationID = ""
			fmt.Fprintln(a.stderr, "(a new conversation starts with the next message)")
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintf(a.stderr, "unknown command %s: %s\n", line, chatHelp)
			continue
		}
		ed.remember(line)
		if err := c.turn(ctx, &req, line); err != nil {
			if ctx.Err() != nil {
				return err
			}
			fmt.Fprintf(a.stderr, "%v\n", err)
		}
	}
}

// turn starts a run of req's conversation with prompt and follows it to
// its end; a new conversation's id goes into req, and req's title, which
// names the conversation's first run, is then spent. Its error says how
// the run ended, or why it could not start.
func (c *runClient) turn(ctx context.Context, req *runRequest, prompt string) error {
	r := *req
	r.Prompt = prompt
	runID, conversation, err := c.start(ctx, r)
	if err != nil {
		return err
	}
	req.Title = ""
	if req.ConversationID == "" && conversation != "" {
		req.ConversationID = conversation
		fmt.Fprintf(c.info, "(conversation %s)\n", conversation)
	}
	return c.follow(ctx, runID)
}

// rawTerminal returns the writer w wraps when it is a terminalWriter: the
// line editor writes its own escape sequences, which a terminalWriter
// would show as text.
func rawTerminal(w io.Writer) io.Writer {
	if tw, ok := w.(terminalWriter); ok {
		return tw.w
	}
	return w
}

// latestConversation returns the id of the newest conversation the
// caller started (its owner is the caller's key, GET /v1/whoami), or ""
// when it has none.
func (c *runClient) latestConversation(ctx context.Context) (string, error) {
	var me struct {
		Key string `json:"key"`
	}
	if err := c.getJSON(ctx, "/v1/whoami", "find who you are", &me); err != nil {
		return "", err
	}
	cursor := ""
	for {
		var page struct {
			Conversations []struct {
				ID    string `json:"id"`
				Owner string `json:"owner"`
			} `json:"conversations"`
			NextCursor string `json:"next_cursor"`
		}
		path := "/v1/conversations?limit=100"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		if err := c.getJSON(ctx, path, "list your conversations", &page); err != nil {
			return "", err
		}
		for _, conv := range page.Conversations {
			if conv.Owner == me.Key {
				return conv.ID, nil
			}
		}
		if page.NextCursor == "" || page.NextCursor == cursor {
			return "", nil
		}
		cursor = page.NextCursor
	}
}

// getJSON decodes the answer of GET path into v; op says what for, in an
// error.
func (c *runClient) getJSON(ctx context.Context, path, op string, v any) error {
	status, data, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return c.answerError(op, status, data)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("run: %s: unexpected answer from %s: %.200s", op, c.base, data)
	}
	return nil
}
