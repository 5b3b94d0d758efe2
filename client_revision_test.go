package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// This file tests the negotiation of the protocol revision over stdio and
// Streamable HTTP, and the requests of the current revision.

func TestNegotiateStdio(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		mode   string
		pinned string
		want   string // the negotiated version; "" when connect fails
		// wantErr is in connect's error when want is "".
		wantErr    string
		wantServer string
	}{
		{name: "older server answers -32601", mode: "legacy", want: latestProtocolVersion, wantServer: "fake"},
		{name: "current server", mode: "modern", want: sessionlessProtocolVersion, wantServer: "fake-modern"},
		{name: "current server refuses the first version", mode: "modern-retry", want: sessionlessProtocolVersion, wantServer: "fake-modern"},
		{name: "no answer within the bound", mode: "discover-silent", want: latestProtocolVersion, wantServer: "fake"},
		{name: "current server slow to start", mode: "modern-slow", want: sessionlessProtocolVersion, wantServer: "fake-modern"},
		{name: "pinned older version", mode: "legacy", pinned: "2025-06-18", want: "2025-06-18", wantServer: "fake"},
		{name: "pinned current version", mode: "modern", pinned: sessionlessProtocolVersion, want: sessionlessProtocolVersion, wantServer: "fake-modern"},
		{name: "pinned current version on an older server", mode: "legacy", pinned: sessionlessProtocolVersion, wantErr: "server/discover: json-rpc error -32601"},
		{name: "pinned older version on a current server", mode: "modern", pinned: latestProtocolVersion, wantErr: "initialize: json-rpc error -32601"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := fakeServerConfig(t, tt.mode)
			cfg.ProtocolVersion = tt.pinned
			c, err := connect(t.Context(), cfg, clientOptions{DiscoverTimeout: 300 * time.Millisecond})
			if tt.want == "" {
				if err == nil {
					c.close()
					t.Fatalf("connect(%s) = nil error, want one containing %q", tt.mode, tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `server "fake"`) {
					t.Errorf("connect(%s) = %v, want an error naming the server and containing %q", tt.mode, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("connect(%s) = %v", tt.mode, err)
			}
			t.Cleanup(func() { c.close() })
			if got := c.protocolVersion(); got != tt.want {
				t.Errorf("protocolVersion() = %q, want %q", got, tt.want)
			}
			if got := c.serverInfo().Name; got != tt.wantServer {
				t.Errorf("serverInfo().Name = %q, want %q", got, tt.wantServer)
			}
			// The modern fake refuses requests without the revision's _meta.
			if _, err := c.listTools(t.Context()); err != nil {
				t.Errorf("listTools() = %v", err)
			}
			res, err := c.callTool(t.Context(), "echo", json.RawMessage(`{"message":"hi"}`))
			if err != nil || resultToText(res) != "hi" {
				t.Errorf("callTool(echo hi) = %v, %v; want hi", res, err)
			}
		})
	}
}

// newEraServer starts a fake server that answers server/discover as its
// test says (discover answers the nth; ID in a body stands for the
// request's id) and the rest as a server of whichever revision the client
// ends up speaking: call, when set, answers the nth tools/call, a status
// of 0 with an event stream that ends without the answer.
func newEraServer(t *testing.T, discover, call func(n int) (status int, body string)) *fakeMCP {
	var discovers, calls atomic.Int32
	return newFakeMCP(t, fakeMCPConfig{Name: "older", Capabilities: map[string]any{"tools": map[string]any{}}, Script: func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
		if r.Method != http.MethodPost || len(m.ID) == 0 || m.Method == "initialize" {
			return false
		}
		reply := func(status int, body string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, strings.ReplaceAll(body, "ID", string(m.ID)))
		}
		ok := func(result string) { reply(http.StatusOK, `{"jsonrpc":"2.0","id":ID,"result":`+result+`}`) }
		switch m.Method {
		case "server/discover":
			reply(discover(int(discovers.Add(1))))
		case "tools/list":
			ok(`{"tools":[{"name":"lookup","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}},` +
				`{"name":"bad","inputSchema":{"type":"object","properties":{"n":{"type":"number","x-mcp-header":"N"}}}}]}`)
		case "tools/call":
			if call != nil {
				status, body := call(int(calls.Add(1)))
				if status == 0 {
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					return true
				}
				if status != http.StatusOK {
					reply(status, body)
					return true
				}
			}
			ok(`{"content":[{"type":"text","text":"ok"}]}`)
		default:
			ok(`{"content":[{"type":"text","text":"ok"}]}`)
		}
		return true
	}})
}

const discoverOK = `{"jsonrpc":"2.0","id":ID,"result":{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"current","version":"1"}}}}`

func TestNegotiateHTTP(t *testing.T) {
	t.Parallel()
	refusal := func(code int, data string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":ID,"error":{"code":%d,"message":"no","data":%s}}`, code, data)
	}
	tests := []struct {
		name     string
		discover func(n int) (int, string)
		want     string // the negotiated version; "" when connect fails
		wantErr  string
	}{
		{name: "current server", discover: func(int) (int, string) { return 200, discoverOK }, want: sessionlessProtocolVersion},
		{name: "400 -32022 with a current version", discover: func(n int) (int, string) {
			if n == 1 {
				return 400, refusal(codeUnsupportedVersion, `{"supported":["2026-07-28"],"requested":"2026-07-28"}`)
			}
			return 200, discoverOK
		}, want: sessionlessProtocolVersion},
		{name: "400 -32022 with older versions only", discover: func(int) (int, string) {
			return 400, refusal(codeUnsupportedVersion, `{"supported":["2025-11-25"]}`)
		}, want: latestProtocolVersion},
		{name: "400 -32020", discover: func(int) (int, string) { return 400, refusal(codeHeaderMismatch, `null`) }, wantErr: "json-rpc error -32020"},
		{name: "400 -32021", discover: func(int) (int, string) {
			return 400, refusal(codeMissingCapability, `{"requiredCapabilities":{"sampling":{}}}`)
		}, wantErr: "json-rpc error -32021"},
		{name: "400 of an older server", discover: func(int) (int, string) {
			return 400, `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`
		}, want: latestProtocolVersion},
		{name: "404", discover: func(int) (int, string) { return 404, "not found" }, want: latestProtocolVersion},
		{name: "401 is not an answer about the revision", discover: func(int) (int, string) { return 401, "" }, wantErr: "authentication failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fake := newEraServer(t, tt.discover, nil)
			cfg := httpPeerConfig("fake", transportHTTP, fake.URL)
			c, err := connect(t.Context(), cfg, clientOptions{})
			if tt.want == "" {
				if err == nil {
					c.close()
					t.Fatalf("connect = nil error, want one containing %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("connect = %v, want an error containing %q", err, tt.wantErr)
				}
				if got := fake.methods(); strings.Contains(strings.Join(got, " "), "initialize") {
					t.Errorf("requests = %v, want no initialize after a refusal of the current revision", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("connect = %v", err)
			}
			if got := c.protocolVersion(); got != tt.want {
				t.Errorf("protocolVersion() = %q, want %q", got, tt.want)
			}
			tools, err := c.listTools(t.Context())
			if err != nil {
				t.Fatalf("listTools() = %v", err)
			}
			if _, err := c.callTool(t.Context(), "lookup", json.RawMessage(`{"region":"us-west1"}`)); err != nil {
				t.Fatalf("callTool(lookup) = %v", err)
			}
			c.close()
			methods := strings.Join(fake.methods(), " ")
			if tt.want != sessionlessProtocolVersion {
				if !strings.Contains(methods, "initialize") {
					t.Errorf("requests = %s, want an initialize after the probe", methods)
				}
				return
			}
			// The current revision: no handshake, session, GET or DELETE; the
			// invalid tool is left out; every request carries the revision.
			if strings.Contains(methods, "initialize") || strings.Contains(methods, "GET") || strings.Contains(methods, "DELETE") {
				t.Errorf("requests = %s, want neither initialize, GET nor DELETE", methods)
			}
			if len(tools) != 1 || tools[0].Name != "lookup" {
				t.Errorf("listTools() = %v, want only lookup (bad has x-mcp-header on a number)", tools)
			}
			for _, r := range fake.requests() {
				method := r.msg.Method
				var params struct {
					Meta map[string]json.RawMessage `json:"_meta"`
				}
				json.Unmarshal(r.msg.Params, &params)
				if r.header.Get(headerProtocolVersion) != sessionlessProtocolVersion || r.header.Get(headerMethod) != method ||
					r.header.Get(headerSessionID) != "" || string(params.Meta[metaProtocolVersion]) != `"2026-07-28"` ||
					params.Meta[metaClientCapabilities] == nil || params.Meta[metaClientInfo] == nil {
					t.Errorf("%s: headers %v, _meta %s: want the revision's headers and _meta, no session", method, r.header, r.msg.Params)
				}
				if method == "tools/call" && (r.header.Get(headerName) != "lookup" || r.header.Get("Mcp-Param-Region") != "us-west1") {
					t.Errorf("tools/call headers %v, want Mcp-Name lookup and Mcp-Param-Region us-west1", r.header)
				}
			}
		})
	}
}

func TestEncodeHeaderValue(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"us-west1", "us-west1"},
		{"us west 1", "us west 1"},
		{"", ""},
		{"Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="},
		{" padded ", "=?base64?IHBhZGRlZCA=?="},
		{"line1\nline2", "=?base64?bGluZTEKbGluZTI=?="},
		{"\tindented", "=?base64?CWluZGVudGVk?="},
		{"=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="},
	}
	for _, tt := range tests {
		if got := encodeHeaderValue(tt.in); got != tt.want {
			t.Errorf("encodeHeaderValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParamHeaders(t *testing.T) {
	t.Parallel()
	schema := json.RawMessage(`{"type":"object","properties":{
		"region":{"type":"string","x-mcp-header":"Region"},
		"priority":{"type":"integer","x-mcp-header":"Priority"},
		"verbose":{"type":"boolean","x-mcp-header":"Verbose"},
		"nested":{"type":"object","properties":{"tenant":{"type":"string","x-mcp-header":"Tenant"}}}}}`)
	bindings, err := headerBindings(schema)
	if err != nil {
		t.Fatalf("headerBindings() = %v", err)
	}
	tests := []struct {
		name string
		args string
		want map[string]string // header -> value; absent headers must be missing
	}{
		{"all kinds", `{"region":"eu","priority":42,"verbose":false,"nested":{"tenant":"acme"}}`,
			map[string]string{"Mcp-Param-Region": "eu", "Mcp-Param-Priority": "42", "Mcp-Param-Verbose": "false", "Mcp-Param-Tenant": "acme"}},
		{"null is omitted", `{"region":null,"priority":1}`, map[string]string{"Mcp-Param-Priority": "1"}},
		{"absent is omitted", `{}`, map[string]string{}},
		{"integral float", `{"priority":42.0}`, map[string]string{"Mcp-Param-Priority": "42"}},
		{"fraction and unsafe integer are omitted", `{"priority":4.5,"verbose":true}`, map[string]string{"Mcp-Param-Verbose": "true"}},
		{"beyond the safe range", `{"priority":9007199254740993}`, map[string]string{}},
		{"unsafe text is encoded", `{"region":" eu"}`, map[string]string{"Mcp-Param-Region": "=?base64?IGV1?="}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := paramHeaders(bindings, json.RawMessage(tt.args))
			if len(h) != len(tt.want) {
				t.Errorf("paramHeaders(%s) = %v, want %v", tt.args, h, tt.want)
			}
			for k, v := range tt.want {
				if got := h.Get(k); got != v {
					t.Errorf("paramHeaders(%s)[%s] = %q, want %q", tt.args, k, got, v)
				}
			}
		})
	}
}

func TestHeaderBindingsInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, schema, wantErr string }{
		{"empty", `{"properties":{"v":{"type":"string","x-mcp-header":""}}}`, "non-empty"},
		{"space", `{"properties":{"v":{"type":"string","x-mcp-header":"My Region"}}}`, "cannot"},
		{"colon", `{"properties":{"v":{"type":"string","x-mcp-header":"Region:Primary"}}}`, "cannot"},
		{"non-ascii", `{"properties":{"v":{"type":"string","x-mcp-header":"Région"}}}`, "cannot"},
		{"number", `{"properties":{"v":{"type":"number","x-mcp-header":"V"}}}`, "not number"},
		{"object", `{"properties":{"v":{"type":"object","x-mcp-header":"V"}}}`, "not object"},
		{"duplicate in another case", `{"properties":{"a":{"type":"string","x-mcp-header":"MyField"},"b":{"type":"string","x-mcp-header":"myfield"}}}`, "twice"},
		{"under items", `{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}`, "reached through properties"},
		{"under anyOf", `{"anyOf":[{"properties":{"a":{"type":"string","x-mcp-header":"A"}}}]}`, "reached through properties"},
		{"on the root", `{"type":"string","x-mcp-header":"A"}`, "reached through properties"},
	}
	for _, tt := range tests {
		if _, err := headerBindings(json.RawMessage(tt.schema)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("headerBindings(%s) = %v, want an error containing %q", tt.name, err, tt.wantErr)
		}
	}
	// An x-mcp-header key inside a default value is data, not an annotation.
	if b, err := headerBindings(json.RawMessage(`{"properties":{"o":{"type":"object","default":{"x-mcp-header":"X"}}}}`)); err != nil || len(b) != 0 {
		t.Errorf("headerBindings(default holding the key) = %v, %v; want none and no error", b, err)
	}
}

func TestModernErrorsHTTP(t *testing.T) {
	t.Parallel()
	refusal := func(code int, data string) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":ID,"error":{"code":%d,"message":"no","data":%s}}`, code, data)
	}
	tests := []struct {
		name string
		// discover answers the nth server/discover; nil for discoverOK.
		discover func(n int) (int, string)
		call     func(n int) (int, string)
		wantErr  string // "" when the call succeeds in the end
		// want counts requests by method once the call is over.
		want map[string]int
	}{
		{name: "-32020 lists the tools again and retries once", call: func(n int) (int, string) {
			if n == 1 {
				return 400, refusal(codeHeaderMismatch, `null`)
			}
			return 200, ""
		}, want: map[string]int{"tools/list": 2, "tools/call": 2, "server/discover": 1}},
		{name: "-32022 negotiates again and retries once", call: func(n int) (int, string) {
			if n == 1 {
				return 400, refusal(codeUnsupportedVersion, `{"supported":["2026-07-28"]}`)
			}
			return 200, ""
		}, want: map[string]int{"tools/list": 1, "tools/call": 2, "server/discover": 2}},
		{name: "-32022 naming only older revisions initializes and retries", discover: func(n int) (int, string) {
			if n == 1 {
				return 200, discoverOK
			}
			return 400, refusal(codeUnsupportedVersion, `{"supported":["2025-11-25"]}`)
		}, call: func(n int) (int, string) {
			if n == 1 {
				return 400, refusal(codeUnsupportedVersion, `{"supported":["2025-11-25"]}`)
			}
			return 200, ""
		}, want: map[string]int{"tools/call": 2, "server/discover": 2, "initialize": 1}},
		{name: "a broken answer stream sends the request again", call: func(n int) (int, string) {
			if n == 1 {
				return 0, ""
			}
			return 200, ""
		}, want: map[string]int{"tools/call": 2}},
		{name: "404 with -32601 is the server's answer", call: func(int) (int, string) {
			return 404, refusal(codeMethodNotFound, `null`)
		}, wantErr: "tools/call: json-rpc error -32601", want: map[string]int{"tools/call": 1}},
		{name: "-32021 names the capabilities", call: func(int) (int, string) {
			return 400, refusal(codeMissingCapability, `{"requiredCapabilities":{"sampling":{},"elicitation":{}}}`)
		}, wantErr: "requires client capabilities harnessd does not offer (elicitation, sampling)", want: map[string]int{"tools/call": 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			discover := tt.discover
			if discover == nil {
				discover = func(int) (int, string) { return 200, discoverOK }
			}
			fake := newEraServer(t, discover, tt.call)
			c, err := connect(t.Context(), httpPeerConfig("fake", transportHTTP, fake.URL), clientOptions{})
			if err != nil {
				t.Fatalf("connect = %v", err)
			}
			t.Cleanup(func() { c.close() })
			if _, err := c.listTools(t.Context()); err != nil {
				t.Fatalf("listTools() = %v", err)
			}
			_, err = c.callTool(t.Context(), "lookup", json.RawMessage(`{"region":"eu"}`))
			if tt.wantErr == "" && err != nil {
				t.Errorf("callTool(lookup) = %v, want success", err)
			}
			if tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("callTool(lookup) = %v, want an error containing %q", err, tt.wantErr)
			}
			for method, want := range tt.want {
				if got := fake.count(method); got != want {
					t.Errorf("%s requests = %d, want %d (all: %v)", method, got, want, fake.methods())
				}
			}
			// An initialize never carries a revision header: the older
			// revisions send theirs only once it is negotiated.
			for _, r := range fake.requests() {
				if r.msg.Method == "initialize" && r.header.Get(headerProtocolVersion) != "" {
					t.Errorf("initialize carried %s: %q, want none", headerProtocolVersion, r.header.Get(headerProtocolVersion))
				}
			}
		})
	}
}

// TestSchemaReachesModelVerbatim follows a tool's input schema from a
// tools/list answer through the catalog into both providers' requests: it
// arrives as the server sent it (only compacted), with its network $ref,
// 2020-12 keywords and HTML-like characters untouched.
func TestSchemaReachesModelVerbatim(t *testing.T) {
	t.Parallel()
	schema := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object",
		"$defs":{"userId":{"$anchor":"uid","type":"string","pattern":"^[a-z<>&]+$"}},
		"properties":{"id":{"$ref":"#/$defs/userId"},"profile":{"$ref":"https://example.com/profile.json"},
		"kind":{"anyOf":[{"const":"a"},{"const":"b"}]}},
		"allOf":[{"if":{"required":["kind"]},"then":{"required":["id"]},"else":{}}],
		"additionalProperties":false,"unevaluatedProperties":false,"required":["id"]}`
	var page struct {
		Tools []toolInfo `json:"tools"`
	}
	if err := json.Unmarshal([]byte(`{"tools":[{"name":"lookup","inputSchema":`+schema+`}]}`), &page); err != nil {
		t.Fatal(err)
	}
	st, err := newServerTools("srv", page.Tools, nil, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	if err := json.Compact(&want, []byte(schema)); err != nil {
		t.Fatal(err)
	}
	req := modelRequest{Tools: []toolDef{{Name: st.entries[0].Name, InputSchema: st.entries[0].InputSchema}}}
	providers := []struct {
		name   string
		encode func(modelRequest, bool) ([]byte, error)
		schema func(body []byte) json.RawMessage
	}{
		{"openai", (&openaiProvider{modelEndpoint: &modelEndpoint{}}).encodeStream, func(body []byte) json.RawMessage {
			var r struct {
				Tools []struct {
					Function struct {
						Parameters json.RawMessage `json:"parameters"`
					} `json:"function"`
				} `json:"tools"`
			}
			json.Unmarshal(body, &r)
			return r.Tools[0].Function.Parameters
		}},
		{"anthropic", (&anthropicProvider{modelEndpoint: &modelEndpoint{}}).encodeStream, func(body []byte) json.RawMessage {
			var r struct {
				Tools []struct {
					InputSchema json.RawMessage `json:"input_schema"`
				} `json:"tools"`
			}
			json.Unmarshal(body, &r)
			return r.Tools[0].InputSchema
		}},
	}
	for _, p := range providers {
		body, err := p.encode(req, false)
		if err != nil {
			t.Fatalf("%s: encode = %v", p.name, err)
		}
		if got := p.schema(body); !bytes.Equal(got, want.Bytes()) {
			t.Errorf("%s: schema sent\n%s\nwant\n%s", p.name, got, want.Bytes())
		}
	}
}

func TestRequestMetaAttach(t *testing.T) {
	t.Parallel()
	m := (&conn{}).newRequestMeta(sessionlessProtocolVersion)
	meta := string(m.encoded)
	tests := []struct {
		name   string
		params any
		want   string // "" when attach fails
	}{
		{"nil", nil, `{"_meta":` + meta + `}`},
		{"empty object", json.RawMessage(`{}`), `{"_meta":` + meta + `}`},
		{"members kept after _meta", map[string]any{"name": "t", "arguments": map[string]any{"q": "<a&b>"}},
			`{"_meta":` + meta + `,"arguments":{"q":"<a&b>"},"name":"t"}`},
		{"_meta inside a value is data", json.RawMessage(`{"arguments":{"text":"\"_meta\""}}`),
			`{"_meta":` + meta + `,"arguments":{"text":"\"_meta\""}}`},
		{"own _meta first", json.RawMessage(`{"_meta":{"progressToken":7},"name":"t"}`),
			`{"_meta":` + meta[:len(meta)-1] + `,"progressToken":7},"name":"t"}`},
		{"own empty _meta first", json.RawMessage(`{"_meta":{},"name":"t"}`), `{"_meta":` + meta + `,"name":"t"}`},
		{"own _meta merged", json.RawMessage(`{"name":"t","_meta":{"progressToken":7}}`), ""},
		{"not an object", json.RawMessage(`[1]`), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.attach(tt.params)
			switch {
			case tt.name == "own _meta merged":
				var out struct {
					Meta map[string]json.RawMessage `json:"_meta"`
					Name string                     `json:"name"`
				}
				if err != nil || json.Unmarshal(got, &out) != nil || string(out.Meta["progressToken"]) != "7" ||
					string(out.Meta[metaProtocolVersion]) != `"2026-07-28"` || out.Name != "t" {
					t.Errorf("attach(%s) = %s, %v; want the progress token kept and the revision added", tt.params, got, err)
				}
			case tt.want == "":
				if err == nil {
					t.Errorf("attach(%s) = %s, want an error", tt.params, got)
				}
			case err != nil || string(got) != tt.want:
				t.Errorf("attach(%v) = %s, %v; want %s", tt.params, got, err, tt.want)
			}
		})
	}
}
