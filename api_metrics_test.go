package main

import (
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file tests /metrics: the tool call counters and the exposition
// format, read back by a strict parser.

func TestAPIMetricsCountToolCalls(t *testing.T) {
	t.Parallel()
	f := newFakeModel(t, "openai",
		fakeTurn{ToolCalls: []toolCall{call("mcp_fake_echo", `{"message":"hi"}`), call("mcp_fake_fail", `{}`), call("find_tool", `{"query":"echo"}`)}},
		fakeTurn{Text: "done"},
	)
	at := newAPITest(t, f, nil, fakeServerConfig(t, "normal"))
	waitRun(t, at.startRun(t, `{"prompt":"call things"}`))
	resp, data := at.do(t, http.MethodGet, "/metrics", "", "")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, data)
	}
	samples, err := parseMetrics(string(data))
	if err != nil {
		t.Fatalf("GET /metrics: %v\n%s", err, data)
	}
	for series, want := range map[string]float64{
		`harnessd_mcp_server_up{server="fake"}`:                                  1,
		`harnessd_mcp_server_tools{server="fake"}`:                               4,
		`harnessd_tool_calls_total{server="fake",outcome="ok"}`:                  1,
		`harnessd_tool_calls_total{server="fake",outcome="error"}`:               1,
		`harnessd_tool_calls_total{server="builtin",outcome="ok"}`:               1,
		`harnessd_tool_call_duration_seconds_count{server="fake"}`:               2,
		`harnessd_tool_call_duration_seconds_bucket{server="fake",le="+Inf"}`:    2,
		`harnessd_tool_call_duration_seconds_bucket{server="builtin",le="+Inf"}`: 1,
		`harnessd_runs_started_total`:                                            1,
		`harnessd_runs_total{status="completed"}`:                                1,
		`harnessd_runs_total{status="failed"}`:                                   0,
		`harnessd_runs_active`:                                                   0,
	} {
		if got, ok := samples[series]; !ok || got != want {
			t.Errorf("metric %s = %v (present %v), want %v", series, got, ok, want)
		}
	}
}

// metricSample matches one sample line of the Prometheus text format.
var metricSample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$`)

// metricLabel matches one label pair at the start of a label list.
var metricLabel = regexp.MustCompile(`^([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"(,|$)`)

// parseMetrics checks text against the Prometheus text exposition format
// (HELP and TYPE before a family's samples, label syntax, values, no
// duplicate series, cumulative histograms whose +Inf bucket is the count)
// and returns the samples by their series as written.
func parseMetrics(text string) (map[string]float64, error) {
	samples := map[string]float64{}
	types := map[string]string{}
	if !strings.HasSuffix(text, "\n") {
		return nil, errors.New("metrics: no final newline")
	}
	// By the _count series of a histogram: its last bucket, its +Inf bucket.
	lastBucket, infBuckets := map[string]float64{}, map[string]float64{}
	for i, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		bad := func(format string, args ...any) error {
			return fmt.Errorf("metrics line %d %q: %s", i+1, line, fmt.Sprintf(format, args...))
		}
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			kind, rest, _ := strings.Cut(rest, " ")
			name, value, _ := strings.Cut(rest, " ")
			switch kind {
			case "HELP":
				if name == "" || value == "" {
					return nil, bad("HELP without name or text")
				}
			case "TYPE":
				if !slices.Contains([]string{"counter", "gauge", "histogram", "summary", "untyped"}, value) {
					return nil, bad("unknown type %q", value)
				}
				if _, dup := types[name]; dup {
					return nil, bad("second TYPE for %s", name)
				}
				types[name] = value
			default:
				return nil, bad("unknown comment")
			}
			continue
		}
		m := metricSample.FindStringSubmatch(line)
		if m == nil {
			return nil, bad("not a sample")
		}
		name, labels := m[1], strings.Trim(m[2], "{}")
		value, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			return nil, bad("value: %v", err)
		}
		family := name
		if types[name] == "" {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && types[base] == "histogram" {
					family = base
				}
			}
		}
		if types[family] == "" {
			return nil, bad("no TYPE before the samples of %s", family)
		}
		var le string
		var others []string
		for labels != "" {
			lm := metricLabel.FindStringSubmatch(labels)
			if lm == nil {
				return nil, bad("bad labels at %q", labels)
			}
			if lm[1] == "le" {
				le = lm[2]
			} else {
				others = append(others, lm[0])
			}
			labels = labels[len(lm[0]):]
		}
		series := name + m[2]
		if _, dup := samples[series]; dup {
			return nil, bad("duplicate series")
		}
		samples[series] = value
		if family != name && strings.HasSuffix(name, "_bucket") {
			if le == "" {
				return nil, bad("bucket without le")
			}
			count := family + "_count"
			if len(others) > 0 {
				count += "{" + strings.TrimSuffix(strings.Join(others, ""), ",") + "}"
			}
			if value < lastBucket[count] {
				return nil, bad("buckets are not cumulative")
			}
			lastBucket[count] = value
			if le == "+Inf" {
				infBuckets[count] = value
			}
		}
	}
	for count, inf := range infBuckets {
		if got, ok := samples[count]; !ok || got != inf {
			return nil, fmt.Errorf("metrics: %s = %v (present %v), want the +Inf bucket %v", count, got, ok, inf)
		}
	}
	return samples, nil
}

func TestParseMetricsRejectsBadText(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, text string }{
		{"no type", "a 1\n"},
		{"bad value", "# TYPE a gauge\na one\n"},
		{"bad label", "# TYPE a gauge\na{x=1} 1\n"},
		{"unterminated label", "# TYPE a gauge\na{x=\"1} 1\n"},
		{"duplicate", "# TYPE a gauge\na 1\na 2\n"},
		{"two types", "# TYPE a gauge\n# TYPE a counter\na 1\n"},
		{"not cumulative", "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n"},
		{"count differs", "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 2\n"},
		{"no final newline", "# TYPE a gauge\na 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseMetrics(tt.text); err == nil {
				t.Errorf("parseMetrics(%q) = nil error, want one", tt.text)
			}
		})
	}
	good := "# HELP h Latency.\n# TYPE h histogram\nh_bucket{s=\"a\\\"b\",le=\"1\"} 1\nh_bucket{s=\"a\\\"b\",le=\"+Inf\"} 2\nh_sum{s=\"a\\\"b\"} 3\nh_count{s=\"a\\\"b\"} 2\n"
	if _, err := parseMetrics(good); err != nil {
		t.Errorf("parseMetrics(%q) = %v, want nil", good, err)
	}
}
