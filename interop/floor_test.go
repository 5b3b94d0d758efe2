package interop

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"harnessd/interop/floor"
)

// This file checks the bytes the floor client sends, in both its shapes,
// at both revisions, over stdio and HTTP, against the echoserver.

// The floor's requests, as sent: the calls of two ids of each shape and
// revision, and the messages before them.
const (
	floorInit        = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"floor","version":"1"}}}`
	floorInitialized = `{"jsonrpc":"2.0","method":"notifications/initialized"}`
	floorCall2026    = `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"floor","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}},"name":"echo","arguments":{"message":"hello"}}}`
	floorCall2025    = `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello"}}}`

	// harnessd's, but for the clientInfo and the listen's id (harnessd's
	// is 2, after server/discover).
	sameInit     = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"capabilities":{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},"sampling":{"tools":{}}},"clientInfo":{"name":"floor","version":"1"},"protocolVersion":"2025-11-25"}}`
	sameListen   = `{"jsonrpc":"2.0","id":0,"method":"subscriptions/listen","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},"sampling":{"tools":{}}},"io.modelcontextprotocol/clientInfo":{"name":"floor","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28"},"notifications":{"toolsListChanged":true}}}`
	sameCall2026 = `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}},"roots":{"listChanged":true},"sampling":{"tools":{}}},"io.modelcontextprotocol/clientInfo":{"name":"floor","version":"1"},"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":ID},"name":"echo","arguments":{"message":"hello"}}}`
	sameCall2025 = `{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"_meta":{"progressToken":ID},"name":"echo","arguments":{"message":"hello"}}}`
)

// withIDs returns call with ID replaced by 1, then by 2.
func withIDs(call string) []string {
	return []string{strings.ReplaceAll(call, "ID", "1"), strings.ReplaceAll(call, "ID", "2")}
}

// floorCases are the shapes and revisions, with the messages each sends
// before its calls and the calls themselves.
var floorCases = []struct {
	name    string
	version string
	shape   floor.Shape
	first   []string
	calls   []string
}{
	{"fixed 2026", floor.Rev2026, floor.Fixed, nil, withIDs(floorCall2026)},
	{"fixed 2025", floor.Rev2025, floor.Fixed, []string{floorInit, floorInitialized}, withIDs(floorCall2025)},
	{"same 2026", floor.Rev2026, floor.SameRequests, []string{sameListen}, withIDs(sameCall2026)},
	{"same 2025", floor.Rev2025, floor.SameRequests, []string{sameInit, floorInitialized}, withIDs(sameCall2025)},
}

// TestFloorStdioBytes runs two calls of each case through a tee on both
// sides of the echoserver, and checks the lines sent, and, for the
// subscription, that the server acknowledged it.
func TestFloorStdioBytes(t *testing.T) {
	server := buildEchoServer(t)
	for _, tc := range floorCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sent, got := filepath.Join(dir, "sent"), filepath.Join(dir, "got")
			cmd := exec.Command("sh", "-c", `tee "$0" | "$1" stdio | tee "$2"`, sent, server, got)
			cmd.Stderr = os.Stderr
			floorCalls(t, func() (floor.Client, error) { return floor.Stdio(t.Context(), cmd, tc.version, tc.shape) })
			lines := strings.Split(strings.TrimSuffix(readFile(t, sent), "\n"), "\n")
			if want := slices.Concat(tc.first, tc.calls); !slices.Equal(lines, want) {
				t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
			}
			answers := readFile(t, got)
			if tc.shape == floor.SameRequests && tc.version == floor.Rev2026 && !strings.Contains(answers, `"method":"notifications/subscriptions/acknowledged"`) {
				t.Errorf("no acknowledgement of the subscription in the answers:\n%s", answers)
			}
		})
	}
}

// TestFloorHTTPBytes runs two calls of each case on the echoserver's
// handler of its revision, and checks the requests sent and, for the
// subscription, that the server acknowledged it on the held stream.
func TestFloorHTTPBytes(t *testing.T) {
	for _, tc := range floorCases {
		t.Run(tc.name, func(t *testing.T) {
			mode := "http"
			if tc.version == floor.Rev2026 {
				mode = "http-stateless"
			}
			url := startEchoServerHTTP(t, mode)
			rec := &recorder{next: http.DefaultTransport}
			floorCalls(t, func() (floor.Client, error) {
				return floor.HTTP(t.Context(), url, &http.Client{Transport: rec}, tc.version, tc.shape)
			})
			want := slices.Concat(tc.first, tc.calls)
			if tc.shape == floor.SameRequests && tc.version == floor.Rev2025 {
				// The session's GET stream, before the initialized notification.
				want = slices.Insert(want, 1, "GET ")
			}
			var sent []string
			for _, x := range rec.exchanges {
				sent = append(sent, x.sent)
			}
			if !slices.Equal(sent, want) {
				t.Errorf("sent:\n%s\nwant:\n%s", strings.Join(sent, "\n"), strings.Join(want, "\n"))
			}
			for _, x := range rec.exchanges {
				if got := x.answer(); x.sent == sameListen && !strings.Contains(got, `"method":"notifications/subscriptions/acknowledged"`) {
					t.Errorf("no acknowledgement on the subscription's stream: %q", got)
				}
			}
		})
	}
}

// floorCalls connects with connect, makes two calls and closes.
func floorCalls(t *testing.T, connect func() (floor.Client, error)) {
	t.Helper()
	c, err := connect()
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.Call(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A recorder is an http.RoundTripper that keeps what each request sent
// (its body, or "GET " for a GET) and what its answer's reader read.
type recorder struct {
	next      http.RoundTripper
	mu        sync.Mutex
	exchanges []*exchange
}

type exchange struct {
	sent string
	mu   sync.Mutex
	got  bytes.Buffer
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	x := &exchange{sent: req.Method + " "}
	if req.Method == http.MethodPost {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		x.sent = string(body)
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	r.mu.Lock()
	r.exchanges = append(r.exchanges, x)
	r.mu.Unlock()
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, x), resp.Body}
	}
	return resp, err
}

func (x *exchange) Write(p []byte) (int, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.got.Write(p)
}

func (x *exchange) answer() string {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.got.String()
}
