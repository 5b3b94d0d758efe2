package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file tests harnessd's MCP server (/mcp) with the official Go SDK
// client: the harnessd binary is built and started with the echoserver as
// its MCP server and a scripted OpenAI-compatible model; the client lists
// the tools, runs a prompt whose run calls the echoserver's echo, answers
// an approval through elicitation, gets progress, and reads the run as a
// resource.

// harnessdToken is the API key the test's harnessd accepts.
const harnessdToken = "interop-token-0123456789"

var (
	harnessdOnce   sync.Once
	harnessdBinary string
	harnessdErr    error
)

// buildHarnessd builds the harnessd binary (the parent module) once per
// test process and returns its path.
func buildHarnessd(t testing.TB) string {
	t.Helper()
	harnessdOnce.Do(func() {
		dir := filepath.Dir(buildEchoServer(t)) // removed by TestMain
		harnessdBinary = filepath.Join(dir, "harnessd")
		cmd := exec.Command("go", "build", "-o", harnessdBinary, ".")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			harnessdErr = fmt.Errorf("go build harnessd: %v\n%s", err, out)
		}
	})
	if harnessdErr != nil {
		t.Fatal(harnessdErr)
	}
	return harnessdBinary
}

// scriptedModel serves OpenAI Chat Completions: find_tool, then the
// echoserver's echo, then an answer quoting the echo's result. It goes by
// the tool results in the request, so every run gets the same script.
func scriptedModel(t testing.TB) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var results []string
		for _, m := range req.Messages {
			if m.Role == "tool" {
				results = append(results, fmt.Sprint(m.Content))
			}
		}
		message := map[string]any{"role": "assistant"}
		finish := "tool_calls"
		toolCall := func(name, args string) []any {
			return []any{map[string]any{"id": "call_" + name, "type": "function", "function": map[string]any{"name": name, "arguments": args}}}
		}
		switch len(results) {
		case 0:
			message["tool_calls"] = toolCall("find_tool", `{"query":"select:mcp_echo_echo"}`)
		case 1:
			message["tool_calls"] = toolCall("mcp_echo_echo", `{"message":"hello from the go sdk"}`)
		default:
			message["content"] = "echo said: " + results[len(results)-1]
			finish = "stop"
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": "scripted",
			"choices": []any{map[string]any{"index": 0, "message": message, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
		})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// startHarnessd starts the harnessd binary on a free loopback port with the
// echoserver (stdio) as its MCP server "echo", the scripted model, and one
// API key; it returns the base URL once harnessd listens.
func startHarnessd(t testing.TB) string {
	t.Helper()
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte("[model]\nstream = false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	servers, _ := json.Marshal([]any{map[string]any{"name": "echo", "command": buildEchoServer(t), "args": []string{"stdio"}}})
	keys, _ := json.Marshal([]any{map[string]any{"name": "interop", "token": harnessdToken, "scopes": []string{"runs:write"}}})
	cmd := exec.Command(buildHarnessd(t), "--addr", "127.0.0.1:0", "--workspace", t.TempDir())
	cmd.Env = append(os.Environ(), "HARNESS_HOME="+home, "HARNESS_MODEL=openai/scripted", "OPENAI_BASE_URL="+scriptedModel(t),
		"OPENAI_API_KEY=sk-scripted", "HARNESS_MCP_SERVERS="+string(servers), "HARNESS_API_KEYS="+string(keys))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		cmd.Wait()
	})
	addrs := make(chan string, 1)
	// Owned by the test; exits when harnessd's stderr closes (it exits).
	go func() {
		addr := regexp.MustCompile(`harnessd listening.*addr=(\S+)`)
		scanner := bufio.NewScanner(stderr)
		for scanner.Scan() {
			if m := addr.FindStringSubmatch(scanner.Text()); m != nil {
				select {
				case addrs <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case addr := <-addrs:
		return "http://" + addr
	case <-time.After(30 * time.Second):
		t.Fatal("harnessd: not listening after 30s")
	}
	return ""
}

// bearer adds the API key to every request.
type bearer struct{ base http.RoundTripper }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+harnessdToken)
	return b.base.RoundTrip(r)
}

// TestHarnessdMCPServerGoSDK drives harnessd's /mcp with the Go SDK
// client at the revision it negotiates and at 2025-11-25, where the run's
// approval is answered through elicitation.
func TestHarnessdMCPServerGoSDK(t *testing.T) {
	base := startHarnessd(t)
	for _, version := range []string{"", "2025-11-25"} {
		t.Run("version="+version, func(t *testing.T) {
			var mu sync.Mutex
			var progress []string
			elicited := 0
			opts := &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.Message)
					mu.Unlock()
				},
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					elicited++
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"decision": "approve"}}, nil
				},
			}
			client := mcp.NewClient(&mcp.Implementation{Name: "interop-test", Version: "1.0.0"}, opts)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			transport := &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{http.DefaultTransport}}}
			session, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: version})
			if err != nil {
				t.Fatalf("connect: %v", err)
			}
			defer session.Close()
			t.Logf("protocol version %s", session.InitializeResult().ProtocolVersion)

			tools, err := session.ListTools(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if got := strings.Join(names, " "); got != "run start_run get_run wait_run list_runs cancel_run decide_approval answer_input" {
				t.Errorf("tools = %s", got)
			}

			args := map[string]any{"prompt": "echo something"}
			if version == "2025-11-25" {
				args["approval"] = "always"
			}
			params := &mcp.CallToolParams{Name: "run", Arguments: args}
			params.SetProgressToken("go-sdk")
			res, err := session.CallTool(ctx, params)
			if err != nil {
				t.Fatalf("call run: %v", err)
			}
			if res.IsError || len(res.Content) != 1 {
				t.Fatalf("run = %+v, want one text block", res)
			}
			if text := res.Content[0].(*mcp.TextContent).Text; text != "echo said: hello from the go sdk" {
				t.Errorf("run output = %q, want the echo quoted", text)
			}
			ids, _ := res.StructuredContent.(map[string]any)
			runID, _ := ids["run_id"].(string)
			if runID == "" || ids["conversation_id"] == nil {
				t.Fatalf("structuredContent = %v, want run_id and conversation_id", res.StructuredContent)
			}
			mu.Lock()
			if !strings.Contains(strings.Join(progress, "\n"), "calling tool mcp_echo_echo") {
				t.Errorf("progress = %q, want the echo call", progress)
			}
			if want := map[string]int{"": 0, "2025-11-25": 1}[version]; elicited != want {
				t.Errorf("elicitations = %d, want %d", elicited, want)
			}
			mu.Unlock()

			read, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "harnessd://runs/" + runID})
			if err != nil {
				t.Fatal(err)
			}
			if len(read.Contents) != 1 || !strings.Contains(read.Contents[0].Text, `"status": "completed"`) {
				t.Errorf("read run = %+v, want the completed run", read.Contents)
			}
			templates, err := session.ListResourceTemplates(ctx, nil)
			if err != nil || len(templates.ResourceTemplates) != 3 {
				t.Errorf("resource templates = %+v (%v), want 3", templates, err)
			}
		})
	}
}
