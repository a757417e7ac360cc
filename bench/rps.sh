#!/usr/bin/env bash
# rps.sh — requests per second of headroom against wrk, on one client core.
#
# Usage: bash bench/rps.sh
#   env ROUNDS=3        rounds; each round runs wrk and headroom once (order alternates)
#       DURATION=10     seconds per measurement
#       CONNS=64        connections (wrk -c) = headroom users
#       SERVER_CPU=0    core nginx is pinned to
#       CLIENT_CPU=1    core wrk and headroom are pinned to
#       HEADROOM=path   use this binary instead of building ./cmd/headroom
#       HEADROOM_ARGS   more flags for headroom run (default --no-compression: the
#                       request wrk sends, without the Accept-Encoding users send
#                       by default; set it empty for an older binary)
#       OUT=dir         keep the raw outputs there (default: a temp dir, removed)
#       QUIET_WAIT=120  seconds to wait, before each measurement, for the machine
#                       to be idle (other work on it skews the figures)
#
# One nginx (one worker, 13-byte body, no access log, keep-alive without a
# request limit) on SERVER_CPU; each client on CLIENT_CPU, wrk with one thread
# (-t1), headroom with GOMAXPROCS=1. Both hold CONNS keep-alive connections
# and send GET / as fast as the server answers (headroom: think time 0).
# Prints each round and the medians: requests/s, the ratio headroom/wrk, and
# each client's CPU time per 1,000 requests. Traffic goes to 127.0.0.1 only.
set -euo pipefail

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
QUIET_WAIT=${QUIET_WAIT:-120}

source "$(dirname "$0")/lib.sh"

bench_workdir rps

need nginx nginx
need wrk wrk
need jq jq
need taskset util-linux
[ -x /usr/bin/time ] || need /usr/bin/time time
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (server and client pinned apart)"
build_headroom

# Enough descriptors for CONNS connections on each side.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

PORT=$(free_port)
start_nginx "$WORK/nginx" "$PORT" "$SERVER_CPU" 4096 75s
URL=http://127.0.0.1:$PORT

cat >"$WORK/rps.star" <<'STAR'
# Every user sends GET / back to back over its own keep-alive connection.
def hit(user):
    user.http.get("/", name="GET /")

actions = [action("Hit", hit)]
think_time = think.constant(0)
STAR

# Warm nginx up (and check it answers) before the first measurement.
taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d2s "$URL/" >"$WORK/warmup.txt"
grep -q 'Requests/sec' "$WORK/warmup.txt" || die "wrk warm-up failed: $(cat "$WORK/warmup.txt")"

# show N CLIENT RPS CPU_MS: prints one measurement's line; sets NOISY=1 when
# other work took 10% of the machine or more, or the hypervisor 2% or more.
show() {
	local noisy=""
	if awk -v o="$OTHERS_PCT" -v s="$STEAL_PCT" 'BEGIN { exit !(o >= 10 || s >= 2) }'; then
		noisy=noisy
		NOISY=1
	fi
	printf '%-6s %-9s %9.0f %10.2f %10.0f %9.0f %8.0f %7.0f  %s\n' "$1" "$2" "$3" "$4" \
		"$(calc "100 * $CLIENT_CPU_S / $ELAPSED")" "$NGINX_PCT" "$OTHERS_PCT" "$STEAL_PCT" "$noisy"
}

# run_wrk N: sets WRK_RPS and WRK_CPU_MS (client CPU ms per 1,000 requests,
# from /usr/bin/time).
run_wrk() {
	local n=$1 out=$WORK/wrk-$1.txt
	watched "wrk-$n" timeout $((DURATION + 30)) \
		taskset -c "$CLIENT_CPU" wrk -t1 -c"$CONNS" -d"${DURATION}s" "$URL/" >"$out"
	WRK_RPS=$(awk '/^Requests\/sec:/ {print $2}' "$out")
	local reqs errs
	reqs=$(awk '/requests in/ {print $1}' "$out")
	errs=$(awk '/Non-2xx|Socket errors/ {print}' "$out")
	if [ -n "$errs" ]; then log "wrk round $n: $errs"; fi
	WRK_CPU_MS=$(calc "$CLIENT_CPU_S * 1e6 / $reqs")
	show "$n" wrk "$WRK_RPS" "$WRK_CPU_MS"
}

# run_headroom N: sets HR_RPS and HR_CPU_MS (client CPU ms per 1,000
# requests, from result.json: generator.cpu_seconds / totals.count).
run_headroom() {
	local n=$1 dir=$WORK/headroom-$1
	watched "headroom-$n" timeout $((DURATION + 60)) env GOMAXPROCS=1 taskset -c "$CLIENT_CPU" \
		"$HEADROOM" run "$WORK/rps.star" --target "$URL" --users "$CONNS" --ramp 0s \
		--duration "${DURATION}s" --out "$dir" --quiet $HEADROOM_ARGS >"$dir.txt" 2>"$dir.err" ||
		die "headroom failed in round $n: $(tail -5 "$dir.err")"
	local r=$dir/result.json errs
	HR_RPS=$(jq -r '.totals.rps' "$r")
	errs=$(jq -r '(.totals.errors // 0) + (.totals.timeouts // 0)' "$r")
	if [ "$errs" != 0 ]; then log "headroom round $n: $errs errors/timeouts"; fi
	HR_CPU_MS=$(jq -r '.generator.cpu_seconds * 1e6 / .totals.count' "$r")
	show "$n" headroom "$HR_RPS" "$HR_CPU_MS"
}

HEADROOM_ARGS=${HEADROOM_ARGS---no-compression}
log "$ROUNDS rounds of ${DURATION}s, $CONNS connections, nginx on cpu $SERVER_CPU, clients on cpu $CLIENT_CPU"
cat <<'HEAD'
cpu_ms/1k: the client's CPU time per 1,000 requests; client%, nginx%: CPU in % of one core;
others%, steal%: CPU used by other work / taken by the hypervisor, in % of both cores (noise)

HEAD
printf '%-6s %-9s %9s %10s %10s %9s %8s %7s\n' round client req/s cpu_ms/1k client% nginx% others% steal%
W=() H=() R=() WC=() HC=() CR=() CW=() CH=()
for n in $(seq 1 "$ROUNDS"); do
	NOISY=""
	# Alternate the order so that a drift of the machine does not favour one.
	if [ $((n % 2)) -eq 1 ]; then
		run_wrk "$n"
		run_headroom "$n"
	else
		run_headroom "$n"
		run_wrk "$n"
	fi
	ratio=$(calc "$HR_RPS / $WRK_RPS")
	W+=("$WRK_RPS") H+=("$HR_RPS") R+=("$ratio") WC+=("$WRK_CPU_MS") HC+=("$HR_CPU_MS")
	if [ -z "$NOISY" ]; then
		CR+=("$ratio") CW+=("$WRK_RPS") CH+=("$HR_RPS")
	fi
	printf '%-6s %-9s %9.3f\n' "$n" ratio "$ratio"
done

mw=$(median "${W[@]}") mh=$(median "${H[@]}") mr=$(median "${R[@]}")
mwc=$(median "${WC[@]}") mhc=$(median "${HC[@]}")
echo
printf 'medians of %d rounds    %10s %10s %14s\n' "$ROUNDS" wrk headroom headroom/wrk
printf '  requests/s              %10.0f %10.0f %14.3f  (median of the per-round ratios)\n' "$mw" "$mh" "$mr"
printf '  CPU ms per 1,000 req    %10.2f %10.2f %14.3f  (wrk/headroom: CPU efficiency)\n' "$mwc" "$mhc" "$(calc "$mwc / $mhc")"
headline=$mr note="all $ROUNDS rounds"
if [ ${#CR[@]} -lt "$ROUNDS" ]; then
	if [ ${#CR[@]} -gt 0 ]; then
		headline=$(median "${CR[@]}") note="the ${#CR[@]} clean rounds of $ROUNDS"
		printf '  clean rounds only (%d of %d) %6.0f %10.0f %14.3f\n' "${#CR[@]}" "$ROUNDS" \
			"$(median "${CW[@]}")" "$(median "${CH[@]}")" "$headline"
	else
		note="all rounds NOISY: rerun on a quiet machine"
		echo "  warning: every round was noisy (other work or the hypervisor took CPU): rerun on a quiet machine"
	fi
fi
echo
printf 'headroom/wrk median ratio: %.2f (%s; target >= 0.80; peers: hey 0.36, vegeta 0.29, k6 0.14, Locust FastHttpUser 0.06)\n' "$headline" "$note"
if [ -n "${KEEP:-}" ]; then log "raw outputs kept in $WORK"; fi
