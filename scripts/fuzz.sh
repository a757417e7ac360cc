#!/usr/bin/env bash
# Runs every Go fuzz target in the repository (each func FuzzXxx in a
# _test.go file) for FUZZTIME, one after the other: the HTTP response
# parser, JSON into Starlark, scenario loading, result and histogram
# reading, check queries, an agent's encoded snapshots (FuzzMergeEncoded,
# metrics/wire_hostile_test.go). A failing input is written under the package's
# testdata/fuzz/ and the script fails; commit the input with the fix so it
# stays a regression seed (plain `go test` runs every seed).
#
#   ./scripts/fuzz.sh                    # 2 minutes per target (about 18 minutes in all)
#   FUZZTIME=10s ./scripts/fuzz.sh       # a quick pass (the test command runs this)
#   FUZZ_WORKERS=1 ./scripts/fuzz.sh     # leave a core for other work
#   ./scripts/fuzz.sh FuzzResponseParser # one target
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-2m}
workers=()
[[ -n ${FUZZ_WORKERS:-} ]] && workers=(-parallel "$FUZZ_WORKERS")
only=${1:-}

found=0
log=$(mktemp)
trap 'rm -f "$log"' EXIT
while IFS= read -r file; do
  pkg=./$(dirname "$file")
  for name in $(sed -nE 's/^func (Fuzz[A-Za-z0-9_]+)\(f \*testing\.F\).*/\1/p' "$file"); do
    [[ -n $only && $name != "$only" ]] && continue
    found=$((found + 1))
    echo "== fuzz $name ($pkg, $FUZZTIME)"
    # -run '^$': only the fuzzing, the package's tests run elsewhere.
    if ! go test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "${workers[@]}" "$pkg" >"$log" 2>&1; then
      grep -vE '^fuzz: elapsed: ' "$log" >&2 || true
      echo "fuzz: $name failed (a failing input is kept under $pkg/testdata/fuzz/$name/)" >&2
      exit 1
    fi
    grep -E '^fuzz: elapsed: .*execs' "$log" | tail -1 || true
  done
done < <(git ls-files '*_test.go' 2>/dev/null | xargs grep -l '^func Fuzz' | sort)

[[ $found -gt 0 ]] || { echo "fuzz: no target${only:+ named $only}" >&2; exit 1; }
echo "fuzz: $found targets, $FUZZTIME each, nothing found"
