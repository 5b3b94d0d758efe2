package interop

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 sampling and roots are deprecated in 2026-07-28 but still part of it; this peer exercises them on purpose.

// This file holds the tests of the echoserver's -full features with the
// official Go SDK client, at the revision it negotiates (2026-07-28) and at
// 2025-11-25: resources, the input-required tools, list changes and cache
// hints. They prove the peer that harnessd's own tests then rely on.

// fullClient returns a Go SDK client that answers every question the full
// server asks: elicitations accepted with fixed content, sampling with a
// fixed text, one root. toolsChanged receives a value per tools
// list_changed notification.
func fullClient(toolsChanged chan<- struct{}) *mcp.Client {
	client := mcp.NewClient(&mcp.Implementation{Name: "interop-test", Version: "1.0.0"}, &mcp.ClientOptions{
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			switch {
			case strings.Contains(req.Params.Message, "name"):
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
			case strings.Contains(req.Params.Message, "colour"):
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"colour": "green"}}, nil
			}
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirmed": true}}, nil
		},
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "fixed", Role: "assistant", Content: &mcp.TextContent{Text: "Paris"}}, nil
		},
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case toolsChanged <- struct{}{}:
			default:
			}
		},
	})
	client.AddRoots(&mcp.Root{URI: "file:///srv/data", Name: "data"})
	return client
}

func TestFullServer(t *testing.T) {
	// The SDK's stateful HTTP handler answers server/discover with a
	// session of the old revision: the current revision, which has no
	// sessions, is served by its stateless handler, and the older ones, whose
	// server requests need a session, by the stateful one.
	transports := []struct {
		name string
		dial func(t *testing.T, version string) mcp.Transport
	}{
		{"stdio", func(t *testing.T, _ string) mcp.Transport {
			cmd := exec.Command(buildEchoServer(t), "stdio", "-full", "-ttl", "1m")
			cmd.Stderr = os.Stderr
			return &mcp.CommandTransport{Command: cmd}
		}},
		{"http", func(t *testing.T, version string) mcp.Transport {
			mode := "http"
			if version >= "2026-07-28" {
				mode = "http-stateless"
			}
			return &mcp.StreamableClientTransport{Endpoint: startEchoServerHTTP(t, mode, "-full", "-ttl", "1m")}
		}},
	}
	for _, tr := range transports {
		for _, version := range []string{"2026-07-28", "2025-11-25"} {
			t.Run(tr.name+" "+version, func(t *testing.T) {
				t.Parallel()
				toolsChanged := make(chan struct{}, 1)
				client := fullClient(toolsChanged)
				ctx, cancel := context.WithCancel(context.Background())
				t.Cleanup(cancel)
				session, err := client.Connect(ctx, tr.dial(t, version), &mcp.ClientSessionOptions{ProtocolVersion: version})
				if err != nil {
					t.Fatalf("connect: %v", err)
				}
				t.Cleanup(func() { session.Close() })
				if got := session.InitializeResult().ProtocolVersion; got != version {
					t.Errorf("negotiated protocol version = %q, want %q", got, version)
				}
				checkFullServer(t, session, toolsChanged)
			})
		}
	}
}

// checkFullServer exercises every -full feature on session.
func checkFullServer(t *testing.T, session *mcp.ClientSession, toolsChanged <-chan struct{}) {
	ctx := t.Context()
	calls := []struct {
		tool string
		args any
		want string
	}{
		{"confirm", map[string]any{"action": "deploy"}, "confirmed deploy"},
		{"ask_model", map[string]any{"question": "Capital of France?"}, "Paris"},
		{"list_roots", map[string]any{}, "file:///srv/data"},
		{"survey", map[string]any{}, "Ada likes green"},
	}
	for _, c := range calls {
		got, err := callText(ctx, session, c.tool, c.args)
		if err != nil || got != c.want {
			t.Errorf("call %s(%v) = %q, %v, want %q", c.tool, c.args, got, err, c.want)
		}
	}
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "nag", Arguments: map[string]any{}}); err == nil {
		t.Errorf("call nag: no error, want one (it asks forever)")
	}

	read, err := session.ReadResource(ctx, &mcp.ReadResourceParams{URI: "echo://greeting"})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "hello from echoserver" {
		t.Errorf("read echo://greeting = %+v, %v, want its text", read, err)
	}

	if _, err := callText(ctx, session, "add_tool", map[string]any{"name": "shout"}); err != nil {
		t.Fatalf("call add_tool: %v", err)
	}
	select {
	case <-toolsChanged:
	case <-time.After(10 * time.Second):
		t.Fatal("no tools list_changed notification within 10s of add_tool")
	}
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("ListTools() error: %v", err)
	}
	found := false
	for _, tool := range tools.Tools {
		found = found || tool.Name == "shout"
	}
	if !found {
		t.Errorf("ListTools() after add_tool lacks %q", "shout")
	}
	if session.InitializeResult().ProtocolVersion >= "2026-07-28" && (tools.TTLMs != 60000 || tools.CacheScope != "public") {
		t.Errorf("ListTools() ttlMs, cacheScope = %d, %q, want 60000, public", tools.TTLMs, tools.CacheScope)
	}

	stats, err := callText(ctx, session, "stats", map[string]any{})
	var counts map[string]int
	if err != nil || json.Unmarshal([]byte(stats), &counts) != nil || counts["tools/list"] < 1 {
		t.Errorf("call stats = %q, %v, want counts with tools/list >= 1", stats, err)
	}
}
