#!/usr/bin/env bash
# Two releases of the Open edX forum step-compared, as the reference's report compared two
# implementations (forum-step-load-comparison.txt), with repeats so that each difference gets an
# interval and a verdict: both releases are installed and started side by side, each on its own
# database with the same data phase, then step runs alternate base, new, base, new, ... (a drift of
# the machine falls on both sides alike), each from the database as the data phase left it (a run
# leaves more posts and every learner's read state behind: left in place, the server's CPU a request
# rose from 95 to 203 ms in three runs), and `headroom compare` judges them level by level.
#
#   ./scripts/openedx-forum-pair.sh 0.5.0 0.6.0 runs/forum-0.5.0-vs-0.6.0     # ~40 min on 2 cores
#
# Environment:
#   LEVELS (8,24,48)  the step levels (users), the reference's 48…336 scaled to a 2-core server
#   HOLD (90s)        each level's held window (the creates are rare: 45 s gave too few of them for a
#                     verdict at any level)
#   REPEATS (3)       step runs per release
#   THREADS (200)     the data phase's threads (each with 4 responses and 2 comments)
#   PORT (18000)      the base's API; the base's metrics, profiler, MariaDB and MariaDB's exporter are
#                     PORT+1, PORT+2, PORT-4694 and PORT+1104, the new release's each 10 higher
#   PROFILE (1)       the workers' CPU profiles by `headroom profiler` (py-spy, installed by
#                     scripts/py-spy.sh) beside each server, --profile-slice 5s: compare's profile diff
#                     names the Python functions that moved; 0 for none
#
# MariaDB's exporter (scripts/openedx-forum.sh starts it) is scraped beside the forum's metrics, so each
# level has the database's queries and rows read a request, and compare judges them.
#
# Leaves in OUT: base-N/ and new-N/ (each a step result), compare/ (report.md, report.html,
# compare.json), and server-VERSION/ (each server's directory, stopped at the end).
set -euo pipefail

[[ $# -eq 3 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=$1 NEW=$2
mkdir -p "$3"
OUT=$(cd "$3" && pwd)
LEVELS=${LEVELS:-8,24,48}
HOLD=${HOLD:-90s}
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-200}
PORT=${PORT:-18000}
PROFILE=${PROFILE:-1}
FORUM=$ROOT/scripts/openedx-forum.sh
SC=$ROOT/examples/openedx-forum.star

T0=$SECONDS
step() { echo "== $(date -u +%H:%M:%S) (+$((SECONDS - T0)) s) $*"; }

(cd "$ROOT" && go build -o "$OUT/headroom" ./cmd/headroom)
HR=$OUT/headroom

# ports SIDE: the API, metrics and MariaDB ports of side 0 (base) or 1 (new).
ports() { local p=$((PORT + 10 * $1)); echo "PORT=$p METRICS_PORT=$((p + 1)) DB_PORT=$((p - 4694)) DB_EXPORTER_PORT=$((p + 1104))"; }

profiler=""
stop_all() {
	[[ -n $profiler ]] && kill "$profiler" 2>/dev/null
	for v in "$BASE" "$NEW"; do "$FORUM" stop "$OUT/server-$v" >/dev/null 2>&1 || true; done
}
PYSPY=""
if [[ $PROFILE == 1 ]]; then
	"$ROOT/scripts/py-spy.sh" install
	PYSPY=$("$ROOT/scripts/py-spy.sh" path)
fi
trap stop_all EXIT

# One token for both servers, and one forum.json for the scenario: its hash covers its data files and
# --var values, so both sides' results are of one scenario.
FORUM_TOKEN=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
FORUM_API_KEY=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
export FORUM_TOKEN FORUM_API_KEY

side=0
for v in "$BASE" "$NEW"; do
	step "openedx-forum $v: install, start, data phase ($THREADS threads)"
	FORUM_VERSION=$v "$FORUM" install
	env $(ports $side) FORUM_VERSION=$v "$FORUM" start "$OUT/server-$v"
	cp "$OUT/server-$v/forum.json" "$OUT/forum.json"
	"$HR" run "$SC" --target "http://127.0.0.1:$((PORT + 10 * side))" --var forum="$OUT/forum.json" --var data=yes \
		--var threads="$THREADS" --setup-only --users 20 --ramp 5s --setup-timeout 10m --no-report --force --out "$OUT/data-$v" >/dev/null
	"$FORUM" stop "$OUT/server-$v" >/dev/null
	rm -rf "$OUT/server-$v/db.snapshot" && cp -a "$OUT/server-$v/db" "$OUT/server-$v/db.snapshot"
	side=1
done

# restore VERSION SIDE: the server of VERSION started again on its database as the data phase left it.
restore() {
	"$FORUM" stop "$OUT/server-$1" >/dev/null
	rm -rf "$OUT/server-$1/db" && cp -a "$OUT/server-$1/db.snapshot" "$OUT/server-$1/db"
	env $(ports "$2") FORUM_VERSION=$1 "$FORUM" start "$OUT/server-$1" >/dev/null
}

for i in $(seq 1 "$REPEATS"); do
	side=0
	for v in "$BASE" "$NEW"; do
		name=base
		[[ $side == 1 ]] && name=new
		p=$((PORT + 10 * side))
		step "run $i of $REPEATS: $name ($v), levels $LEVELS, $HOLD each"
		restore "$v" "$side"
		prof=()
		if [[ $PROFILE == 1 ]]; then # the workers: gunicorn's master and its children
			"$HR" profiler --pid "$(cat "$OUT/server-$v/gunicorn.pid")" --py-spy "$PYSPY" --listen "127.0.0.1:$((p + 2))" \
				>"$OUT/$name-$i.profiler.log" 2>&1 &
			profiler=$!
			prof=(--profile "http://127.0.0.1:$((p + 2))/debug/pprof" --profile-slice 5s)
		fi
		"$HR" step "$SC" --target "http://127.0.0.1:$p" --var forum="$OUT/forum.json" \
			--scrape "http://127.0.0.1:$((p + 1))/metrics" --scrape "http://127.0.0.1:$((p + 1104))/metrics" "${prof[@]}" \
			--levels "$LEVELS" --hold "$HOLD" --no-report --force --out "$OUT/$name-$i" >"$OUT/$name-$i.txt" 2>&1 ||
			{ tail -20 "$OUT/$name-$i.txt"; exit 1; }
		if [[ -n $profiler ]]; then
			kill "$profiler" 2>/dev/null
			wait "$profiler" 2>/dev/null || true
			profiler=""
		fi
		side=1
	done
done
stop_all

step "compare: $BASE against $NEW"
bases=() news=()
for i in $(seq 1 "$REPEATS"); do bases+=("$OUT/base-$i") news+=("$OUT/new-$i"); done
"$HR" compare "${bases[@]}" --vs "${news[@]}" --out "$OUT/compare" | tee "$OUT/compare.txt"
step "done: $OUT/compare/report.md"
