#!/usr/bin/env bash
# Runs every fuzz target of the module, one after another, for FUZZTIME each
# (default 30s), and prints the size of each target's corpus: the seeds
# committed under testdata/fuzz/<target> and the inputs fuzzing has added to
# the cache (GOCACHE/fuzz). Targets are listed with go test -list '^Fuzz'.
#
#   bash scripts/fuzz.sh                              # every package
#   FUZZTIME=10m bash scripts/fuzz.sh ./internal/...  # some packages, longer
#   FUZZPARALLEL=1 bash scripts/fuzz.sh               # one fuzzing worker
#   FUZZMINIMIZE=60s bash scripts/fuzz.sh             # go test's own default
#
# FUZZMINIMIZE (default 5s) bounds the minimization of each new interesting
# input (-fuzzminimizetime). go test's default, 60s, lets one input hold
# the workers for up to a minute, in which no new input is tried and the
# progress lines say "0/sec": FuzzServeHTTP spent most of its first minute
# that way, minimizing inputs of a few hundred bytes that each run in
# under a millisecond.
#
# A failing input is written to testdata/fuzz/<target>/ by go test: fix
# what it shows and commit it as a seed. Exits non-zero if any target
# failed, after running them all. A target whose only failure is the
# fuzzing engine's deadline race (see fuzz_once) is run once more, and is
# "flaked", not failed, if that happens twice.
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-30s}"
FUZZMINIMIZE="${FUZZMINIMIZE:-5s}"
parallel=()
if [ -n "${FUZZPARALLEL:-}" ]; then
  parallel=(-parallel "$FUZZPARALLEL")
fi
[ $# -gt 0 ] || set -- ./...

# fuzz_once PKG TARGET fuzzes one target for FUZZTIME. When it fails, last
# says how: "deadline" when the only failure is the fuzzing engine's own
# race at the end of -fuzztime (go.dev/issue/75804, fixed in Go 1.27: a
# worker still running at the deadline is reported as "context deadline
# exceeded", with no failing input written), "failed" otherwise. A real
# finding always prints "Failing input written to".
fuzz_once() {
  local out status=0
  out=$(mktemp)
  go test -run '^$' -fuzz "^${2}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZE" "${parallel[@]}" "$1" 2>&1 | tee "$out" || status=${PIPESTATUS[0]}
  last=failed
  if [ "$status" -ne 0 ] && grep -q 'context deadline exceeded' "$out" &&
    ! grep -qE 'Failing input written|panic:|\.go:[0-9]+:' "$out"; then
    last=deadline
  fi
  rm -f "$out"
  return "$status"
}

cache="$(go env GOCACHE)/fuzz"
summary=()
failed=0
for pkg in $(go list "$@"); do
  targets=$(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
  [ -n "$targets" ] || continue
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for target in $targets; do
    echo "== $pkg $target ($FUZZTIME)"
    result=ok
    if ! fuzz_once "$pkg" "$target"; then
      if [ "$last" = deadline ]; then
        echo "== $target: the fuzzing engine's deadline race (go.dev/issue/75804), no failing input; once more"
        fuzz_once "$pkg" "$target" || result=$last
      else
        result=FAILED
      fi
    fi
    case $result in
    ok) ;;
    deadline) result=flaked ;; # twice the engine's race, never an input: not a finding
    *) result=FAILED failed=1 ;;
    esac
    seeds=$(find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | wc -l)
    cached=$(find "$cache/$pkg/$target" -type f 2>/dev/null | wc -l)
    summary+=("$(printf '%-7s %-55s %-26s %5d committed %7d cached' "$result" "$pkg" "$target" "$seeds" "$cached")")
  done
done

echo
echo "== corpus sizes (after $FUZZTIME per target)"
printf '%s\n' "${summary[@]}"
exit "$failed"
