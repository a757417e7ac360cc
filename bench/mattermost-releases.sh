#!/usr/bin/env bash
# mattermost-releases.sh — the reference's release comparison (perf-comparison-v10.12-vs-v11.0.md) on two
# real Mattermost builds: each side a fresh server and database (scripts/mattermost.sh), the same small data
# set, RUNS bounded runs with the server's CPU profiles (--profile), then `headroom compare` of the two:
# the users' setup (logins), the window's latencies, the server's timings and the profile diff per phase.
#
# Usage: bash bench/mattermost-releases.sh
#   env BASE=<pseudo-version> BASE_PUBLIC=<pseudo-version of server/public>   (default: master of
#           2025-05-21, v8.0.0-20250521083701-1cb244e8760d: passwords hashed with bcrypt)
#       NEW=<pseudo-version>  NEW_PUBLIC=...                                  (default: master of
#           2025-10-28, v8.0.0-20251028162707-35dd8dea5008: PBKDF2 at 600,000 rounds, PR #33830)
#       RUNS=3        bounded runs a side; compare gives intervals from 2 or more
#       USERS=40 RAMP=20s DURATION=40s   each run (every user logs in during the ramp)
#       OUT=dir       put the runs and the comparison there (default: a temporary directory; kept, printed)
#
# Every user logs in (a fresh process keeps no session), so the setup phase is the releases' logins.
# Each build takes ~13 minutes cold (scripts/mattermost.sh install), seconds when cached; the runs take
# about RUNS x 2 x 1.5 minutes.
set -euo pipefail

BASE=${BASE:-v8.0.0-20250521083701-1cb244e8760d}
BASE_PUBLIC=${BASE_PUBLIC:-v0.1.14-0.20250521083701-1cb244e8760d}
NEW=${NEW:-v8.0.0-20251028162707-35dd8dea5008}
NEW_PUBLIC=${NEW_PUBLIC:-v0.1.22-0.20251028162707-35dd8dea5008}
RUNS=${RUNS:-3}
USERS=${USERS:-40}
RAMP=${RAMP:-20s}
DURATION=${DURATION:-40s}

source "$(dirname "$0")/lib.sh"
bench_workdir mattermost-releases
KEEP=1 # the runs are the result: kept, and their place printed
chmod 755 "$WORK" # PostgreSQL runs as another user when we are root
MM=$BENCH_ROOT/scripts/mattermost.sh
SC=$BENCH_ROOT/examples/mattermost.star
export PORT=${PORT:-$(free_port)} METRICS_PORT=${METRICS_PORT:-$(free_port)} PG_PORT=${PG_PORT:-$(free_port)} NODE_PORT=0
running_dir=""
trap '[ -n "$running_dir" ] && "$MM" stop "$running_dir" >/dev/null 2>&1; bench_cleanup' EXIT
build_headroom

# side NAME VERSION PUBLIC: a fresh server of VERSION, its data, RUNS profiled runs into $WORK/NAME-<i>.
side() {
	local name=$1
	MATTERMOST_VERSION=$2 PUBLIC_VERSION=$3 "$MM" install
	running_dir=$WORK/$name-server
	MATTERMOST_VERSION=$2 PUBLIC_VERSION=$3 "$MM" start "$running_dir"
	local t=http://127.0.0.1:$PORT m=http://127.0.0.1:$METRICS_PORT
	log "$name ($2): the data set"
	# every account the runs use signs up here: the runs' setups are logins alone, the same work each time
	"$HEADROOM" run "$SC" --target "$t" --setup-only --users "$((USERS > 20 ? USERS : 20))" --ramp 10s --var data=yes \
		--var posts=50 --out "$WORK/$name-data" >"$WORK/$name-data.log" 2>&1 || die "$name: the data phase failed: $(tail -5 "$WORK/$name-data.log")"
	for i in $(seq 1 "$RUNS"); do
		log "$name: run $i of $RUNS ($USERS users, ramp $RAMP, $DURATION)"
		"$HEADROOM" run "$SC" --target "$t" --scrape "$m/metrics" --profile "$m/debug/pprof" --profile-slice 2s \
			--users "$USERS" --ramp "$RAMP" --duration "$DURATION" --seed "$i" --out "$WORK/$name-$i" \
			>"$WORK/$name-$i.log" 2>&1 || die "$name: run $i failed: $(tail -5 "$WORK/$name-$i.log")"
		tail -n +1 "$WORK/$name-$i.log" | grep -m1 "requests/s" >&2 || true
	done
	"$MM" stop "$running_dir" >/dev/null
	running_dir=""
}

side base "$BASE" "$BASE_PUBLIC"
side new "$NEW" "$NEW_PUBLIC"
log "headroom compare"
bases=() news=()
for i in $(seq 1 "$RUNS"); do bases+=("$WORK/base-$i"); news+=("$WORK/new-$i"); done
"$HEADROOM" compare "${bases[@]}" --vs "${news[@]}" --out "$WORK/compare" | tee "$WORK/compare.txt"
log "runs and comparison in $WORK (report: $WORK/compare/report.md)"
