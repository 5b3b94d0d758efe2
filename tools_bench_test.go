package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"
)

// Vocabulary of the synthetic catalog: real-looking services, objects and
// verbs, so tokens repeat across servers as they do in practice.
var (
	synthServices = []string{"github", "gitlab", "jira", "slack", "postgres", "mysql", "s3", "gcs", "kubernetes", "docker",
		"stripe", "salesforce", "notion", "confluence", "linear", "sentry", "datadog", "pagerduty", "zendesk", "hubspot",
		"twilio", "sendgrid", "bigquery", "snowflake", "redis", "elastic", "mongo", "figma", "asana", "trello"}
	synthObjects = []string{"issue", "pull_request", "comment", "repository", "branch", "commit", "user", "team", "project",
		"channel", "message", "table", "query", "bucket", "object", "pod", "deployment", "invoice", "customer", "ticket",
		"page", "database", "alert", "incident", "dashboard", "file", "label", "webhook", "release", "secret"}
	synthVerbs = []string{"list", "get", "create", "update", "delete", "search", "archive", "export"}
)

// syntheticServers returns n tools spread over servers of at most 240
// tools each, named and described like real integrations.
func syntheticServers(tb testing.TB, n int) []*serverTools {
	tb.Helper()
	var out []*serverTools
	for s := 0; n > 0; s++ {
		server := synthServices[s%len(synthServices)]
		if s >= len(synthServices) {
			server = fmt.Sprintf("%s-%d", server, s/len(synthServices))
		}
		count := min(n, len(synthObjects)*len(synthVerbs))
		tools := make([]toolInfo, count)
		for i := range tools {
			verb, object := synthVerbs[i%len(synthVerbs)], synthObjects[i/len(synthVerbs)]
			tools[i] = toolInfo{
				Name: verb + "_" + object,
				Description: fmt.Sprintf("%s a %s in %s. Returns the %s as JSON with its id, name, owner and timestamps; fails when the caller lacks permission.",
					verb, object, synthServices[s%len(synthServices)], object),
				InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}}}`),
			}
		}
		st, err := newServerTools(server, tools, nil, nil, false)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, st)
		n -= count
	}
	return out
}

var benchQueries = []string{
	"read a file", "create a github issue", "list slack channels", "search jira tickets assigned to me",
	"delete a kubernetes pod", "export the invoices of a customer", "query the database", "knowledge graph",
	"get the deployment status", "archive old messages", "select:mcp_github_get_issue,mcp_slack_list_channel",
}

// BenchmarkFindTool runs find_tool over 10,000 tools and reports the 99th
// percentile of one call's latency.
func BenchmarkFindTool(b *testing.B) {
	c := newCatalog(staticGlobal(syntheticServers(b, 10000)...))
	args := make([]json.RawMessage, len(benchQueries))
	for i, q := range benchQueries {
		args[i], _ = json.Marshal(map[string]string{"query": q})
	}
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		if _, err := c.findTool(args[i%len(args)]); err != nil {
			b.Fatal(err)
		}
		durations = append(durations, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(durations)
	b.ReportMetric(float64(durations[len(durations)*99/100].Microseconds()), "p99-µs")
}

// BenchmarkOffered measures building one model request's tool list with
// 10,000 reachable tools and 20 activated.
func BenchmarkOffered(b *testing.B) {
	sets := syntheticServers(b, 10000)
	c := newCatalog(staticGlobal(sets...))
	for _, e := range sets[0].entries[:20] {
		c.activate(e.Name)
	}
	b.ReportAllocs()
	for b.Loop() {
		if got := c.offered(); len(got) != 21 {
			b.Fatalf("offered() = %d tools, want 21", len(got))
		}
	}
	b.ReportMetric(float64(firstRequestBytes(b, newCatalog(staticGlobal(syntheticServers(b, 200)...)))), "first-request-bytes-200")
	b.ReportMetric(float64(firstRequestBytes(b, newCatalog(staticGlobal(sets...)))), "first-request-bytes-10000")
}

// BenchmarkNewServerTools measures building one server's snapshot and
// index (what a tools/list_changed costs).
func BenchmarkNewServerTools(b *testing.B) {
	tools := make([]toolInfo, 0, 240)
	for _, e := range syntheticServers(b, 240)[0].entries {
		tools = append(tools, toolInfo{Name: e.ServerTool, Description: e.Description, InputSchema: e.InputSchema})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := newServerTools("github", tools, nil, nil, false); err != nil {
			b.Fatal(err)
		}
	}
}
