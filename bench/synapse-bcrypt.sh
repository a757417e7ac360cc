#!/usr/bin/env bash
# synapse-bcrypt.sh — a Python server's regression named by its own profile: Synapse 1.163.2 at two password-
# hash costs (scripts/synapse.sh's BCRYPT_ROUNDS), each side a fresh server whose MEMBERS accounts are signed up
# first, then RUNS bounded runs in which every user logs in, the server sampled by `headroom profiler` (py-spy
# 0.4.3) and read by --profile; then `headroom compare`: the logins' latency, the server's CPU a user set up and
# the Python function that carries the change, as the reference found PBKDF2 in Mattermost's logins.
#
# Usage: bash bench/synapse-bcrypt.sh
#   env BASE=10 NEW=12    bcrypt rounds a side (each round doubles a hash's work; 12 is Synapse's default)
#       RUNS=2            bounded runs a side; compare gives intervals from 2 or more
#       USERS=20 RAMP=10s DURATION=20s   each run (every user logs in during the ramp)
#       OUT=dir           put the runs and the comparison there (default: a temporary directory; kept, printed)
#
# ~4 minutes on 2 cores. Synapse checks a password on a thread of its pool, in bcrypt's native code with the
# GIL let go: py-spy counts that thread as running (it is), under the Python function that called bcrypt.
set -euo pipefail

BASE=${BASE:-10}
NEW=${NEW:-12}
RUNS=${RUNS:-2}
USERS=${USERS:-20}
RAMP=${RAMP:-10s}
DURATION=${DURATION:-20s}

source "$(dirname "$0")/lib.sh"
bench_workdir synapse-bcrypt
KEEP=1 # the runs are the result: kept, and their place printed
cd "$BENCH_ROOT"
build_headroom
./scripts/synapse.sh install >&2
./scripts/py-spy.sh install >&2
PYSPY=$(./scripts/py-spy.sh path)
server="" profiler=""
cleanup() {
	[ -n "$profiler" ] && kill "$profiler" 2>/dev/null
	[ -n "$server" ] && ./scripts/synapse.sh stop "$server" >/dev/null 2>&1
	bench_cleanup
}
trap cleanup EXIT

for side in base new; do
	rounds=$BASE
	[ "$side" = new ] && rounds=$NEW
	port=$(free_port) metrics=$(free_port) pport=$(free_port)
	server=$WORK/$side-server
	PORT=$port METRICS_PORT=$metrics BCRYPT_ROUNDS=$rounds ./scripts/synapse.sh start "$server" >&2
	t=http://127.0.0.1:$port
	log "$side (bcrypt_rounds $rounds): the $USERS accounts signed up"
	"$HEADROOM" run examples/matrix.star --target "$t" --var members="$USERS" --setup-only --users 1 --ramp 1s \
		--no-report --out "$WORK/$side-data" >"$WORK/$side-data.log" 2>&1 || die "$side: signing up failed: $(tail -5 "$WORK/$side-data.log")"
	"$HEADROOM" profiler --pid "$(cat "$server/synapse.pid")" --py-spy "$PYSPY" --listen "127.0.0.1:$pport" 2>"$WORK/$side-profiler.log" &
	profiler=$!
	for i in $(seq 1 "$RUNS"); do
		log "$side: run $i of $RUNS ($USERS users log in during $RAMP, then $DURATION)"
		"$HEADROOM" run examples/matrix.star --target "$t" --var members="$USERS" \
			--scrape "http://127.0.0.1:$metrics/_synapse/metrics" --profile "http://127.0.0.1:$pport/debug/pprof" --profile-slice 2s \
			--users "$USERS" --ramp "$RAMP" --duration "$DURATION" --seed "$i" --out "$WORK/$side-$i" \
			>"$WORK/$side-$i.log" 2>&1 || die "$side: run $i failed: $(tail -5 "$WORK/$side-$i.log")"
		grep -m1 "requests/s" "$WORK/$side-$i.log" >&2 || true
	done
	kill "$profiler" && wait "$profiler" 2>/dev/null || true
	profiler=""
	./scripts/synapse.sh stop "$server" >/dev/null
	server=""
done
log "headroom compare"
bases=() news=()
for i in $(seq 1 "$RUNS"); do bases+=("$WORK/base-$i") news+=("$WORK/new-$i"); done
"$HEADROOM" compare "${bases[@]}" --vs "${news[@]}" --out "$WORK/compare" | tee "$WORK/compare.txt"
grep -A3 "^### Target 1, users' setup" "$WORK/compare/report.md" || true
log "runs and comparison in $WORK (report: $WORK/compare/report.md)"
