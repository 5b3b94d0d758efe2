#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine:
#   1. installs the pinned npm MCP peers (npm ci in testdata/npm) when
#      node_modules is missing or older than package-lock.json;
#   2. downloads the Go modules of both modules;
#   3. go test -race ./... in the root module (extra arguments go here),
#      then in interop/;
#   4. the official MCP client conformance scenarios against harnessd.
#
#   ./test.sh [go test flags for the root module...]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"
root="$(pwd)"

loud() {
	printf '\n********************************************************************\n' >&2
	printf '*** %s\n' "$@" >&2
	printf '********************************************************************\n\n' >&2
}

echo "== npm peers (testdata/npm)"
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
	loud "node and npm are required: install Node.js 20 or later"
	exit 1
fi
lock=testdata/npm/package-lock.json
installed=testdata/npm/node_modules/.package-lock.json
if [ ! -f "$installed" ] || [ "$lock" -nt "$installed" ]; then
	(cd testdata/npm && npm ci --no-audit --no-fund)
else
	echo "node_modules is up to date"
fi

echo "== go mod download"
go mod download
(cd interop && go mod download)

echo "== go test -race ./... (root module)"
# A bound well above the suite's time (under 2 minutes on two cores), so
# that a loaded machine is not taken for a hung test.
go test -race -timeout 20m "$@" ./...

echo "== go test -race ./... (interop)"
(cd interop && go test -race ./...)

echo "== MCP client conformance"
bin_dir="$(mktemp -d "${TMPDIR:-/tmp}/harnessd-test.XXXXXX")"
trap 'rm -rf "$bin_dir"' EXIT
go build -o "$bin_dir/harnessd" .
testdata/conformance.sh "$bin_dir/harnessd" mcp conformance
echo "== all tests passed ($root)"
