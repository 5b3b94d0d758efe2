package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// This file holds "harnessd run": a client of a running harnessd that
// starts one run (in a new conversation, or continuing one), follows its
// events on the terminal (the model's text as it is written, a line per
// tool call, approvals and servers' questions asked at the terminal, or,
// without one, printed with the request that answers them while it keeps
// following) and ends with the conversation's id, to follow up with
// another run; or prints the events as JSON lines (--json); and its exit
// status says how the run ended. The chat on a terminal is cmd_chat.go.

const runUsage = `Usage: harnessd run [flags] [PROMPT]

Start a run on a running harnessd and follow it: the model's text goes to
stdout, tool calls with a short form of their results and the
conversation's id to stderr. Continue the conversation with
--conversation ID, or the latest one of yours with --continue. Flags may
come before or after PROMPT; a prompt with words that start with "-" goes
after -- (harnessd run --model openai/gpt-4o -- explain what -v does).

Without PROMPT, on a terminal (stdin and stdout), it is a chat: each line
you type is a turn of one conversation; /new starts a new conversation,
/exit or Ctrl-D ends. The arrows edit the line and go through earlier
ones (on Linux).

A tool call that needs approval, and a server's question, are asked at
the terminal; when stdin is not a terminal (or with --json) the command
never asks: it prints the curl command that answers and keeps following
until the run ends (decided elsewhere, or denied once its approval_timeout
passes).

--json prints the run's events, one JSON object a line, as GET
/v1/runs/{id}/events streams them, and nothing else on stdout.

Exit status: 0 the run completed, 1 it failed, 2 bad flags, 3 it was
cancelled, 4 it stopped at a budget (--max-tokens, --max-cost-usd,
--max-duration), 5 harnessd refused the request or could not be reached,
130 interrupted (the run is cancelled). A chat ends with 0.

Environment: HARNESS_ADDR (the daemon's address), HARNESS_TOKEN (the API
key's token, when the daemon has keys).

Flags:
`

// Exit statuses of harnessd run, besides 0 (completed), 2 (usage) and 130
// (interrupted).
const (
	exitRunFailed     = 1
	exitRunCancelled  = 3
	exitRunBudget     = 4
	exitRunUnanswered = 5
)

// runFollowRetries bounds the reconnections of an event stream that broke
// before the run ended.
const runFollowRetries = 5

// A runClient talks to a running harnessd for "harnessd run".
type runClient struct {
	base   string // http://host:port
	token  string
	client *http.Client
	out    io.Writer // the model's text
	info   io.Writer // everything else
	// events receives each event as one JSON line (--json); nil shows
	// them as text instead.
	events io.Writer
	// prompter asks the servers' questions; nil without a terminal.
	prompter *terminalPrompter
}

// runFlags are harnessd run's flags besides the run request's fields.
type runFlags struct {
	addr           string
	continueLatest bool
	json           bool
}

// register adds the flags of f and of the run request's fields to fs.
func (f *runFlags) register(fs *flag.FlagSet, req *runRequest, getenv func(string) (string, bool)) {
	fs.StringVar(&f.addr, "addr", defaultAddr(getenv), "address of the running harnessd (env HARNESS_ADDR)")
	fs.BoolVar(&f.continueLatest, "continue", false, "continue your latest conversation")
	fs.BoolVar(&f.json, "json", false, "print the run's events, one JSON object a line; never ask at the terminal")
	fs.StringVar(&req.ConversationID, "conversation", "", "continue this conversation (its id is printed at the end of each run)")
	fs.StringVar(&req.Model, "model", "", "model as provider/model (default: the daemon's)")
	fs.StringVar(&req.Profile, "profile", "", "profile whose servers the run gets")
	fs.StringVar(&req.SystemPrompt, "system", "", "system prompt (default: the conversation's)")
	fs.StringVar(&req.Title, "title", "", "title of the run, and of a new conversation (default: the prompt's first line)")
	fs.IntVar(&req.MaxSteps, "max-steps", 0, "most model steps (default: the daemon's max_steps)")
	fs.Int64Var(&req.MaxTokens, "max-tokens", 0, "token budget of the run (max_tokens; default: the daemon's max_run_tokens)")
	fs.Float64Var(&req.MaxCostUSD, "max-cost-usd", 0, "cost budget of the run in USD (max_cost_usd; default: the daemon's max_run_cost_usd)")
	fs.Float64Var(&req.MaxCostUSD, "max-cost", 0, "same as --max-cost-usd")
	fs.StringVar(&req.MaxDuration, "max-duration", "", "time budget of the run, like 10m (max_duration)")
	fs.StringVar(&req.Approval, "approval", "", "ask approval for more tool calls: writes or always (tightens the servers' own)")
}

// runPrompt is "harnessd run": one run, or a chat on a terminal.
func (a *app) runPrompt(ctx context.Context, args []string) error {
	fs := newFlagSet("run", a.stderr, runUsage)
	var (
		f   runFlags
		req runRequest
	)
	f.register(fs, &req, a.getenv)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if f.continueLatest && req.ConversationID != "" {
		return usageError("run: give --continue or --conversation, not both")
	}
	req.Prompt = strings.TrimSpace(strings.Join(fs.Args(), " "))
	stdin := a.stdinOrDefault()
	chat := req.Prompt == "" && !f.json && isTTY(stdin) && isTerminalWriter(a.stdout)
	if req.Prompt == "" && !chat {
		return usageError("run: missing PROMPT: harnessd run [flags] \"what the agent should do\" (or, on a terminal, harnessd run for a chat)")
	}
	token, _ := a.getenv("HARNESS_TOKEN")
	c := &runClient{base: daemonURL(f.addr), token: strings.TrimSpace(token), client: &http.Client{}, out: a.stdout, info: a.stderr}
	if f.continueLatest {
		id, err := c.latestConversation(ctx)
		if err != nil {
			return unansweredExit(err)
		}
		if id == "" {
			fmt.Fprintln(c.info, "no conversation of yours to continue: starting a new one")
		}
		req.ConversationID = id
	}
	if chat {
		return a.chat(ctx, c, req, stdin.(*os.File))
	}
	switch {
	case f.json:
		c.events, c.out = a.stdout, io.Discard
	case isTTY(stdin):
		c.prompter = &terminalPrompter{in: newBufferedLines(stdin), out: a.stderr}
		req.Interactive = true
	}
	runID, conversation, err := c.start(ctx, req)
	if err != nil {
		return unansweredExit(err)
	}
	err = c.follow(ctx, runID)
	if conversation != "" {
		fmt.Fprintf(c.info, "conversation %s (continue with: harnessd run --conversation %s \"...\")\n", conversation, conversation)
	}
	return err
}

// unansweredExit gives err, from a request harnessd refused or did not
// answer, its exit status.
func unansweredExit(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: exitRunUnanswered, err: err}
}

// daemonURL returns the base URL of the daemon at addr (host:port, or a
// URL).
func daemonURL(addr string) string {
	addr = strings.TrimRight(strings.TrimSpace(addr), "/")
	if strings.HasPrefix(addr, "http://") || strings.HasPrefix(addr, "https://") {
		return addr
	}
	return "http://" + addr
}

// do sends one request with the token and returns the answer's status and
// body (at most 4 MiB). A daemon that cannot be reached is an error saying
// so.
func (c *runClient) do(ctx context.Context, method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, rd)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("run: %s %s: read the answer: %v", method, path, err)
	}
	return resp.StatusCode, data, nil
}

// send sends one request and returns the response, whose body the caller
// closes.
func (c *runClient) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("run: --addr %q: %v", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("run: cannot reach harnessd at %s (%v): is it running? Start it with \"harnessd serve\", or point --addr (HARNESS_ADDR) at it", c.base, unwrapURLError(err))
	}
	return resp, nil
}

// unwrapURLError returns the cause of a client error, without the method
// and URL the caller's message already names.
func unwrapURLError(err error) error {
	var uerr *url.Error
	if errors.As(err, &uerr) {
		return uerr.Err
	}
	return err
}

// answerError turns a refusal by the daemon into a message saying what
// to do.
func (c *runClient) answerError(op string, status int, data []byte) error {
	msg := strings.TrimSpace(string(data))
	code := ""
	if e, err := decodeAnswerError(data); err == nil {
		msg, code = e.Message, e.Code
	}
	switch {
	case status == http.StatusUnauthorized:
		return fmt.Errorf("run: %s", tokenRefusal(c.base, c.token != "", msg))
	case code == "conversation_busy":
		return fmt.Errorf("run: %s", msg)
	}
	return fmt.Errorf("run: %s: %d %s: %s", op, status, code, msg)
}

// tokenRefusal says that harnessd at base refused a request for want of a
// valid API key (401), and what to do: set HARNESS_TOKEN, or fix the one
// set. detail is the daemon's reason ("" for none).
func tokenRefusal(base string, hasToken bool, detail string) string {
	if !hasToken {
		return fmt.Sprintf("harnessd at %s needs an API key: set HARNESS_TOKEN to a key's token%s", base, parenthesized(detail))
	}
	return fmt.Sprintf("harnessd at %s refused the token in HARNESS_TOKEN: %s", base, cmp.Or(detail, "set it to the token of a key the daemon has"))
}

// decodeAnswerError reads an API error body.
func decodeAnswerError(data []byte) (apiErrorBody, error) {
	var e apiError
	if err := json.Unmarshal(data, &e); err != nil || e.Error.Code == "" {
		return apiErrorBody{}, errors.New("not an API error")
	}
	return e.Error, nil
}

// start posts the run and returns its id and its conversation's.
func (c *runClient) start(ctx context.Context, req runRequest) (string, string, error) {
	status, data, err := c.do(ctx, http.MethodPost, "/v1/runs", req)
	if err != nil {
		return "", "", err
	}
	if status != http.StatusAccepted {
		return "", "", c.answerError("start the run", status, data)
	}
	var out struct {
		RunID          string `json:"run_id"`
		ConversationID string `json:"conversation_id"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.RunID == "" {
		return "", "", fmt.Errorf("run: start the run: unexpected answer from %s: %.200s", c.base, data)
	}
	return out.RunID, out.ConversationID, nil
}

// follow shows the run's events until it ends, reconnecting a broken
// stream where it stopped. Interrupted (ctx done), it cancels the run. It
// returns nil when the run completed, else an error saying how it ended.
func (c *runClient) follow(ctx context.Context, runID string) error {
	f := &runFollower{c: c, runID: runID, printed: map[int]string{}}
	var lastErr error
	for attempt := 0; attempt <= runFollowRetries; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * 500 * time.Millisecond):
			}
		}
		done, err := f.stream(ctx)
		if ctx.Err() != nil {
			return c.interrupt(runID)
		}
		if done || err == nil {
			return f.outcome
		}
		lastErr = err
	}
	return unansweredExit(fmt.Errorf("run: following run %s: %v (see GET /v1/runs/%s)", runID, lastErr, runID))
}

// interrupt cancels the run after the user interrupted the command.
func (c *runClient) interrupt(runID string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	status, data, err := c.do(ctx, http.MethodPost, "/v1/runs/"+runID+"/cancel", nil)
	switch {
	case err != nil:
		return &exitError{code: 130, err: fmt.Errorf("interrupted; cancelling run %s failed: %v", runID, err)}
	case status != http.StatusOK && status != http.StatusAccepted && status != http.StatusConflict:
		return &exitError{code: 130, err: fmt.Errorf("interrupted; cancelling run %s failed: %v", runID, c.answerError("cancel", status, data))}
	}
	return &exitError{code: 130, err: fmt.Errorf("interrupted: run %s cancelled", runID)}
}

// A runFollower shows one run's events. Not safe for concurrent use.
type runFollower struct {
	c     *runClient
	runID string
	seq   int // the last event shown
	// printed is the text of each step shown so far from model.delta.
	printed map[int]string
	// outcome is the run's end as an error (nil when it completed); set
	// with the terminal event.
	outcome error
	midLine bool // the last text shown did not end a line
	// budgetStop is set by budget.exceeded: the run's failure is its
	// budget's.
	budgetStop bool
}

// stream reads the run's event stream after f.seq and shows each event.
// It reports whether the terminal event came.
func (f *runFollower) stream(ctx context.Context) (bool, error) {
	resp, err := f.c.send(ctx, http.MethodGet, "/v1/runs/"+f.runID+"/events?after="+strconv.Itoa(f.seq), nil)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return true, f.setOutcome(unansweredExit(f.c.answerError("follow the run", resp.StatusCode, data)))
	}
	p := newSSEParser(resp.Body, maxModelResponseBytes)
	defer p.release()
	for {
		ev, err := p.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return false, err
		}
		var e struct {
			Seq  int             `json:"seq"`
			Type string          `json:"type"`
			Data json.RawMessage `json:"data"`
		}
		if json.Unmarshal(ev.data, &e) != nil {
			continue
		}
		if e.Seq > 0 {
			f.seq = e.Seq
		}
		if f.c.events != nil {
			// A line of its own: ev.data is the parser's buffer.
			data := bytes.TrimSpace(ev.data)
			line := append(make([]byte, 0, len(data)+1), data...)
			f.c.events.Write(append(line, '\n'))
		}
		if f.show(ctx, e.Type, e.Data) {
			return true, nil
		}
	}
}

// setOutcome records how the run ended and returns it.
func (f *runFollower) setOutcome(err error) error {
	f.outcome = err
	return err
}

// text writes the model's text.
func (f *runFollower) text(s string) {
	if s == "" {
		return
	}
	io.WriteString(f.c.out, s)
	f.midLine = !strings.HasSuffix(s, "\n")
}

// line writes one line of information, after ending the model's text.
func (f *runFollower) line(format string, args ...any) {
	if f.midLine {
		io.WriteString(f.c.out, "\n")
		f.midLine = false
	}
	fmt.Fprintf(f.c.info, format+"\n", args...)
}

// runEventFields is what show reads of events' payloads.
type runEventFields struct {
	Step      int             `json:"step"`
	Text      string          `json:"text"`
	Content   string          `json:"content"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Result    string          `json:"result"`
	IsError   bool            `json:"is_error"`
	Server    string          `json:"server"`
	Error     string          `json:"error"`
	Status    string          `json:"status"`
	Message   string          `json:"message"`
	Reason    string          `json:"reason"`
	ID        string          `json:"id"`
	Mode      string          `json:"mode"`
	Approval  string          `json:"approval_id"`
	Decision  string          `json:"decision"`
	By        string          `json:"by"`
	Action    string          `json:"action"`
	URL       string          `json:"url"`
	Schema    json.RawMessage `json:"requested_schema"`
	Trimmed   int             `json:"tool_results_trimmed"`
	Dropped   int             `json:"turns_dropped"`
}

// show shows one event and reports whether it ended the run.
func (f *runFollower) show(ctx context.Context, typ string, raw json.RawMessage) bool {
	var d runEventFields
	json.Unmarshal(raw, &d)
	switch typ {
	case evModelDelta:
		f.printed[d.Step] += d.Text
		f.text(d.Text)
	case evModelResponse:
		// Whatever model.delta did not show (none, before live output, or
		// lost to a reconnection) comes from the whole answer.
		shown := f.printed[d.Step]
		f.text(strings.TrimPrefix(d.Content, shown))
		if f.midLine {
			f.text("\n")
		}
	case evToolCallStarted:
		f.line("→ %s %s", d.Name, shortText(d.Arguments, 160))
	case evToolCallCompleted:
		if d.IsError {
			f.line("✗ %s: %s", d.Name, shortText(d.Result, 160))
		} else {
			f.line("← %s: %s", d.Name, shortText(d.Result, 160))
		}
	case evServerFailed:
		f.line("server %s failed: %s", d.Server, shortText(d.Error, 300))
	case evConversationTrimmed:
		f.line("(earlier messages trimmed to fit max_conversation_bytes: %d tool results, %d turns)", d.Trimmed, d.Dropped)
	case evInputRequested:
		f.ask(ctx, d)
	case evApprovalRequested:
		f.decide(ctx, raw)
	case evApprovalResolved:
		f.line("approval %s: %s by %s%s", d.Approval, d.Decision, d.By, parenthesized(d.Reason))
	case evInputAnswered:
		if d.ID != "" {
			f.line("question %s: %s by %s", d.ID, d.Action, d.By)
		}
	case evBudgetExceeded:
		f.budgetStop = true
		f.line("budget exceeded: %s", shortText(d.Error, 300))
	default:
		if !isTerminalEvent(typ) {
			return false
		}
		if d.Status != runCompleted {
			code := exitRunFailed
			switch {
			case d.Status == runCancelled:
				code = exitRunCancelled
			case f.budgetStop:
				code = exitRunBudget
			}
			f.setOutcome(&exitError{code: code, err: fmt.Errorf("run %s %s: %s", f.runID, d.Status, d.Error)})
		}
		if f.midLine {
			f.text("\n")
		}
		return true
	}
	return false
}

// parenthesized returns " (s)", or "" for an empty s.
func parenthesized(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}
