#!/usr/bin/env bash
# Runs every fuzz target of the module, one after another, for FUZZTIME each
# (default 30s), and prints the size of each target's corpus: the seeds
# committed under testdata/fuzz/<target> and the inputs fuzzing has added to
# the cache (GOCACHE/fuzz). Targets are listed with go test -list '^Fuzz'.
#
#   bash scripts/fuzz.sh                              # every package
#   FUZZTIME=10m bash scripts/fuzz.sh ./internal/...  # some packages, longer
#   FUZZPARALLEL=1 bash scripts/fuzz.sh               # one fuzzing worker
#
# A failing input is written to testdata/fuzz/<target>/ by go test: fix
# what it shows and commit it as a seed. Exits non-zero if any target
# failed, after running them all.
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZTIME="${FUZZTIME:-30s}"
parallel=()
if [ -n "${FUZZPARALLEL:-}" ]; then
  parallel=(-parallel "$FUZZPARALLEL")
fi
[ $# -gt 0 ] || set -- ./...

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
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "${parallel[@]}" "$pkg"; then
      result=FAILED
      failed=1
    fi
    seeds=$(find "$dir/testdata/fuzz/$target" -type f 2>/dev/null | wc -l)
    cached=$(find "$cache/$pkg/$target" -type f 2>/dev/null | wc -l)
    summary+=("$(printf '%-7s %-55s %-26s %5d committed %7d cached' "$result" "$pkg" "$target" "$seeds" "$cached")")
  done
done

echo
echo "== corpus sizes (after $FUZZTIME per target)"
printf '%s\n' "${summary[@]}"
exit "$failed"
