package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

//lint:file-ignore SA1019 sampling and roots are deprecated in 2026-07-28 but still part of it; this peer exercises them on purpose.

// This file holds what -full adds to the echoserver: a resource, tools that
// ask the client for input (as input-required results to clients of
// revision 2026-07-28, which the SDK turns into server requests for older
// clients), tools that add tools and resources (so the server notifies list
// changes), a tool that counts the list and read requests the server
// answered, and the ttlMs and cacheScope hints of its lists and reads.
//
// The input tools:
//   - confirm {"action"}: asks, by elicitation, whether to go ahead with the
//     action; answers "confirmed ACTION", or "not confirmed: ACTION" and the
//     elicitation's action.
//   - ask_model {"question"}: asks the client's model (sampling); answers
//     with the model's text.
//   - list_roots: asks for the client's roots; answers their URIs, one a line.
//   - survey: two rounds, a name and then a colour, each an elicitation; the
//     second round's requestState carries the first answer.
//   - nag: asks for a confirmation on every call, accepted or not: a client
//     must give up after a bounded number of rounds.
//
// Every request state is checked on the retry: a state the server did not
// send, or none where one was sent, gets a tool error naming it.

// greetingURI is the resource every full server offers.
const greetingURI = "echo://greeting"

// A listCounter counts the list and read requests the server answered, by
// method. It is safe for concurrent use.
type listCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (c *listCounter) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[method]++
}

func (c *listCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.counts))
	for k, v := range c.counts {
		out[k] = v
	}
	return out
}

// newFullServer returns the echo server with everything -full adds. Lists
// and reads carry ttlMs = ttl; resources/read is private, the lists public.
func newFullServer(ttl time.Duration) *mcp.Server {
	counter := &listCounter{counts: map[string]int{}}
	server := newServer(&mcp.ServerOptions{
		SetCacheable: func(_ context.Context, req mcp.Request, c *mcp.Cacheable) {
			c.TTLMs = int(ttl.Milliseconds())
			c.CacheScope = "public"
			if _, ok := req.GetParams().(*mcp.ReadResourceParams); ok {
				c.CacheScope = "private"
			}
		},
	})
	server.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			switch method {
			case "server/discover", "tools/list", "resources/list", "resources/read", "prompts/list":
				counter.add(method)
			}
			return next(ctx, method, req)
		}
	})
	server.AddResource(&mcp.Resource{URI: greetingURI, Name: "greeting", MIMEType: "text/plain"}, textResource("hello from echoserver"))
	addInputTools(server)
	addListTools(server, counter)
	return server
}

// textResource returns a handler that reads text.
func textResource(text string) mcp.ResourceHandler {
	return func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "text/plain", Text: text}}}, nil
	}
}

func textResult(format string, args ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}
}

func errorResult(format string, args ...any) *mcp.CallToolResult {
	res := textResult(format, args...)
	res.IsError = true
	return res
}

// ask returns the input-required result of one question, key, carrying
// state (encoded so that the client cannot read it as anything but opaque).
func ask(key string, question mcp.InputRequest, state map[string]string) *mcp.CallToolResult {
	raw, _ := json.Marshal(state)
	return &mcp.CallToolResult{
		InputRequests: mcp.InputRequestMap{key: question},
		RequestState:  base64.RawURLEncoding.EncodeToString(raw),
	}
}

// stateOf decodes a request state ask encoded; ok is false for anything
// else, including none.
func stateOf(req *mcp.CallToolRequest) (map[string]string, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(req.Params.RequestState)
	if err != nil || req.Params.RequestState == "" {
		return nil, false
	}
	var state map[string]string
	if json.Unmarshal(raw, &state) != nil {
		return nil, false
	}
	return state, true
}

// elicitAnswer returns the elicitation answer under key, if the retry
// carries one.
func elicitAnswer(req *mcp.CallToolRequest, key string) (*mcp.ElicitResult, bool) {
	res, ok := req.Params.InputResponses[key].(*mcp.ElicitResult)
	return res, ok
}

func formQuestion(message, field, typ string) *mcp.ElicitParams {
	return &mcp.ElicitParams{
		Mode:    "form",
		Message: message,
		RequestedSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{field: map[string]any{"type": typ}},
			"required":   []string{field},
		},
	}
}

type confirmInput struct {
	Action string `json:"action" jsonschema:"what to confirm"`
}

type askModelInput struct {
	Question string `json:"question" jsonschema:"what to ask the client's model"`
}

type noInput struct{}

// addInputTools adds the tools that ask the client for input.
func addInputTools(server *mcp.Server) {
	mcp.AddTool(server, &mcp.Tool{Name: "confirm", Description: "Asks the user to confirm an action."},
		func(_ context.Context, req *mcp.CallToolRequest, in confirmInput) (*mcp.CallToolResult, any, error) {
			answer, answered := elicitAnswer(req, "confirm")
			if !answered {
				return ask("confirm", formQuestion("Go ahead with "+in.Action+"?", "confirmed", "boolean"), map[string]string{"action": in.Action}), nil, nil
			}
			state, ok := stateOf(req)
			if !ok || state["action"] != in.Action {
				return errorResult("confirm: requestState %q is not the one sent", req.Params.RequestState), nil, nil
			}
			if answer.Action == "accept" && answer.Content["confirmed"] == true {
				return textResult("confirmed %s", in.Action), nil, nil
			}
			return textResult("not confirmed: %s (%s)", in.Action, answer.Action), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "ask_model", Description: "Asks the client's model a question."},
		func(_ context.Context, req *mcp.CallToolRequest, in askModelInput) (*mcp.CallToolResult, any, error) {
			var text []string
			switch res := req.Params.InputResponses["answer"].(type) {
			case *mcp.CreateMessageResult:
				if t, ok := res.Content.(*mcp.TextContent); ok {
					text = append(text, t.Text)
				}
			case *mcp.CreateMessageWithToolsResult:
				for _, c := range res.Content {
					if t, ok := c.(*mcp.TextContent); ok {
						text = append(text, t.Text)
					}
				}
			default:
				question := &mcp.CreateMessageParams{
					Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Question}}},
					MaxTokens: 200,
				}
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"answer": question}}, nil, nil
			}
			return textResult("%s", strings.Join(text, "")), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "list_roots", Description: "Lists the client's roots."},
		func(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
			res, ok := req.Params.InputResponses["roots"].(*mcp.ListRootsResult)
			if !ok {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"roots": &mcp.ListRootsParams{}}}, nil, nil
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return textResult("%s", strings.Join(uris, "\n")), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "survey", Description: "Asks for a name, then for a colour."},
		func(_ context.Context, req *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
			state, hasState := stateOf(req)
			if colour, ok := elicitAnswer(req, "colour"); ok {
				if !hasState || state["name"] == "" {
					return errorResult("survey: requestState %q does not carry the name", req.Params.RequestState), nil, nil
				}
				return textResult("%s likes %v", state["name"], colour.Content["colour"]), nil, nil
			}
			if name, ok := elicitAnswer(req, "name"); ok && name.Action == "accept" {
				if !hasState || state["round"] != "1" {
					return errorResult("survey: requestState %q is not round 1's", req.Params.RequestState), nil, nil
				}
				return ask("colour", formQuestion("Your favourite colour?", "colour", "string"), map[string]string{"round": "2", "name": fmt.Sprint(name.Content["name"])}), nil, nil
			}
			return ask("name", formQuestion("Your name?", "name", "string"), map[string]string{"round": "1"}), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "nag", Description: "Asks for a confirmation on every call, forever."},
		func(_ context.Context, _ *mcp.CallToolRequest, _ noInput) (*mcp.CallToolResult, any, error) {
			return ask("again", formQuestion("Again?", "confirmed", "boolean"), map[string]string{"nag": "1"}), nil, nil
		})
}

type addToolInput struct {
	Name string `json:"name" jsonschema:"the new tool's name; it echoes its message"`
}

type addResourceInput struct {
	URI  string `json:"uri" jsonschema:"the new resource's URI"`
	Text string `json:"text" jsonschema:"its text"`
}

// addListTools adds the tools that change the server's lists, and stats.
func addListTools(server *mcp.Server, counter *listCounter) {
	mcp.AddTool(server, &mcp.Tool{Name: "add_tool", Description: "Adds a tool that echoes its message."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addToolInput) (*mcp.CallToolResult, any, error) {
			mcp.AddTool(server, &mcp.Tool{Name: in.Name, Description: "Returns the message it is given (added by add_tool)."},
				func(_ context.Context, _ *mcp.CallToolRequest, in echoInput) (*mcp.CallToolResult, any, error) {
					return textResult("%s", in.Message), nil, nil
				})
			return textResult("added tool %s", in.Name), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "add_resource", Description: "Adds a text resource."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addResourceInput) (*mcp.CallToolResult, any, error) {
			server.AddResource(&mcp.Resource{URI: in.URI, Name: in.URI, MIMEType: "text/plain"}, textResource(in.Text))
			return textResult("added resource %s", in.URI), nil, nil
		})
	mcp.AddTool(server, &mcp.Tool{Name: "stats", Description: "Counts the list and read requests answered, by method, as JSON."},
		func(context.Context, *mcp.CallToolRequest, noInput) (*mcp.CallToolResult, any, error) {
			raw, err := json.Marshal(counter.snapshot())
			if err != nil {
				return nil, nil, err
			}
			return textResult("%s", raw), nil, nil
		})
}
