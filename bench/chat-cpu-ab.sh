#!/usr/bin/env bash
# chat-cpu-ab.sh — two builds of headroom side by side on examples/chat.star: the CPU a request each costs at
# the same moment, and their ratio.
#
# Usage: bash bench/chat-cpu-ab.sh                  # the last commit (HEAD) against the working tree
#        BASE=a794fde bash bench/chat-cpu-ab.sh     # any commit, tag or branch as the base
#   env BASE=HEAD        the base: a git ref of this repository; it is built, with its own examples/chat.star
#       USERS=2000       chat users each build runs
#       DURATION=60      seconds measured in each round, once both have every user set up
#       ROUNDS=3         rounds (fresh testbeds and runs each); the median ratio is printed
#       TESTBED_ARGS     as bench/chat-cpu.sh's ("--channels 1000 --workers 64 --scale 0.2")
#       TESTBED_CPU=0    core both testbeds are pinned to
#       HEADROOM_CPU=1   core both headroom processes are pinned to (GOMAXPROCS=1 each)
#       OUT=dir          keep the raw outputs there
#
# Why: bench/chat-cpu.sh's rounds differ by ±10% on a shared VM (57 to 72 µs for one binary), so a 5% change
# needs many alternating rounds and still misleads. Here both builds run at once, each against its own
# testbed, on the same core: whatever slows the machine slows both, and the ratio new/base holds to ~1%
# round to round. The absolute µs are higher than chat-cpu.sh's (two processes share the core and its
# caches): quote the ratio, and chat-cpu.sh for the absolute figure.
set -euo pipefail

BASE=${BASE:-HEAD}
USERS=${USERS:-2000}
DURATION=${DURATION:-60}
ROUNDS=${ROUNDS:-3}
TESTBED_ARGS=${TESTBED_ARGS:---channels 1000 --workers 64 --scale 0.2}
TESTBED_CPU=${TESTBED_CPU:-0}
HEADROOM_CPU=${HEADROOM_CPU:-1}

source "$(dirname "$0")/lib.sh"

bench_workdir chat-cpu-ab

need curl curl
need taskset util-linux
command -v go >/dev/null || die "go is required to build both builds"
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (testbeds and headroom pinned apart)"
[ "$(ulimit -n)" -gt $((USERS * 4 + 400)) ] || ulimit -n $((USERS * 4 + 400)) 2>/dev/null ||
	die "open-files limit $(ulimit -n) is too low for two runs of $USERS chat users"

# The two trees: the base from git (its own scenario, as that build's users would run it) and this one.
rev=$(git -C "$BENCH_ROOT" rev-parse --short "$BASE^{commit}" 2>/dev/null) || die "BASE=$BASE is not a commit of $BENCH_ROOT"
mkdir -p "$WORK/base"
git -C "$BENCH_ROOT" archive "$rev" | tar -x -C "$WORK/base"
log "building the base ($BASE = $rev) and the working tree"
(cd "$WORK/base" && go build -o "$WORK/headroom-base" ./cmd/headroom)
(cd "$BENCH_ROOT" && go build -o "$WORK/headroom-new" ./cmd/headroom)
trees=("$WORK/base" "$BENCH_ROOT")
bins=("$WORK/headroom-base" "$WORK/headroom-new")

ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
HZ=$(getconf CLK_TCK)

# round N: sets US (µs a request of base and new) and RPS.
round() {
	local dir=$WORK/round-$1 i tport mport pids=() mports=() t0=() t1=() r0=() r1=()
	mkdir -p "$dir"
	wait_quiet 60
	for i in 0 1; do
		tport=$(free_port)
		# shellcheck disable=SC2086 # TESTBED_ARGS is a list of flags
		taskset -c "$TESTBED_CPU" "${bins[$i]}" testbed --listen "127.0.0.1:$tport" $TESTBED_ARGS >"$dir/testbed-$i.txt" 2>&1 &
		BENCH_PIDS+=($!)
		wait_port "$tport" 10 || die "a testbed did not start: $(tail -5 "$dir/testbed-$i.txt")"
		mport=$(free_port)
		GOMAXPROCS=1 taskset -c "$HEADROOM_CPU" "${bins[$i]}" run "${trees[$i]}/examples/chat.star" \
			--target "http://127.0.0.1:$tport" --users "$USERS" --ramp 20s --duration "$((DURATION + 60))s" \
			--metrics-listen "127.0.0.1:$mport" --out "$dir/run-$i" --quiet >"$dir/run-$i.txt" 2>"$dir/run-$i.err" &
		pids+=($!) mports+=("$mport")
		BENCH_PIDS+=($!)
	done
	for i in 0 1; do
		wait_ready "http://127.0.0.1:${mports[$i]}/metrics" "$USERS" "${pids[$i]}" 120 "$dir/run-$i.err"
	done
	sleep 5
	for i in 0 1; do
		t0[i]=$(ticks "${pids[$i]}") r0[i]=$(scrape "http://127.0.0.1:${mports[$i]}/metrics" loadtest_http_request_time_count)
	done
	sleep "$DURATION"
	for i in 0 1; do
		t1[i]=$(ticks "${pids[$i]}") r1[i]=$(scrape "http://127.0.0.1:${mports[$i]}/metrics" loadtest_http_request_time_count)
	done
	US=() RPS=()
	for i in 0 1; do
		US+=("$(calc "1e6 * (${t1[i]} - ${t0[i]}) / $HZ / (${r1[i]} - ${r0[i]})")")
		RPS+=("$(calc "(${r1[i]} - ${r0[i]}) / $DURATION")")
		kill -INT "${pids[$i]}" 2>/dev/null || true
	done
	for i in 0 1; do wait "${pids[$i]}" 2>/dev/null || true; done
	bench_cleanup_testbeds
}

# bench_cleanup_testbeds stops this round's testbeds (and anything else started), keeping $WORK.
bench_cleanup_testbeds() {
	local pid
	for pid in "${BENCH_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	BENCH_PIDS=()
}

printf '%-6s %12s %12s %10s %10s %8s\n' round 'base µs/req' 'new µs/req' 'base req/s' 'new req/s' 'new/base'
ratios=()
for r in $(seq 1 "$ROUNDS"); do
	round "$r"
	ratio=$(calc "${US[1]} / ${US[0]}")
	ratios+=("$ratio")
	printf '%-6s %12.1f %12.1f %10.0f %10.0f %8.3f\n' "$r" "${US[0]}" "${US[1]}" "${RPS[0]}" "${RPS[1]}" "$ratio"
done
printf 'examples/chat.star, %d users each, side by side on one core: the working tree costs %.3f of %s'"'"'s CPU a request (median of %d)\n' \
	"$USERS" "$(median "${ratios[@]}")" "$BASE ($rev)" "$ROUNDS"
