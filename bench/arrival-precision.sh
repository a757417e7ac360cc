#!/usr/bin/env bash
# arrival-precision.sh — how late headroom's open model sends each arrival at rates where its core is
# mostly idle, and what sending them on time costs. Go's poller sleeps in whole milliseconds
# (epoll_wait): with the next arrival under a millisecond away when the process goes idle, it wakes a
# millisecond later, and sends that millisecond's arrivals together (golang/go#53824). The dispatcher
# has the kernel end such a wait on time (internal/wakeup) while arrivals are 100 µs or more apart on average
# (engine/guard.go, guardedGaps): this script shows the lateness and the CPU either way.
#
# Usage: bash bench/arrival-precision.sh
#   env RATES="1000 2000 5000 10000 12000 20000"   arrivals a second, one trial each (a round)
#       TRIAL=5        seconds a trial
#       ROUNDS=1       rounds, the binaries interleaved at each rate
#       HEADROOM=path  the binary measured (default: ./cmd/headroom built from this tree)
#       BASE=path      a second binary, e.g. one built before internal/wakeup, measured beside it
#       SERVER_CPU=0 CLIENT_CPU=1   cores nginx and headroom are pinned to (GOMAXPROCS=1)
#       QUIET_WAIT=20  seconds to wait, before each trial, for the machine to be idle
#       OUT=dir        keep the runs there (default: a temp dir, removed)
#
# One nginx (one worker, 13-byte body) on SERVER_CPU; headroom run --rate R/s with 64 users set up
# first, on CLIENT_CPU. Printed per trial: the generator's CPU (% of its core), its lateness (from each
# arrival's intended start to its send: result.json's generator.lateness) p50 and p99, and the
# latency's p99 from the intended start and from the send (the service time, the server's part).
# Traffic: 127.0.0.1 only.
set -euo pipefail

RATES=${RATES:-1000 2000 5000 10000 12000 20000}
TRIAL=${TRIAL:-5}
ROUNDS=${ROUNDS:-1}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
QUIET_WAIT=${QUIET_WAIT:-20}

source "$(dirname "$0")/lib.sh"

bench_workdir arrival-precision
need nginx nginx
need jq jq
need taskset util-linux
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (server and client pinned apart)"
build_headroom
bins=("$HEADROOM")
if [ -n "${BASE:-}" ]; then
	[ -x "$BASE" ] || die "BASE=$BASE is not an executable"
	bins+=("$BASE")
fi

PORT=$(free_port)
start_nginx "$WORK/nginx" "$PORT" "$SERVER_CPU" 4096 75s
cat >"$WORK/hit.star" <<'STAR'
def hit(user):
    user.http.get("/", name="GET /")

actions = [action("Hit", hit)]
STAR

printf '%-10s %7s %6s %10s %10s %12s %12s\n' binary rate cpu% "late p50" "late p99" "p99 intended" "p99 service"
for round in $(seq "$ROUNDS"); do
	for rate in $RATES; do
		for bin in "${bins[@]}"; do
			out=$WORK/run-$round-$rate-$(basename "$bin")
			wait_quiet "$QUIET_WAIT" 10
			GOMAXPROCS=1 taskset -c "$CLIENT_CPU" "$bin" run "$WORK/hit.star" --target "http://127.0.0.1:$PORT" \
				--rate "$rate/s" --duration "${TRIAL}s" --max-users 64 --pre-users 64 \
				--out "$out" --quiet --no-report >"$out.log" 2>&1 || die "$bin at $rate/s failed: $(tail -3 "$out.log")"
			jq -r --arg b "$(basename "$bin")" --arg r "$rate" '[$b, $r, (.generator.cpu_percent | floor),
				"\(.generator.lateness.p50_ms) ms", "\(.generator.lateness.p99_ms) ms",
				"\(.totals.p99_ms) ms", "\(.service_time.totals.p99_ms // "-") ms"] | @tsv' "$out/result.json" |
				awk -F'\t' '{printf "%-10s %7s %6s %10s %10s %12s %12s\n", $1, $2, $3, $4, $5, $6, $7}'
		done
	done
done
