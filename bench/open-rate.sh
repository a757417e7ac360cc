#!/usr/bin/env bash
# open-rate.sh — the highest arrival rate one client core holds on time: headroom's open model
# (run --rate) beside k6's constant-arrival-rate executor and vegeta, as a ratio to wrk's closed-loop rate.
#
# Usage: bash bench/open-rate.sh
#   env TRIAL=5          seconds of each trial at one rate
#       POOL=256         users (headroom --max-users and --pre-users), VUs (k6 preAllocatedVUs = maxVUs),
#                        workers (vegeta -workers = -max-workers): the connections each may hold
#       TOOLS="headroom k6 vegeta"
#       SERVER_CPU=0     core nginx is pinned to
#       CLIENT_CPU=1     core each client is pinned to, one at a time (GOMAXPROCS=1 for the Go ones)
#       HEADROOM=path    use this binary instead of building ./cmd/headroom
#       HEADROOM_ARGS=   more flags for headroom's trials, e.g. "--max-wait 10ms"
#       K6_BIN, VEGETA_BIN  use these instead of the pinned versions built once (bench/lib.sh)
#       OUT=dir          keep the raw outputs there (default: a temp dir, removed)
#       QUIET_WAIT=60    seconds to wait, before each trial, for the machine to be idle
#       ROUNDS=1         rounds, each with its own wrk run and searches; medians of the ratios printed
#       MAX_DROPPED=0.1  headroom: a held rate also drops at most this percent of its arrivals (issue 36's bar)
#
# One nginx (one worker, 13-byte body) on SERVER_CPU. wrk (-t1 -c64, 10 s) gives the closed-loop rate
# one core sends. Then, per tool, trials of TRIAL seconds at a constant rate of GET /: a rate is *held*
# when under 1% of its arrivals were late or lost:
#   headroom  (dropped + started more than 10 ms after the intended time) / intended < 1%, and
#             dropped / intended <= MAX_DROPPED% (result.json's arrivals: late_after_ms is 10)
#   k6        dropped_iterations / (iterations + dropped_iterations) < 1%, and the iterations made at
#             least 99% of rate × TRIAL (k6 drops an iteration only when no VU is free; a starved
#             scheduler makes fewer without dropping)
#   vegeta    requests sent at least 99% of rate × TRIAL and its achieved rate at least 99% of the
#             rate asked (vegeta reports no lateness: its pacer falls behind instead)
# The search doubles the rate from 10% of wrk's until a trial fails, then bisects five times. Printed:
# every trial, then each tool's highest rate held and its ratio to wrk's rate. Traffic: 127.0.0.1 only.
set -euo pipefail

TRIAL=${TRIAL:-5}
POOL=${POOL:-256}
TOOLS=${TOOLS:-headroom k6 vegeta}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
QUIET_WAIT=${QUIET_WAIT:-60}
ROUNDS=${ROUNDS:-1}
MAX_DROPPED=${MAX_DROPPED:-0.1}

source "$(dirname "$0")/lib.sh"

bench_workdir open-rate

need nginx nginx
need wrk wrk
need jq jq
need taskset util-linux
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (server and client pinned apart)"
build_headroom
for t in $TOOLS; do
	case $t in
	k6) find_k6 ;;
	vegeta) find_vegeta ;;
	headroom) ;;
	*) die "unknown tool $t (TOOLS: headroom k6 vegeta)" ;;
	esac
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

PORT=$(free_port)
start_nginx "$WORK/nginx" "$PORT" "$SERVER_CPU" 4096 75s
URL=http://127.0.0.1:$PORT

cat >"$WORK/hit.star" <<'STAR'
# Each arrival: one GET / on a free user's keep-alive connection.
def hit(user):
    user.http.get("/", name="GET /")

actions = [action("Hit", hit)]
STAR

cat >"$WORK/hit.js" <<'JS'
import http from 'k6/http';
export const options = {
  discardResponseBodies: true,
  scenarios: { open: { executor: 'constant-arrival-rate', rate: Number(__ENV.RATE), timeUnit: '1s',
    duration: __ENV.TRIAL + 's', preAllocatedVUs: Number(__ENV.POOL), maxVUs: Number(__ENV.POOL) } },
};
export default function () { http.get(__ENV.URL + '/'); }
export function handleSummary(data) {
  const count = (m) => (data.metrics[m] ? data.metrics[m].values.count : 0);
  return { [__ENV.SUMMARY]: JSON.stringify({ iterations: count('iterations'), dropped: count('dropped_iterations') }) };
}
JS

# closed_loop: sets WRK_RPS, wrk's rate from the client core.
closed_loop() {
	taskset -c "$CLIENT_CPU" wrk -t1 -c64 -d10s "$URL/" >"$WORK/wrk.txt"
	WRK_RPS=$(awk '/^Requests\/sec/ {print $2}' "$WORK/wrk.txt")
	[ -n "$WRK_RPS" ] || die "wrk failed: $(cat "$WORK/wrk.txt")"
	log "wrk (closed loop, 64 connections, one core): $WRK_RPS requests/s"
}

# trial TOOL RATE: runs one trial; sets OK (0/1) and WHY (what was measured).
trial() {
	local tool=$1 rate=$2 dir=$WORK/$1-$2
	mkdir -p "$dir"
	wait_quiet "$QUIET_WAIT" 10
	case $tool in
	headroom)
		GOMAXPROCS=1 taskset -c "$CLIENT_CPU" "$HEADROOM" run "$WORK/hit.star" --target "$URL" --rate "$rate/s" \
			--duration "${TRIAL}s" --max-users "$POOL" --pre-users "$POOL" ${HEADROOM_ARGS:-} --out "$dir/run" --quiet >"$dir/out.txt" 2>&1 || true
		local a
		a=$(jq -r '.arrivals | "\(.intended) \(.dropped) \(.late)"' "$dir/run/result.json" 2>/dev/null) || a="0 0 0"
		read -r intended dropped late <<<"$a"
		OK=$(awk -v i="$intended" -v d="$dropped" -v l="$late" -v m="$MAX_DROPPED" \
			'BEGIN { print (i > 0 && (d + l) / i < 0.01 && 100 * d / i <= m) ? 1 : 0 }')
		WHY="intended $intended, dropped $dropped, late $late"
		;;
	k6)
		RATE=$rate TRIAL=$TRIAL POOL=$POOL URL=$URL SUMMARY=$dir/summary.json GOMAXPROCS=1 taskset -c "$CLIENT_CPU" \
			"$K6_BIN" run --no-usage-report -q "$WORK/hit.js" >"$dir/out.txt" 2>&1 || true
		local s
		s=$(jq -r '"\(.iterations) \(.dropped)"' "$dir/summary.json" 2>/dev/null) || s="0 0"
		read -r iterations dropped <<<"$s"
		OK=$(awk -v it="$iterations" -v d="$dropped" -v r="$rate" -v t="$TRIAL" \
			'BEGIN { print (it > 0 && d / (it + d) < 0.01 && it >= 0.99 * r * t) ? 1 : 0 }')
		WHY="iterations $iterations, dropped $dropped"
		;;
	vegeta)
		echo "GET $URL/" | GOMAXPROCS=1 taskset -c "$CLIENT_CPU" "$VEGETA_BIN" attack -rate "$rate/s" -duration "${TRIAL}s" \
			-workers "$POOL" -max-workers "$POOL" -keepalive >"$dir/results.bin" 2>"$dir/out.txt" || true
		"$VEGETA_BIN" report -type json <"$dir/results.bin" >"$dir/report.json" 2>>"$dir/out.txt" || true
		local v
		v=$(jq -r '"\(.requests) \(.rate) \(.success)"' "$dir/report.json" 2>/dev/null) || v="0 0 0"
		read -r requests achieved success <<<"$v"
		OK=$(awk -v n="$requests" -v a="$achieved" -v r="$rate" -v t="$TRIAL" -v s="$success" \
			'BEGIN { print (n >= 0.99 * r * t && a >= 0.99 * r && s >= 0.99) ? 1 : 0 }')
		WHY="requests $requests, achieved $(printf '%.0f' "$achieved")/s, success $success"
		;;
	esac
	log "$tool at $rate/s: $([ "$OK" = 1 ] && echo held || echo NOT held) ($WHY)"
}

# search TOOL: sets BEST, the highest rate held.
search() {
	local tool=$1 lo=0 hi=0 rate
	rate=$(awk -v w="$WRK_RPS" 'BEGIN { printf "%d", w / 10 }')
	while :; do
		trial "$tool" "$rate"
		if [ "$OK" = 1 ]; then
			lo=$rate
			rate=$((rate * 2))
			[ "$rate" -le $((WRK_RPS_INT * 4)) ] || break
		else
			hi=$rate
			break
		fi
	done
	if [ "$hi" -gt 0 ]; then
		for _ in 1 2 3 4 5; do
			rate=$(((lo + hi) / 2))
			[ "$rate" -gt "$lo" ] || break
			trial "$tool" "$rate"
			if [ "$OK" = 1 ]; then lo=$rate; else hi=$rate; fi
		done
	fi
	BEST=$lo
}

declare -A best ratios
for round in $(seq "$ROUNDS"); do
	[ "$ROUNDS" = 1 ] || log "round $round of $ROUNDS"
	closed_loop
	WRK_RPS_INT=$(printf '%.0f' "$WRK_RPS")
	for t in $TOOLS; do
		search "$t"
		best[$t]="${best[$t]:-} $BEST"
		ratios[$t]="${ratios[$t]:-} $(awk -v b="$BEST" -v w="$WRK_RPS" 'BEGIN { printf "%.2f", b / w }')"
	done
done

echo
printf '%-10s %-28s %-28s %s\n' client 'rate held (/s), each round' 'ratio to wrk, each round' 'median ratio'
for t in $TOOLS; do
	printf '%-10s %-28s %-28s %.2f\n' "$t" "${best[$t]# }" "${ratios[$t]# }" "$(median ${ratios[$t]})"
done
echo "held: under 1% of arrivals late (> 10 ms) or lost (headroom: at most $MAX_DROPPED% dropped too), trials of ${TRIAL} s, one client core, pool $POOL; wrk's closed loop each round"
if [ -n "${KEEP:-}" ]; then log "raw outputs kept in $WORK"; fi
