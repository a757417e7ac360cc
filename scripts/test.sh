#!/usr/bin/env bash
# Every test, as CI runs it (.ci/run calls this). Installs what the tests
# need, then vets, checks formatting and runs the tests with the race
# detector. Takes about a minute on 2 cores.
#
#   ./scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

command -v go >/dev/null || { echo "test: Go 1.26 is needed" >&2; exit 1; }
echo "== go modules"
go mod download

echo "== vet and format"
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi

echo "== tests (real traffic on 127.0.0.1: the testbed and go-httpbin)"
go test -race -count=1 ./...
