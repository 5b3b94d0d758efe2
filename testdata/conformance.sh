#!/usr/bin/env bash
# Runs the client scenarios of the pinned MCP conformance suites against a
# client command, one scenario at a time (sse-retry measures timing): every
# scenario of 0.1.16, and every client scenario of 0.2.0-alpha.12 at each
# protocol revision it lists (extensions once, at the suite's default).
# Each run gets a fresh HARNESS_HOME (so a fresh OAuth token store).
# A scenario listed in expected_failures below (one the suite itself gets
# wrong) runs too, but its failure is reported, not fatal.
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
declare -A suites=(
	[0.1.16]="$npm_dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
	[0.2.0-alpha.12]="$npm_dir/node_modules/conformance-next/dist/index.js"
)
for suite in "${suites[@]}"; do
	if [ ! -f "$suite" ]; then
		echo "conformance: $suite is missing: run ./test.sh or (cd testdata/npm && npm ci)" >&2
		exit 2
	fi
done

# SUITE:SCENARIO pairs expected to fail (at every revision they run at),
# each for a fault of the suite: 0.1.16's 2025-03-26 metadata scenario
# serves metadata whose issuer is not the one it was fetched for (harnessd
# refuses such metadata, as RFC 8414 §3.3 requires; 0.2.0-alpha.12 fixed
# the scenario).
expected_failures=" 0.1.16:auth/2025-03-26-oauth-metadata-backcompat "

# The suite splits the command on spaces and hands the pieces to /bin/sh
# joined by spaces, so shell-quoting each argument survives the round trip.
client_cmd="$(printf '%q ' "$@")"
client_cmd="${client_cmd% }"

conformance() {
	local version="$1"
	shift
	node --import "$npm_dir/globsync-shim.mjs" "${suites[$version]}" "$@"
}

# runs holds "suite revision scenario" triples; revision "-" is the
# suite's default for the scenario.
runs=()
for version in 0.1.16 0.2.0-alpha.12; do
	# Lines read "  - SCENARIO [REVISION,...]" (0.2.0-alpha.12) or
	# "  - SCENARIO" (0.1.16).
	mapfile -t listed < <(conformance "$version" list --client | sed -n 's/^  - \([^ ]*\)\( \[\([^]]*\)\]\)\{0,1\}.*/\1 \3/p')
	if [ "${#listed[@]}" -eq 0 ]; then
		echo "conformance: suite $version listed no client scenarios" >&2
		exit 2
	fi
	for line in "${listed[@]}"; do
		scenario="${line%% *}"
		revisions="${line#* }"
		if [ "$version" = 0.1.16 ] || [ -z "$revisions" ] || [ "$revisions" = extension ]; then
			runs+=("$version - $scenario")
			continue
		fi
		for revision in ${revisions//,/ }; do
			runs+=("$version $revision $scenario")
		done
	done
done

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
	checks="$(ls -d "$2/$1"-*/ | tail -n 1)checks.json"
	if ! grep -q '"status": "SUCCESS"' "$checks"; then
		echo "conformance: $1: no check succeeded (see $checks)" >&2
		return 1
	fi
}

failed=()
passed=()
expected_failed=()
for run in "${runs[@]}"; do
	read -r version revision scenario <<<"$run"
	out="$results/$version"
	revision_args=()
	name="$version:$scenario"
	if [ "$revision" != - ]; then
		revision_args=(--spec-version "$revision")
		out="$results/$version/$revision"
		name="$version:$scenario@$revision"
	fi
	home="$(mktemp -d "${TMPDIR:-/tmp}/conformance-home.XXXXXX")"
	echo "=== conformance $name"
	if HARNESS_HOME="$home" conformance "$version" client --command "$client_cmd" --scenario "$scenario" \
		"${revision_args[@]}" --timeout "${CONFORMANCE_TIMEOUT_MS:-30000}" -o "$out" &&
		passed_a_check "$scenario" "$out"; then
		echo "--- PASS $name"
		passed+=("$name")
	elif [[ "$expected_failures" == *[[:space:]]"$version:$scenario"[[:space:]]* ]]; then
		echo "--- FAIL (expected) $name"
		expected_failed+=("$name")
	else
		echo "--- FAIL $name"
		failed+=("$name")
	fi
	rm -rf "$home"
done

if [ "${#expected_failed[@]}" -gt 0 ]; then
	echo "conformance: failed as expected: ${expected_failed[*]}"
fi
if [ "${#failed[@]}" -gt 0 ]; then
	echo "conformance: ${#failed[@]} of ${#runs[@]} scenarios failed: ${failed[*]} (results in $results)" >&2
	exit 1
fi
if [ "$keep_results" -eq 0 ]; then
	rm -rf "$results"
fi
echo "conformance: ${#passed[@]} of ${#runs[@]} scenarios passed: ${passed[*]}"
