#!/usr/bin/env bash
# The long end-to-end tests, left out of ./scripts/test.sh to keep it within CI's 15 minutes: each is a real
# search against the testbed of 2.5 minutes or more, in files built only with the tag long (go test -tags long).
# Takes about 3 minutes on 2 cores (the searches run side by side).
#
#   ./scripts/test-long.sh
#
#   TestSearchFindsTheTestbedCeiling   the ceiling search on the testbed at 110 and 220 users (the test command
#                                      runs it at 27.5): found within 5% of the model's ceiling
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "test-long: Go 1.26 is needed" >&2; exit 1; }
go mod download
go test -tags long -count=1 -parallel 3 -timeout 14m -v -run '^TestSearchFindsTheTestbedCeiling$' ./runner |
	grep -E '^(=== RUN|\s*--- |ok|FAIL|PASS)|\.go:[0-9]+:'
