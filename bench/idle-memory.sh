#!/usr/bin/env bash
# idle-memory.sh — resident memory per idle user of headroom.
#
# Usage: bash bench/idle-memory.sh
#   env USERS=20000     idle users (each holds one keep-alive connection);
#                       lowered to fit the open-files limit if it must be
#       BASE_USERS=10   users of the baseline run
#       RAMP=20         seconds over which the USERS are added
#       HOLD=40         seconds all of them are held (the run ends by itself)
#       HEADROOM=path   use this binary instead of building ./cmd/headroom
#       OUT=dir         keep the raw outputs there (default: a temp dir, removed)
#
# Each user sends one request in setup and one action (so it opens its own
# connection and keeps it), then thinks for 300 s: idle, holding its socket.
# The target is nginx (one worker, worker_connections above USERS,
# keepalive_timeout 300s) at 127.0.0.1. Once every connection is ESTABLISHED
# and a few seconds have passed, VmRSS of the headroom process is sampled
# from /proc/PID/status. A second run with BASE_USERS users gives the fixed
# cost (binary, runtime, scenario), so
#   KB per idle user = (RSS_USERS - RSS_BASE) / (USERS - BASE_USERS).
set -euo pipefail

USERS=${USERS:-20000}
BASE_USERS=${BASE_USERS:-10}
RAMP=${RAMP:-20}
HOLD=${HOLD:-40}

source "$(dirname "$0")/lib.sh"

bench_workdir idle

need nginx nginx
need jq jq
need ss iproute2
build_headroom

# Each side needs a descriptor per connection. Raise the limit as far as we
# may (Go raises its own soft limit to the hard one; nginx gets
# worker_rlimit_nofile from this shell's limit).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ $((USERS + 100)) -gt "$NOFILE" ]; then
	log "open-files limit is $NOFILE here (hard limit $(ulimit -Hn)): running $((NOFILE - 100)) users instead of $USERS"
	USERS=$((NOFILE - 100))
fi
read -r plo phi </proc/sys/net/ipv4/ip_local_port_range
if [ $((USERS + 1000)) -gt $((phi - plo)) ]; then
	die "USERS=$USERS needs more local ports than ip_local_port_range ($plo-$phi) has"
fi

PORT=$(free_port)
# nginx starts closing idle keep-alive connections once fewer than 1/16 of
# its worker_connections are free, so give it twice as many as users.
start_nginx "$WORK/nginx" "$PORT" "" $((2 * USERS + 1000)) 300s
URL=http://127.0.0.1:$PORT

cat >"$WORK/idle.star" <<'STAR'
# Each user opens its own keep-alive connection in setup, then stays idle.
def setup(user):
    user.http.get("/", name="setup")

def hit(user):
    user.http.get("/", name="GET /")

actions = [action("Hit", hit)]
think_time = think.constant("300s")
STAR

# rss_kb PID: VmRSS of PID in KB.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# established: client-side connections to nginx (those headroom holds).
established() { ss -Htn state established "( dport = :$PORT )" | wc -l; }

# measure N RAMP HOLD NAME: runs headroom with N users, waits until all N
# connections are up and idle, samples VmRSS five times a second apart and
# sets RSS_KB (their median), then waits for the run to end by itself.
measure() {
	local n=$1 ramp=$2 hold=$3 name=$4 dir=$WORK/$4 pid
	log "$name: $n users, ramp ${ramp}s, hold ${hold}s"
	"$HEADROOM" run "$WORK/idle.star" --target "$URL" --users "$n" --ramp "${ramp}s" \
		--duration "${hold}s" --out "$dir" --quiet >"$dir.txt" 2>"$dir.err" &
	pid=$!
	BENCH_PIDS+=("$pid")
	# Wait for the connections until 20 s past the ramp, leaving at least
	# 12 s of the hold for settling and sampling.
	local deadline=$((SECONDS + ramp + (hold - 12 < 20 ? hold - 12 : 20))) est=0
	while [ $SECONDS -lt "$deadline" ]; do
		est=$(established)
		[ "$est" -ge "$n" ] && break
		kill -0 "$pid" 2>/dev/null || die "$name: headroom exited early: $(tail -5 "$dir.err")"
		sleep 1
	done
	if [ "$est" -lt "$n" ]; then
		log "$name: WARNING only $est of $n connections are established (see $WORK/nginx/error.log)"
	fi
	# Past the ramp, plus a settling pause for the last users' first think.
	local settle=$((ramp + 5 - (SECONDS - start_s)))
	[ "$settle" -gt 3 ] || settle=3
	sleep "$settle"
	local samples=()
	for _ in 1 2 3 4 5; do
		samples+=("$(rss_kb "$pid")")
		sleep 1
	done
	RSS_KB=$(median "${samples[@]}")
	EST=$(established)
	log "$name: $EST connections established, VmRSS samples ${samples[*]} KB"
	# The run ends by itself after ramp + hold (+ the grace for stopping users).
	# Exit 4 ("measured nothing") is this benchmark working: idle users
	# send nothing in the measured window, by design.
	local rc=0
	wait "$pid" || rc=$?
	[ "$rc" = 0 ] || [ "$rc" = 4 ] || die "$name: headroom failed (exit $rc): $(tail -5 "$dir.err")"
	PEAK_MB=$(jq -r '.generator.peak_rss_mb' "$dir/result.json")
	local errs
	errs=$(jq -r '[.totals, .ramp_totals | (.errors // 0) + (.timeouts // 0)] | add' "$dir/result.json")
	if [ "$errs" != 0 ]; then log "$name: $errs requests failed (see $dir.txt)"; fi
}

start_s=$SECONDS
measure "$BASE_USERS" 2 15 baseline
BASE_KB=$RSS_KB BASE_PEAK=$PEAK_MB

start_s=$SECONDS
measure "$USERS" "$RAMP" "$HOLD" idle
IDLE_KB=$RSS_KB IDLE_PEAK=$PEAK_MB

per_user=$(calc "($IDLE_KB - $BASE_KB) / ($USERS - $BASE_USERS)")
gross=$(calc "$IDLE_KB / $USERS")
echo
printf '%-28s %10s %12s %12s\n' run users 'VmRSS (MB)' 'peak (MB)'
printf '%-28s %10d %12.1f %12.1f\n' baseline "$BASE_USERS" "$(calc "$BASE_KB / 1024")" "$BASE_PEAK"
printf '%-28s %10d %12.1f %12.1f\n' "idle (connected, thinking)" "$USERS" "$(calc "$IDLE_KB / 1024")" "$IDLE_PEAK"
echo
printf 'RSS / users: %.1f KB per user\n' "$gross"
printf 'headroom idle memory: %.1f KB per idle user ((RSS_N - RSS_base) / (N - base); target < 16; k6 ~160, Locust FastHttpUser ~17)\n' "$per_user"
if [ -n "${KEEP:-}" ]; then log "raw outputs kept in $WORK"; fi
