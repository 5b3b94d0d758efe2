// Command fakeserver is a misbehaving stdio MCP server for harnessd's
// tests: HARNESSD_FAKE_SERVER names its mode (normal; ignore-term, deaf,
// brood, flaky, rug-pull, hang-initialize, modern-retry and the others
// below), and its tools fail in their own ways (crash, hang, big, noise,
// stderr-flood, ...). The tests build it once per run (fakeServerBinary
// in build_test.go), without the race detector: it is a peer, not code
// under test, and over the ~330 servers the suite starts each costs about
// 10 ms of CPU to start (perf stat) instead of 70-90 ms as the race-built
// test binary.
//
// It writes the wire's numbers and names as literals, as a peer would,
// rather than sharing harnessd's constants.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The environment the tests set (stdio_fake_test.go names the same).
const (
	// fakeServerEnv names the mode.
	fakeServerEnv = "HARNESSD_FAKE_SERVER"
	// fakeInitGateEnv names the FIFO a server in mode gate-initialize
	// holds its answer to initialize on: the test knows the server is
	// starting when its open for writing returns, and lets it answer by
	// closing.
	fakeInitGateEnv = "HARNESSD_FAKE_INIT_GATE"
	// fakeDescFileEnv names the file a server in mode rug-pull reads the
	// description of its echo tool from, at each tools/list.
	fakeDescFileEnv = "HARNESSD_FAKE_DESC_FILE"
	// faultTagEnv, set by the fault tests, adds the tools they call.
	faultTagEnv = "HARNESSD_FAULT_TAG"
)

// JSON-RPC error codes and the _meta keys of revision 2026-07-28.
const (
	codeInvalidRequest      = -32600
	codeMethodNotFound      = -32601
	codeInvalidParams       = -32602
	codeInternalError       = -32603
	codeUnsupportedVersion  = -32022
	fallbackProtocolVersion = "2024-11-05"
	metaProtocolVersion     = "io.modelcontextprotocol/protocolVersion"
	metaClientInfo          = "io.modelcontextprotocol/clientInfo"
	metaClientCapabilities  = "io.modelcontextprotocol/clientCapabilities"
	metaServerInfo          = "io.modelcontextprotocol/serverInfo"
)

func main() {
	os.Exit(runFakeServer(os.Getenv(fakeServerEnv)))
}

// sleepForever blocks until a signal ends the process. An empty select
// would not do: with no other goroutine, the runtime reports a deadlock
// and exits.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

// fakeServer is the state of a running fake server.
type fakeServer struct {
	mode string
	out  *bufio.Writer
	// writeMu guards out
	writeMu sync.Mutex
	// guards answers to the server's own requests
	mu      sync.Mutex
	waiting map[string]chan json.RawMessage
	calls   atomic.Int64 // tools/call requests received, for mode flaky
	// discovers counts server/discover requests, for the modern modes
	discovers atomic.Int64
}

// broodSize is how many children a server in mode brood starts.
const broodSize = 4

// flakyEvery is how many tool calls a server in mode flaky answers before
// it exits on the next one.
const flakyEvery = 25

func (s *fakeServer) write(v any) {
	b, _ := json.Marshal(v)
	s.writeRaw(b)
}

func (s *fakeServer) writeRaw(b []byte) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	s.out.Write(b)
	s.out.WriteByte('\n')
	s.out.Flush()
}

func (s *fakeServer) reply(id json.RawMessage, result any) {
	s.write(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func (s *fakeServer) replyError(id json.RawMessage, code int, msg string) {
	s.write(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": code, "message": msg}})
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

// ask sends a request to the client with the given raw id and waits for
// the answer.
func (s *fakeServer) ask(id, method string) json.RawMessage {
	return s.askWith(id, method, nil)
}

// askWith sends a request with params (none when nil) to the client with
// the given raw id and waits for the answer: its result or its error.
func (s *fakeServer) askWith(id, method string, params any) json.RawMessage {
	ch := make(chan json.RawMessage, 1)
	s.mu.Lock()
	s.waiting[id] = ch
	s.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method}
	if params != nil {
		msg["params"] = params
	}
	s.write(msg)
	select {
	case r := <-ch:
		return r
	case <-time.After(5 * time.Second):
		return json.RawMessage(`"no answer"`)
	}
}

func runFakeServer(mode string) int {
	s := &fakeServer{mode: mode, out: bufio.NewWriter(os.Stdout), waiting: map[string]chan json.RawMessage{}}
	switch mode {
	case "ignore-term":
		signal.Ignore(syscall.SIGTERM)
	case "sleeper":
		signal.Ignore(syscall.SIGTERM)
		sleepForever()
	case "brood":
		// Ignores SIGTERM and EOF, with broodSize children that do too.
		signal.Ignore(syscall.SIGTERM)
		exe, _ := os.Executable()
		for range broodSize {
			cmd := exec.Command(exe)
			cmd.Env = append(os.Environ(), fakeServerEnv+"=sleeper")
			if err := cmd.Start(); err != nil {
				fmt.Fprintln(os.Stderr, "start child:", err)
				return 1
			}
		}
	case "deaf":
		sleepForever() // never reads stdin; SIGTERM ends it
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if err != nil {
			if mode == "ignore-term" || mode == "grandchild" || mode == "brood" {
				sleepForever() // outlive stdin; only a signal ends us
			}
			return 0
		}
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
			Result json.RawMessage `json:"result"`
			Error  json.RawMessage `json:"error"`
		}
		if json.Unmarshal(line, &msg) != nil {
			continue
		}
		if msg.Method == "" {
			s.mu.Lock()
			ch := s.waiting[string(msg.ID)]
			delete(s.waiting, string(msg.ID))
			s.mu.Unlock()
			if ch != nil {
				if msg.Error != nil {
					ch <- msg.Error
				} else {
					ch <- msg.Result
				}
			}
			continue
		}
		go s.handle(msg.ID, msg.Method, msg.Params)
	}
}

func (s *fakeServer) handle(id json.RawMessage, method string, params json.RawMessage) {
	if strings.HasPrefix(s.mode, "modern") || s.mode == "discover-silent" {
		if s.handleModern(id, method, params) {
			return
		}
	}
	switch method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		json.Unmarshal(params, &p)
		version := p.ProtocolVersion
		switch s.mode {
		case "old-only":
			if version != fallbackProtocolVersion {
				s.replyError(id, codeInvalidParams, "unsupported protocol version")
				return
			}
		case "old-invalid-request":
			if version != fallbackProtocolVersion {
				s.replyError(id, codeInvalidRequest, "bad request")
				return
			}
		case "answers-2025-06-18":
			version = "2025-06-18"
		case "unknown-version":
			version = "1999-01-01"
		case "exit-in-initialize":
			fmt.Fprintln(os.Stderr, "fatal: cannot open database")
			os.Exit(7)
		case "hang-initialize":
			return
		case "gate-initialize":
			if f, err := os.Open(os.Getenv(fakeInitGateEnv)); err == nil {
				io.Copy(io.Discard, f)
				f.Close()
			}
		}
		s.reply(id, map[string]any{
			"protocolVersion": version,
			"capabilities":    map[string]any{"tools": map[string]any{"listChanged": true}, "resources": map[string]any{}},
			"serverInfo":      map[string]any{"name": "fake", "version": "1.0"},
		})
	case "notifications/initialized", "notifications/cancelled":
	case "tools/list":
		s.listTools(id, params)
	case "resources/list":
		s.reply(id, map[string]any{"resources": []any{map[string]any{"uri": "fake://one", "name": "one"}}})
	case "resources/read":
		s.reply(id, map[string]any{"contents": []any{map[string]any{"uri": "fake://one", "text": "resource one"}}})
	case "tools/call":
		s.call(id, params)
	default:
		if len(id) > 0 {
			s.replyError(id, codeMethodNotFound, "no such method")
		}
	}
}

func (s *fakeServer) listTools(id, params json.RawMessage) {
	var p struct {
		Cursor string `json:"cursor"`
	}
	json.Unmarshal(params, &p)
	tool := func(name string) map[string]any {
		return map[string]any{"name": name, "description": "fake " + name, "inputSchema": map[string]any{"type": "object"}}
	}
	switch s.mode {
	case "paginate":
		page, _ := strconv.Atoi(strings.TrimPrefix(p.Cursor, "page"))
		res := map[string]any{"tools": []any{tool(fmt.Sprintf("tool%d", page))}}
		if page < 2 {
			res["nextCursor"] = fmt.Sprintf("page%d", page+1)
		}
		s.reply(id, res)
	case "repeat-cursor":
		s.reply(id, map[string]any{"tools": []any{tool("again")}, "nextCursor": "same"})
	default:
		tools := []any{tool("echo"), tool("fail"), tool("crash"), tool("hang")}
		if s.mode == "rug-pull" {
			// The description of echo is what the test last wrote into
			// the file: a server that changes a tool under its client.
			desc, err := os.ReadFile(os.Getenv(fakeDescFileEnv))
			if err != nil {
				s.replyError(id, codeInternalError, err.Error())
				return
			}
			tools[0].(map[string]any)["description"] = string(desc)
		}
		if s.mode == "gate" {
			tools = append(tools, tool("gate"))
		}
		if s.mode == "sampler" {
			tools = append(tools, tool("burst"))
		}
		if s.mode == "pid" {
			tools = append(tools, tool("pid"))
		}
		if _, ok := os.LookupEnv(faultTagEnv); ok {
			// The fault suite calls every tool through a run's catalog.
			for _, name := range []string{"big", "noise", "stderr-flood", "server-requests", "unknown-messages", "grandchild"} {
				tools = append(tools, tool(name))
			}
		}
		s.reply(id, map[string]any{"tools": tools})
	}
}

func (s *fakeServer) call(id, params json.RawMessage) {
	var p struct {
		Name      string `json:"name"`
		Arguments struct {
			Message string `json:"message"`
			Size    int    `json:"size"`
		} `json:"arguments"`
		Meta struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	json.Unmarshal(params, &p)
	if s.mode == "flaky" && s.calls.Add(1)%flakyEvery == 0 {
		fmt.Fprintln(os.Stderr, "flaky: exiting on purpose")
		os.Exit(5)
	}
	switch p.Name {
	case "echo":
		s.reply(id, text(p.Arguments.Message))
	case "fail":
		s.reply(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": "it failed"}}, "isError": true})
	case "crash":
		fmt.Fprintln(os.Stderr, "panic: boom")
		os.Exit(3)
	case "hang":
	case "gate":
		// Answers once the test has opened and closed the FIFO named by
		// message: the test knows the call is in flight when its open
		// returns, and releases it by closing.
		f, err := os.Open(p.Arguments.Message)
		if err == nil {
			io.Copy(io.Discard, f)
			f.Close()
		}
		s.reply(id, text("released"))
	case "burst":
		s.reply(id, text(s.sampleBurst(p.Arguments.Size)))
	case "big":
		// The id comes last, as the TypeScript SDK writes it.
		s.writeRaw([]byte(fmt.Sprintf(`{"result":{"content":[{"type":"text","text":"%s"}]},"jsonrpc":"2.0","id":%s}`, strings.Repeat("x", p.Arguments.Size), id)))
	case "noise":
		s.writeRaw([]byte("Server starting... this is not JSON"))
		s.writeRaw([]byte(""))
		s.reply(id, text("after noise"))
	case "stderr-flood":
		chunk := strings.Repeat("e", 1023) + "\n"
		for i := 0; i < 4096; i++ {
			os.Stderr.WriteString(chunk)
		}
		s.reply(id, text("flooded"))
	case "progress":
		for i := 0; i < p.Arguments.Size; i++ {
			time.Sleep(40 * time.Millisecond)
			s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": p.Meta.ProgressToken, "progress": i}})
		}
		s.reply(id, text("done"))
	case "server-requests":
		// A ping whose id collides with the id of this very call, then
		// roots/list and an unsupported method.
		ping := s.ask(string(id), "ping")
		roots := s.ask(`"r1"`, "roots/list")
		other := s.ask(`"x1"`, "completion/complete")
		s.reply(id, text(fmt.Sprintf("ping=%s roots=%s other=%s", ping, roots, other)))
	case "list-changed":
		s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
		s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/message", "params": map[string]any{"level": "warning", "data": "careful"}})
		s.reply(id, text("changed"))
	case "unknown-messages":
		// Notifications and requests harnessd does not support, a response
		// to no request, and a message that is not JSON-RPC at all.
		s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/unheard_of", "params": map[string]any{"x": 1}})
		s.write(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": "not an object"})
		s.write(map[string]any{"jsonrpc": "2.0", "id": 987654, "result": map[string]any{}})
		s.writeRaw([]byte(`{"hello":"world"}`))
		other := s.ask(`"u1"`, "tasks/unheard_of")
		s.reply(id, text(fmt.Sprintf("still here other=%s", other)))
	case "pid":
		// Which process answers: a restart gives another.
		s.reply(id, text(strconv.Itoa(os.Getpid())))
	case "grandchild":
		exe, _ := os.Executable()
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), fakeServerEnv+"=sleeper")
		if err := cmd.Start(); err != nil {
			s.reply(id, text("error "+err.Error()))
			return
		}
		s.reply(id, text(strconv.Itoa(cmd.Process.Pid)))
	default:
		s.replyError(id, codeInvalidParams, "unknown tool "+p.Name)
	}
}

// handleModern answers as a server of the current revision only, in the
// modes that start with "modern" (modern-retry refuses the first probe
// with -32022, modern-slow ignores it as a server still starting would),
// or as an older server that never answers server/discover
// (discover-silent). It reports whether it answered.
func (s *fakeServer) handleModern(id json.RawMessage, method string, params json.RawMessage) bool {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	json.Unmarshal(params, &p)
	switch {
	case method == "server/discover":
		n := s.discovers.Add(1)
		switch {
		case s.mode == "discover-silent", s.mode == "modern-slow" && n == 1:
		case s.mode == "modern-retry" && n == 1:
			s.write(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
				"code": codeUnsupportedVersion, "message": "unsupported protocol version",
				"data": map[string]any{"supported": []string{"2026-07-28"}, "requested": "2026-07-28"}}})
		default:
			s.reply(id, map[string]any{
				"supportedVersions": []string{"2026-07-28"},
				"capabilities":      map[string]any{"tools": map[string]any{}, "resources": map[string]any{}},
				"_meta":             map[string]any{metaServerInfo: map[string]any{"name": "fake-modern", "version": "2.0"}},
			})
		}
		return true
	case s.mode == "discover-silent":
		return false
	case method == "initialize", method == "ping", strings.HasPrefix(method, "notifications/initialized"):
		if len(id) > 0 {
			s.replyError(id, codeMethodNotFound, method+" is not a method of revision 2026-07-28")
		}
		return true
	case len(id) > 0 && (string(p.Meta[metaProtocolVersion]) != `"2026-07-28"` || p.Meta[metaClientCapabilities] == nil || p.Meta[metaClientInfo] == nil):
		s.replyError(id, codeInvalidParams, "missing _meta fields of revision 2026-07-28")
		return true
	}
	return false
}

// burstMaxTokens is the maxTokens of each sampling request of the tool
// burst.
const burstMaxTokens = 1000

// sampleBurst sends n sampling/createMessage requests at once, each for
// up to burstMaxTokens, waits for every answer and returns
// "served=S refused=R" followed by each distinct refusal, one a line.
func (s *fakeServer) sampleBurst(n int) string {
	answers := make([]json.RawMessage, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		// Owned by sampleBurst; ends with the answer (or ask's timeout).
		go func() {
			defer wg.Done()
			answers[i] = s.askWith(fmt.Sprintf(`"burst-%d"`, i), "sampling/createMessage", map[string]any{
				"messages":  []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": fmt.Sprintf("sample %d", i)}}},
				"maxTokens": burstMaxTokens,
			})
		}()
	}
	wg.Wait()
	served, refused := 0, 0
	var reasons []string
	for _, a := range answers {
		var answer struct {
			Role    string `json:"role"`
			Message string `json:"message"`
		}
		json.Unmarshal(a, &answer)
		switch {
		case answer.Role != "":
			served++
		case answer.Message != "":
			refused++
			if !slices.Contains(reasons, answer.Message) {
				reasons = append(reasons, answer.Message)
			}
		}
	}
	return fmt.Sprintf("served=%d refused=%d\n%s", served, refused, strings.Join(reasons, "\n"))
}
