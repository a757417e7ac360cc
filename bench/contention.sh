#!/usr/bin/env bash
# contention.sh — does headroom's ceiling find a rate limiter's true capacity,
# on a quiet machine and on a busy one?
#
# Usage: bash bench/contention.sh
#   env RATES="200 400"   the limiter's rates (requests/s, all clients together), one search each per HOGS
#       HOGS="0 2"        CPU busy loops beside headroom and nginx, for each rate
#       REPEAT=1          searches of each case, one after another (each on a fresh nginx)
#       BURST=20          the limiter's burst allowance (limit_req burst, nodelay): 20 lets
#                         users on independent phases (Poisson-like starts) through at the
#                         rate itself; a burst of 5 refuses such load near its rate by chance
#                         (simulated: ~6% at 95% of the rate), so its true ceiling is lower
#       WINDOW=5s JUDGE=4s MEASURE=10s
#                         the search's check window, judging time and final hold (short, as
#                         scripts/demo.sh's; the defaults are 10s, 6s, 20s)
#       MAX_DURATION=8m   each search stops after this long (headroom ceiling --max-duration)
#       NICE=-10          nginx's nice value (scripts/nginx.sh; root only): ahead of the hogs, so
#                         that what is measured is headroom's stalls, not the target's (0: both)
#       QUIET_WAIT=60     seconds to wait, before each search, for the machine to be idle
#       HEADROOM=path     use this binary instead of building ./cmd/headroom
#       OUT=dir           keep every search's result there (default: a temp dir, removed)
#
# The target is scripts/nginx.sh: Debian's nginx with limit_req, one token
# bucket of RATE requests a second with a burst of BURST, 503 past it. The
# scenario, bench/limiter.star, sends one GET a user a second, so the true
# ceiling is RATE users (a little more: a user's cycle is 1 s plus its
# request). headroom's default client checks judge each level (5xx > 0.025%,
# timeouts > 0.025%, mean latency > 0.1 s, p99 > 2 s); nginx has no metrics to
# scrape. Users whose phases gather into bunches meet 503s below RATE, so a
# search on bunched load answers low. Each search starts at a third of RATE.
#
# The yardstick is not RATE itself: users on independent phases overflow a
# small burst by chance below the rate, so an ideal generator's search lands
# under it, spread by the draw of its users' phases. bench/bucketsim runs
# 1,000 such searches (the same search, checks and bucket, a generator whose
# users keep independent uniform phases) and gives the 5th and 95th
# percentiles of their answers: the ideal range, printed once a rate.
#
# One line per search, then a table: the supported users and their interval,
# whether headroom called the answer trustworthy (and why not), and whether
# it is inside the ideal range: "ok" if so, "flagged" if not but headroom said
# it was untrustworthy, "WRONG" if not and it claimed to be trustworthy.
# Traffic goes to 127.0.0.1 only; nginx and the hogs are stopped by PID.
set -euo pipefail

RATES=${RATES:-200 400}
HOGS=${HOGS:-0 2}
REPEAT=${REPEAT:-1}
BURST=${BURST:-20}
WINDOW=${WINDOW:-5s}
JUDGE=${JUDGE:-4s}
MEASURE=${MEASURE:-10s}
MAX_DURATION=${MAX_DURATION:-8m}
QUIET_WAIT=${QUIET_WAIT:-60}

source "$(dirname "$0")/lib.sh"

bench_workdir contention

need jq jq
need timeout coreutils
NGINX_SH=$BENCH_ROOT/scripts/nginx.sh
"$NGINX_SH" install >&2 || die "could not install nginx"
build_headroom
SCENARIO=$BENCH_ROOT/bench/limiter.star
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "REPEAT=$REPEAT: want a whole number, 1 or more"
BUCKETSIM=$WORK/bucketsim
(cd "$BENCH_ROOT" && go build -o "$BUCKETSIM" ./bench/bucketsim) || die "could not build bench/bucketsim"

# ideal RATE: the 5th percentile, median and 95th percentile of an ideal
# generator's answers at RATE (bench/bucketsim, 1,000 searches; a few seconds).
declare -A IDEAL
ideal() {
	[ -n "${IDEAL[$1]:-}" ] || IDEAL[$1]=$("$BUCKETSIM" -rate "$1" -burst "$BURST" -window "$WINDOW" -judge "$JUDGE" \
		-measure "$MEASURE" -start $(($1 / 3)) -searches 1000) || die "bucketsim failed at rate $1"
	echo "${IDEAL[$1]}"
}

# Descriptors for a few hundred users' connections, on each side.
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# max_seconds DURATION: a Go duration of whole m or s (8m, 90s) in seconds.
max_seconds() {
	case $1 in
	*m) echo $((${1%m} * 60)) ;;
	*s) echo "${1%s}" ;;
	*) die "MAX_DURATION=$1: want whole minutes or seconds, e.g. 8m or 300s" ;;
	esac
}
BOUND=$(($(max_seconds "$MAX_DURATION") + 120)) # a hog outlives no search by more than 2 minutes

# start_hogs N: N busy loops, each bounded to BOUND seconds, stopped by PID
# (stop_hogs, and the EXIT trap through BENCH_PIDS).
HOG_PIDS=()
start_hogs() {
	local i
	for ((i = 0; i < $1; i++)); do
		timeout "$BOUND" sh -c 'while :; do :; done' &
		HOG_PIDS+=("$!")
		BENCH_PIDS+=("$!")
	done
}
stop_hogs() {
	local pid
	for pid in "${HOG_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	HOG_PIDS=()
}

# one_case RATE HOGS: one search; prints its line and appends it to ROWS.
ROWS=()
one_case() {
	local rate=$1 hogs=$2 name=rate$1-hogs$2-$3 port start rc=0
	local dir=$WORK/$name
	port=$(free_port)
	wait_quiet "$QUIET_WAIT"
	PORT=$port RATE=$rate BURST=$BURST NICE=${NICE:--10} "$NGINX_SH" start "$dir/nginx" >&2 || die "nginx did not start"
	BENCH_PIDS+=("$(cat "$dir/nginx/nginx.pid")")
	start_hogs "$hogs"
	start=$((rate / 3))
	log "$name: headroom ceiling, limiter ${rate}/s burst $BURST, $hogs hogs, --start-users $start"
	"$HEADROOM" ceiling "$SCENARIO" --target "http://127.0.0.1:$port" --start-users "$start" \
		--window "$WINDOW" --judge "$JUDGE" --measure "$MEASURE" --max-duration "$MAX_DURATION" \
		--max-users $((rate * 4)) --quiet --no-report --out "$dir/ceiling" >"$dir/ceiling.txt" 2>"$dir/ceiling.err" || rc=$?
	stop_hogs
	"$NGINX_SH" stop "$dir/nginx" >&2
	local r=$dir/ceiling/result.json
	[ -f "$r" ] || die "$name: headroom exited $rc with no result: $(tail -5 "$dir/ceiling.err")"
	local refused
	refused=$(awk '$2 == 503' "$dir/nginx/access.log" | wc -l)
	# rate hogs users low high found trustworthy untrusted(- if none) within late cpu% 503s seconds rc:
	# no field is empty, so that read splits it right (tabs are whitespace to read)
	local row ilo imid ihi
	read -r ilo imid ihi <<<"$(ideal "$rate")"
	row=$(jq -r --argjson rate "$rate" --argjson hogs "$hogs" --argjson refused "$refused" --argjson rc "$rc" \
		--argjson ilo "$ilo" --argjson ihi "$ihi" '
		.ceiling as $c | $c.supported_users as $s
		| (if $s.value >= $ilo and $s.value <= $ihi then "ok"
		   elif $c.trustworthy | not then "flagged" else "WRONG" end) as $within
		| [$rate, $hogs, $s.value, $s.low, $s.high, $s.found, $c.trustworthy, (if ($c.untrusted // "") == "" then "-" else $c.untrusted | gsub("[\t\n]"; " ") end),
		   $within, .generator.late_wakeups, (.generator.cpu_percent | round), $refused, ($c.search_seconds | round), $rc, "[\($ilo), \($ihi)]"]
		| @tsv' "$r")
	ROWS+=("$row")
	IFS=$'\t' read -r _ _ users low high found trusted untrusted within late cpu _ secs _ _ <<<"$row"
	printf 'rate %4s/s  hogs %s  supported %5.0f users  [%s, %s)  found %s  trustworthy %s%s  %s (ideal [%s, %s], median %s)  late wake-ups %s, generator %s%% of a core, %s 503s at nginx, %ss\n' \
		"$rate" "$hogs" "$users" "$low" "$high" "$found" "$trusted" "$([ "$untrusted" = - ] || echo " ($untrusted)")" "$within" "$ilo" "$ihi" "$imid" "$late" "$cpu" "$refused" "$secs"
}

log "rates: $RATES; hogs: $HOGS; $REPEAT search(es) each; burst $BURST; --window $WINDOW --judge $JUDGE --measure $MEASURE --max-duration $MAX_DURATION"
for rate in $RATES; do
	[[ $rate =~ ^[0-9]+$ && $rate -ge 3 ]] || die "RATES: $rate is not a whole number of requests/s, 3 or more"
	read -r ilo imid ihi <<<"$(ideal "$rate")"
	log "rate $rate/s, burst $BURST: an ideal generator's searches answer [$ilo, $ihi] (5th to 95th percentile), median $imid"
	for hogs in $HOGS; do
		[[ $hogs =~ ^[0-9]+$ ]] || die "HOGS: $hogs is not a whole number"
		for ((k = 1; k <= REPEAT; k++)); do
			one_case "$rate" "$hogs" "$k"
		done
	done
done

echo
echo "summary (within: ok = inside an ideal generator's range; flagged = not, and headroom said untrustworthy; WRONG = not, and it said trustworthy)"
printf '%6s %5s %9s %13s %11s %6s %12s %8s %6s %6s %6s %7s  %s\n' rate hogs supported interval ideal found trustworthy within late cpu% 503s seconds untrusted
wrong=0
for row in "${ROWS[@]}"; do
	IFS=$'\t' read -r rate hogs users low high found trusted untrusted within late cpu refused secs _ range <<<"$row"
	[ "$within" = WRONG ] && wrong=$((wrong + 1))
	printf '%6s %5s %9.0f %13s %11s %6s %12s %8s %6s %6s %6s %7s  %s\n' "$rate" "$hogs" "$users" "[$low, $high)" "$range" "$found" "$trusted" \
		"$within" "$late" "$cpu" "$refused" "$secs" "$untrusted"
done
echo "$wrong of ${#ROWS[@]} searches WRONG (outside an ideal generator's range and claimed trustworthy)"
if [ -n "${KEEP:-}" ]; then log "results kept in $WORK"; fi
