#!/usr/bin/env bash
# ws-events.sh — WebSocket events headroom hands to a scenario's handler, per second of its CPU.
#
# Usage: bash bench/ws-events.sh
#   env USERS=200        listeners: users holding the testbed's /api/v4/websocket
#       POSTERS=1        users posting in the listeners' shared channel
#       POST_THINK=0     each poster's think time between posts, e.g. 5ms (0: back to back)
#       DURATION=20      seconds measured in each round
#       ROUNDS=3         rounds (a fresh testbed and headroom run each); medians are printed
#       TESTBED_ARGS="--scale 0.1 --event-cost 0 --conn-cost 0"
#                        the testbed's model: fast posts, and delivering events costs no worker
#                        time, so headroom and the testbed's CPU are what limit the events
#       TESTBED_CPU=0    core the testbed is pinned to
#       HEADROOM_CPU=1   core headroom is pinned to (with GOMAXPROCS=1: one core, as rps.sh)
#       HEADROOM=path    use this binary instead of building ./cmd/headroom
#       OUT=dir          keep the raw outputs there (default: a temp dir, removed)
#       QUIET_WAIT=120   seconds to wait, before each round, for the machine to be idle
#
# The testbed (headroom testbed, 127.0.0.1) serves the reference server's WebSocket. Every listener
# signs up, logs in, joins one shared channel and connects with its session; its on_message handler
# decodes each event (msg.json()) and counts the posted ones. The posters post in that channel, so
# every post is an event to every listener. Once every user is set up, the round measures DURATION
# seconds: the handler runs (loadtest_actions_total{action="(ws message)"} from headroom's
# --metrics-listen), headroom's CPU time (utime + stime from /proc/PID/stat) and the testbed's events
# (testbed_websocket_events_total, queued to a connection, and ..._dropped_total, dropped because a
# connection's queue of 256 was full). It prints per round: events handled per second, headroom's CPU
# (% of one core), events handled per second of headroom CPU (the headline: per core), the posts per
# second, the events the testbed sent and dropped, and the testbed's CPU (% of one core: near 100, it
# is what limits the events); then the medians.
set -euo pipefail

USERS=${USERS:-200}
POSTERS=${POSTERS:-1}
POST_THINK=${POST_THINK:-0}
DURATION=${DURATION:-20}
ROUNDS=${ROUNDS:-3}
TESTBED_ARGS=${TESTBED_ARGS:---scale 0.1 --event-cost 0 --conn-cost 0}
TESTBED_CPU=${TESTBED_CPU:-0}
HEADROOM_CPU=${HEADROOM_CPU:-1}
QUIET_WAIT=${QUIET_WAIT:-120}

source "$(dirname "$0")/lib.sh"

bench_workdir ws-events

need jq jq
need curl curl
need taskset util-linux
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (testbed and headroom pinned apart)"
build_headroom
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

cat >"$WORK/ws-events.star" <<STAR
# Listeners hold the testbed's WebSocket in one shared channel; posters post in it.
def init(user):
    user.http.post("/api/v4/users", json={"username": "owner", "password": "pw"}, expect=[201, 409])
    r = user.http.post("/api/v4/users/login", json={"login_id": "owner", "password": "pw"})
    user.http.headers["Authorization"] = "Bearer " + r.headers["token"]
    return {"channel": user.http.get("/api/v4/users/me/channels").json()[0]["id"]}

def join(user):
    name = "u%d" % user.id
    user.http.post("/api/v4/users", json={"username": name, "password": "pw"}, expect=[201, 409])
    r = user.http.post("/api/v4/users/login", json={"login_id": name, "password": "pw"})
    user.http.headers["Authorization"] = "Bearer " + r.headers["token"]
    user.http.post("/api/v4/channels/%s/members" % user.shared["channel"], expect=[201, 409],
                   name="POST /api/v4/channels/{id}/members")

def listen(user):
    join(user)
    user.state["posts"] = 0
    user.ws.connect("/api/v4/websocket", on_message=on_event)

def on_event(user, msg):
    if msg.json()["event"] == "posted":
        user.state["posts"] += 1

def idle(user):
    pass

def post(user):
    user.http.post("/api/v4/posts", json={"channel_id": user.shared["channel"], "message": "a message of a usual length, said in a channel of many members"})

# Users 1 to USERS + POSTERS hold exactly USERS listeners and POSTERS posters.
user_types = [
    user_type("listener", weight=$USERS, setup=listen, actions=[action("Idle", idle)], think_time=think.constant("1h")),
    user_type("poster", weight=$POSTERS, setup=join, actions=[action("Post", post)], think_time=think.constant("$POST_THINK")),
]
STAR


# cpu_ticks_of PID: utime + stime of PID, in clock ticks.
cpu_ticks_of() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }

HZ=$(getconf CLK_TCK)
# round N: a fresh testbed and headroom run; sets the R_* figures.
round() {
	local n=$1 dir=$WORK/round-$1 tport mport hpid tbpid
	mkdir -p "$dir"
	wait_quiet "$QUIET_WAIT"
	tport=$(free_port)
	# shellcheck disable=SC2086 # TESTBED_ARGS is a list of flags
	taskset -c "$TESTBED_CPU" "$HEADROOM" testbed --listen "127.0.0.1:$tport" $TESTBED_ARGS >"$dir/testbed.txt" 2>&1 &
	tbpid=$!
	BENCH_PIDS+=("$tbpid")
	wait_port "$tport" 10 || die "the testbed did not start: $(tail -5 "$dir/testbed.txt")"
	mport=$(free_port)
	local total=$((USERS + POSTERS))
	GOMAXPROCS=1 taskset -c "$HEADROOM_CPU" "$HEADROOM" run "$WORK/ws-events.star" --target "http://127.0.0.1:$tport" \
		--users "$total" --ramp 5s --duration "$((DURATION + 30))s" --metrics-listen "127.0.0.1:$mport" \
		--out "$dir/run" --quiet >"$dir/run.txt" 2>"$dir/run.err" &
	hpid=$!
	BENCH_PIDS+=("$hpid")
	# Every user set up, then two seconds for the events to flow.
	wait_ready "http://127.0.0.1:$mport/metrics" "$total" "$hpid" 60 "$dir/run.err"
	sleep 2
	local hm=http://127.0.0.1:$mport/metrics tm=http://127.0.0.1:$tport/metrics
	local h0 c0 b0 p0 q0 d0 t0 h1 c1 b1 p1 q1 d1 t1
	t0=$(date +%s.%N) c0=$(cpu_ticks_of "$hpid") b0=$(cpu_ticks_of "$tbpid")
	h0=$(scrape "$hm" loadtest_actions_total '"(ws message)"')
	p0=$(scrape "$hm" loadtest_actions_total 'action="Post"')
	q0=$(scrape "$tm" testbed_websocket_events_total 'event="posted"')
	d0=$(scrape "$tm" testbed_websocket_events_dropped_total)
	sleep "$DURATION"
	t1=$(date +%s.%N) c1=$(cpu_ticks_of "$hpid") b1=$(cpu_ticks_of "$tbpid")
	h1=$(scrape "$hm" loadtest_actions_total '"(ws message)"')
	p1=$(scrape "$hm" loadtest_actions_total 'action="Post"')
	q1=$(scrape "$tm" testbed_websocket_events_total 'event="posted"')
	d1=$(scrape "$tm" testbed_websocket_events_dropped_total)
	local el cpu
	el=$(calc "$t1 - $t0")
	cpu=$(calc "($c1 - $c0) / $HZ")
	R_RATE=$(calc "($h1 - $h0) / $el")
	R_CPU=$(calc "100 * $cpu / $el")
	R_PER_CORE=$(calc "($h1 - $h0) / $cpu")
	R_POSTS=$(calc "($p1 - $p0) / $el")
	R_SENT=$(calc "($q1 - $q0) / $el")
	R_TDROP=$(calc "($d1 - $d0) / $el")
	R_TBCPU=$(calc "100 * ($b1 - $b0) / $HZ / $el")
	kill -TERM "$hpid" 2>/dev/null || true
	wait "$hpid" 2>/dev/null || true
	kill -TERM "$tbpid" 2>/dev/null || true
	wait "$tbpid" 2>/dev/null || true
	local errs
	errs=$(jq -r '[.totals, .ramp_totals, .setup.totals | (.errors // 0) + (.timeouts // 0)] | add' "$dir/run/result.json" 2>/dev/null || echo "?")
	if [ "$errs" != 0 ]; then log "round $n: $errs requests or actions failed (see $dir/run.txt)"; fi
}

printf '%-6s %12s %10s %14s %10s %12s %12s %10s\n' round 'handled/s' 'hr CPU%' 'handled/cpu-s' 'posts/s' 'sent/s' 'tb-drop/s' 'tb CPU%'
rates=() cpus=() percore=() posts=() sents=() tbcpus=()
for r in $(seq 1 "$ROUNDS"); do
	round "$r"
	printf '%-6s %12.0f %10.0f %14.0f %10.0f %12.0f %12.0f %10.0f\n' "$r" "$R_RATE" "$R_CPU" "$R_PER_CORE" "$R_POSTS" \
		"$R_SENT" "$R_TDROP" "$R_TBCPU"
	rates+=("$R_RATE") cpus+=("$R_CPU") percore+=("$R_PER_CORE") posts+=("$R_POSTS") sents+=("$R_SENT") tbcpus+=("$R_TBCPU")
done
echo
printf '%-6s %12.0f %10.0f %14.0f %10.0f %12.0f %12s %10.0f\n' median "$(median "${rates[@]}")" "$(median "${cpus[@]}")" \
	"$(median "${percore[@]}")" "$(median "${posts[@]}")" "$(median "${sents[@]}")" "" "$(median "${tbcpus[@]}")"
printf 'headroom handled %.0f WebSocket events per second of its CPU (median of %d; %d listeners, msg.json() each, GOMAXPROCS=1)\n' \
	"$(median "${percore[@]}")" "$ROUNDS" "$USERS"
if [ -n "${KEEP:-}" ]; then log "raw outputs kept in $WORK"; fi
