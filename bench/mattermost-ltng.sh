#!/usr/bin/env bash
# mattermost-ltng.sh — is examples/mattermost.star the reference's user? It and Mattermost's own load-test
# tool (mattermost-load-test-ng, "LT-ng", whose simulative controller is the user the reference's reports
# load) on the same real Mattermost (scripts/mattermost.sh, LTNG=true), the same number of users for the same
# time, one after the other; the server's own counters (mattermost_api_time_count per handler, its CPU, its
# store calls, its WebSocket events) read when the users are settled and at the end. Prints per handler the
# requests a user-second of each, the total variation distance of the two mixes (with and without profile
# images), and API requests, server CPU, CPU a request and store calls a user-second side by side.
#
# Usage: LTNG_SRC=DIR PLAYBOOKS_SRC=DIR bash bench/mattermost-ltng.sh
#   LTNG_SRC       a checkout of LT-ng (it is not on the Go module proxy), at the release measured:
#                    git clone https://github.com/mattermost/mattermost-load-test-ng && git -C mattermost-load-test-ng checkout v1.32.0
#   PLAYBOOKS_SRC  a checkout of the Playbooks plugin at the commit LT-ng v1.32.0 asks for (its client module's
#                  pseudo-version is not on the proxy either; put in by a `replace`):
#                    git clone https://github.com/mattermost/mattermost-plugin-playbooks && git -C mattermost-plugin-playbooks checkout 8f646f6e5d13
#   LTAGENT        an ltagent built before (skips the build; it must carry the patch below)
#   USERS=40 DURATION=300   each tool's users and seconds
#   SETTLE=90      seconds after the start before the first reading: logins and first loads are left out
#                  (LT-ng's users wait a think time, 1 to 39 s at rate 1, before logging in and another
#                  before their first team load)
#   RATE=1.0       LT-ng's rate (its think time times RATE) and examples/mattermost.star's --var rate
#   POSTS=2000     posts in the data set of each tool (LT-ng: `ltagent init`'s NumPosts; headroom: its data phase)
#   OUT=dir        keep the runs, readings and table there (default: a temporary directory; kept, printed)
#
# What LT-ng needs changed to run on this (unlicensed, 11.4) build: the server's LTNG=true switches
# (scripts/mattermost.sh), its Playbooks plugin left off (no such plugin on the server), and one patch to its
# copy here: the team's scheduled posts, which it asks an 11.x server for on every team load and which an
# unlicensed server refuses, ignored when refused (without it every user stops at its first team load).
# The build takes ~3 minutes with Mattermost's modules cached (scripts/mattermost.sh install), each run
# DURATION seconds plus the data sets (~2 minutes).
set -euo pipefail

USERS=${USERS:-40}
DURATION=${DURATION:-300}
SETTLE=${SETTLE:-90}
RATE=${RATE:-1.0}
POSTS=${POSTS:-2000}

source "$(dirname "$0")/lib.sh"
[ "$DURATION" -gt $((SETTLE + 30)) ] || die "DURATION ($DURATION) must be at least SETTLE ($SETTLE) + 30 seconds"
if [ -z "${LTAGENT:-}" ]; then
	[ -f "${LTNG_SRC:-}/cmd/ltagent/main.go" ] || die "LTNG_SRC must name a checkout of mattermost-load-test-ng (see the usage at the top of $0)"
	[ -f "${PLAYBOOKS_SRC:-}/client/go.mod" ] || die "PLAYBOOKS_SRC must name a checkout of mattermost-plugin-playbooks (see the usage at the top of $0)"
fi
bench_workdir mattermost-ltng
KEEP=1 # the runs are the result: kept, and their place printed
chmod 755 "$WORK" # PostgreSQL runs as another user when we are root
MM=$BENCH_ROOT/scripts/mattermost.sh
export PORT=${PORT:-$(free_port)} METRICS_PORT=${METRICS_PORT:-$(free_port)} PG_PORT=${PG_PORT:-$(free_port)} NODE_PORT=0 LTNG=true
SERVER=$WORK/server
trap '"$MM" stop "$SERVER" >/dev/null 2>&1; bench_cleanup' EXIT
API=http://127.0.0.1:$PORT
METRICS=http://127.0.0.1:$METRICS_PORT/metrics
build_headroom

# build_ltagent: LT-ng's copy in $WORK/ltng, Playbooks' client put in, the scheduled posts' refusal ignored.
build_ltagent() {
	if [ -n "${LTAGENT:-}" ]; then
		[ -x "$LTAGENT" ] || die "LTAGENT=$LTAGENT is not an executable"
		return 0
	fi
	log "building LT-ng's ltagent from $LTNG_SRC"
	mkdir -p "$WORK/ltng"
	tar -C "$LTNG_SRC" --exclude=.git -cf - . | tar -C "$WORK/ltng" -xf -
	local la=$WORK/ltng/loadtest/control/simulcontroller/actions.go
	grep -q 'if err := u.GetTeamScheduledPosts(team.Id); err != nil {' "$la" ||
		die "LT-ng's loadTeam has changed (no GetTeamScheduledPosts call to patch in $la): measure the release this script names"
	sed -i 's|if err := u.GetTeamScheduledPosts(team.Id); err != nil {|if err := u.GetTeamScheduledPosts(team.Id); err != nil \&\& !strings.Contains(err.Error(), "scheduled") {|' "$la"
	(cd "$WORK/ltng" && go mod edit -replace "github.com/mattermost/mattermost-plugin-playbooks/client=$(cd "$PLAYBOOKS_SRC/client" && pwd)" &&
		go build -o "$WORK/ltagent" ./cmd/ltagent) >"$WORK/ltagent-build.log" 2>&1 || die "the ltagent build failed: $(tail -5 "$WORK/ltagent-build.log")"
	LTAGENT=$WORK/ltagent
}

# reading NAME: the server's counters now, into $WORK/NAME.prom, with its process's CPU seconds (its
# metrics leave them out) as headroom_server_cpu_seconds_total.
reading() {
	curl -sfS "$METRICS" >"$WORK/$1.prom" || die "reading $METRICS failed"
	awk -v hz="$(getconf CLK_TCK)" '{ printf "headroom_server_cpu_seconds_total %.2f\n", ($14 + $15) / hz }' \
		"/proc/$(cat "$SERVER/mattermost.pid")/stat" >>"$WORK/$1.prom"
}

# measured NAME PID: two readings of a run whose process is PID, SETTLE seconds in and 5 seconds before its end.
measured() {
	sleep "$SETTLE"
	kill -0 "$2" 2>/dev/null || die "$1 ended before its first reading: $(tail -5 "$WORK/$1.log")"
	reading "$1-settled"
	sleep $((DURATION - SETTLE - 5))
	reading "$1-end"
}

build_ltagent
"$MM" install
"$MM" start "$SERVER" >"$WORK/server.log"

# LT-ng: its data set (`ltagent init`: teams, channels, posts by its own users), then its users.
mkdir -p "$WORK/ltng-run/config"
cat >"$WORK/ltng-run/config/config.json" <<JSON
{
  "ConnectionConfiguration": {"ServerURL": "$API", "WebSocketURL": "ws://127.0.0.1:$PORT",
    "AdminEmail": "admin@headroom.invalid", "AdminPassword": "${ADMIN_PASSWORD:-headroom-Admin-1}"},
  "UserControllerConfiguration": {"Type": "simulative", "RatesDistribution": [{"Rate": $RATE, "Percentage": 1.0}]},
  "InstanceConfiguration": {"NumTeams": 2, "NumChannels": 20, "NumPosts": $POSTS, "NumReactions": 0, "NumAdmins": 0,
    "PercentReplies": 0.2, "PercentRepliesInLongThreads": 0.05, "PercentUrgentPosts": 0.001,
    "PercentPublicChannels": 0.5, "PercentPrivateChannels": 0.1, "PercentDirectChannels": 0.3, "PercentGroupChannels": 0.1},
  "UsersConfiguration": {"InitialActiveUsers": 0, "MaxActiveUsers": $USERS, "MaxActiveBrowserUsers": 0,
    "AvgSessionsPerUser": 1, "PercentOfUsersAreAdmin": 0.0},
  "LogSettings": {"EnableConsole": true, "ConsoleLevel": "ERROR", "EnableFile": true, "FileLevel": "INFO",
    "FileJson": true, "FileLocation": "$WORK/ltng-run/ltagent.log"}
}
JSON
cat >"$WORK/ltng-run/config/simulcontroller.json" <<JSON
{"MinIdleTimeMs": 1000, "AvgIdleTimeMs": 20000, "PercentUrgentPosts": 0.001, "PercentReplies": 0.18, "EnabledPlugins": []}
JSON
log "LT-ng: its data set (ltagent init, $POSTS posts)"
(cd "$WORK/ltng-run" && timeout 900 "$LTAGENT" init -c config/config.json) >"$WORK/ltng-init.log" 2>&1 ||
	die "ltagent init failed: $(tail -5 "$WORK/ltng-init.log")"
log "LT-ng: $USERS users for ${DURATION}s at rate $RATE"
(cd "$WORK/ltng-run" && exec "$LTAGENT" -c config/config.json --controller-config config/simulcontroller.json \
	-n "$USERS" -d "$DURATION") >"$WORK/ltng.log" 2>&1 &
ltng_pid=$!
BENCH_PIDS+=("$ltng_pid")
measured ltng "$ltng_pid"
wait "$ltng_pid" || die "ltagent failed: $(tail -5 "$WORK/ltng.log")"

# headroom: its data set, made as `ltagent init` makes LT-ng's, by 50 accounts; then its users.
SC=$BENCH_ROOT/examples/mattermost.star
log "headroom: its data set ($POSTS posts)"
"$HEADROOM" run "$SC" --target "$API" --setup-only --users 50 --ramp 20s --var data=yes --var posts="$((POSTS / 50))" \
	--var rate="$RATE" --out "$WORK/headroom-data" >"$WORK/headroom-data.log" 2>&1 ||
	die "headroom's data phase failed: $(tail -5 "$WORK/headroom-data.log")"
log "headroom: $USERS users for ${DURATION}s at rate $RATE"
# LT-ng's users start together and each logs in after one think time (1 to 39 s at rate 1): a ramp of 40 s.
"$HEADROOM" run "$SC" --target "$API" --users "$USERS" --ramp 40s --duration "$((DURATION - 40))s" --var rate="$RATE" \
	--out "$WORK/headroom" >"$WORK/headroom.log" 2>&1 &
hr_pid=$!
BENCH_PIDS+=("$hr_pid")
measured headroom "$hr_pid"
wait "$hr_pid" || die "headroom's run failed: $(tail -5 "$WORK/headroom.log")"
"$MM" stop "$SERVER" >/dev/null

status=0
python3 "$BENCH_ROOT/bench/mattermost-mix.py" --users "$USERS" --seconds "$((DURATION - SETTLE - 5))" \
	"$WORK/ltng-settled.prom" "$WORK/ltng-end.prom" "$WORK/headroom-settled.prom" "$WORK/headroom-end.prom" \
	>"$WORK/table.md" || status=$?
cat "$WORK/table.md"
log "runs, readings and table in $WORK"
exit "$status" # 3: headroom's user is outside the bounds the last lines name
