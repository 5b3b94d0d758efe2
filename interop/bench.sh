#!/bin/sh
# bench.sh compares harnessd's MCP client with the official Go SDK client and
# with the floor client (interop/floor: one goroutine, a fixed request, no
# decoding beyond the id) on the same server, and reports harnessd's other
# performance figures against their targets, the run store's among them.
# The floor runs twice: with its
# fixed request, and making the same protocol requests as harnessd
# (floor-same: harnessd's capabilities, a progress token on every call, the
# stream harnessd holds open), so that harnessd/floor-same is the client's
# own overhead and floor-same/floor the server's work for what harnessd asks.
#
# Usage: interop/bench.sh [COUNT]   (COUNT runs of each benchmark, default 6)
#
# Both sides call echo({"message":"hello"}) on interop/cmd/echoserver (over
# stdio at the revision negotiated, 2026-07-28, and pinned at 2025-11-25;
# over its stateful HTTP handler, at 2025-11-25, and its stateless one, at
# 2026-07-28), or on
# HARNESS_BENCH_STDIO_SERVER (a command line) and HARNESS_BENCH_HTTP_URL (a
# Streamable HTTP endpoint) when set. The rounds of the two sides alternate,
# so a change in the machine's load weighs on both alike. benchstat comes
# from the Go module proxy into a temporary GOBIN. Not part of CI: a full run
# takes several minutes.
set -eu

count=${1:-${BENCH_COUNT:-6}}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/harnessd-bench-XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM

echo "building benchstat and the test binaries..." >&2
GOBIN="$work/bin" go install golang.org/x/perf/cmd/benchstat@latest
benchstat="$work/bin/benchstat"
(cd "$root" && go test -c -o "$work/harnessd.test" .)
(cd "$root/interop" && go test -c -o "$work/sdk.test" .)

calls='^Benchmark(StdioToolCall|StdioToolCall2025|HTTPToolCall|HTTPStatelessToolCall)$'
floors='^BenchmarkFloor(StdioToolCall|StdioToolCall2025|HTTPToolCall|HTTPStatelessToolCall)$'
sames='^BenchmarkFloorSame(StdioToolCall|StdioToolCall2025|HTTPToolCall|HTTPStatelessToolCall)$'
others='^Benchmark(Startup1Server|Startup10Servers|StartupFloor1Server|StartupFloor10Servers|HarnessOverhead|FindTool|Offered|IdleRSS|BinarySize)$'

i=0
while [ "$i" -lt "$count" ]; do
	i=$((i + 1))
	echo "round $i of $count: tool calls" >&2
	# One pkg name on both sides, so benchstat puts them in one table.
	(cd "$root/interop" && "$work/sdk.test" -test.run '^$' -test.bench "$calls" -test.count 1) |
		sed 's/^pkg: .*/pkg: echo/' >>"$work/sdk.txt"
	(cd "$root" && "$work/harnessd.test" -test.run '^$' -test.bench "$calls" -test.count 1) |
		sed 's/^pkg: .*/pkg: echo/' >>"$work/harnessd.txt"
	# The floor's benchmarks, with its fixed request and with harnessd's,
	# renamed to the names of the two clients'.
	(cd "$root/interop" && "$work/sdk.test" -test.run '^$' -test.bench "$floors" -test.count 1) |
		sed -e 's/^pkg: .*/pkg: echo/' -e 's/^BenchmarkFloor/Benchmark/' >>"$work/floor.txt"
	(cd "$root/interop" && "$work/sdk.test" -test.run '^$' -test.bench "$sames" -test.count 1) |
		sed -e 's/^pkg: .*/pkg: echo/' -e 's/^BenchmarkFloorSame/Benchmark/' >>"$work/same.txt"
done
echo "harnessd's other benchmarks" >&2
(cd "$root" && "$work/harnessd.test" -test.run '^$' -test.bench "$others" -test.count "$count") >"$work/other.txt"

# Runs through the API at 8 clients, in alternating rounds of 1000 runs:
# store off, store on (the runs log, in a fresh directory under TMPDIR, so
# on TMPDIR's filesystem) and the store's floor (two group-committed
# commits per run and nothing else), at once and with a 1 ms window.
runbench() { # runbench PATTERN: one round of the benchmarks PATTERN names
	(cd "$root" && "$work/harnessd.test" -test.run '^$' -test.bench "$1" -test.benchtime 1000x -test.count 1) | grep '^Benchmark'
}
i=0
while [ "$i" -lt "$count" ]; do
	i=$((i + 1))
	echo "round $i of $count: runs through the API" >&2
	runbench '^BenchmarkRunsThroughAPI$/^clients=8$' | sed 's|^BenchmarkRunsThroughAPI/clients=8|BenchmarkRunsOff|' >>"$work/runs.txt"
	runbench '^BenchmarkRunsThroughAPIStore$' | sed 's|^BenchmarkRunsThroughAPIStore/clients=8|BenchmarkRunsStore|' >>"$work/runs.txt"
	runbench '^BenchmarkRunsThroughAPIStoreFloor$/^clients=8$/^commits=serial$' |
		sed -e 's|^BenchmarkRunsThroughAPIStoreFloor/clients=8/commits=serial/window=0s|BenchmarkRunsFloor|' \
			-e 's|^BenchmarkRunsThroughAPIStoreFloor/clients=8/commits=serial/window=1ms|BenchmarkRunsFloorWindow|' >>"$work/runs.txt"
done

# procs is the -GOMAXPROCS suffix of this run's benchmark names (none when
# GOMAXPROCS is 1), read off a name known without it, so that a name ending
# in -<digits> of its own keeps them.
procs=$(awk '$1 ~ /^BenchmarkStdioToolCall\/seq(-[0-9]+)?$/ { n = $1; sub(/^BenchmarkStdioToolCall\/seq/, "", n); print n; exit }' "$work/harnessd.txt")

# The awk function bare(n) returns benchmark name n without that suffix.
bare='function bare(n) { return (procs != "" && substr(n, length(n) - length(procs) + 1) == procs) ? substr(n, 1, length(n) - length(procs)) : n }'

# median FILE NAME UNIT prints the median of the UNIT figures of benchmark
# NAME (without its -GOMAXPROCS suffix) in FILE, or NaN if there are none.
median() {
	awk -v name="$2" -v unit="$3" -v procs="$procs" "$bare"'{
		n = bare($1)
		if (n != name) next
		for (i = 3; i <= NF; i++) if ($i == unit) print $(i - 1)
	}' "$1" | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "NaN"; exit }
			if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
}

# verdict VALUE OP LIMIT prints "ok" or "MISSED" for VALUE OP LIMIT (OP is
# <= or >=).
verdict() {
	awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN {
		ok = (op == "<=") ? (v + 0 <= l + 0) : (v + 0 >= l + 0)
		print (v == "NaN") ? "no data" : (ok ? "ok" : "MISSED")
	}'
}

echo
echo "== Go SDK client (sdk) vs harnessd, same server; $count runs each =="
"$benchstat" sdk="$work/sdk.txt" harnessd="$work/harnessd.txt"

echo
echo "== ratios harnessd/sdk (medians; cpu-ns/op is the client process's CPU time per call) =="
printf '%-40s %10s %10s %7s %9s %7s %10s  %s\n' benchmark "sdk ns/op" "ours ns/op" ratio "cpu-ns/op" "B/op" "allocs/op" target
for bench in BenchmarkStdioToolCall/seq BenchmarkStdioToolCall2025/seq BenchmarkHTTPToolCall/seq BenchmarkHTTPStatelessToolCall/seq \
	BenchmarkStdioToolCall/parallel BenchmarkStdioToolCall2025/parallel BenchmarkHTTPToolCall/parallel BenchmarkHTTPStatelessToolCall/parallel; do
	sdk=$(median "$work/sdk.txt" "$bench" ns/op)
	ours=$(median "$work/harnessd.txt" "$bench" ns/op)
	ratio=$(awk -v a="$ours" -v b="$sdk" 'BEGIN { printf "%.2f", a / b }')
	bytes=$(awk -v a="$(median "$work/harnessd.txt" "$bench" B/op)" -v b="$(median "$work/sdk.txt" "$bench" B/op)" 'BEGIN { printf "%.2f", a / b }')
	cpu=$(awk -v a="$(median "$work/harnessd.txt" "$bench" cpu-ns/op)" -v b="$(median "$work/sdk.txt" "$bench" cpu-ns/op)" 'BEGIN { printf "%.2f", a / b }')
	allocs=$(awk -v a="$(median "$work/harnessd.txt" "$bench" allocs/op)" -v b="$(median "$work/sdk.txt" "$bench" allocs/op)" 'BEGIN { printf "%.2f", a / b }')
	case $bench in
	*Stdio*/seq) target="time <= 0.90x: $(verdict "$ratio" '<=' 0.9)" ;;
	*HTTP*/seq) target="time <= 0.80x: $(verdict "$ratio" '<=' 0.8)" ;;
	*/parallel)
		throughput=$(awk -v a="$sdk" -v b="$ours" 'BEGIN { printf "%.2f", a / b }')
		target="throughput ${throughput}x >= 1.25x: $(verdict "$throughput" '>=' 1.25)"
		;;
	esac
	printf '%-40s %10.0f %10.0f %6sx %8sx %6sx %9sx  %s\n' "$bench" "$sdk" "$ours" "$ratio" "$cpu" "$bytes" "$allocs" "$target"
done

echo
echo "== the floor client, with its fixed request and with harnessd's (same), vs the Go SDK client vs harnessd, same server; $count runs each =="
"$benchstat" floor="$work/floor.txt" same="$work/same.txt" sdk="$work/sdk.txt" harnessd="$work/harnessd.txt"

echo
echo "== ratios to the floor (medians of ns/op, one call at a time); same: the floor making harnessd's requests =="
printf '%-40s %-22s %10s %8s %8s %10s %13s  %s\n' benchmark "revision, transport" "floor ns" sdk harnessd "same ns" harnessd/same target
for bench in BenchmarkStdioToolCall/seq BenchmarkStdioToolCall2025/seq BenchmarkHTTPStatelessToolCall/seq BenchmarkHTTPToolCall/seq; do
	floor=$(median "$work/floor.txt" "$bench" ns/op)
	sdk=$(awk -v a="$(median "$work/sdk.txt" "$bench" ns/op)" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')
	ours=$(awk -v a="$(median "$work/harnessd.txt" "$bench" ns/op)" -v b="$floor" 'BEGIN { printf "%.2f", a / b }')
	same=$(median "$work/same.txt" "$bench" ns/op)
	oursSame=$(awk -v a="$(median "$work/harnessd.txt" "$bench" ns/op)" -v b="$same" 'BEGIN { printf "%.2f", a / b }')
	case $bench in
	BenchmarkStdioToolCall/*) what="2026-07-28, stdio" limit=1.15 ;;
	BenchmarkStdioToolCall2025/*) what="2025-11-25, stdio" limit=1.15 ;;
	BenchmarkHTTPStatelessToolCall/*) what="2026-07-28, HTTP" limit=1.10 ;;
	*) what="2025-11-25, HTTP" limit=1.10 ;;
	esac
	printf '%-40s %-22s %10.0f %7sx %7sx %10.0f %12sx  <= %sx: %s\n' "$bench" "$what" "$floor" "$sdk" "$ours" "$same" "$oursSame" "$limit" "$(verdict "$ours" '<=' "$limit")"
done

echo
echo "== harnessd's other benchmarks =="
"$benchstat" "$work/other.txt"

one=$(median "$work/other.txt" BenchmarkStartup1Server ns/op)
ten=$(median "$work/other.txt" BenchmarkStartup10Servers ns/op)
startup=$(awk -v a="$ten" -v b="$one" 'BEGIN { printf "%.2f", a / b }')
floor1=$(median "$work/other.txt" BenchmarkStartupFloor1Server ns/op)
floor10=$(median "$work/other.txt" BenchmarkStartupFloor10Servers ns/op)
p99=$(median "$work/other.txt" BenchmarkFindTool p99-µs)
overhead=$(median "$work/other.txt" BenchmarkHarnessOverhead overhead-ns/call)
first200=$(median "$work/other.txt" BenchmarkOffered first-request-bytes-200)
first10k=$(median "$work/other.txt" BenchmarkOffered first-request-bytes-10000)
rss=$(median "$work/other.txt" BenchmarkIdleRSS rss-bytes)
size=$(median "$work/other.txt" BenchmarkBinarySize bytes)

# perround FILE A B prints the median over the rounds of A's runs/s over
# B's (the i-th figure of each, rounds alternating), or NaN.
perround() {
	awk -v a="$2" -v b="$3" -v procs="$procs" "$bare"'{
		n = bare($1)
		for (i = 3; i <= NF; i++) if ($i == "runs/s") {
			if (n == a) va[++na] = $(i - 1)
			if (n == b) vb[++nb] = $(i - 1)
		}
	} END {
		m = (na < nb) ? na : nb
		for (i = 1; i <= m; i++) if (vb[i] > 0) print va[i] / vb[i]
	}' "$1" | sort -g | awk '
		{ v[NR] = $1 }
		END {
			if (NR == 0) { print "NaN"; exit }
			if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2
		}'
}

echo
echo "== runs through the API, 8 clients (store on: TMPDIR's filesystem) =="
"$benchstat" "$work/runs.txt"
store=$(perround "$work/runs.txt" BenchmarkRunsStore BenchmarkRunsOff)
floorat=$(perround "$work/runs.txt" BenchmarkRunsFloor BenchmarkRunsOff)
floorwin=$(perround "$work/runs.txt" BenchmarkRunsFloorWindow BenchmarkRunsOff)
echo
printf '%-52s %s\n' \
	"store on, runs/s of store off (per-round median)" "$(awk -v a="$store" 'BEGIN { printf "%.0f%%", a * 100 }'), >= 90%: $(verdict "$store" '>=' 0.9)" \
	"  floor, at once / with a 1 ms window" "$(awk -v a="$floorat" -v b="$floorwin" 'BEGIN { printf "%.0f%% / %.0f%%", a * 100, b * 100 }')" \
	"  store on, of the floor with the window" "$(awk -v a="$store" -v b="$floorwin" 'BEGIN { printf "%.0f%%", a / b * 100 }')" \
	"  fsyncs per run (<= 2), written/json (<= 2)" "$(median "$work/runs.txt" BenchmarkRunsStore fsyncs/run), $(median "$work/runs.txt" BenchmarkRunsStore written/json)"

echo
echo "== targets (medians) =="
printf '%-52s %-26s %s\n' \
	"start-up, 10 stdio servers vs 1" "$(awk -v a="$ten" -v b="$one" 'BEGIN { printf "%.1f ms / %.1f ms", a / 1e6, b / 1e6 }') = ${startup}x" "<= 1.3x: $(verdict "$startup" '<=' 1.3)" \
	"  floor: the bare servers, no client logic" "$(awk -v a="$floor10" -v b="$floor1" 'BEGIN { printf "%.1f ms / %.1f ms = %.2fx", a / 1e6, b / 1e6, a / b }')" "harnessd/floor, 10 servers: $(awk -v a="$ten" -v b="$floor10" 'BEGIN { printf "%.2fx", a / b }')" \
	"find_tool over 10,000 tools, p99" "${p99} µs" "< 1000 µs: $(verdict "$p99" '<=' 999)" \
	"harness overhead per tool call" "$(awk -v a="$overhead" 'BEGIN { printf "%.1f µs", a / 1e3 }')" "< 100 µs: $(verdict "$overhead" '<=' 99999)" \
	"tool definitions in the first request, 200 tools" "${first200} bytes (10,000: ${first10k})" "a few KB, flat: $(verdict "$first200" '<=' 4096)" \
	"idle RSS, harnessd with 10 stdio servers" "$(awk -v a="$rss" 'BEGIN { printf "%.1f MiB", a / 1048576 }')" "<= 20 MB: $(verdict "$rss" '<=' 20000000)" \
	"static binary (CGO_ENABLED=0, -s -w)" "$(awk -v a="$size" 'BEGIN { printf "%.1f MiB (%d bytes)", a / 1048576, a }')" "<= 10 MB: $(verdict "$size" '<=' 10000000)"
