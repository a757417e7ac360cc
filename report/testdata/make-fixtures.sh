#!/usr/bin/env bash
# Makes the result fixtures in report/testdata/runs (real runs against two
# testbeds on loopback, the new one with its capacity lowered by 10%), then
# rewrites the golden reports. Run from anywhere; takes about 3 minutes.
# After a change to the result format: make them again, read the diff.
set -euo pipefail
cd "$(dirname "$0")/../.."
go build -o bin/headroom ./cmd/headroom
H=bin/headroom S=report/testdata/scenario/posts.star F=report/testdata/runs
A=${PORT_A:-18065} B=${PORT_B:-18066}
PIDS=()
trap 'kill "${PIDS[@]}" 2>/dev/null || true' EXIT
$H testbed --listen 127.0.0.1:$A --workers 2 --scale 10 2>/dev/null & PIDS+=($!)
$H testbed --listen 127.0.0.1:$B --workers 2 --scale 11.111 2>/dev/null & PIDS+=($!)
sleep 1
rm -rf "$F"/base-* "$F"/new-* "$F"/step-* "$F"/ceil-* "$F"/open-*
for i in 1 2 3; do
  $H run $S --target http://127.0.0.1:$A --users 10 --ramp 1s --duration 4s --out $F/base-$i --scrape http://127.0.0.1:$A/metrics --quiet --no-report
  $H run $S --target http://127.0.0.1:$B --users 10 --ramp 1s --duration 4s --out $F/new-$i --scrape http://127.0.0.1:$B/metrics --quiet --no-report
done
for i in 1 2; do
  $H run $S --target http://127.0.0.1:$A --rate 40/s --duration 4s --max-users 20 --out $F/open-$i --scrape http://127.0.0.1:$A/metrics --quiet --no-report
done
$H step $S --target http://127.0.0.1:$A --levels 5,10,20,40 --hold 3s --settle 1s --out $F/step-1 --scrape http://127.0.0.1:$A/metrics --quiet --no-report
for i in 1 2; do
  $H ceiling $S --target http://127.0.0.1:$A --scrape http://127.0.0.1:$A/metrics --start-users 10 --window 3s --judge 3s --measure 4s \
    --out $F/ceil-$i --quiet --no-report
done
go test ./report -update >/dev/null
echo "fixtures and golden files rewritten: git diff report/testdata"
