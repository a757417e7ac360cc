#!/usr/bin/env bash
# open-rate.sh — the highest arrival rate one client core holds on time: headroom's open model
# (run --rate) beside k6's constant-arrival-rate executor, vegeta and wrk2 (Gil Tene's constant-throughput
# wrk), as a ratio to wrk's closed-loop rate; then what a request costs each at a quarter and half of it.
# gofloor -rate (bench/gofloor: 64 goroutines, each its own connection and its share of the schedule,
# time.Sleep until each request is due, no scenario, no metrics) is the least a Go process does for a
# paced request: the floor under headroom's figures, as wrk2 is under C's.
#
# Usage: bash bench/open-rate.sh
#   env TRIAL=5          seconds of each trial at one rate
#       POOL=64          the connections every client may hold: headroom's users (--max-users, --pre-users),
#                        k6's VUs (preAllocatedVUs = maxVUs), vegeta's workers (-workers = -max-workers),
#                        gofloor's and wrk2's connections (-c). 64 as wrk's closed loop (-c64): headroom's pool
#                        takes arrivals in turn, so it uses every connection it holds, and 256 cost it more a
#                        request than 64: 35.5 µs against 24.8 in a closed loop, 52 against 46 paced at
#                        18,800/s (2026-11-30, BENCHMARKS-LOG.md)
#       TOOLS="headroom gofloor k6 vegeta wrk2"   gofloor-grid too, on request: gofloor -grid 1ms, each request at
#                        the first tick of a 1 ms grid at or after its due time, as wrk2's timers send (whole
#                        milliseconds): what that grid saves a request (1.07x wrk2's CPU at 0.5 R, where gofloor
#                        as asked used 1.37x, 2026-11-30, BENCHMARKS.md). Neither wrk2 nor it sends each request
#                        at its due time; headroom and gofloor aim to
#       SERVER_CPU=0     core nginx is pinned to
#       CLIENT_CPU=1     core each client is pinned to, one at a time (GOMAXPROCS=1 for the Go ones)
#       HEADROOM=path    use this binary instead of building ./cmd/headroom
#       HEADROOM_ARGS=   more flags for headroom's trials, e.g. "--max-wait 100ms": an arrival that finds no user
#                        free waits that long before it is dropped (default 10 ms). wrk2 never drops: it sends late,
#                        and its p99 judges it; with 100 ms headroom too sends a stall's backlog late, judged by its
#                        lateness, as wrk2 is (0.74 and 0.81 of wrk2's rate against 0.55-0.70 with the default,
#                        2026-11-30, BENCHMARKS-LOG.md)
#       K6_BIN, VEGETA_BIN  use these instead of the pinned versions built once (bench/lib.sh)
#       WRK2_BIN=path    wrk2's binary (no registry packages it: git clone https://github.com/giltene/wrk2,
#                        make, ~1 minute; the binary is ./wrk); without it wrk2 is skipped with a note
#       COST=1           0: skip the cost trials
#       OUT=dir          keep the raw outputs there (default: a temp dir, removed)
#       QUIET_WAIT=60    seconds to wait, before each trial, for the machine to be idle
#       ROUNDS=1         rounds, each with its own wrk run and searches; medians of the ratios printed
#       MAX_DROPPED=0.1  headroom: a held rate also drops at most this percent of its arrivals (issue 36's bar)
#       START=0.4        the search's first rate, a fraction of wrk's
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
#   gofloor   -c POOL -rate rate: it sent at least 99% of rate × TRIAL, with a p99 from the intended start
#             under 10 ms (as wrk2, below)
#   wrk2      -t1 -cPOOL -R rate, 15 s at least (its first seconds calibrate; in 5 s trials it made 80% of
#             20,908/s with a p99 of 3.4 ms, 2026-11-29): its p99 (from the intended start, as headroom's; it never drops, it falls
#             behind, which its latency shows) under 10 ms, and its requests/s at least 90% of the rate (its
#             requests/s counts its start-up, connections and calibration: 97% of the rate in a 5 s trial
#             with a p99 of 3.5 ms, 2026-11-29)
# The search starts at START of wrk's rate and goes up while held, or down until held, then bisects five
# times (search, below): not up from a low rate to the first failure, since a core that idles wakes late on
# some machines (a VM), and a low rate then fails that a higher one holds (wrk2, 2026-11-30: not held at
# 3,300/s, p99 13 ms from the intended start, held at 16,502/s and 33,004/s). Printed:
# every trial, then each tool's highest rate held and its ratio to wrk's rate. Then (COST=1), per tool, one
# trial at 0.25 and one at 0.5 of wrk's rate: the client's CPU a request (user + system, /usr/bin/time) and
# the p99 (headroom, gofloor and wrk2 from the intended start; k6 and vegeta from the send, all they measure).
# Traffic: 127.0.0.1 only.
set -euo pipefail

TRIAL=${TRIAL:-5}
POOL=${POOL:-64}
TOOLS=${TOOLS:-headroom gofloor k6 vegeta wrk2}
COST=${COST:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
QUIET_WAIT=${QUIET_WAIT:-60}
ROUNDS=${ROUNDS:-1}
MAX_DROPPED=${MAX_DROPPED:-0.1}
START=${START:-0.4}

source "$(dirname "$0")/lib.sh"

bench_workdir open-rate

need nginx nginx
need wrk wrk
need jq jq
need taskset util-linux
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (server and client pinned apart)"
build_headroom
need /usr/bin/time time
tools=
for t in $TOOLS; do
	case $t in
	k6) find_k6 ;;
	vegeta) find_vegeta ;;
	wrk2)
		if [ -z "${WRK2_BIN:-}" ] || [ ! -x "$WRK2_BIN" ]; then
			log "wrk2: skipped: WRK2_BIN is not an executable (git clone https://github.com/giltene/wrk2 && make; WRK2_BIN=<it>/wrk)"
			continue
		fi
		log "using wrk2 ($WRK2_BIN)"
		;;
	headroom) ;;
	gofloor | gofloor-grid)
		need go golang-go
		go build -o "$WORK/gofloor" ./bench/gofloor || die "cannot build bench/gofloor"
		;;
	*) die "unknown tool $t (TOOLS: headroom gofloor gofloor-grid k6 vegeta wrk2)" ;;
	esac
	tools="$tools $t"
done
TOOLS=${tools# }
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
  summaryTrendStats: ['avg', 'p(99)'],
  scenarios: { open: { executor: 'constant-arrival-rate', rate: Number(__ENV.RATE), timeUnit: '1s',
    duration: __ENV.TRIAL + 's', preAllocatedVUs: Number(__ENV.POOL), maxVUs: Number(__ENV.POOL) } },
};
export default function () { http.get(__ENV.URL + '/'); }
export function handleSummary(data) {
  const count = (m) => (data.metrics[m] ? data.metrics[m].values.count : 0);
  const p99 = data.metrics.http_req_duration ? data.metrics.http_req_duration.values['p(99)'] : 0;
  return { [__ENV.SUMMARY]: JSON.stringify({ iterations: count('iterations'), dropped: count('dropped_iterations'), p99: p99 }) };
}
JS

# closed_loop: sets WRK_RPS, wrk's rate from the client core.
closed_loop() {
	taskset -c "$CLIENT_CPU" wrk -t1 -c64 -d10s "$URL/" >"$WORK/wrk.txt"
	WRK_RPS=$(awk '/^Requests\/sec/ {print $2}' "$WORK/wrk.txt")
	[ -n "$WRK_RPS" ] || die "wrk failed: $(cat "$WORK/wrk.txt")"
	log "wrk (closed loop, 64 connections, one core): $WRK_RPS requests/s"
}

# run_tool TOOL RATE DIR: runs TOOL at RATE for TRIAL seconds on the client core, its outputs in DIR and its
# CPU (user and system seconds) in DIR/time.txt.
run_tool() {
	local tool=$1 rate=$2 dir=$3
	local timed=(/usr/bin/time -o "$dir/time.txt" -f "%U %S" env GOMAXPROCS=1 taskset -c "$CLIENT_CPU")
	case $tool in
	headroom)
		"${timed[@]}" "$HEADROOM" run "$WORK/hit.star" --target "$URL" --rate "$rate/s" \
			--duration "${TRIAL}s" --max-users "$POOL" --pre-users "$POOL" ${HEADROOM_ARGS:-} --out "$dir/run" --quiet --no-report >"$dir/out.txt" 2>&1 || true
		;;
	k6)
		RATE=$rate TRIAL=$TRIAL POOL=$POOL URL=$URL SUMMARY=$dir/summary.json \
			"${timed[@]}" "$K6_BIN" run --no-usage-report -q "$WORK/hit.js" >"$dir/out.txt" 2>&1 || true
		;;
	vegeta)
		echo "GET $URL/" | "${timed[@]}" "$VEGETA_BIN" attack -rate "$rate/s" -duration "${TRIAL}s" \
			-workers "$POOL" -max-workers "$POOL" -keepalive >"$dir/results.bin" 2>"$dir/out.txt" || true
		"$VEGETA_BIN" report -type json <"$dir/results.bin" >"$dir/report.json" 2>>"$dir/out.txt" || true
		;;
	gofloor | gofloor-grid)
		local grid=0
		[ "$tool" = gofloor-grid ] && grid=1ms
		"${timed[@]}" "$WORK/gofloor" -addr "127.0.0.1:$PORT" -c "$POOL" -d "${TRIAL}s" -rate "$rate" -grid "$grid" >"$dir/out.txt" 2>&1 || true
		;;
	wrk2)
		"${timed[@]}" "$WRK2_BIN" -t1 -c"$POOL" -d"$((TRIAL > 15 ? TRIAL : 15))s" -R "$rate" --latency "$URL/" >"$dir/out.txt" 2>&1 || true
		;;
	esac
}

# wrk2_p99 DIR: wrk2's p99 in ms, from its HdrHistogram distribution ("99.000%    4.29ms").
wrk2_p99() {
	awk '$1 == "99.000%" { v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
		print (u == "us" ? v / 1000 : u == "s" ? v * 1000 : u == "m" ? v * 60000 : v); exit }' "$1/out.txt"
}

# trial TOOL RATE: runs one trial; sets OK (0/1), WHY (what was measured), DONE (requests completed),
# P99 (ms) and CPU (client seconds).
trial() {
	local tool=$1 rate=$2 dir=$WORK/$1-$2-${3:-search}
	mkdir -p "$dir"
	wait_quiet "$QUIET_WAIT" 10
	run_tool "$tool" "$rate" "$dir"
	CPU=$(awk 'NF == 2 && $1 ~ /^[0-9.]+$/ { print $1 + $2 }' "$dir/time.txt" 2>/dev/null)
	CPU=${CPU:-0}
	case $tool in
	headroom)
		local a
		a=$(jq -r '"\(.arrivals.intended) \(.arrivals.dropped) \(.arrivals.late) \(.totals.count) \(.totals.p99_ms)"' "$dir/run/result.json" 2>/dev/null) || a="0 0 0 0 0"
		read -r intended dropped late DONE P99 <<<"$a"
		OK=$(awk -v i="$intended" -v d="$dropped" -v l="$late" -v m="$MAX_DROPPED" \
			'BEGIN { print (i > 0 && (d + l) / i < 0.01 && 100 * d / i <= m) ? 1 : 0 }')
		WHY="intended $intended, dropped $dropped, late $late"
		;;
	k6)
		local s
		s=$(jq -r '"\(.iterations) \(.dropped) \(.p99)"' "$dir/summary.json" 2>/dev/null) || s="0 0 0"
		read -r iterations dropped P99 <<<"$s"
		DONE=$iterations
		OK=$(awk -v it="$iterations" -v d="$dropped" -v r="$rate" -v t="$TRIAL" \
			'BEGIN { print (it > 0 && d / (it + d) < 0.01 && it >= 0.99 * r * t) ? 1 : 0 }')
		WHY="iterations $iterations, dropped $dropped"
		;;
	vegeta)
		local v
		v=$(jq -r '"\(.requests) \(.rate) \(.success) \(.latencies["99th"] / 1e6)"' "$dir/report.json" 2>/dev/null) || v="0 0 0 0"
		read -r requests achieved success P99 <<<"$v"
		DONE=$requests
		OK=$(awk -v n="$requests" -v a="$achieved" -v r="$rate" -v t="$TRIAL" -v s="$success" \
			'BEGIN { print (n >= 0.99 * r * t && a >= 0.99 * r && s >= 0.99) ? 1 : 0 }')
		WHY="requests $requests, achieved $(printf '%.0f' "$achieved")/s, success $success"
		;;
	gofloor | gofloor-grid)
		read -r DONE P99 <<<"$(awk '/^requests / { n = $2 } /^from the intended start/ { p = $8 } END { print n + 0, p + 0 }' "$dir/out.txt")"
		OK=$(awk -v n="$DONE" -v r="$rate" -v t="$TRIAL" -v p="$P99" 'BEGIN { print (n >= 0.99 * r * t && p > 0 && p < 10) ? 1 : 0 }')
		WHY="requests $DONE, p99 $P99 ms from the intended start"
		;;
	wrk2)
		local achieved
		achieved=$(awk '/^Requests\/sec/ { print $2 }' "$dir/out.txt")
		achieved=${achieved:-0}
		P99=$(wrk2_p99 "$dir")
		P99=${P99:-0}
		DONE=$(awk -v a="$achieved" -v t="$((TRIAL > 15 ? TRIAL : 15))" 'BEGIN { printf "%d", a * t }')
		OK=$(awk -v a="$achieved" -v r="$rate" -v p="$P99" 'BEGIN { print (a >= 0.9 * r && p > 0 && p < 10) ? 1 : 0 }')
		WHY="achieved $(printf '%.0f' "$achieved")/s, p99 $P99 ms from the intended start"
		;;
	esac
	log "$tool at $rate/s: $([ "$OK" = 1 ] && echo held || echo NOT held) ($WHY)"
}

# search TOOL: sets BEST, the highest rate held: from START of wrk's rate, up by half again while held
# (to 4 times wrk's), or else down by halves until held (to 1% of it), then five bisections between the
# highest rate held and the lowest above it that was not.
search() {
	local tool=$1 lo=0 hi=0 rate
	rate=$(awk -v w="$WRK_RPS" -v f="$START" 'BEGIN { printf "%d", w * f }')
	trial "$tool" "$rate"
	if [ "$OK" = 1 ]; then
		lo=$rate
		while rate=$((rate * 3 / 2)) && [ "$rate" -le $((WRK_RPS_INT * 4)) ]; do
			trial "$tool" "$rate"
			if [ "$OK" = 1 ]; then lo=$rate; else hi=$rate && break; fi
		done
	else
		hi=$rate
		while rate=$((rate / 2)) && [ "$rate" -ge $((WRK_RPS_INT / 100)) ]; do
			trial "$tool" "$rate"
			if [ "$OK" = 1 ]; then lo=$rate && break; else hi=$rate; fi
		done
	fi
	if [ "$hi" -gt 0 ] && [ "$lo" -gt 0 ]; then
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

[ "$COST" = 1 ] || exit 0
echo
printf '%-10s %-10s %-12s %-14s %s\n' client 'of wrk' 'rate (/s)' 'CPU a request' 'p99 (ms)'
for frac in 0.25 0.5; do
	rate=$(awk -v w="$WRK_RPS" -v f="$frac" 'BEGIN { printf "%d", w * f }')
	for t in $TOOLS; do
		trial "$t" "$rate" cost
		printf '%-10s %-10s %-12s %-14s %s\n' "$t" "$frac" "$rate" \
			"$(awk -v c="$CPU" -v n="$DONE" 'BEGIN { if (n > 0) printf "%.1f us", 1e6 * c / n; else print "-" }')" \
			"$(printf '%.2f' "$P99")$({ [ "$t" = k6 ] || [ "$t" = vegeta ]; } && echo ' (from the send)')"
	done
done
echo "CPU a request: the client's user + system seconds over its requests, setup and start-up included (a ${TRIAL} s trial)"
if [ -n "${KEEP:-}" ]; then log "raw outputs kept in $WORK"; fi
