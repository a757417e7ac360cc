#!/usr/bin/env bash
# Does headroom's ceiling of a real server hold still when asked again?
# Three ceiling searches of Synapse 1.163.2 (a Matrix homeserver) under
# examples/matrix.star, judged by Synapse's own figures
# (bench/synapse-checks.star), each on a fresh Synapse (a new data
# directory: the same empty database at every start). Prints each supported
# users figure with its interval, and whether the intervals overlap.
#
#   bash bench/synapse-ceiling.sh                       # ~20-40 minutes
#   RUNS=5 bash bench/synapse-ceiling.sh
#   CHECKS= bash bench/synapse-ceiling.sh               # headroom's default checks instead
#   CEILING_ARGS="--precision 10%" bash bench/synapse-ceiling.sh
#   OUT=.bench/synapse bash bench/synapse-ceiling.sh    # keep every result, config and Synapse log
#
# On a machine with 2 cores or more Synapse is pinned to core 0 and headroom
# to core 1 (SYNAPSE_CPU, HEADROOM_CPU; set both empty for no pinning), so
# that neither steals the other's CPU. Synapse serves its requests on one
# Python thread, so one core is what it can use anyway.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-3}
CHECKS=${CHECKS-bench/synapse-checks.star}
CEILING_ARGS=${CEILING_ARGS:-}
if [ "$(nproc)" -ge 2 ]; then
	SYNAPSE_CPU=${SYNAPSE_CPU-0}
	HEADROOM_CPU=${HEADROOM_CPU-1}
else
	SYNAPSE_CPU=${SYNAPSE_CPU-}
	HEADROOM_CPU=${HEADROOM_CPU-}
fi

source bench/lib.sh
bench_workdir synapse-ceiling
ulimit -n 65536 2>/dev/null || true
need jq jq
need curl curl
build_headroom
./scripts/synapse.sh install >&2

SYNAPSE_DIR=""
stop_synapse() {
	[ -n "$SYNAPSE_DIR" ] && ./scripts/synapse.sh stop "$SYNAPSE_DIR" >&2
	SYNAPSE_DIR=""
}
# Synapse runs in a session of its own: stop it by its PID on the way out,
# before bench_cleanup removes its directory.
trap 'stop_synapse; bench_cleanup' EXIT

pin() { # CPU CMD...: CMD pinned to CPU ("" = not pinned)
	local cpu=$1
	shift
	if [ -n "$cpu" ]; then taskset -c "$cpu" "$@"; else "$@"; fi
}

checks=()
[ -n "$CHECKS" ] && checks=(--checks "$CHECKS")
for i in $(seq 1 "$RUNS"); do
	port=$(free_port)
	metrics=$(free_port)
	[ "$port" != "$metrics" ] || metrics=$(free_port)
	SYNAPSE_DIR=$WORK/synapse-$i
	PORT=$port METRICS_PORT=$metrics pin "$SYNAPSE_CPU" ./scripts/synapse.sh start "$SYNAPSE_DIR" >&2
	wait_quiet 60
	log "ceiling $i of $RUNS${SYNAPSE_CPU:+ (Synapse on cpu $SYNAPSE_CPU, headroom on cpu $HEADROOM_CPU)}"
	# shellcheck disable=SC2086 # CEILING_ARGS is a list of flags
	pin "$HEADROOM_CPU" "$HEADROOM" ceiling examples/matrix.star --target "http://127.0.0.1:$port" \
		--scrape "http://127.0.0.1:$metrics/_synapse/metrics" "${checks[@]}" $CEILING_ARGS \
		--out "$WORK/ceiling-$i" --quiet --no-report | sed -n '/^supported users/,/^levels/p' >&2 || true
	stop_synapse
done

echo
judged_by=${CHECKS:-"the default checks"}
echo "Synapse 1.163.2, examples/matrix.star, checks: $judged_by${CEILING_ARGS:+, $CEILING_ARGS}"
printf '%-4s %-6s %-10s %-14s %-9s %-24s %s\n' run found users interval took "bottleneck (fired/judged)" why
for i in $(seq 1 "$RUNS"); do
	jq -r --arg i "$i" '.ceiling as $c | $c.supported_users as $s |
		($c.bottleneck // [] | max_by(.fired) // {}) as $b |
		[$i, ($s.found | tostring), ($s.value | tostring),
		 "[\($s.low), \(if $s.high > 0 then $s.high else "none" end))",
		 "\($c.search_seconds | floor)s",
		 (if $b.check then "\($b.check) \($b.fired)/\($b.evaluations)" else "-" end),
		 ($s.why // "")] | @tsv' "$WORK/ceiling-$i/result.json" |
		awk -F'\t' '{printf "%-4s %-6s %-10s %-14s %-9s %-24s %s\n", $1, $2, $3, $4, $5, $6, $7}'
done
# The ceiling of run i lies in [low, high) (high 0: no level was unhealthy,
# the interval is open above). The intervals overlap when one number lies in
# all of them: the largest low is below the smallest high.
jq -s -r '[.[].ceiling.supported_users] as $s |
	([$s[].low] | max) as $lo | ([$s[] | select(.high > 0) | .high] | min // infinite) as $hi |
	if $lo < $hi then "intervals overlap: every ceiling lies in [\($lo), \(if $hi == infinite then "none" else $hi end))"
	else "intervals do NOT overlap: the largest low end (\($lo)) is not below the smallest high end (\($hi))" end' \
	"$WORK"/ceiling-*/result.json
[ -n "${KEEP:-}" ] && echo "results, Synapse configs and logs: $WORK"
