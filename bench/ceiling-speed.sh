#!/usr/bin/env bash
# How much faster is headroom's search than the reference coordinator's
# linear controller, at finding the same ceiling?
#
#   bash bench/ceiling-speed.sh                    # ~10-15 minutes
#   LINEAR_WINDOW=30m bash bench/ceiling-speed.sh  # the reference's own equilibrium window (~40 min)
#
# Both controllers run the same scenario (bench/ceiling.star) with the same
# check against a fresh testbed with 8 workers and Scale 2 (GetChannelPosts
# takes 8 ms): the model puts the ceiling at 8 * (1 + 0.1) / 0.008 = 1100
# users. Linear adds 8 users every 2 s while healthy, removes 8 when the
# check fires, and stops when the count is flat over LINEAR_WINDOW (default
# 5m; the reference uses 30m, which only makes it slower).
set -euo pipefail
cd "$(dirname "$0")/.."

LINEAR_WINDOW=${LINEAR_WINDOW:-5m}
PORT=${PORT:-18765}
OUT=${OUT:-.bench/ceiling-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
ulimit -n 65536 2>/dev/null || true

go build -o bin/headroom ./cmd/headroom

source bench/lib.sh
trap stop_testbed EXIT

run() { # name, extra flags...
  local name=$1; shift
  start_testbed "$PORT" --workers 8 --scale 2
  echo "== $name"
  bin/headroom ceiling bench/ceiling.star --target "http://127.0.0.1:$PORT" --max-users 3000 --max-duration 60m \
    --out "$OUT/$name" --quiet "$@" | sed -n '/^\(Supported users\|No ceiling\)/,/^Requests$/p' || true
  stop_testbed
}

run search
run linear --controller linear --linear-window "$LINEAR_WINDOW"

python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
model = 8 * (1 + 0.1) / 0.008
rows = {}
for name in ("search", "linear"):
    r = json.load(open(f"{out}/{name}/result.json"))["ceiling"]
    su = r["supported_users"]
    rows[name] = r
    err = 100 * (su["value"] - model) / model
    print(f"{name:7s} found={su['found']!s:5s} users={su['value']:7.1f} [{su['low']:.0f}, {su['high']:.0f}] "
          f"({err:+.1f}% vs model {model:.0f})  took {r['search_seconds']:6.0f} s")
s, l = rows["search"]["search_seconds"], rows["linear"]["search_seconds"]
print(f"linear/search time ratio: {l / s:.1f}x")
PY
