package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file tests run budgets: their configuration (price tables, the
// default budgets from TOML, the environment and flags, the request's
// fields) and runs stopped by each budget with the scripted model: tokens
// (sampling included) between steps, cost with a price table, and a
// duration that cancels a model call in flight.

// findToolCall is a step that calls the built-in find_tool, which needs
// no server.
func findToolCall() []toolCall { return calls(toolFindTool, `{"query":"anything"}`) }

func TestParsePrices(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		toml    string
		want    map[string]modelPrice
		wantErr string
	}{
		{name: "input and output", toml: "[model.prices.\"openai/gpt-4o\"]\ninput = 2.5\noutput = 10",
			want: map[string]modelPrice{"openai/gpt-4o": {Input: 2.5, Output: 10, CachedInput: 2.5}}},
		{name: "cached input", toml: "[model.prices.\"anthropic/claude-x\"]\ninput = 3\noutput = 15\ncached_input = 0.3",
			want: map[string]modelPrice{"anthropic/claude-x": {Input: 3, Output: 15, CachedInput: 0.3}}},
		{name: "missing output", toml: "[model.prices.\"openai/gpt-4o\"]\ninput = 2.5",
			wantErr: `config.toml: [model.prices."openai/gpt-4o"]: output: missing; set the model's price in USD per million tokens`},
		{name: "negative", toml: "[model.prices.\"openai/gpt-4o\"]\ninput = -1\noutput = 10",
			wantErr: `config.toml: [model.prices."openai/gpt-4o"]: input: -1 is not a price`},
		{name: "not a model name", toml: "[model.prices.gpt-4o]\ninput = 1\noutput = 1",
			wantErr: `config.toml: [model.prices."gpt-4o"]: model "gpt-4o": want provider/model`},
		{name: "unknown key", toml: "[model.prices.\"openai/gpt-4o\"]\ninput = 1\noutput = 1\ncache = 1",
			wantErr: `unknown key "model.prices.\"openai/gpt-4o\".cache"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layer, err := parseConfigTOML("config.toml", []byte(tt.toml+"\n"), fakeEnv(nil))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseConfigTOML(%q) = %v, want an error containing %q", tt.toml, err, tt.wantErr)
				}
				return
			}
			if err != nil || len(layer.model.Prices) != len(tt.want) {
				t.Fatalf("parseConfigTOML(%q) = %v, %v, want %v", tt.toml, layer.model.Prices, err, tt.want)
			}
			for k, v := range tt.want {
				if layer.model.Prices[k] != v {
					t.Errorf("prices[%s] = %+v, want %+v", k, layer.model.Prices[k], v)
				}
			}
		})
	}
}

func TestModelPriceCost(t *testing.T) {
	t.Parallel()
	p := modelPrice{Input: 2.5, Output: 10, CachedInput: 1.25}
	tests := []struct {
		usage modelUsage
		want  float64
	}{
		{modelUsage{InputTokens: 1_000_000}, 2.5},
		{modelUsage{OutputTokens: 100_000}, 1},
		{modelUsage{InputTokens: 1_000_000, CachedInputTokens: 400_000, OutputTokens: 1000}, 0.6*2.5 + 0.4*1.25 + 0.01},
	}
	for _, tt := range tests {
		if got := p.cost(tt.usage); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("cost(%+v) = %v, want %v", tt.usage, got, tt.want)
		}
	}
}

func TestBudgetDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		toml    string
		env     map[string]string
		flags   budgetSettings
		want    budgetLimits
		wantErr string
	}{
		{name: "none", want: budgetLimits{}},
		{name: "toml", toml: "max_run_tokens = 5000\nmax_run_cost_usd = 2\nmax_run_duration = \"10m\"\n",
			want: budgetLimits{Tokens: 5000, CostUSD: 2, Duration: 10 * time.Minute}},
		{name: "env overrides toml", toml: "max_run_tokens = 5000\nmax_run_duration = \"10m\"\n",
			env:  map[string]string{"HARNESS_MAX_RUN_TOKENS": "7000", "HARNESS_MAX_RUN_COST_USD": "0.25"},
			want: budgetLimits{Tokens: 7000, CostUSD: 0.25, Duration: 10 * time.Minute}},
		{name: "flag overrides env", env: map[string]string{"HARNESS_MAX_RUN_DURATION": "1h"},
			flags: budgetSettings{duration: settingValue{value: "90s", source: "--max-run-duration"}},
			want:  budgetLimits{Duration: 90 * time.Second}},
		{name: "bad duration in toml", toml: "max_run_duration = \"soon\"\n",
			wantErr: `config.toml: max_run_duration: "soon" is not a duration; give one like 10m`},
		{name: "negative tokens in env", env: map[string]string{"HARNESS_MAX_RUN_TOKENS": "-1"},
			wantErr: `HARNESS_MAX_RUN_TOKENS: "-1" is not a number of tokens`},
		{name: "bad cost flag", flags: budgetSettings{cost: settingValue{value: "lots", source: "--max-run-cost-usd"}},
			wantErr: `--max-run-cost-usd: "lots" is not an amount of USD`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home, _ := configDirs(t, tt.toml, "")
			cfg, err := loadConfig(loadOptions{Home: home, Getenv: fakeEnv(tt.env)})
			if err == nil {
				serveFlags{budgets: tt.flags}.overlay(cfg)
				var limits budgetLimits
				limits, err = cfg.Budgets.limits()
				if err == nil && limits != tt.want {
					t.Errorf("budgets = %+v, want %+v", limits, tt.want)
				}
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("budgets: %v, want none", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("budgets: error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestBudgetRequestFields(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI), nil)
	at.runs.setBudgets(budgetLimits{}, map[string]modelPrice{"openai/gpt-4o": {Input: 2.5, Output: 10, CachedInput: 2.5}})
	tests := []struct{ body, want string }{
		{`{"prompt":"x","max_tokens":-5}`, `max_tokens: -5 is negative`},
		{`{"prompt":"x","max_cost_usd":-1}`, `max_cost_usd: -1 is not an amount`},
		{`{"prompt":"x","max_duration":"soon"}`, `max_duration: \"soon\" is not a positive duration: give one like \"10m\"`},
		{`{"prompt":"x","max_duration":"-1s"}`, `max_duration: \"-1s\" is not a positive duration`},
		{`{"prompt":"x","max_cost_usd":0.5}`, `max_cost_usd: model \"openai/fake-model\" has no price, so its cost is unknown: add [model.prices.\"openai/fake-model\"] with input and output`},
	}
	for _, tt := range tests {
		resp, data := at.do(t, http.MethodPost, "/v1/runs", "", tt.body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), tt.want) {
			t.Errorf("POST /v1/runs %s = %d %s, want 400 containing %s", tt.body, resp.StatusCode, data, tt.want)
		}
	}
	at.runs.setBudgets(budgetLimits{CostUSD: 1}, nil)
	resp, data := at.do(t, http.MethodPost, "/v1/runs", "", `{"prompt":"x"}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(data), "max_cost_usd (from max_run_cost_usd)") {
		t.Errorf("POST /v1/runs under a default cost budget, model unpriced = %d %s, want 400 naming max_run_cost_usd", resp.StatusCode, data)
	}
}

// requireBudgetStop checks that r failed past budget with an error naming
// it and wants, after a budget.exceeded event, and that /metrics counts it.
func requireBudgetStop(t *testing.T, at *apiTest, r *run, budget string, wants ...string) runView {
	t.Helper()
	v := waitRun(t, r)
	if v.Status != runFailed || !strings.Contains(v.Error, "budget "+budget+" exceeded") {
		t.Fatalf("run = %s (%q), want failed past %s", v.Status, v.Error, budget)
	}
	for _, want := range wants {
		if !strings.Contains(v.Error, want) {
			t.Errorf("error = %q, want it to contain %q", v.Error, want)
		}
	}
	types := eventTypes(r)
	if n := len(types); n < 2 || types[n-2] != evBudgetExceeded || types[n-1] != "run.failed" {
		t.Errorf("events = %v, want budget.exceeded then run.failed last", types)
	}
	if d := eventData(r, evBudgetExceeded); len(d) != 1 || d[0]["budget"] != budget {
		t.Errorf("budget.exceeded events = %v, want one for %s", d, budget)
	}
	metrics := string(getOK(t, at, "/metrics"))
	if want := `harnessd_run_budget_stops_total{budget="` + budget + `"} 1`; !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	return v
}

func TestBudgetTokensStopBetweenStepsCountingSampling(t *testing.T) {
	t.Parallel()
	const samplingTool = "mcp_everything_trigger_sampling_request"
	cfg := stdioPeerConfig("everything", everythingStdioCommand(t))
	cfg.Sampling = true
	at := newAPITest(t, newFakeModel(t, providerOpenAI,
		fakeTurn{ToolCalls: calls(samplingTool, `{"prompt":"hi"}`), Usage: modelUsage{InputTokens: 10, OutputTokens: 5}},
		// The server's sampling request, served by the run's model: it
		// takes the run past its 100 tokens, so there is no step 2.
		fakeTurn{Text: "sampled", Usage: modelUsage{InputTokens: 70, OutputTokens: 20}},
	), nil, cfg)
	r := at.startRun(t, `{"prompt":"sample","max_tokens":100}`)
	v := requireBudgetStop(t, at, r, budgetTokens, "used 105 tokens", "limit is 100")
	if v.Steps != 1 || v.ToolCalls != 1 {
		t.Errorf("steps, tool calls = %d, %d; want the run stopped after step 1 and its call", v.Steps, v.ToolCalls)
	}
	if d := eventData(r, evBudgetExceeded)[0]; d["limit"] != float64(100) && d["limit"] != int64(100) {
		t.Errorf("budget.exceeded = %v, want limit 100", d)
	}
}

func TestBudgetCostWithPriceTable(t *testing.T) {
	t.Parallel()
	// 100k input and 10k output tokens at 2.5 and 10 USD per million:
	// 0.35 USD a step.
	step := fakeTurn{ToolCalls: findToolCall(), Usage: modelUsage{InputTokens: 100_000, OutputTokens: 10_000}}
	at := newAPITest(t, newFakeModel(t, providerOpenAI, step, step), nil)
	at.runs.setBudgets(budgetLimits{}, map[string]modelPrice{"openai/fake-model": {Input: 2.5, Output: 10, CachedInput: 2.5}})
	r := at.startRun(t, `{"prompt":"spend","max_cost_usd":0.5}`)
	v := requireBudgetStop(t, at, r, budgetCostUSD, "cost 0.7 USD", "limit is 0.5 USD")
	if v.Steps != 2 || v.Usage.CostUSD != 0.7 {
		t.Errorf("steps %d, usage %+v; want 2 steps costing 0.7 USD", v.Steps, v.Usage)
	}
	var raw struct {
		Usage map[string]any `json:"usage"`
	}
	if err := json.Unmarshal(getOK(t, at, "/v1/runs/"+r.id), &raw); err != nil || raw.Usage["cost_usd"] != 0.7 {
		t.Errorf("GET run usage = %v (%v), want cost_usd 0.7", raw.Usage, err)
	}
	if responses := eventData(r, evModelResponse); len(responses) != 2 {
		t.Errorf("model.response events = %v, want two", responses)
	}
}

func TestBudgetDurationCancelsModelCall(t *testing.T) {
	t.Parallel()
	at := newAPITest(t, newFakeModel(t, providerOpenAI, fakeTurn{Hang: true}), nil)
	r := at.startRun(t, `{"prompt":"think slowly","max_duration":"300ms"}`)
	v := requireBudgetStop(t, at, r, budgetDuration, "limit is 300ms")
	if d := eventData(r, evBudgetExceeded); len(d) != 1 || d[0]["limit"] != "300ms" {
		t.Errorf("budget.exceeded = %v, want limit 300ms", d)
	}
	if took := v.EndedAt.Sub(*v.StartedAt); took > 20*time.Second {
		t.Errorf("the run took %s, want it stopped near its 300ms", took)
	}
}

func TestBudgetsReload(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	write := func(config string) {
		t.Helper()
		writeFile(t, home, "config.toml", config)
	}
	write("max_run_tokens = 1000\n")
	load := loadOptions{Home: home, Getenv: fakeEnv(nil)}
	cfg, _, err := checkConfig(load)
	if err != nil {
		t.Fatal(err)
	}
	reg := startRegistry(t, cfg.Servers, registryOptions{})
	opts := runOptionsOver(t, reg, newFakeModel(t, providerOpenAI), home, nil)
	opts.Budgets, _ = cfg.Budgets.limits()
	runs := newRunsWith(t, opts)
	rl := &daemon{load: load, started: cfg, reg: reg, api: newAPI(runs, reg, nil, runs.opts.Metrics, nil, nil), runs: runs,
		metrics: runs.opts.Metrics, secrets: newLiveRedactor(nil), logger: discardLogger(),
		opts: serveOptions{addr: "127.0.0.1:8080", flags: serveFlags{budgets: budgetSettings{duration: settingValue{value: "2m", source: "--max-run-duration"}}}}}

	write("max_run_tokens = 5000\nmax_run_cost_usd = 1.5\n\n[model.prices.\"openai/fake-model\"]\ninput = 1\noutput = 2\n")
	if err := rl.reload(); err != nil {
		t.Fatalf("reload() = %v", err)
	}
	budgets, prices := runs.budgets()
	if want := (budgetLimits{Tokens: 5000, CostUSD: 1.5, Duration: 2 * time.Minute}); budgets != want {
		t.Errorf("default budgets after the reload = %+v, want %+v (the flag still winning)", budgets, want)
	}
	if prices["openai/fake-model"] != (modelPrice{Input: 1, Output: 2, CachedInput: 1}) {
		t.Errorf("prices after the reload = %v, want openai/fake-model priced", prices)
	}

	write("max_run_tokens = -3\n")
	if err := rl.reload(); err == nil || !strings.Contains(err.Error(), "max_run_tokens") {
		t.Errorf("reload(max_run_tokens -3) = %v, want it refused naming max_run_tokens", err)
	}
	if after, _ := runs.budgets(); after != budgets {
		t.Errorf("default budgets after a refused reload = %+v, want %+v kept", after, budgets)
	}
}

// TestRunBudgetReserve holds, settles and releases model calls against a
// run's budgets: what a call may use is cut to what is left after what
// was spent and what calls under way hold, a call with no room is refused
// with the budget's error, a settle counts the real use and frees the
// rest, a release frees all, and only the first of the two acts.
func TestRunBudgetReserve(t *testing.T) {
	t.Parallel()
	prices := map[string]modelPrice{"openai/m": {Input: 1, Output: 100, CachedInput: 1}}
	// An op acts on the budget: reserve (a sampling request) and step (a
	// run's own call) add a hold; settle and release end hold number n.
	type op struct {
		action           string
		n                int
		input, maxOutput int
		usage            modelUsage
		wantOut          int
		wantErr          string
	}
	tests := []struct {
		name             string
		limits           budgetLimits
		model            string
		ops              []op
		wantTokens, held int64
		wantCost         float64
	}{
		{name: "tokens cut to what is left", limits: budgetLimits{Tokens: 1000}, ops: []op{
			{action: "reserve", input: 100, maxOutput: 500, wantOut: 500},
			{action: "reserve", input: 100, maxOutput: 500, wantOut: 300},
			{action: "reserve", input: 100, maxOutput: 500, wantErr: "budget max_tokens exceeded: the run used 0 tokens and model calls under way hold 1000 tokens more, which leaves no room for a call of about 100 tokens of input and its answer, its limit is 1000 tokens"},
			{action: "release", n: 0},
			{action: "reserve", input: 100, maxOutput: 500, wantOut: 500},
		}, held: 1000},
		{name: "settle counts the real use and frees the rest", limits: budgetLimits{Tokens: 1000}, ops: []op{
			{action: "reserve", input: 100, maxOutput: 800, wantOut: 800},
			{action: "settle", n: 0, usage: modelUsage{InputTokens: 40, OutputTokens: 60}},
			{action: "reserve", input: 100, maxOutput: 1000, wantOut: 800},
		}, wantTokens: 100, wantCost: 0.00604, held: 900},
		{name: "cost cut to what is left", limits: budgetLimits{CostUSD: 0.5}, ops: []op{
			{action: "reserve", maxOutput: 4000, wantOut: 4000},
			{action: "reserve", maxOutput: 4000, wantOut: 1000},
			{action: "reserve", maxOutput: 10, wantErr: "budget max_cost_usd exceeded: the run cost 0 USD and model calls under way hold 0.5 USD more, its limit is 0.5 USD; raise max_cost_usd to allow more"},
			{action: "settle", n: 0, usage: modelUsage{OutputTokens: 2000}},
			{action: "reserve", maxOutput: 4000, wantOut: 2000},
		}, wantTokens: 2000, wantCost: 0.2, held: 3000},
		{name: "the input is priced", limits: budgetLimits{CostUSD: 0.01}, ops: []op{
			{action: "reserve", input: 10_000, maxOutput: 10, wantErr: "a call of about 0.01 USD of input"},
			{action: "reserve", input: 5_000, maxOutput: 100, wantOut: 50},
		}, held: 5050},
		{name: "an unpriced model under a cost budget", limits: budgetLimits{CostUSD: 1}, model: "openai/other", ops: []op{
			{action: "reserve", maxOutput: 10, wantErr: `model "openai/other" has no price and the run has a cost budget`},
		}},
		{name: "a settle after a release counts nothing", limits: budgetLimits{Tokens: 1000}, ops: []op{
			{action: "reserve", input: 10, maxOutput: 10, wantOut: 10},
			{action: "release", n: 0},
			{action: "settle", n: 0, usage: modelUsage{InputTokens: 500}},
			{action: "release", n: 0},
		}},
		{name: "a step is held and refused once the budget is held", limits: budgetLimits{Tokens: 1000}, ops: []op{
			{action: "step", input: 100, maxOutput: 400},
			{action: "reserve", input: 100, maxOutput: 1000, wantOut: 400},
			{action: "step", input: 1, wantErr: "budget max_tokens exceeded: the run used 0 tokens and model calls under way hold 1000 tokens more, its limit is 1000 tokens"},
			{action: "settle", n: 0, usage: modelUsage{InputTokens: 90, OutputTokens: 10}},
			{action: "step", input: 1},
		}, wantTokens: 100, wantCost: 0.00109, held: 501},
		{name: "no limit refuses nothing", ops: []op{
			{action: "reserve", input: 1e6, maxOutput: 1e6, wantOut: 1e6},
			{action: "step", input: 1e6, maxOutput: 1e6},
			{action: "settle", n: 0, usage: modelUsage{InputTokens: 5}},
		}, wantTokens: 5, wantCost: 0.000005, held: 2e6},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			model := cmp.Or(tt.model, "openai/m")
			b := &runBudget{limits: tt.limits, prices: prices}
			var holds []*budgetHold
			for i, o := range tt.ops {
				var (
					out  = -1
					hold *budgetHold
					err  error
				)
				switch o.action {
				case "reserve":
					out, hold, err = b.reserve(model, o.input, o.maxOutput)
				case "step":
					hold, err = b.holdStep(model, o.input, o.maxOutput)
				case "settle":
					holds[o.n].settle(o.usage)
				case "release":
					holds[o.n].release()
				}
				if hold != nil {
					holds = append(holds, hold)
				}
				switch {
				case o.wantErr != "":
					if err == nil || !strings.Contains(err.Error(), o.wantErr) {
						t.Errorf("op %d %s(%d, %d) = %v, want an error containing %q", i, o.action, o.input, o.maxOutput, err, o.wantErr)
					}
				case err != nil:
					t.Errorf("op %d %s(%d, %d) = %v", i, o.action, o.input, o.maxOutput, err)
				case o.action == "reserve" && out != o.wantOut:
					t.Errorf("op %d reserve(%d, %d) = %d output tokens, want %d", i, o.input, o.maxOutput, out, o.wantOut)
				}
			}
			b.mu.Lock()
			defer b.mu.Unlock()
			if b.tokens != tt.wantTokens || b.heldTokens != tt.held || roundUSD(b.cost) != tt.wantCost {
				t.Errorf("spent %d tokens and %v USD, held %d tokens; want %d, %v and %d", b.tokens, roundUSD(b.cost), b.heldTokens, tt.wantTokens, tt.wantCost, tt.held)
			}
		})
	}
}

// TestRunBudgetReserveConcurrent has 50 goroutines reserve at once calls
// of up to 0.1 USD under a budget of 0.5 USD: exactly 5 are held, and
// once all are released nothing is held or spent.
func TestRunBudgetReserveConcurrent(t *testing.T) {
	t.Parallel()
	b := &runBudget{limits: budgetLimits{CostUSD: 0.5}, prices: map[string]modelPrice{"openai/m": {Output: 100}}}
	const callers = 50
	holds := make(chan *budgetHold, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		// Owned by the test; ends after one reserve.
		go func() {
			defer wg.Done()
			if out, hold, err := b.reserve("openai/m", 0, 1000); err == nil {
				if out != 1000 {
					t.Errorf("reserve = %d output tokens, want the whole 1000 or a refusal", out)
				}
				holds <- hold
			}
		}()
	}
	wg.Wait()
	close(holds)
	n := 0
	for h := range holds {
		n++
		h.release()
		h.release()
	}
	if n != 5 {
		t.Errorf("%d of %d concurrent calls of 0.1 USD were held under 0.5 USD, want 5", n, callers)
	}
	if b.heldCost != 0 || b.heldTokens != 0 || b.cost != 0 {
		t.Errorf("after the releases: held %v USD and %d tokens, spent %v USD; want nothing", b.heldCost, b.heldTokens, b.cost)
	}
}

// TestBudgetConcurrentSampling has one tool call whose stdio server sends
// 15 sampling requests at once, each for up to 1000 output tokens at 100
// USD per million (0.1 USD at worst), under max_cost_usd 0.5: five are
// served, the others refused with the budget's error, the run spends no
// more than its budget and stops at its next step.
func TestBudgetConcurrentSampling(t *testing.T) {
	t.Parallel()
	const sent, fit = 15, 5
	// The model answers with all the output it was allowed.
	sampled := fakeTurn{Reply: func(req fakeRequest) fakeTurn {
		return fakeTurn{Text: "sampled", Usage: modelUsage{InputTokens: 3, OutputTokens: req.MaxTokens}}
	}}
	script := append([]fakeTurn{{ToolCalls: calls("mcp_fake_burst", fmt.Sprintf(`{"size":%d}`, sent))}}, slices.Repeat([]fakeTurn{sampled}, fit)...)
	cfg := fakeServerConfig(t, "sampler")
	cfg.Sampling = true
	at := newAPITest(t, newFakeModel(t, providerOpenAI, script...), nil, cfg)
	at.runs.setBudgets(budgetLimits{}, map[string]modelPrice{"openai/fake-model": {Input: 0, Output: 100}})
	r := at.startRun(t, `{"prompt":"sample at once","max_cost_usd":0.5}`)
	v := requireBudgetStop(t, at, r, budgetCostUSD, "cost 0.5 USD", "limit is 0.5 USD")
	if v.Usage.CostUSD > 0.5 || v.Usage.OutputTokens != fit*burstMaxTokens {
		t.Errorf("usage = %+v, want %d output tokens costing 0.5 USD at most", v.Usage, fit*burstMaxTokens)
	}
	completed := eventData(r, evToolCallCompleted)
	if len(completed) != 1 {
		t.Fatalf("tool.call.completed events = %v, want one", completed)
	}
	result, _ := completed[0]["result"].(string)
	if want := fmt.Sprintf("served=%d refused=%d\n", fit, sent-fit); !strings.HasPrefix(result, want) {
		t.Errorf("the server saw %q, want it to begin %q", result, want)
	}
	for _, reason := range strings.Split(result, "\n")[1:] {
		if !strings.HasPrefix(reason, "sampling refused by harnessd: budget max_cost_usd exceeded: the run cost") || !strings.Contains(reason, "raise max_cost_usd to allow more") {
			t.Errorf("refusal %q, want the budget's error saying what to raise", reason)
		}
	}
	if refused := eventData(r, evSamplingRefused); len(refused) != sent-fit {
		t.Errorf("sampling.refused events = %d, want %d", len(refused), sent-fit)
	}
	r.budget.mu.Lock()
	defer r.budget.mu.Unlock()
	if r.budget.heldTokens != 0 || r.budget.heldCost != 0 || roundUSD(r.budget.cost) != 0.5 {
		t.Errorf("after the run: %d tokens and %v USD held, %v USD spent; want nothing held and 0.5 USD spent", r.budget.heldTokens, r.budget.heldCost, r.budget.cost)
	}
}

// TestSamplingHoldReleased serves a sampling request whose model call
// fails or is cancelled: what it held against the run's budget, its
// sampling caps and the outside budget is freed, and nothing is spent.
func TestSamplingHoldReleased(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		turn   fakeTurn
		cancel bool
	}{
		{name: "the model refuses", turn: fakeTurn{Status: http.StatusBadRequest, Text: "bad request"}},
		{name: "the call is cancelled", turn: fakeTurn{Hang: true}, cancel: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			turn := tt.turn
			if tt.cancel {
				// Cancelled once the model has the request.
				turn.Check = func(fakeRequest) error { cancel(); return nil }
			}
			f := newFakeModel(t, providerOpenAI, turn)
			runBudget := &runBudget{limits: budgetLimits{Tokens: 10_000, CostUSD: 1}, prices: map[string]modelPrice{"openai/fake-model": {Input: 1, Output: 10}}}
			caps := newSamplingBudget(5, 5_000)
			outside := newOutsideSamplingBudget(5, 5_000)
			policy := &inputPolicy{Sampler: &samplingModel{Provider: f.provider(t), Spec: f.spec(), Budget: caps, RunBudget: runBudget},
				Outside: outside, Logger: slog.New(slog.DiscardHandler)}
			_, rpcErr := policy.sample(ctx, serverConfig{Name: "s", Sampling: true}, json.RawMessage(`{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":100}`))
			if rpcErr == nil {
				t.Fatal("sample succeeded, want the model's failure")
			}
			runBudget.mu.Lock()
			defer runBudget.mu.Unlock()
			caps.mu.Lock()
			defer caps.mu.Unlock()
			outside.mu.Lock()
			defer outside.mu.Unlock()
			if runBudget.heldTokens != 0 || runBudget.heldCost != 0 || runBudget.tokens != 0 || caps.held != 0 || caps.tokens != 0 || outside.servers["s"].held != 0 {
				t.Errorf("after %s: run budget held %d tokens and %v USD, spent %d; caps held %d, spent %d; outside held %d; want nothing",
					tt.name, runBudget.heldTokens, runBudget.heldCost, runBudget.tokens, caps.held, caps.tokens, outside.servers["s"].held)
			}
		})
	}
}
