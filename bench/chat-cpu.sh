#!/usr/bin/env bash
# chat-cpu.sh — headroom's CPU per request of examples/chat.star, and the chat users one core holds.
#
# Usage: bash bench/chat-cpu.sh
#   env USERS=2000       chat users (each holds an HTTP connection and the testbed's WebSocket)
#       DURATION=30      seconds measured in each round, once every user is set up
#       ROUNDS=3         rounds (a fresh testbed and headroom run each); medians are printed
#       AGENTS=0         0: one headroom process with GOMAXPROCS=1; N: --local-agents N (the CPU of
#                        the coordinator and its agents is counted; cores as HEADROOM_CPU says)
#       TESTBED_ARGS="--channels 1000 --workers 64 --scale 0.2"
#                        the testbed's model: 1,000 public channels (a user joins 5, so a channel has
#                        ~10 members at 2,000 users, and a post reaches ~10 connections: a chat server's
#                        shape rather than 500-member rooms) and enough capacity that nothing queues,
#                        so headroom's CPU is what is measured
#       TESTBED_CPU=0    core the testbed is pinned to
#       HEADROOM_CPU=1   core(s) headroom is pinned to (e.g. 0,1 with AGENTS=2)
#       RAMP=20s         the ramp to USERS (set longer for tens of thousands of users)
#       SOURCE_ADDRS=    --source-addrs for headroom, e.g. 127.0.0.1-127.0.0.4: one address holds ~14,000
#                        connections to the testbed, and each user holds two (past ~7,000 users)
#       PROFILE=file     write a CPU profile of the first round's measured seconds (HEADROOM_PPROF=1;
#                        one process only, not with AGENTS)
#       HEADROOM=path    use this binary instead of building ./cmd/headroom
#       OUT=dir          keep the raw outputs there (default: a temp dir, removed)
#       QUIET_WAIT=120   seconds to wait, before each round, for the machine to be idle
#
# Each round starts the testbed and `headroom run examples/chat.star` with USERS users (ramp 20 s),
# waits until every user is set up (loadtest_users_ready from --metrics-listen), lets 5 s pass, then
# measures DURATION seconds: headroom's CPU time (utime + stime of the process and its children, from
# /proc), its requests (loadtest_http_request_time_count), WebSocket messages received and actions. It
# prints per round: requests/s, messages in/s, headroom's CPU (% of one core), **µs of CPU per request**
# (the headline; each request's share of the WebSocket events it causes is in it), and the chat users
# one core would hold at this pace (USERS / CPU fraction); then the medians.
set -euo pipefail

USERS=${USERS:-2000}
DURATION=${DURATION:-30}
ROUNDS=${ROUNDS:-3}
AGENTS=${AGENTS:-0}
TESTBED_ARGS=${TESTBED_ARGS:---channels 1000 --workers 64 --scale 0.2}
TESTBED_CPU=${TESTBED_CPU:-0}
HEADROOM_CPU=${HEADROOM_CPU:-1}
QUIET_WAIT=${QUIET_WAIT:-120}
RAMP=${RAMP:-20s}
SOURCE_ADDRS=${SOURCE_ADDRS:-}

source "$(dirname "$0")/lib.sh"

bench_workdir chat-cpu

need curl curl
need taskset util-linux
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (testbed and headroom pinned apart)"
build_headroom
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ "$(ulimit -n)" -gt $((USERS * 2 + 200)) ] || die "open-files limit $(ulimit -n) is too low for $USERS chat users"


HZ=$(getconf CLK_TCK)
# all_ticks PID: CPU ticks of PID and its descendants (a coordinator's local agents).
all_ticks() {
	local t=0 p
	for p in $(pstree -pT "$1" 2>/dev/null | grep -o '([0-9]*)' | tr -d '()'); do
		[ -r "/proc/$p/stat" ] || continue
		t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
	done
	echo "$t"
}
need pstree psmisc

round() {
	local n=$1 dir=$WORK/round-$1 tport mport hpid tbpid env=()
	mkdir -p "$dir"
	wait_quiet "$QUIET_WAIT"
	tport=$(free_port)
	# shellcheck disable=SC2086 # TESTBED_ARGS is a list of flags
	taskset -c "$TESTBED_CPU" "$HEADROOM" testbed --listen "127.0.0.1:$tport" $TESTBED_ARGS >"$dir/testbed.txt" 2>&1 &
	tbpid=$!
	BENCH_PIDS+=("$tbpid")
	wait_port "$tport" 10 || die "the testbed did not start: $(tail -5 "$dir/testbed.txt")"
	mport=$(free_port)
	local agents=()
	if [ "$AGENTS" -gt 0 ]; then agents=(--local-agents "$AGENTS"); else env+=(GOMAXPROCS=1); fi
	if [ -n "$SOURCE_ADDRS" ]; then agents+=(--source-addrs "$SOURCE_ADDRS"); fi
	if [ -n "${PROFILE:-}" ] && [ "$n" = 1 ]; then env+=(HEADROOM_PPROF=1); fi
	env "${env[@]}" taskset -c "$HEADROOM_CPU" "$HEADROOM" run "$BENCH_ROOT/examples/chat.star" \
		--target "http://127.0.0.1:$tport" --users "$USERS" --ramp "$RAMP" --duration "$((DURATION + 30))s" \
		--metrics-listen "127.0.0.1:$mport" "${agents[@]}" --out "$dir/run" --quiet >"$dir/run.txt" 2>"$dir/run.err" &
	hpid=$!
	BENCH_PIDS+=("$hpid")
	wait_ready "http://127.0.0.1:$mport/metrics" "$USERS" "$hpid" 120 "$dir/run.err"
	sleep 5
	local hm=http://127.0.0.1:$mport/metrics
	local t0 c0 r0 m0 e0 t1 c1 r1 m1 e1
	t0=$(date +%s.%N) c0=$(all_ticks "$hpid")
	r0=$(scrape "$hm" loadtest_http_request_time_count)
	m0=$(scrape "$hm" loadtest_websocket_messages_total 'direction="in"')
	e0=$(scrape "$hm" loadtest_http_errors_total)
	local prof=""
	if [ -n "${PROFILE:-}" ] && [ "$n" = 1 ]; then
		curl -fsS -o "$PROFILE" "http://127.0.0.1:$mport/debug/pprof/profile?seconds=$DURATION" &
		prof=$!
	fi
	sleep "$DURATION"
	[ -z "$prof" ] || wait "$prof"
	t1=$(date +%s.%N) c1=$(all_ticks "$hpid")
	r1=$(scrape "$hm" loadtest_http_request_time_count)
	m1=$(scrape "$hm" loadtest_websocket_messages_total 'direction="in"')
	e1=$(scrape "$hm" loadtest_http_errors_total)
	local el cpu
	el=$(calc "$t1 - $t0")
	cpu=$(calc "($c1 - $c0) / $HZ")
	R_RPS=$(calc "($r1 - $r0) / $el")
	R_MSGS=$(calc "($m1 - $m0) / $el")
	R_CPU=$(calc "100 * $cpu / $el")
	R_US=$(calc "1e6 * $cpu / ($r1 - $r0)")
	R_PER_CORE=$(calc "$USERS * 100 / $R_CPU")
	R_ERRS=$((e1 - e0))
	kill -INT "$hpid" 2>/dev/null || true
	wait "$hpid" 2>/dev/null || true
	kill -TERM "$tbpid" 2>/dev/null || true
	wait "$tbpid" 2>/dev/null || true
}

printf '%-6s %10s %10s %10s %12s %14s %8s\n' round 'req/s' 'msgs in/s' 'CPU%' 'µs/request' 'users/core' errors
rps=() msgs=() cpus=() us=() percore=()
for r in $(seq 1 "$ROUNDS"); do
	round "$r"
	printf '%-6s %10.0f %10.0f %10.1f %12.1f %14.0f %8d\n' "$r" "$R_RPS" "$R_MSGS" "$R_CPU" "$R_US" "$R_PER_CORE" "$R_ERRS"
	rps+=("$R_RPS") msgs+=("$R_MSGS") cpus+=("$R_CPU") us+=("$R_US") percore+=("$R_PER_CORE")
done
echo
printf '%-6s %10.0f %10.0f %10.1f %12.1f %14.0f\n' median "$(median "${rps[@]}")" "$(median "${msgs[@]}")" \
	"$(median "${cpus[@]}")" "$(median "${us[@]}")" "$(median "${percore[@]}")"
mode="one process, GOMAXPROCS=1"
[ "$AGENTS" -gt 0 ] && mode="--local-agents $AGENTS, cores $HEADROOM_CPU"
printf 'examples/chat.star, %d users (%s): %.1f µs of headroom CPU per request, %.0f chat users per core (median of %d)\n' \
	"$USERS" "$mode" "$(median "${us[@]}")" "$(median "${percore[@]}")" "$ROUNDS"
if [ -n "${PROFILE:-}" ]; then log "profile of round 1: $PROFILE (go tool pprof -top $HEADROOM $PROFILE)"; fi
if [ -n "${KEEP:-}" ]; then log "raw outputs kept in $WORK"; fi
