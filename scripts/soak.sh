#!/usr/bin/env bash
# An hour under load with nothing growing. Starts a redis-server of its own
# (a free loopback port, its own temporary directory, no persistence) and
# two replicas of internal/cmd/soakserver on it, then drives them with
# internal/cmd/soak for SOAK_MINUTES minutes: a steady mix of every kind of
# request, on both replicas, with the fixed demo identities of three
# tenants:
#
#   - sessions opened and deleted: 2025-11-25 (initialize, tools/list, a
#     call, DELETE on the other replica), 2024-11-05 HTTP+SSE (stream on
#     one replica, messages to the other), 2026-07-28 plain calls;
#   - confirms asked on one replica and answered through the other
#     (2025-11-25), and 2026-07-28 confirms whose input_required round is
#     retried on the other replica;
#   - tasks created on one replica and polled (2026-07-28 tasks/get) or
#     waited for (2025-11-25 tasks/result) on the other;
#   - approvals (2025-11-25 URL elicitations and 2026-07-28 rounds retried
#     on the other replica): half approved in the approval store, as the
#     page would, half left to expire;
#   - GET streams and subscriptions/listen opened, held and dropped;
#   - clients hanging up mid-call (2025-11-25, half after
#     notifications/cancelled, and 2026-07-28).
#
# Every minute it prints a row: Redis's key count (DBSIZE) and
# used_memory, each replica's RSS (/proc/PID/status VmRSS), goroutines
# (the replica's loopback-only /debug/soak) and open files (/proc/PID/fd),
# each the median of that minute's samples (one every 5 s), and the
# operations that ended in the minute, by how they ended. The first
# max(2, SOAK_MINUTES/6) minutes are warm-up; then the last minute is
# checked against the last warm-up minute, within these tolerances:
#
#   Redis keys, goroutines of each replica   +10% or +50, whichever is larger
#   Redis used_memory                        +20% or +2 MiB, whichever is larger
#   RSS of each replica                      +20%
#   open files of each replica               +10
#
# An operation that fails unexpectedly fails the run too; an approval left
# to expire and a client hanging up are expected, and counted apart. Exits
# 0 when the run passed, 1 when it failed.
#
#   SOAK_MINUTES=3 bash scripts/soak.sh      # minutes of load (default 60; at least 3)
#   SOAK_RATE=8                              # operations started per second (default 8)
#   SOAK_WORKERS=16                          # operations at most at once (default 16)
#   SOAK_OUT=dir                             # where the CSV, plots and logs go (default a new temporary directory)
#   SOAK_SERVER_FLAGS="-self-test-leak"      # more flags for both replicas; this one leaks a
#                                            # goroutine per request, to see the soak fail
#
# The output directory keeps soak.csv (one row per minute, sizes in bytes,
# operations per kind), the plots internal/cmd/soakplot draws from it
# (one PNG per group of figures) and the replicas' and Redis's logs.
set -euo pipefail
cd "$(dirname "$0")/.."

SOAK_MINUTES="${SOAK_MINUTES:-60}"
SOAK_RATE="${SOAK_RATE:-8}"
SOAK_WORKERS="${SOAK_WORKERS:-16}"
SOAK_SERVER_FLAGS="${SOAK_SERVER_FLAGS:-}"

if ! command -v redis-server >/dev/null 2>&1; then
  echo "soak: redis-server is not on PATH (Redis 7 or later)" >&2
  exit 2
fi

work=$(mktemp -d -t mcph-soak.XXXXXX)
out="${SOAK_OUT:-$(mktemp -d -t mcph-soak-out.XXXXXX)}"
mkdir -p "$out"
children=()

# cleanup stops the processes this script started, by their ids, and
# removes its temporary directory (not the output directory).
cleanup() {
  local pid
  for pid in "${children[@]}"; do
    kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${children[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "soak: building"
mkdir -p "$work/bin"
go build -o "$work/bin/" ./internal/cmd/soak ./internal/cmd/soakserver ./internal/cmd/soakplot

# waitfile FILE PID waits for FILE, which process PID writes once it
# listens; fails if PID exits first or after 30 s.
waitfile() {
  local i
  for i in $(seq 300); do
    [ -s "$1" ] && return 0
    if ! kill -0 "$2" 2>/dev/null; then
      echo "soak: process $2 exited before writing $1" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "soak: $1 did not appear within 30 s" >&2
  return 1
}

port=$("$work/bin/soak" -free-port)
mkdir -p "$work/redis"
redis-server --port "$port" --bind 127.0.0.1 --dir "$work/redis" --save "" --appendonly no \
  --logfile "$out/redis.log" &
children+=($!)
redis_url="redis://127.0.0.1:$port"

# The secret the replicas and the driver share, in their environment only.
MCP_STATE_KEY=$(head -c 48 /dev/urandom | base64 | tr -d '\n')
export MCP_STATE_KEY

for r in a b; do
  # shellcheck disable=SC2086 # SOAK_SERVER_FLAGS is a list of flags
  "$work/bin/soakserver" -redis "$redis_url" -addr 127.0.0.1:0 -addr-file "$work/$r.addr" \
    -debug-addr 127.0.0.1:0 -debug-addr-file "$work/$r.debug" $SOAK_SERVER_FLAGS 2>"$out/replica-$r.log" &
  children+=($!)
  waitfile "$work/$r.addr" "$!"
  waitfile "$work/$r.debug" "$!"
done

status=0
"$work/bin/soak" -redis "$redis_url" -minutes "$SOAK_MINUTES" -rate "$SOAK_RATE" -workers "$SOAK_WORKERS" \
  -a "$(cat "$work/a.addr")" -b "$(cat "$work/b.addr")" \
  -debug-a "$(cat "$work/a.debug")" -debug-b "$(cat "$work/b.debug")" \
  -csv "$out/soak.csv" || status=$?

if [ -s "$out/soak.csv" ]; then
  "$work/bin/soakplot" -o "$out" "$out/soak.csv" || status=1
fi
echo "soak: CSV, plots and logs in $out"
exit "$status"
