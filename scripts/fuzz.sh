#!/usr/bin/env bash
# Runs every Go fuzz target in the repository (each func FuzzXxx in a
# _test.go file) for FUZZTIME, one after the other: the HTTP response
# parser, JSON into Starlark, scenario loading, data.csv files, result and histogram
# reading, a result directory reported and compared (its profiles among it), check
# queries, an agent's encoded snapshots (FuzzMergeEncoded,
# metrics/wire/hostile_test.go). A failing input is written under the package's
# testdata/fuzz/ and the script fails; commit the input with the fix so it
# stays a regression seed (plain `go test` runs every seed).
#
#   ./scripts/fuzz.sh                    # 2 minutes per target (about 30 minutes in all)
#   FUZZTIME=10s ./scripts/fuzz.sh       # a quick pass (the test command runs this)
#   FUZZ_WORKERS=1 ./scripts/fuzz.sh     # leave a core for other work
#   FUZZ_MINIMIZE=1x ./scripts/fuzz.sh   # keep new inputs as found: a brief pass of a target whose
#                                        # inputs are large (a result.json) spends it minimizing them
#   ./scripts/fuzz.sh FuzzResponseParser # one target
set -euo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-2m}
workers=()
[[ -n ${FUZZ_WORKERS:-} ]] && workers=(-parallel "$FUZZ_WORKERS")
[[ -n ${FUZZ_MINIMIZE:-} ]] && workers+=(-fuzzminimizetime "$FUZZ_MINIMIZE")
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
    ok=1
    go test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" "${workers[@]}" "$pkg" >"$log" 2>&1 || ok=0
    # The fuzzing engine fails with "context deadline exceeded", and writes no
    # input, when -fuzztime ends before it has run the seed corpus: beside the
    # test command's tests, a slow target's seeds (FuzzLoad's each wait out a
    # load timeout) can outlast a brief -fuzztime. That is no finding: once
    # more, with FUZZ_RETRY (30 s).
    if [[ $ok == 0 ]] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
      echo "fuzz: $name ran out of time before its seed corpus had run; again for ${FUZZ_RETRY:-30s}"
      ok=1
      go test -run '^$' -fuzz "^$name\$" -fuzztime "${FUZZ_RETRY:-30s}" "${workers[@]}" "$pkg" >"$log" 2>&1 || ok=0
    fi
    if [[ $ok == 0 ]]; then
      grep -vE '^fuzz: elapsed: ' "$log" >&2 || true
      echo "fuzz: $name failed (a failing input is kept under $pkg/testdata/fuzz/$name/)" >&2
      exit 1
    fi
    grep -E '^fuzz: elapsed: .*execs' "$log" | tail -1 || true
  done
done < <(git ls-files '*_test.go' 2>/dev/null | xargs grep -l '^func Fuzz' | sort)

[[ $found -gt 0 ]] || { echo "fuzz: no target${only:+ named $only}" >&2; exit 1; }
echo "fuzz: $found targets, $FUZZTIME each, nothing found"
