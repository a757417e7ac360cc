#!/usr/bin/env bash
# Does headroom's ceiling of a real server hold still when asked again?
# Three ceiling searches of Synapse 1.163.2 (a Matrix homeserver) under
# examples/matrix.star, judged by headroom's default checks plus Synapse's
# own latency and CPU (bench/synapse-checks.star), each on a fresh Synapse
# (a new data directory: the same empty database at every start), its
# shared rooms given a fixed population of MEMBERS accounts by the
# scenario's init (--var members=200), so that every level is judged
# against the same rooms whatever levels came before it. Prints
# each supported users figure with its interval, the levels tried (and how
# many of a level's users had finished setup while it was judged, when not
# all), and whether the intervals overlap.
#
#   bash bench/synapse-ceiling.sh                       # ~10-15 minutes
#   RUNS=5 bash bench/synapse-ceiling.sh
#   CHECKS= bash bench/synapse-ceiling.sh               # the default checks alone
#   MEMBERS=0 bash bench/synapse-ceiling.sh             # each user signs up and joins (rooms grow)
#   CEILING_ARGS="--precision 10%" bash bench/synapse-ceiling.sh
#   BCRYPT_ROUNDS=4 bash bench/synapse-ceiling.sh       # cheap sign-ups (scripts/synapse.sh)
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
MEMBERS=${MEMBERS-200}
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
members=()
[ "${MEMBERS:-0}" -gt 0 ] && members=(--var "members=$MEMBERS")
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
		--scrape "http://127.0.0.1:$metrics/_synapse/metrics" "${checks[@]}" "${members[@]}" $CEILING_ARGS \
		--out "$WORK/ceiling-$i" --quiet --no-report | sed -n '/^\(Supported users\|No ceiling\)/,/^Requests$/p' >&2 || true
	stop_synapse
done

judged_by=${CHECKS:+"the defaults and $CHECKS"}${MEMBERS:+, $MEMBERS members}
python3 - "$WORK" "$RUNS" "${judged_by:-the defaults}${CEILING_ARGS:+, $CEILING_ARGS}" <<'PY'
import json, sys

work, runs, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
print(f"\nSynapse 1.163.2, examples/matrix.star, checks: {how}")
print(f"{'run':4s} {'found':6s} {'users':>6s}  {'interval':14s} {'took':>6s}  bottleneck (fired/judged)")
intervals = []
for i in range(1, runs + 1):
    c = json.load(open(f"{work}/ceiling-{i}/result.json"))["ceiling"]
    s = c["supported_users"]
    high = s["high"] if s["high"] > 0 else float("inf")
    intervals.append((s["low"], high))
    judged = [b for b in c.get("bottleneck") or [] if b["fired"] > 0]
    b = max(judged, key=lambda b: (b.get("first", False), b["fired"]), default=None)
    neck = f"{b['check']} {b['fired']}/{b['evaluations']}" if b else "-"
    interval = f"[{s['low']:.0f}, {'none' if high == float('inf') else f'{high:.0f}'})"
    why = f"  ({s['why']})" if s.get("why") else ""
    print(f"{i:<4d} {str(s['found']).lower():6s} {s['value']:6.0f}  {interval:14s} {c['search_seconds']:5.0f}s  {neck}{why}")
    # Each level, and how many of its users had finished setup while it
    # was judged (the check timeline's users), when that was fewer.
    levels = []
    for l in c.get("levels") or []:
        setup = [p["users"] for p in c.get("check_timeline") or []
                 if l.get("judge_start_s", l["start_s"]) <= p["t"] <= l["end_s"]]
        mark = "ok" if l["verdict"] == "healthy" else "X"
        short = f" ({min(setup)} set up)" if setup and min(setup) < l["users"] else ""
        levels.append(f"{l['users']} {mark}{short}")
    print(f"     levels: {', '.join(levels)}")
# The ceiling of run i lies in [low, high) (no high: open above). They
# overlap when one number lies in all of them: the largest low end is
# below the smallest high end.
lo, hi = max(l for l, _ in intervals), min(h for _, h in intervals)
if lo < hi:
    print(f"intervals overlap: every ceiling lies in [{lo:.0f}, {'none' if hi == float('inf') else f'{hi:.0f}'})")
else:
    print(f"intervals do NOT overlap: the largest low end ({lo:.0f}) is not below the smallest high end ({hi:.0f})")
PY
if [ -n "${KEEP:-}" ]; then echo "results, Synapse configs and logs: $WORK"; fi
