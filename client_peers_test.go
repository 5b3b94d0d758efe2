package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file holds the real MCP peers tests talk to: the npm reference
// servers pinned in testdata/npm (started with node, never npx, bound to
// 127.0.0.1) and the official Go SDK's server, interop/cmd/echoserver.

// peerStartTimeout bounds how long a peer may take to say it is ready.
const peerStartTimeout = 30 * time.Second

// A peerCommand is how to start a stdio MCP server: the program, its
// arguments and the variables to add to its environment (nil when none).
type peerCommand struct {
	Command string
	Args    []string
	Env     map[string]string
}

// requireNode returns the absolute path of testdata/npm/node_modules. When
// the npm packages or node are missing it fails the test if CI=true and skips
// it otherwise, saying to run ./test.sh.
func requireNode(t testing.TB) string {
	t.Helper()
	modules, missing := nodePeers()
	if missing == "" {
		return modules
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("real MCP peers: %s: run ./test.sh (or npm ci in testdata/npm)", missing)
	}
	t.Skipf("\n*** SKIPPED: real MCP peers unavailable: %s.\n*** Run ./test.sh once (it runs npm ci in testdata/npm) to test against them. ***", missing)
	return ""
}

// nodePeers returns the absolute path of testdata/npm/node_modules and
// what is missing to run the npm peers ("" when nothing is).
func nodePeers() (modules, missing string) {
	modules, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules"))
	if err != nil {
		return "", err.Error()
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node is not on PATH"
	}
	for _, pkg := range []string{"server-everything", "server-filesystem", "server-memory"} {
		entry := filepath.Join(modules, "@modelcontextprotocol", pkg, "dist", "index.js")
		if _, err := os.Stat(entry); err != nil && missing == "" {
			missing = entry + " is missing"
		}
	}
	return modules, missing
}

// everythingIfPresent is everythingStdioCommand for a test whose other
// cases run without the npm peers: it returns a zero command when they are
// missing, and the cases that need it call requireNode.
func everythingIfPresent(t testing.TB) peerCommand {
	t.Helper()
	if _, missing := nodePeers(); missing != "" {
		return peerCommand{}
	}
	return everythingStdioCommand(t)
}

// nodePeer returns the command that runs an npm server's entry point with
// node, given the file names of --import preloads in testdata/npm.
func nodePeer(t testing.TB, pkg string, preloads []string, args ...string) peerCommand {
	t.Helper()
	modules := requireNode(t)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	var nodeArgs []string
	for _, preload := range preloads {
		nodeArgs = append(nodeArgs, "--import", filepath.Join(filepath.Dir(modules), preload))
	}
	nodeArgs = append(nodeArgs, filepath.Join(modules, "@modelcontextprotocol", pkg, "dist", "index.js"))
	return peerCommand{Command: node, Args: append(nodeArgs, args...)}
}

// everythingStdioCommand returns how to start server-everything over stdio.
func everythingStdioCommand(t testing.TB) peerCommand {
	t.Helper()
	return nodePeer(t, "server-everything", nil, "stdio")
}

// filesystemStdioCommand returns how to start server-filesystem over stdio,
// allowed to reach dir only.
func filesystemStdioCommand(t testing.TB, dir string) peerCommand {
	t.Helper()
	return nodePeer(t, "server-filesystem", nil, dir)
}

// memoryStdioCommand returns how to start server-memory over stdio, its
// knowledge graph kept in a file in a fresh t.TempDir().
func memoryStdioCommand(t testing.TB) peerCommand {
	t.Helper()
	peer := nodePeer(t, "server-memory", nil)
	peer.Env = map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")}
	return peer
}

// startEverythingHTTP starts server-everything in mode "streamableHttp" or
// "sse" on a free port of 127.0.0.1 and returns its endpoint URL (…/mcp or
// …/sse) once it listens. testdata/npm/loopback.mjs binds it to loopback and
// reports the port the kernel chose for PORT=0. The server's process group
// is killed when the test ends.
func startEverythingHTTP(t testing.TB, mode string) string {
	t.Helper()
	var path string
	switch mode {
	case "streamableHttp":
		path = "/mcp"
	case "sse":
		path = "/sse"
	default:
		t.Fatalf("startEverythingHTTP(%q): mode must be streamableHttp or sse", mode)
	}
	peer := nodePeer(t, "server-everything", []string{"loopback.mjs"}, mode)
	cmd := exec.Command(peer.Command, peer.Args...)
	cmd.Env = append(os.Environ(), "PORT=0")
	return startHTTPPeer(t, "server-everything "+mode, cmd, false, func(line string) (string, bool) {
		addr, found := strings.CutPrefix(line, "loopback.mjs: listening on ")
		return "http://" + addr + path, found
	})
}

var echoServerBuild struct {
	once sync.Once
	path string
	err  error
}

// buildEchoServer builds interop/cmd/echoserver once per test process and
// returns the binary's path. The binary lives in a directory of os.TempDir()
// named after this checkout, replaced atomically by each build, so nothing
// accumulates and concurrent test processes never see a half-written file.
// Safe for concurrent use; it blocks while building.
func buildEchoServer(t testing.TB) string {
	t.Helper()
	b := &echoServerBuild
	b.once.Do(func() {
		interop, err := filepath.Abs("interop")
		if err != nil {
			b.err = err
			return
		}
		sum := sha256.Sum256([]byte(interop))
		dir := filepath.Join(os.TempDir(), "harnessd-echoserver-"+hex.EncodeToString(sum[:6]))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.err = fmt.Errorf("build echoserver: %w", err)
			return
		}
		tmp, err := os.CreateTemp(dir, "echoserver-*.tmp")
		if err != nil {
			b.err = fmt.Errorf("build echoserver: %w", err)
			return
		}
		tmp.Close()
		defer os.Remove(tmp.Name())
		build := exec.Command("go", "build", "-o", tmp.Name(), "./cmd/echoserver")
		build.Dir = interop
		if out, err := build.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build echoserver: go build ./cmd/echoserver in %s: %v\n%s", interop, err, out)
			return
		}
		b.path = filepath.Join(dir, "echoserver")
		b.err = os.Rename(tmp.Name(), b.path)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// startEchoServerHTTP starts the echoserver in mode "http", "http-stateless",
// "http-json" or "sse", with the extra flags given, on a free port of
// 127.0.0.1 and returns its endpoint URL once it listens. It is stopped when
// the test ends.
func startEchoServerHTTP(t testing.TB, mode string, flags ...string) string {
	t.Helper()
	cmd := exec.Command(buildEchoServer(t), append([]string{mode, "-addr", "127.0.0.1:0"}, flags...)...)
	return startHTTPPeer(t, "echoserver "+mode, cmd, true, func(line string) (string, bool) {
		return strings.CutPrefix(line, "listening ")
	})
}

// startHTTPPeer starts cmd in its own process group with stdin open, reads
// its stdout (fromStdout) or stderr line by line until ready returns a URL,
// and returns it. It fails the test if the peer exits first or is not ready
// within peerStartTimeout. On cleanup it closes stdin and kills the group.
func startHTTPPeer(t testing.TB, name string, cmd *exec.Cmd, fromStdout bool, ready func(line string) (string, bool)) string {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var output io.ReadCloser
	if fromStdout {
		output, err = cmd.StdoutPipe()
	} else {
		output, err = cmd.StderrPipe()
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}

	urls := make(chan string, 1)
	tail := newTailBuffer(4096)
	drained := make(chan struct{})
	// Owned by startHTTPPeer's cleanup; exits at end of output, when the
	// peer's process group is gone.
	go func() {
		defer close(drained)
		scanner := bufio.NewScanner(output)
		found := false
		for scanner.Scan() {
			line := scanner.Text()
			tail.Write([]byte(line + "\n"))
			if url, ok := ready(line); ok && !found {
				found = true
				urls <- url
			}
		}
	}()
	t.Cleanup(func() {
		stdin.Close()
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-drained
		cmd.Wait()
	})

	timer := time.NewTimer(peerStartTimeout)
	defer timer.Stop()
	select {
	case url := <-urls:
		return url
	case <-drained:
		t.Fatalf("start %s: exited before listening; output:\n%s", name, string(tail.Bytes()))
	case <-timer.C:
		t.Fatalf("start %s: not listening after %v; output:\n%s", name, peerStartTimeout, string(tail.Bytes()))
	}
	return ""
}

const peerInitialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"peers-test","version":"1"}}}`

// TestPeersStdio checks that each stdio peer starts and answers initialize.
func TestPeersStdio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		peer func(t *testing.T) peerCommand
	}{
		{"everything", func(t *testing.T) peerCommand { return everythingStdioCommand(t) }},
		{"filesystem", func(t *testing.T) peerCommand { return filesystemStdioCommand(t, t.TempDir()) }},
		{"memory", func(t *testing.T) peerCommand { return memoryStdioCommand(t) }},
		{"echoserver", func(t *testing.T) peerCommand {
			return peerCommand{Command: buildEchoServer(t), Args: []string{"stdio"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			peer := tt.peer(t)
			cmd := exec.Command(peer.Command, peer.Args...)
			cmd.Env = os.Environ()
			for k, v := range peer.Env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatalf("start %s: %v", tt.name, err)
			}
			answered := make(chan string, 1)
			// Owned by the test; exits at end of the peer's stdout.
			go func() {
				defer close(answered)
				scanner := bufio.NewScanner(stdout)
				for scanner.Scan() {
					if version := initializeVersion(scanner.Bytes()); version != "" {
						answered <- version
						return
					}
				}
			}()
			t.Cleanup(func() {
				stdin.Close()
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				cmd.Wait()
			})
			if _, err := io.WriteString(stdin, peerInitialize+"\n"); err != nil {
				t.Fatalf("write initialize to %s: %v", tt.name, err)
			}
			select {
			case version, ok := <-answered:
				if !ok {
					t.Fatalf("%s: stdout ended without an initialize result", tt.name)
				}
				if version != "2025-11-25" {
					t.Errorf("%s: initialize protocolVersion = %q, want %q", tt.name, version, "2025-11-25")
				}
			case <-time.After(peerStartTimeout):
				t.Fatalf("%s: no initialize result after %v", tt.name, peerStartTimeout)
			}
		})
	}
}

// TestPeersHTTP checks that each HTTP peer listens on loopback and answers
// initialize: on Streamable HTTP with a 200, on legacy SSE on its stream.
func TestPeersHTTP(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		start func(t *testing.T) string
		sse   bool
	}{
		{"everything streamableHttp", func(t *testing.T) string { return startEverythingHTTP(t, "streamableHttp") }, false},
		{"everything sse", func(t *testing.T) string { return startEverythingHTTP(t, "sse") }, true},
		{"echoserver http", func(t *testing.T) string { return startEchoServerHTTP(t, "http") }, false},
		{"echoserver http-stateless", func(t *testing.T) string { return startEchoServerHTTP(t, "http-stateless") }, false},
		{"echoserver http-json", func(t *testing.T) string { return startEchoServerHTTP(t, "http-json") }, false},
		{"echoserver sse", func(t *testing.T) string { return startEchoServerHTTP(t, "sse") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			endpoint := tt.start(t)
			if !strings.HasPrefix(endpoint, "http://127.0.0.1:") {
				t.Errorf("%s: endpoint = %q, want http://127.0.0.1:PORT/...", tt.name, endpoint)
			}
			ctx, cancel := context.WithTimeout(t.Context(), peerStartTimeout)
			defer cancel()
			var version string
			var err error
			if tt.sse {
				version, err = initializeOverSSE(ctx, endpoint)
			} else {
				version, err = initializeOverStreamable(ctx, endpoint)
			}
			if err != nil {
				t.Fatalf("%s: initialize: %v", tt.name, err)
			}
			if version != "2025-11-25" {
				t.Errorf("%s: initialize protocolVersion = %q, want %q", tt.name, version, "2025-11-25")
			}
		})
	}
}

// initializeOverStreamable POSTs initialize and returns the protocol version
// of the answer, whether it comes as JSON or as an SSE stream.
func initializeOverStreamable(ctx context.Context, endpoint string) (string, error) {
	resp, err := postJSON(ctx, endpoint, peerInitialize)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("POST status %d, want 200", resp.StatusCode)
	}
	scanner := bufio.NewScanner(resp.Body)
	for scanner.Scan() {
		line := bytes.TrimPrefix(scanner.Bytes(), []byte("data:"))
		if version := initializeVersion(line); version != "" {
			return version, nil
		}
	}
	return "", fmt.Errorf("no initialize result in the answer (%v)", scanner.Err())
}

// initializeOverSSE opens a legacy SSE stream, POSTs initialize to the
// endpoint it announces and returns the protocol version of the answer that
// arrives on the stream.
func initializeOverSSE(ctx context.Context, endpoint string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET status %d, want 200", resp.StatusCode)
	}
	scanner := bufio.NewScanner(resp.Body)
	event := ""
	for scanner.Scan() {
		line := scanner.Text()
		if name, ok := strings.CutPrefix(line, "event:"); ok {
			event = strings.TrimSpace(name)
			continue
		}
		data, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		data = strings.TrimSpace(data)
		if event == "endpoint" {
			base, err := url.Parse(endpoint)
			if err != nil {
				return "", err
			}
			messages, err := base.Parse(data)
			if err != nil {
				return "", fmt.Errorf("endpoint event %q: %v", data, err)
			}
			post, err := postJSON(ctx, messages.String(), peerInitialize)
			if err != nil {
				return "", err
			}
			post.Body.Close()
			if post.StatusCode/100 != 2 {
				return "", fmt.Errorf("POST %s status %d, want 2xx", messages, post.StatusCode)
			}
			continue
		}
		if version := initializeVersion([]byte(data)); version != "" {
			return version, nil
		}
	}
	return "", fmt.Errorf("stream ended without an initialize result (%v)", scanner.Err())
}

func postJSON(ctx context.Context, endpoint, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return http.DefaultClient.Do(req)
}

// initializeVersion returns the protocolVersion of an answer to request id 1,
// or "" when msg is anything else.
func initializeVersion(msg []byte) string {
	var answer struct {
		ID     json.RawMessage `json:"id"`
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(bytes.TrimSpace(msg), &answer) != nil || string(answer.ID) != "1" {
		return ""
	}
	return answer.Result.ProtocolVersion
}
