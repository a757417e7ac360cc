#!/usr/bin/env bash
# live-cost.sh — what the live view (--ui) costs: headroom's CPU a request with and without it, a
# real headless Chromium watching the page, in alternating runs; and what the page costs its browser
# (Chromium's CPU at one update a second) and weighs (the page, its script, one update).
#
# Usage: bash bench/live-cost.sh
#   env USERS=100        users of bench/live-names.star (200 request names, think 20 ms)
#       DURATION=30      seconds measured in each run
#       ROUNDS=3         rounds of one run without and one with --ui; the median ratio is printed
#       HEADROOM_CPU=1   the core headroom is pinned to; the testbed and Chromium share the others
#       VIEWER=chromium  who watches: chromium, or curl (the updates read and nothing drawn: what the
#                        view costs headroom, apart from what a browser beside it costs the machine)
#       OUT=dir          keep the results there
set -euo pipefail

USERS=${USERS:-100}
DURATION=${DURATION:-30}
ROUNDS=${ROUNDS:-3}
HEADROOM_CPU=${HEADROOM_CPU:-1}
VIEWER=${VIEWER:-chromium}

source "$(dirname "$0")/lib.sh"
bench_workdir live-cost
trap 'stop_testbed; bench_cleanup' EXIT
need taskset util-linux
need python3 python3
need chromium chromium
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (headroom pinned apart from the testbed and the browser)"
OTHERS=$(python3 -c "import os; print(','.join(str(c) for c in sorted(os.sched_getaffinity(0)) if c != $HEADROOM_CPU))")
cd "$BENCH_ROOT"
build_headroom

# clock_ticks PGID: the CPU (user+system, in clock ticks) of every process of a process group.
clock_ticks() {
	local t=0 f
	for f in /proc/[0-9]*/stat; do
		read -r -a s <"$f" 2>/dev/null || continue
		# fields after the command: [4] pgrp, [13] utime, [14] stime (the command has no space here)
		[ "${s[4]}" = "$1" ] && t=$((t + s[13] + s[14]))
	done
	echo "$t"
}

# run NAME UI: one run against a fresh testbed, with --ui and a Chromium on its page when UI is 1;
# writes "µs-a-request requests/s browser-cores" to $WORK/NAME.txt.
run() {
	local name=$1 port ui_port ui_url= args=() browser=0 pg=
	port=$(free_port)
	wait_quiet 60
	start_testbed "$port" --workers 64
	taskset -p -c "$OTHERS" "$TESTBED" >/dev/null
	if [ "$2" = 1 ]; then
		ui_port=$(free_port)
		args=(--ui "$ui_port")
	fi
	taskset -c "$HEADROOM_CPU" "$HEADROOM" run bench/live-names.star --target "http://127.0.0.1:$port" \
		--users "$USERS" --ramp 2s --duration "${DURATION}s" --out "$WORK/$name" --no-report "${args[@]}" \
		>/dev/null 2>"$WORK/$name.log" &
	local hr=$!
	if [ "$2" = 1 ]; then
		wait_port "$ui_port" 30 || die "no live view on $ui_port"
		for _ in $(seq 50); do # the page's URL, with its key, as headroom prints it
			ui_url=$(sed -n 's|^live view: \(http://.*/\)$|\1|p' "$WORK/$name.log")
			[ -n "$ui_url" ] && break
			sleep 0.1
		done
		[ -n "$ui_url" ] || die "no live view URL in $WORK/$name.log"
		if [ "$VIEWER" = curl ]; then # the updates read, nothing drawn: headroom's side alone
			setsid taskset -c "$OTHERS" curl -sN "${ui_url}events" >/dev/null 2>&1 &
		else
			setsid taskset -c "$OTHERS" chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
				--no-first-run --user-data-dir="$WORK/chromium-$name" --remote-debugging-port=0 \
				"$ui_url" >/dev/null 2>&1 &
		fi
		pg=$!
		BENCH_PIDS+=("$pg")
		sleep 5 # the page loaded, the ramp over: then its CPU is counted
		local t0=$(clock_ticks "$pg") s0=$SECONDS
		sleep $((DURATION - 5))
		local t1=$(clock_ticks "$pg") s1=$SECONDS
		browser=$(python3 -c "import os; print('%.3f' % (($t1 - $t0) / os.sysconf('SC_CLK_TCK') / max($s1 - $s0, 1)))")
		# what the page weighs: the page, its script, one update of 200 names
		curl -s "$ui_url" | wc -c >"$WORK/page.bytes"
		curl -s "${ui_url}live.js" | wc -c >"$WORK/script.bytes"
		timeout 3 curl -sN "${ui_url}events" | awk 'NF == 0 { exit } { print }' | wc -c >"$WORK/update.bytes" || true
	fi
	wait "$hr" || { cat "$WORK/$name.log" >&2; die "run $name failed"; }
	[ -n "$pg" ] && { kill -KILL -- "-$pg" 2>/dev/null || true; }
	stop_testbed
	python3 - "$WORK/$name/result.json" "$browser" >"$WORK/$name.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
g, t = r["generator"], r["totals"]
n = sum(r.get(k, {}).get("count", 0) for k in ("totals", "ramp_totals", "stopping_totals"))
print("%.2f %.0f %s" % (1e6 * g["cpu_seconds"] / max(n, 1), t["rps"], sys.argv[2]))
PY
	# the page's own share, as headroom counts it (the time it spent building and sending updates)
	sed -n 's/.*: \([0-9.]*\)% of headroom.s CPU over the run/\1/p' "$WORK/$name.log" >"$WORK/$name.share"
}

printf '%-6s %-24s %-24s %-10s %-15s %s\n' round "without: µs/req req/s" "with --ui: µs/req req/s" "CPU ratio" "Chromium cores" "page's share %" >&2
ratios=() browsers=() shares=()
for i in $(seq 1 "$ROUNDS"); do
	run "off-$i" 0
	run "on-$i" 1
	read -r a ar _ <"$WORK/off-$i.txt"
	read -r b br bc <"$WORK/on-$i.txt"
	ratios+=("$(calc "$b / $a")")
	browsers+=("$bc")
	shares+=("$(cat "$WORK/on-$i.share")")
	printf '%-6s %-24s %-24s %-10s %-15s %s\n' "$i" "$a $ar" "$b $br" "${ratios[-1]}" "$bc" "${shares[-1]}" >&2
done
log "median CPU-a-request ratio, with --ui and a browser over without: $(median "${ratios[@]}")"
log "median share of headroom's CPU it spent on the page's updates: $(median "${shares[@]}")%"
log "median CPU of the watching Chromium: $(median "${browsers[@]}") cores"
log "page $(cat "$WORK/page.bytes") bytes, script $(cat "$WORK/script.bytes") bytes, one update (200 request names) $(cat "$WORK/update.bytes") bytes"
