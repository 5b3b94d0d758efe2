package interop

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file holds the helpers that build and start cmd/echoserver, and the
// tests that prove it works in every mode with the official Go SDK client.

var (
	buildOnce   sync.Once
	buildDir    string // removed by TestMain
	echoBinary  string
	errBuilding error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildEchoServer builds cmd/echoserver once per test process and returns the
// binary's path. It is safe for concurrent use; it blocks while building.
func buildEchoServer(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, errBuilding = os.MkdirTemp("", "echoserver-")
		if errBuilding != nil {
			return
		}
		echoBinary = filepath.Join(buildDir, "echoserver")
		out, err := exec.Command("go", "build", "-o", echoBinary, "./cmd/echoserver").CombinedOutput()
		if err != nil {
			errBuilding = fmt.Errorf("go build ./cmd/echoserver: %v\n%s", err, out)
		}
	})
	if errBuilding != nil {
		t.Fatal(errBuilding)
	}
	return echoBinary
}

// startEchoServerHTTP starts the echoserver in an HTTP mode (http,
// http-stateless, http-json, sse) on a free loopback port, with the extra
// flags given, and returns its endpoint URL once it listens. The server and
// its process group are stopped when the test ends.
func startEchoServerHTTP(t testing.TB, mode string, flags ...string) string {
	t.Helper()
	cmd := exec.Command(buildEchoServer(t), append([]string{mode, "-addr", "127.0.0.1:0"}, flags...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start echoserver %s: %v", mode, err)
	}
	t.Cleanup(func() {
		stdin.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})

	lines := make(chan string, 1)
	// Owned by the test; exits when the server's stdout closes (it exits).
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			select {
			case lines <- scanner.Text():
			default:
			}
		}
		close(lines)
	}()
	select {
	case line, ok := <-lines:
		url, found := strings.CutPrefix(line, "listening ")
		if !ok || !found {
			t.Fatalf("echoserver %s: first stdout line = %q, want \"listening URL\"", mode, line)
		}
		return url
	case <-time.After(30 * time.Second):
		t.Fatalf("echoserver %s: not listening after 30s", mode)
	}
	return ""
}

// connect opens a Go SDK client session to the echoserver started in mode.
// The session is closed when the test ends.
func connect(t testing.TB, mode string, httpClient *http.Client) *mcp.ClientSession {
	t.Helper()
	var transport mcp.Transport
	switch mode {
	case "stdio":
		cmd := exec.Command(buildEchoServer(t), "stdio")
		cmd.Stderr = os.Stderr
		transport = &mcp.CommandTransport{Command: cmd}
	case "sse":
		transport = &mcp.SSEClientTransport{Endpoint: startEchoServerHTTP(t, mode), HTTPClient: httpClient}
	default:
		transport = &mcp.StreamableClientTransport{Endpoint: startEchoServerHTTP(t, mode), HTTPClient: httpClient}
	}
	return connectTransport(t, transport)
}

func connectTransport(t testing.TB, transport mcp.Transport) *mcp.ClientSession {
	t.Helper()
	return connectClient(t, mcp.NewClient(&mcp.Implementation{Name: "interop-test", Version: "1.0.0"}, nil), transport)
}

// connectClient connects client over transport; the session is closed when
// the test ends.
func connectClient(t testing.TB, client *mcp.Client, transport mcp.Transport) *mcp.ClientSession {
	t.Helper()
	// The SSE transport keeps its event stream on the context given to
	// Connect, so that context lives as long as the session.
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	deadline := time.AfterFunc(30*time.Second, cancel)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	deadline.Stop()
	t.Cleanup(func() { session.Close() })
	return session
}

// callText calls a tool and returns its only text block; a call error, a
// tool error or any other content is an error. Safe for concurrent use.
func callText(ctx context.Context, session *mcp.ClientSession, tool string, args any) (string, error) {
	result, err := session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	if result.IsError || len(result.Content) != 1 {
		return "", fmt.Errorf("call %s: result %+v, want one text block", tool, result)
	}
	text, ok := result.Content[0].(*mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("call %s: content %T, want text", tool, result.Content[0])
	}
	return text.Text, nil
}

func TestEchoServerModes(t *testing.T) {
	for _, mode := range []string{"stdio", "http", "http-stateless", "http-json", "sse"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			session := connect(t, mode, nil)
			ctx := t.Context()
			tools, err := session.ListTools(ctx, nil)
			if err != nil {
				t.Fatalf("ListTools() error: %v", err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if got, want := strings.Join(names, ","), "add,echo"; got != want {
				t.Errorf("ListTools() names = %q, want %q", got, want)
			}
			calls := []struct {
				tool string
				args any
				want string
			}{
				{"echo", map[string]any{"message": "hello"}, "hello"},
				{"echo", map[string]any{"message": "ünïcode\nline"}, "ünïcode\nline"},
				{"add", map[string]any{"a": 2, "b": 3.5}, "5.5"},
			}
			for _, c := range calls {
				got, err := callText(ctx, session, c.tool, c.args)
				if err != nil || got != c.want {
					t.Errorf("call %s(%v) = %q, %v, want %q", c.tool, c.args, got, err, c.want)
				}
			}
		})
	}
}

// TestEchoServerHTTPResponses checks that the HTTP modes differ as their names
// say, on the raw answer to an initialize POST.
func TestEchoServerHTTPResponses(t *testing.T) {
	tests := []struct {
		mode        string
		contentType string
		session     bool
	}{
		{"http", "text/event-stream", true},
		{"http-stateless", "text/event-stream", false},
		{"http-json", "application/json", true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			url := startEchoServerHTTP(t, tt.mode)
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("POST initialize: %v", err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("POST initialize status = %d, want 200", resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Type"); !strings.HasPrefix(got, tt.contentType) {
				t.Errorf("POST initialize Content-Type = %q, want %q", got, tt.contentType)
			}
			if got := resp.Header.Get("Mcp-Session-Id") != ""; got != tt.session {
				t.Errorf("POST initialize has Mcp-Session-Id = %v, want %v", got, tt.session)
			}
			if tt.contentType == "application/json" {
				var msg struct {
					Result struct {
						ProtocolVersion string `json:"protocolVersion"`
					} `json:"result"`
				}
				if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil || msg.Result.ProtocolVersion != "2025-11-25" {
					t.Errorf("POST initialize protocolVersion = %q, %v, want %q", msg.Result.ProtocolVersion, err, "2025-11-25")
				}
			}
		})
	}
}

// TestEchoServerStopsAtEndOfStdin checks the HTTP modes' stop signal.
func TestEchoServerStopsAtEndOfStdin(t *testing.T) {
	cmd := exec.Command(buildEchoServer(t), "http", "-addr", "127.0.0.1:0")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "listening http://127.0.0.1:") {
		t.Fatalf("first stdout line = %q, %v, want \"listening http://127.0.0.1:PORT/mcp\"", line, err)
	}
	stdin.Close()
	exited := make(chan error, 1)
	// Owned by the test; exits when the server exits.
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("echoserver exit after end of stdin = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("echoserver still running 10s after end of stdin")
	}
}
