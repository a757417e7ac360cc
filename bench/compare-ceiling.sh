#!/usr/bin/env bash
# Does compare call a 10% capacity drop a regression in supported users,
# and base against base no change? The longer, ceiling-based version of
# compare/testbed_test.go (which uses short bounded runs).
#
#   bash bench/compare-ceiling.sh          # ~15 minutes: 9 ceiling searches
#   REPEATS=5 bash bench/compare-ceiling.sh
#
# Three sides of REPEATS ceiling searches each, every search on a fresh
# testbed with 4 workers: base and again at Scale 4 (GetChannelPosts takes
# 16 ms; the model: 4 * (1 + 0.1) / 0.016 = 275 users), new at Scale 4/0.9
# (capacity -10%: 247.5 users). Then compare new vs base, and again vs base.
set -euo pipefail
cd "$(dirname "$0")/.."

REPEATS=${REPEATS:-3}
PORT=${PORT:-18766}
OUT=${OUT:-.bench/compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
ulimit -n 65536 2>/dev/null || true
go build -o bin/headroom ./cmd/headroom

source bench/lib.sh
trap stop_testbed EXIT

search() { # dir scale
  start_testbed "$PORT" --workers 4 --scale "$2"
  bin/headroom ceiling bench/ceiling.star --target "http://127.0.0.1:$PORT" --scrape "http://127.0.0.1:$PORT/metrics" \
    --start-users 50 --precision 3% --measure 10s --out "$1" --quiet --no-report | grep -E '^(Supported users|No ceiling)' || true
  stop_testbed
}

for i in $(seq "$REPEATS"); do
  for side in base again new; do
    scale=4
    [[ $side == new ]] && scale=4.4444
    echo "== $side $i (scale $scale)"
    search "$OUT/$side-$i" "$scale"
  done
done

dirs() { for i in $(seq "$REPEATS"); do echo "$OUT/$1-$i"; done; }
echo
echo "== new (capacity -10%) vs base"
bin/headroom compare $(dirs base) --vs $(dirs new) --out "$OUT/report-new" --fail-on users:-5% || echo "(exit $?)"
echo
echo "== base again vs base"
bin/headroom compare $(dirs base) --vs $(dirs again) --out "$OUT/report-again" --fail-on users:-5% || echo "(exit $?)"
