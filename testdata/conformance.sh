#!/usr/bin/env bash
# Runs every non-auth client scenario of the pinned MCP conformance suite
# against a client command, one scenario at a time (sse-retry measures timing).
#
#   testdata/conformance.sh CLIENT_CMD [ARGS...]
#
# The suite starts a test server per scenario and runs
# `CLIENT_CMD ARGS... <server-url>` with MCP_CONFORMANCE_SCENARIO set to the
# scenario name. A scenario fails on any FAILURE or WARNING check, a client
# exit status other than 0, a client still running after the timeout
# (CONFORMANCE_TIMEOUT_MS, default 30000), or no SUCCESS check at all.
# Exits 1 if any scenario failed, 2 on bad usage or missing npm packages. Results: $CONFORMANCE_RESULTS, or a
# temporary directory that is removed unless a scenario failed.
set -euo pipefail

if [ "$#" -eq 0 ]; then
	echo "usage: $0 CLIENT_CMD [ARGS...]" >&2
	exit 2
fi

npm_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/npm" && pwd)"
suite="$npm_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
if [ ! -f "$suite" ]; then
	echo "conformance: $suite is missing: run ./test.sh or (cd testdata/npm && npm ci)" >&2
	exit 2
fi

# The suite splits the command on spaces and hands the pieces to /bin/sh
# joined by spaces, so shell-quoting each argument survives the round trip.
client_cmd="$(printf '%q ' "$@")"
client_cmd="${client_cmd% }"

conformance() {
	node --import "$npm_dir/globsync-shim.mjs" "$suite" "$@"
}

mapfile -t scenarios < <(conformance list --client | sed -n 's/^  - \([^ ]*\).*/\1/p' | grep -v '^auth/')
if [ "${#scenarios[@]}" -eq 0 ]; then
	echo "conformance: the suite listed no client scenarios" >&2
	exit 2
fi

results="${CONFORMANCE_RESULTS:-}"
keep_results=1
if [ -z "$results" ]; then
	results="$(mktemp -d "${TMPDIR:-/tmp}/conformance.XXXXXX")"
	keep_results=0
fi

# The suite passes a scenario with no checks at all (a client that exits at
# once passes "initialize"), so demand at least one successful check.
passed_a_check() {
	local checks
	checks="$(ls -d "$results/$1"-*/ | tail -n 1)checks.json"
	if ! grep -q '"status": "SUCCESS"' "$checks"; then
		echo "conformance: $1: no check succeeded (see $checks)" >&2
		return 1
	fi
}

failed=()
for scenario in "${scenarios[@]}"; do
	echo "=== conformance $scenario"
	if conformance client --command "$client_cmd" --scenario "$scenario" \
		--timeout "${CONFORMANCE_TIMEOUT_MS:-30000}" -o "$results" &&
		passed_a_check "$scenario"; then
		echo "--- PASS $scenario"
	else
		echo "--- FAIL $scenario"
		failed+=("$scenario")
	fi
done

if [ "${#failed[@]}" -gt 0 ]; then
	echo "conformance: ${#failed[@]} of ${#scenarios[@]} scenarios failed: ${failed[*]} (results in $results)" >&2
	exit 1
fi
if [ "$keep_results" -eq 0 ]; then
	rm -rf "$results"
fi
echo "conformance: all ${#scenarios[@]} scenarios passed: ${scenarios[*]}"
