package interop

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
	"go.uber.org/zap"
)

// This file proves harnessd's traces against the OpenTelemetry
// Collector's own OTLP receiver: the harnessd binary, driven by a scripted
// model, runs two tool calls on a Go SDK server over Streamable HTTP; the
// receiver gets one trace whose spans nest run → model call / tool call →
// MCP request, the server sees the trace in each request's _meta and
// headers, and the caller's traceparent is the parent of it all.

// A traceReceiver is the collector's OTLP receiver (HTTP only) on a free
// loopback port, keeping every span it accepts.
type traceReceiver struct {
	endpoint string
	// got receives a value per export accepted.
	got chan struct{}

	mu sync.Mutex
	// guards spans
	spans []receivedSpan
}

// A receivedSpan is one span as the receiver decoded it, with its
// resource's service.name.
type receivedSpan struct {
	service string
	span    ptrace.Span
}

// startTraceReceiver starts the receiver, shut down at cleanup.
func startTraceReceiver(t *testing.T) *traceReceiver {
	t.Helper()
	r := &traceReceiver{got: make(chan struct{}, 1024)}
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	addr := freeAddr(t)
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	r.endpoint = "http://" + addr
	next, err := consumer.NewTraces(func(_ context.Context, td ptrace.Traces) error {
		r.mu.Lock()
		for i := range td.ResourceSpans().Len() {
			rs := td.ResourceSpans().At(i)
			service, _ := rs.Resource().Attributes().Get("service.name")
			for j := range rs.ScopeSpans().Len() {
				spans := rs.ScopeSpans().At(j).Spans()
				for k := range spans.Len() {
					span := ptrace.NewSpan()
					spans.At(k).CopyTo(span)
					r.spans = append(r.spans, receivedSpan{service: service.Str(), span: span})
				}
			}
		}
		r.mu.Unlock()
		r.got <- struct{}{}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	set := receiver.Settings{ID: component.NewID(factory.Type()), BuildInfo: component.NewDefaultBuildInfo()}
	set.Logger = zap.NewNop()
	set.MeterProvider = metricnoop.NewMeterProvider()
	set.TracerProvider = tracenoop.NewTracerProvider()
	set.Resource = pcommon.NewResource()
	rcv, err := factory.CreateTraces(t.Context(), set, cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := rcv.Start(context.Background(), nopHost{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rcv.Shutdown(context.Background()) })
	return r
}

// nopHost is a component.Host without extensions.
type nopHost struct{}

func (nopHost) GetExtensions() map[component.ID]component.Component { return nil }

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// waitSpans waits until the receiver holds spans that satisfy done, and
// returns them.
func (r *traceReceiver) waitSpans(t *testing.T, done func([]receivedSpan) bool) []receivedSpan {
	t.Helper()
	timeout := time.After(time.Minute)
	for {
		r.mu.Lock()
		spans := append([]receivedSpan(nil), r.spans...)
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-r.got:
		case <-timeout:
			t.Fatalf("the receiver got %d spans in a minute, not the ones awaited: %v", len(spans), spanNames(spans))
		}
	}
}

// spanNames returns the spans' names.
func spanNames(spans []receivedSpan) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.span.Name())
	}
	return names
}

// A metaServer is a Go SDK server over Streamable HTTP whose echo tool
// records the trace context of each call: the traceparent of its _meta
// and of its HTTP request.
type metaServer struct {
	url string

	mu sync.Mutex
	// guards metas and headers
	metas   []string
	headers []string
}

// startMetaServer starts the server, closed at cleanup.
func startMetaServer(t *testing.T) *metaServer {
	t.Helper()
	s := &metaServer{}
	server := mcp.NewServer(&mcp.Implementation{Name: "meta-server", Version: "1.0.0"}, nil)
	type echoInput struct {
		Message string `json:"message"`
	}
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echoes the message."},
		func(_ context.Context, req *mcp.CallToolRequest, in echoInput) (*mcp.CallToolResult, any, error) {
			tp, _ := req.Params.GetMeta()["traceparent"].(string)
			s.mu.Lock()
			s.metas = append(s.metas, tp)
			s.mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
		})
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(body)))
			if strings.Contains(string(body), `"tools/call"`) {
				s.mu.Lock()
				s.headers = append(s.headers, r.Header.Get("Traceparent"))
				s.mu.Unlock()
			}
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// tracedModel is an OpenAI-compatible endpoint that asks for two echo
// calls at once, then answers with their results; it records each
// request's traceparent.
func tracedModel(t *testing.T, traceparents chan<- string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		traceparents <- r.Header.Get("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		if !strings.Contains(string(body), `"role":"tool"`) {
			io.WriteString(w, `{"model":"scripted-1","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[
				{"id":"call_1","type":"function","function":{"name":"mcp_sdk_echo","arguments":"{\"message\":\"one\"}"}},
				{"id":"call_2","type":"function","function":{"name":"mcp_sdk_echo","arguments":"{\"message\":\"two\"}"}}]}}],
				"usage":{"prompt_tokens":21,"completion_tokens":8}}`)
			return
		}
		io.WriteString(w, `{"model":"scripted-1","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"both echoed"}}],
			"usage":{"prompt_tokens":34,"completion_tokens":3}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// startTracedHarnessd starts the built daemon with env on a free port and
// returns its address once it listens; it is stopped (SIGTERM, which
// flushes its spans) at cleanup.
func startTracedHarnessd(t *testing.T, env []string) string {
	t.Helper()
	bin := buildHarnessd(t)
	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--log-format", "json", "--workspace", t.TempDir())
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	var logMu sync.Mutex
	var log strings.Builder
	// Owned by the test; ends when harnessd closes its stderr (it exits).
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			var entry struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal(sc.Bytes(), &entry) == nil && entry.Msg == "harnessd listening" {
				addr <- entry.Addr
			}
		}
		close(addr)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		if t.Failed() {
			logMu.Lock()
			t.Logf("harnessd log:\n%s", log.String())
			logMu.Unlock()
		}
	})
	select {
	case a, ok := <-addr:
		if !ok {
			t.Fatal("harnessd exited before listening")
		}
		return a
	case <-time.After(time.Minute):
		t.Fatal("harnessd did not listen within a minute")
	}
	return ""
}

// attr returns the span's attribute key as text.
func attr(s ptrace.Span, key string) string {
	v, ok := s.Attributes().Get(key)
	if !ok {
		return ""
	}
	return v.AsString()
}

func TestTracesReachTheCollector(t *testing.T) {
	rcv := startTraceReceiver(t)
	server := startMetaServer(t)
	modelTraceparents := make(chan string, 16)
	model := tracedModel(t, modelTraceparents)
	home := t.TempDir()
	config := fmt.Sprintf("[mcp_servers.sdk]\nurl = %q\n", server.url+"/mcp")
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := startTracedHarnessd(t, []string{
		"HARNESS_HOME=" + home,
		"HARNESS_MODEL=openai/scripted",
		"OPENAI_BASE_URL=" + model,
		"OPENAI_API_KEY=sk-interop-test-key",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rcv.endpoint,
		"OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20collector-token",
		"OTEL_SERVICE_NAME=harnessd-interop",
	})

	// The caller's own span: its trace id and span id.
	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/runs", strings.NewReader(`{"prompt":"echo one and two"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	req.Header.Set("Tracestate", "caller=1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || started.RunID == "" {
		t.Fatalf("POST /v1/runs = %d, want 202 with a run id", resp.StatusCode)
	}

	// The receiver gets the run's span once the run has ended (the
	// exporter sends every 5 seconds, or at shutdown).
	spans := rcv.waitSpans(t, func(spans []receivedSpan) bool {
		for _, s := range spans {
			if s.span.Name() == "invoke_agent harnessd" && s.span.TraceID().String() == callerTrace {
				return true
			}
		}
		return false
	})
	inTrace := map[string][]ptrace.Span{}
	for _, s := range spans {
		if s.span.TraceID().String() != callerTrace {
			continue
		}
		if s.service != "harnessd-interop" {
			t.Errorf("span %q has service.name %q, want OTEL_SERVICE_NAME", s.span.Name(), s.service)
		}
		inTrace[s.span.Name()] = append(inTrace[s.span.Name()], s.span)
	}
	request, runs := inTrace["POST /v1/runs"], inTrace["invoke_agent harnessd"]
	chats, tools, calls := inTrace["chat scripted"], inTrace["execute_tool mcp_sdk_echo"], inTrace["tools/call echo"]
	if len(request) != 1 || len(runs) != 1 || len(chats) != 2 || len(tools) != 2 || len(calls) != 2 {
		var names []string
		for n, s := range inTrace {
			names = append(names, fmt.Sprintf("%s×%d", n, len(s)))
		}
		t.Fatalf("the caller's trace holds %v, want 1 POST /v1/runs, 1 run, 2 chat, 2 execute_tool, 2 tools/call", names)
	}
	// The caller's traceparent is the parent of the request, the request
	// the parent of the run.
	if got := request[0].ParentSpanID().String(); got != callerSpan {
		t.Errorf("POST /v1/runs parent = %s, want the caller's span %s", got, callerSpan)
	}
	if request[0].Kind() != ptrace.SpanKindServer || attr(request[0], "http.route") != "/v1/runs" || attr(request[0], "http.response.status_code") != "202" {
		t.Errorf("request span: kind %v, route %q, status %q, want server, /v1/runs, 202", request[0].Kind(), attr(request[0], "http.route"), attr(request[0], "http.response.status_code"))
	}
	if request[0].TraceState().AsRaw() != "caller=1" {
		t.Errorf("request span tracestate = %q, want the caller's", request[0].TraceState().AsRaw())
	}
	run := runs[0]
	if run.ParentSpanID() != request[0].SpanID() {
		t.Errorf("run parent = %s, want the request's span %s", run.ParentSpanID(), request[0].SpanID())
	}
	if attr(run, "harnessd.run.id") != started.RunID || attr(run, "harnessd.run.status") != "completed" || attr(run, "gen_ai.conversation.id") == "" {
		t.Errorf("run span: id %q, status %q, conversation %q, want %s, completed, set", attr(run, "harnessd.run.id"), attr(run, "harnessd.run.status"), attr(run, "gen_ai.conversation.id"), started.RunID)
	}
	for _, s := range append(append([]ptrace.Span{}, chats...), tools...) {
		if s.ParentSpanID() != run.SpanID() {
			t.Errorf("span %q parent = %s, want the run's %s", s.Name(), s.ParentSpanID(), run.SpanID())
		}
	}
	for _, c := range chats {
		want := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "scripted", "gen_ai.response.model": "scripted-1"}
		for k, v := range want {
			if attr(c, k) != v {
				t.Errorf("model call span: %s = %q, want %q", k, attr(c, k), v)
			}
		}
		if c.Kind() != ptrace.SpanKindClient || attr(c, "gen_ai.usage.input_tokens") == "" || attr(c, "gen_ai.usage.output_tokens") == "" || attr(c, "gen_ai.response.finish_reasons") == "" {
			t.Errorf("model call span: kind %v, tokens %q/%q, finish reasons %q", c.Kind(), attr(c, "gen_ai.usage.input_tokens"), attr(c, "gen_ai.usage.output_tokens"), attr(c, "gen_ai.response.finish_reasons"))
		}
	}
	toolIDs := map[pcommon.SpanID]bool{}
	for _, s := range tools {
		toolIDs[s.SpanID()] = true
		if attr(s, "gen_ai.operation.name") != "execute_tool" || attr(s, "gen_ai.tool.name") != "mcp_sdk_echo" || attr(s, "gen_ai.tool.call.id") == "" {
			t.Errorf("tool call span attributes: %v", s.Attributes().AsRaw())
		}
		if _, ok := s.Attributes().Get("gen_ai.tool.call.arguments"); ok {
			t.Errorf("tool call span holds the arguments without include_content")
		}
	}
	callIDs := map[string]bool{}
	for _, s := range calls {
		if !toolIDs[s.ParentSpanID()] {
			t.Errorf("MCP request parent = %s, not a tool call span", s.ParentSpanID())
		}
		callIDs[s.SpanID().String()] = true
		if s.Kind() != ptrace.SpanKindClient || attr(s, "mcp.method.name") != "tools/call" || attr(s, "gen_ai.tool.name") != "echo" ||
			attr(s, "harnessd.mcp.server") != "sdk" || attr(s, "mcp.protocol.version") == "" || attr(s, "jsonrpc.request.id") == "" {
			t.Errorf("MCP request span: kind %v, attributes %v", s.Kind(), s.Attributes().AsRaw())
		}
	}
	// The server saw each call's own span in _meta and in its headers.
	server.mu.Lock()
	metas, headers := server.metas, server.headers
	server.mu.Unlock()
	if len(metas) != 2 || len(headers) != 2 {
		t.Fatalf("the server saw %d calls' _meta and %d headers, want 2", len(metas), len(headers))
	}
	for i := range metas {
		for what, tp := range map[string]string{"_meta": metas[i], "header": headers[i]} {
			trace, span, ok := splitTraceparent(tp)
			if !ok || trace != callerTrace || !callIDs[span] {
				t.Errorf("the server's %s traceparent %q is not an MCP request span of the caller's trace", what, tp)
			}
		}
	}
	// The model endpoint saw the trace too, with a model call's span.
	chatIDs := map[string]bool{chats[0].SpanID().String(): true, chats[1].SpanID().String(): true}
	for range 2 {
		tp := <-modelTraceparents
		if trace, span, ok := splitTraceparent(tp); !ok || trace != callerTrace || !chatIDs[span] {
			t.Errorf("the model's traceparent %q is not a model call span of the caller's trace", tp)
		}
	}
}

// splitTraceparent returns the trace and span ids of a version 00
// traceparent.
func splitTraceparent(tp string) (trace, span string, ok bool) {
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" {
		return "", "", false
	}
	if _, err := hex.DecodeString(parts[1] + parts[2]); err != nil {
		return "", "", false
	}
	return parts[1], parts[2], true
}
