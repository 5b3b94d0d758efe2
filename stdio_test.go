package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// connectFake connects to a fake stdio server and closes it at cleanup.
func connectFake(t *testing.T, cfg serverConfig, opts clientOptions) *mcpClient {
	t.Helper()
	c, err := connect(t.Context(), cfg, opts)
	if err != nil {
		t.Fatalf("connect(%q) = %v", cfg.Env[fakeServerEnv], err)
	}
	t.Cleanup(func() { c.close() })
	return c
}

func resultText(t *testing.T, r *callResult) string {
	t.Helper()
	var parts []string
	for _, b := range r.Content {
		parts = append(parts, b.Text)
	}
	return strings.Join(parts, "\n")
}

func TestStdioVersionFallback(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode    string
		want    string
		wantErr string
	}{
		{mode: "normal", want: "2025-11-25"},
		{mode: "old-only", want: "2024-11-05"},
		{mode: "old-invalid-request", want: "2024-11-05"},
		{mode: "answers-2025-06-18", want: "2025-06-18"},
		{mode: "unknown-version", wantErr: `unsupported protocol version "1999-01-01"`},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			c, err := connect(t.Context(), fakeServerConfig(t, tt.mode), clientOptions{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("connect(%q) = %v, want error containing %q", tt.mode, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("connect(%q) = %v", tt.mode, err)
			}
			defer c.close()
			if got := c.protocolVersion(); got != tt.want {
				t.Errorf("protocolVersion() = %q, want %q", got, tt.want)
			}
			if got := c.serverInfo().Name; got != "fake" {
				t.Errorf("serverInfo().Name = %q, want %q", got, "fake")
			}
		})
	}
}

func TestStdioCallAndList(t *testing.T) {
	t.Parallel()
	c := connectFake(t, fakeServerConfig(t, "normal"), clientOptions{})
	tools, err := c.listTools(t.Context())
	if err != nil || len(tools) != 4 || tools[0].Name != "echo" {
		t.Fatalf("listTools() = %v, %v, want echo, fail, crash, hang", tools, err)
	}
	res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"hi there"}`))
	if err != nil || resultText(t, res) != "hi there" {
		t.Fatalf("callTool(echo) = %v, %v, want %q", res, err, "hi there")
	}
	res, err = c.callTool(t.Context(), "fail", nil)
	if err != nil || !res.IsError {
		t.Fatalf("callTool(fail) = %+v, %v, want an isError result", res, err)
	}
	var rpcErr *rpcError
	if _, err := c.callTool(t.Context(), "nope", nil); !errors.As(err, &rpcErr) || rpcErr.Code != codeInvalidParams {
		t.Fatalf("callTool(nope) = %v, want rpc error %d", err, codeInvalidParams)
	}
	resources, err := c.listResources(t.Context())
	if err != nil || len(resources) != 1 || resources[0].URI != "fake://one" {
		t.Fatalf("listResources() = %v, %v", resources, err)
	}
	read, err := c.readResource(t.Context(), "fake://one")
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "resource one" {
		t.Fatalf("readResource() = %v, %v", read, err)
	}
}

func TestStdioConcurrentCallsGetTheirOwnResults(t *testing.T) {
	t.Parallel()
	c := connectFake(t, fakeServerConfig(t, "normal"), clientOptions{})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			want := "message " + strconv.Itoa(i)
			res, err := c.callTool(t.Context(), "echo", json.RawMessage(fmt.Sprintf(`{"message":%q}`, want)))
			if err != nil {
				errs <- err
				return
			}
			if got := resultText(t, res); got != want {
				errs <- fmt.Errorf("call %d got %q, want %q", i, got, want)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestStdioPagination(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode string
		want []string
	}{
		{mode: "paginate", want: []string{"tool0", "tool1", "tool2"}},
		{mode: "repeat-cursor", want: []string{"again", "again"}},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			c := connectFake(t, fakeServerConfig(t, tt.mode), clientOptions{})
			tools, err := c.listTools(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
			}
			if strings.Join(names, ",") != strings.Join(tt.want, ",") {
				t.Errorf("listTools() = %v, want %v", names, tt.want)
			}
		})
	}
}

func TestStdioCrashFailsPendingCall(t *testing.T) {
	t.Parallel()
	c := connectFake(t, fakeServerConfig(t, "normal"), clientOptions{})
	hung := make(chan error, 1)
	go func() {
		_, err := c.callTool(context.Background(), "hang", nil)
		hung <- err
	}()
	_, err := c.callTool(t.Context(), "crash", nil)
	for _, want := range []string{"connection lost", "exited with status 3", "panic: boom"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("callTool(crash) = %v, want error containing %q", err, want)
		}
	}
	if err := <-hung; err == nil || !strings.Contains(err.Error(), "exited with status 3") {
		t.Errorf("pending callTool(hang) = %v, want the crash", err)
	}
	if _, err := c.callTool(t.Context(), "echo", nil); err == nil || !strings.Contains(err.Error(), "exited with status 3") {
		t.Errorf("callTool after crash = %v, want the crash", err)
	}
}

func TestStdioTimeoutSendsCancelled(t *testing.T) {
	t.Parallel()
	cfg := fakeServerConfig(t, "normal")
	cfg.Timeout = 200 * time.Millisecond
	c := connectFake(t, cfg, clientOptions{})
	_, err := c.callTool(t.Context(), "hang", nil)
	if !errors.Is(err, errTimeout) {
		t.Fatalf("callTool(hang) = %v, want errTimeout", err)
	}
	// The session survives a timed-out call.
	if res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"still here"}`)); err != nil || resultText(t, res) != "still here" {
		t.Fatalf("callTool(echo) after timeout = %v, %v", res, err)
	}
}

func TestStdioProgressExtendsDeadline(t *testing.T) {
	t.Parallel()
	cfg := fakeServerConfig(t, "normal")
	cfg.Timeout = 400 * time.Millisecond
	c := connectFake(t, cfg, clientOptions{})
	// 15 progress steps of 40ms: 600ms in all, past the 400ms timeout,
	// but never 400ms without progress.
	res, err := c.callTool(t.Context(), "progress", json.RawMessage(`{"size":15}`))
	if err != nil || resultText(t, res) != "done" {
		t.Fatalf("callTool(progress) = %v, %v, want done", res, err)
	}
}

func TestStdioCallerCancellation(t *testing.T) {
	t.Parallel()
	c := connectFake(t, fakeServerConfig(t, "normal"), clientOptions{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.callTool(ctx, "hang", nil)
		errc <- err
	}()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("callTool(hang) after cancel = %v, want context.Canceled", err)
	}
}

func TestStdioOversizedLine(t *testing.T) {
	t.Parallel()
	cfg := fakeServerConfig(t, "normal")
	cfg.MaxMessageBytes = 100 << 10
	c := connectFake(t, cfg, clientOptions{})
	_, err := c.callTool(t.Context(), "big", json.RawMessage(`{"size":500000}`))
	if err == nil || !strings.Contains(err.Error(), "response too large") {
		t.Fatalf("callTool(big 500000) = %v, want response too large", err)
	}
	res, err := c.callTool(t.Context(), "big", json.RawMessage(`{"size":90000}`))
	if err != nil || len(resultText(t, res)) != 90000 {
		t.Fatalf("callTool(big 90000) = %v, want 90000 bytes", err)
	}
}

func TestStdioNoiseAndStderrFlood(t *testing.T) {
	t.Parallel()
	c := connectFake(t, fakeServerConfig(t, "normal"), clientOptions{})
	for _, tool := range []string{"noise", "stderr-flood"} {
		if _, err := c.callTool(t.Context(), tool, nil); err != nil {
			t.Errorf("callTool(%q) = %v", tool, err)
		}
	}
	st := c.t.(*stdioTransport)
	if n := len(st.tail.Bytes()); n != stderrTailBytes {
		t.Errorf("stderr tail holds %d bytes, want %d", n, stderrTailBytes)
	}
}

func TestStdioServerRequests(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := fakeServerConfig(t, "normal")
	cfg.Roots = []string{dir}
	c := connectFake(t, cfg, clientOptions{})
	res, err := c.callTool(t.Context(), "server-requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	got := resultText(t, res)
	for _, want := range []string{"ping={}", `"uri":"file://` + dir + `"`, `"code":-32601`} {
		if !strings.Contains(got, want) {
			t.Errorf("server-requests = %s, want it to contain %s", got, want)
		}
	}
}

func TestStdioListChangedNotification(t *testing.T) {
	t.Parallel()
	changed := make(chan struct{}, 1)
	c := connectFake(t, fakeServerConfig(t, "normal"), clientOptions{OnToolsChanged: func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	if _, err := c.callTool(t.Context(), "list-changed", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	case <-t.Context().Done():
		t.Fatal("OnToolsChanged not called")
	}
}

func TestStdioStartupFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cfg     func(serverConfig) serverConfig
		want    []string
		maxTime time.Duration
	}{
		{
			name: "exit in initialize",
			cfg:  func(c serverConfig) serverConfig { c.Env[fakeServerEnv] = "exit-in-initialize"; return c },
			want: []string{`server "fake"`, "exited with status 7", "cannot open database"},
		},
		{
			name: "hang in initialize",
			cfg: func(c serverConfig) serverConfig {
				c.Env[fakeServerEnv] = "hang-initialize"
				c.StartupTimeout = 300 * time.Millisecond
				return c
			},
			want: []string{`server "fake"`, "startup_timeout 300ms"},
		},
		{
			name: "no such command",
			cfg:  func(c serverConfig) serverConfig { c.Command = "/nonexistent/mcp-server"; return c },
			want: []string{`server "fake"`, `start: command "/nonexistent/mcp-server" does not exist`, "fix the server's command"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := connect(t.Context(), tt.cfg(fakeServerConfig(t, "normal")), clientOptions{})
			for _, want := range tt.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("connect() = %v, want error containing %q", err, want)
				}
			}
		})
	}
}

func TestStdioCloseStopsStubbornServerAndGrandchildren(t *testing.T) {
	t.Parallel()
	tests := []string{"ignore-term", "grandchild"}
	for _, mode := range tests {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			c := connectFake(t, fakeServerConfig(t, mode), clientOptions{StopGrace: testStopGrace})
			res, err := c.callTool(t.Context(), "grandchild", nil)
			if err != nil {
				t.Fatal(err)
			}
			grandchild, err := strconv.Atoi(resultText(t, res))
			if err != nil {
				t.Fatalf("grandchild pid %q: %v", resultText(t, res), err)
			}
			server := c.t.(*stdioTransport).cmd.Process.Pid
			c.close()
			c.close() // idempotent
			for _, pid := range []int{server, grandchild} {
				if !eventually(5*time.Second, func() bool { return !processAlive(pid) }) {
					t.Errorf("process %d still runs after close", pid)
				}
			}
			if _, err := c.callTool(t.Context(), "echo", nil); !errors.Is(err, errClientClosed) {
				t.Errorf("callTool after close = %v, want errClientClosed", err)
			}
		})
	}
}

// TestStdioCloseDoesNotWaitForStuckWrite fills the stdin pipe of a server
// that never reads it, so a send blocks in its write: close still returns
// within the stop ladder's bound, and the stuck send fails as closed.
func TestStdioCloseDoesNotWaitForStuckWrite(t *testing.T) {
	t.Parallel()
	cfg := fakeServerConfig(t, "deaf")
	tr, err := startStdio(cfg, stdioEnv(cfg, os.LookupEnv), nil, testStopGrace, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.close() })
	// Fill the pipe with non-blocking writes until it takes no more:
	// chunks first, then single bytes, as a pipe takes a small write only
	// whole.
	raw, err := tr.stdin.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fillErr error
	err = raw.Write(func(fd uintptr) bool {
		for _, size := range []int{4 << 10, 1} {
			chunk := make([]byte, size)
			for {
				if _, err := syscall.Write(int(fd), chunk); err != nil {
					if err != syscall.EAGAIN {
						fillErr = err
						return true
					}
					break
				}
			}
		}
		return true
	})
	if err != nil || fillErr != nil {
		t.Fatalf("fill stdin: %v, %v", err, fillErr)
	}

	// The send's own deadline is far past the ladder's bound: a close that
	// waited for it would take a minute.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	sent := make(chan error, 1)
	go func() { sent <- tr.send(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)) }()
	// Wait until the send holds the write lock: its write cannot finish.
	for tr.writeMu.TryLock() {
		tr.writeMu.Unlock()
		select {
		case err := <-sent:
			t.Fatalf("send into a full pipe returned %v before close", err)
		default:
			runtime.Gosched()
		}
	}

	bound := 3 * testStopGrace
	start := time.Now()
	tr.close()
	if took := time.Since(start); took > bound {
		t.Errorf("close with a stuck write took %s, want at most %s", took, bound)
	}
	select {
	case err := <-sent:
		if !errors.Is(err, errTransportClosed) {
			t.Errorf("stuck send after close = %v, want errTransportClosed", err)
		}
	case <-ctx.Done():
		t.Error("stuck send did not return after close")
	}
}

// TestStdioServerRequestUnencodableAnswer answers a server request with a
// result that cannot be encoded: the server still gets an answer, an
// internal error, instead of waiting for one that never comes.
func TestStdioServerRequestUnencodableAnswer(t *testing.T) {
	t.Parallel()
	c := connectFake(t, fakeServerConfig(t, "normal"), clientOptions{
		HandleRequest: func(method string, params json.RawMessage) (any, *rpcError, bool) {
			return math.Inf(1), nil, true // JSON has no infinity
		},
	})
	res, err := c.callTool(t.Context(), "server-requests", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resultText(t, res), fmt.Sprintf(`other={"code":%d`, codeInternalError); !strings.Contains(got, want) {
		t.Errorf("server-requests = %s, want it to contain %s", got, want)
	}
}
