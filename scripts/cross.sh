#!/usr/bin/env bash
# Builds headroom for Windows (amd64) and macOS (arm64) from this Linux
# machine: Go cross-compiles, nothing to install.
#
#   ./scripts/cross.sh        # the packages with code of their own per system (~1.5 min cold on 2 cores):
#                             # those whose code or tests import syscall, or that hold files for other
#                             # systems, vetted for each (the test command): their test files too, which
#                             # `go build` would not read
#   ALL=1 ./scripts/cross.sh  # the whole binary for each (~4 min cold), into bin/headroom-GOOS-GOARCH
#
# Linux is where headroom is measured (its HTTP/1.1 client reads and writes
# sockets with raw syscalls there and on macOS); on Windows it goes through
# the net package instead (internal/rawio.Supported), and reports no peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."

targets="windows/amd64 darwin/arm64"
if [[ -n ${ALL:-} ]]; then
  for t in $targets; do
    GOOS=${t%/*} GOARCH=${t#*/} go build -o "bin/headroom-${t%/*}-${t#*/}" ./cmd/headroom
    echo "cross: bin/headroom-${t%/*}-${t#*/}"
  done
  exit 0
fi
# cmd/headroom imports every package; its own system calls (SIGTERM, Exec)
# exist on every system, so it is left to ALL=1.
pkgs=$(go list -f '{{.ImportPath}}{{range .Imports}} {{.}}{{end}}{{range .TestImports}} {{.}}{{end}}{{range .IgnoredGoFiles}} ignored:{{.}}{{end}}' ./... |
  awk '{ for (i = 2; i <= NF; i++) if ($i == "syscall" || ($i ~ /^ignored:/ && $i !~ /_test\.go$/)) { print $1; next } }' |
  grep -v '/cmd/headroom$\|/bench/\|/deploy/')
for t in $targets; do
  GOOS=${t%/*} GOARCH=${t#*/} go vet $pkgs
  echo "cross: $t vets:" $(echo "$pkgs" | sed 's|.*/headroom/||')
done
