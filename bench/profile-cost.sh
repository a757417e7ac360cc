#!/usr/bin/env bash
# profile-cost.sh — what --profile costs the server it profiles: the testbed's CPU a request and the
# users' latency, with and without headroom taking its CPU profiles, in alternating runs.
#
# Usage: bash bench/profile-cost.sh
#   env USERS=300        chat users (examples/chat.star) each run
#       DURATION=30      seconds measured in each run
#       ROUNDS=3         rounds of one run without and one with --profile; the median ratio is printed
#       SLICE=10s        --profile-slice
#       TESTBED_CPU=0    core the testbed is pinned to; HEADROOM_CPU=1 headroom's
#       OUT=dir          keep the results there
#
# Each run starts a fresh testbed (--pprof) and scrapes its /metrics: the server's CPU over the window
# (process_cpu_seconds_total) divided by the requests served in it, and the p99 latency of every
# request, side by side.
set -euo pipefail

USERS=${USERS:-300}
DURATION=${DURATION:-30}
ROUNDS=${ROUNDS:-3}
SLICE=${SLICE:-10s}
TESTBED_CPU=${TESTBED_CPU:-0}
HEADROOM_CPU=${HEADROOM_CPU:-1}

source "$(dirname "$0")/lib.sh"
bench_workdir profile-cost
trap 'stop_testbed; bench_cleanup' EXIT
need taskset util-linux
need python3 python3
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (the testbed and headroom pinned apart)"
cd "$BENCH_ROOT"
mkdir -p bin
go build -o bin/headroom ./cmd/headroom

# run NAME PROFILE: one run against a fresh testbed, profiled when PROFILE is 1; writes
# "µs-a-request p99-ms requests/s" to $WORK/NAME.txt. In this shell, so the EXIT trap stops its testbed.
run() {
	local name=$1 port args=()
	port=$(free_port)
	[ "$2" = 1 ] && args=(--profile "http://127.0.0.1:$port/debug/pprof" --profile-slice "$SLICE")
	wait_quiet 60
	start_testbed "$port" --pprof --channels 200 --workers 16
	taskset -p -c "$TESTBED_CPU" "$TESTBED" >/dev/null
	taskset -c "$HEADROOM_CPU" bin/headroom run examples/chat.star --target "http://127.0.0.1:$port" \
		--scrape "http://127.0.0.1:$port/metrics" --users "$USERS" --ramp 5s --duration "${DURATION}s" \
		--out "$WORK/$name" --quiet --no-report "${args[@]}" >/dev/null 2>"$WORK/$name.log" ||
		{ stop_testbed; cat "$WORK/$name.log" >&2; die "run $name failed"; }
	stop_testbed
	python3 - "$WORK/$name/result.json" >"$WORK/$name.txt" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
w = r["server"]["targets"][0]["window"]
t = r["totals"]
print("%.1f %.2f %.1f" % (1e6 * w["cpu_cores_mean"] / t["rps"], t["p99_ms"], t["rps"]))
EOF
}

printf '%-6s %-22s %-22s %s\n' round "without: µs/req p99 rps" "with: µs/req p99 rps" "CPU ratio" >&2
ratios=()
for i in $(seq 1 "$ROUNDS"); do
	run "off-$i" 0
	run "on-$i" 1
	read -r a ap ar <"$WORK/off-$i.txt"
	read -r b bp br <"$WORK/on-$i.txt"
	ratios+=("$(calc "$b / $a")")
	printf '%-6s %-22s %-22s %s\n' "$i" "$a $ap $ar" "$b $bp $br" "${ratios[-1]}" >&2
done
log "median CPU-a-request ratio, with --profile over without: $(median "${ratios[@]}")"
