#!/usr/bin/env bash
# rps-syscalls.sh — what a request costs wrk and headroom in the kernel: system calls by kind, context switches
# and CPU a request, counted by perf on bench/rps.sh's setup (issue 36: where the closed model's ratio to wrk
# is low, say what wrk does that a Go process does not, in numbers).
#
# Usage: bash bench/rps-syscalls.sh
#   env DURATION=10     seconds each client runs
#       CONNS=64        connections (wrk -c) = headroom users
#       SERVER_CPU=0    core nginx is pinned to; CLIENT_CPU=1 each client's
#       HEADROOM=path   use this binary instead of building ./cmd/headroom
#
# perf stat counts the client's own events (its threads, not nginx's): raw_syscalls:sys_enter and the
# syscalls:sys_enter_* of the calls that matter, context-switches, cpu-migrations, task-clock. headroom's
# count includes its start and end (a second or so of a 10 s run); its requests are result.json's.
set -euo pipefail

DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}

source "$(dirname "$0")/lib.sh"
bench_workdir rps-syscalls
trap 'bench_cleanup' EXIT
need nginx nginx
need wrk wrk
need perf linux-perf
need jq jq
build_headroom
PORT=$(free_port)
URL="http://127.0.0.1:$PORT"
start_nginx "$WORK/nginx" "$PORT" "$SERVER_CPU" 4096 75s
cat >"$WORK/rps.star" <<'STAR'
def hit(user):
    user.http.get("/", name="GET /")

actions = [action("Hit", hit)]
think_time = think.constant("0s")
STAR
taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d2s "$URL/" >/dev/null # warm nginx up

calls=(read write readv writev sendto recvfrom epoll_wait epoll_pwait epoll_ctl futex nanosleep sched_yield tgkill getpid madvise)
events=raw_syscalls:sys_enter,context-switches,cpu-migrations,task-clock
for c in "${calls[@]}"; do events+=",syscalls:sys_enter_$c"; done

# counted NAME REQUESTS: prints NAME's counts a request, from $WORK/NAME.perf (perf stat -x,) and
# $WORK/NAME.time (user and system CPU seconds).
counted() {
	local name=$1 req=$2
	read -r user sys <"$WORK/$name.time"
	awk -F, -v n="$name" -v r="$req" -v u="$user" -v s="$sys" '
		$3 == "task-clock" { cpu = 1000 * $1 / r }
		$3 == "raw_syscalls:sys_enter" { calls = $1 / r }
		$3 == "context-switches" { sw = $1 / r }
		$3 ~ /^syscalls:sys_enter_/ && $1 > 0 { sub("syscalls:sys_enter_", "", $3); mix = mix sprintf(" %s %.3f", $3, $1 / r) }
		END {
			printf "%-9s %8d req  %5.1f µs CPU/req (user %4.1f, system %4.1f)  %4.2f syscalls/req  %5.3f switches/req\n",
				n, r, cpu, 1e6 * u / r, 1e6 * s / r, calls, sw
			printf "          by call, a request:%s\n", mix
		}' "$WORK/$name.perf"
}
# timed NAME CMD...: runs CMD under perf stat, its user and system seconds into $WORK/NAME.time.
timed() {
	local name=$1 TIMEFORMAT='%U %S'
	shift
	{ time perf stat -x, -e "$events" -o "$WORK/$name.perf" -- "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"; } 2>"$WORK/$name.time"
}

log "wrk: -t1 -c$CONNS, ${DURATION}s"
timed wrk taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$URL/"
wrk_req=$(awk '/requests in/ { print $1 }' "$WORK/wrk.out")
log "headroom: $CONNS users, think 0, GOMAXPROCS=1, ${DURATION}s"
timed headroom env GOMAXPROCS=1 taskset -c "$CLIENT_CPU" "$HEADROOM" run "$WORK/rps.star" --target "$URL" \
	--users "$CONNS" --ramp 0s --duration "${DURATION}s" --out "$WORK/hr" --quiet --no-report ||
	die "headroom failed: $(tail -3 "$WORK/headroom.err")"
hr_req=$(jq -r '.totals.count + (.ramp_totals.count // 0) + (.stopping_totals.count // 0)' "$WORK/hr/result.json")
echo
counted wrk "$wrk_req"
counted headroom "$hr_req"
