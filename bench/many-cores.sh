#!/usr/bin/env bash
# many-cores.sh — examples/chat.star users (each with an HTTP connection and the testbed's WebSocket) at the
# scale one machine holds, sized to it: the testbed on a share of the cores, headroom on the rest as local
# agents (one a core), up to 100,000 users.
#
# Usage: bash bench/many-cores.sh
#   env USERS=            chat users (default: the most this machine holds, at most 100,000: 25,000 a
#                         headroom core, 200 KB of memory each, and what the open-files limit allows)
#       TESTBED_CORES=    cores for the testbed (default: a quarter, at least 1); headroom gets the rest
#       AGENTS=           local agents, one a core, on the cores after the testbed's (default: all of them)
#       DURATION=30       seconds measured once every user is set up
#       RAMP=             the ramp (default: USERS / 400 seconds, at least 20 s)
#       SETUP_WAIT=300    seconds to wait for every user to be set up; past it the users set up are measured
#       HEADROOM=path     the binary (default: bin/headroom if present, else built with go)
#       OUT=dir           keep the run's result there (default: a temp dir, removed)
#
# It needs nothing but this repository, a built binary (or Go), bash, awk and /proc: no network, no package
# manager. It raises the open-files limit to what USERS needs (and says how to raise the hard limit when it
# cannot), checks the ephemeral port range and spreads the users over as many source addresses
# (--source-addrs 127.0.0.1-127.0.0.N) as their connections need. Once every user is set up it measures
# DURATION seconds of headroom's CPU from /proc (the coordinator and each agent) and its requests, WebSocket
# messages and users from its /metrics, and prints per agent (its users, CPU, users a core) and in total
# (users, requests/s, messages/s, CPU, µs of CPU a request, users a core), then the run's own table of its
# agents (each one's requests, req/s, latencies, CPU and memory over the run).
set -euo pipefail

DURATION=${DURATION:-30}
cd "$(dirname "$0")/.."
ROOT=$PWD
log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }

CORES=$(nproc)
[ "$CORES" -ge 2 ] || die "needs 2 cores at least: the testbed and headroom apart"
TESTBED_CORES=${TESTBED_CORES:-$(( CORES / 4 > 0 ? CORES / 4 : 1 ))}
AGENTS=${AGENTS:-$((CORES - TESTBED_CORES))}
[ "$AGENTS" -ge 1 ] && [ $((TESTBED_CORES + AGENTS)) -le "$CORES" ] ||
	die "TESTBED_CORES=$TESTBED_CORES and AGENTS=$AGENTS do not fit $CORES cores (at least one agent)"
mem_kb=$(awk '/^MemAvailable:/ { print $2 }' /proc/meminfo)
hard=$(ulimit -Hn)
# Each user holds 2 connections: 2 descriptors in headroom's agents (split among them) and 2 in the testbed,
# one process: the testbed's limit bounds the users.
fd_users=$(( (hard - 1000) / 2 ))
if [ -z "${USERS:-}" ]; then
	USERS=$(( AGENTS * 25000 ))
	USERS=$(( USERS < 100000 ? USERS : 100000 ))
	USERS=$(( USERS < mem_kb / 200 ? USERS : mem_kb / 200 ))
	if [ "$USERS" -gt "$fd_users" ]; then
		log "the open-files hard limit ($hard) holds $fd_users users, not $USERS: raise it (ulimit -Hn as root, or" \
			"LimitNOFILE= / limits.conf) to run more"
		USERS=$fd_users
	fi
fi
need_fds=$(( 2 * USERS + 1000 ))
ulimit -n "$need_fds" 2>/dev/null ||
	die "$USERS users need $need_fds open files; the hard limit is $hard: raise it (as root: ulimit -Hn $need_fds; for a service, LimitNOFILE=$need_fds) or set USERS lower"
read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
ports=$(( hi - lo + 1 ))
# the ports of one source address toward one target: at most 90% used
addrs=$(( (2 * USERS + ports * 9 / 10 - 1) / (ports * 9 / 10) ))
[ "$addrs" -le 254 ] || die "$USERS users need $addrs source addresses of $ports ephemeral ports ($lo-$hi): widen net.ipv4.ip_local_port_range"
RAMP=${RAMP:-$(( USERS / 400 > 20 ? USERS / 400 : 20 ))s}

if [ -z "${HEADROOM:-}" ]; then
	if [ -x bin/headroom ] && [ -z "$(find cmd internal agents engine metrics runner scenario transport -newer bin/headroom -name '*.go' 2>/dev/null | head -1)" ]; then
		HEADROOM=$ROOT/bin/headroom
	else
		command -v go >/dev/null || die "no bin/headroom and no go to build it: set HEADROOM=/path/to/headroom"
		log "building headroom -> bin/headroom"
		mkdir -p bin && go build -o bin/headroom ./cmd/headroom
		HEADROOM=$ROOT/bin/headroom
	fi
fi
WORK=${OUT:-$(mktemp -d /tmp/headroom-many-cores.XXXXXX)}
mkdir -p "$WORK"
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done
	sleep 1
	for p in "${PIDS[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	[ -n "${OUT:-}" ] || rm -rf "$WORK"
}
trap cleanup EXIT

# free_port: a port no one listens on, outside the ephemeral range (read above): a port in it may be the
# source port of one of the users' connections, where the listener's bind fails (a widened range did, on 16
# cores, between two runs)
free_port() {
	local p from=10000 span=$((lo - 10000))
	[ "$span" -ge 1000 ] || { from=$((hi + 1)) span=$((65536 - hi - 1)); }
	[ "$span" -ge 100 ] || die "no ports outside the ephemeral range $lo-$hi for the testbed: narrow net.ipv4.ip_local_port_range"
	for _ in $(seq 1 200); do
		p=$((from + RANDOM % span))
		(exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
	done
	die "no free port"
}
wait_port() {
	local deadline=$((SECONDS + $2))
	until (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; do
		[ $SECONDS -lt "$deadline" ] || return 1
		sleep 0.2
	done
}
# metric URL NAME [LABELS]: the sum of a metric's samples (with LABELS in their labels) in an exposition.
metric() {
	local body
	body=$( (exec 3<>"/dev/tcp/127.0.0.1/${1##*:}"; printf 'GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n' >&3; cat <&3) 2>/dev/null) || true
	awk -v n="$2" -v l="${3:-}" '$0 ~ "^"n"({| )" && index($0, l) { s += $NF } END { printf "%.0f", s }' <<<"$body"
}
# ticks PID: the CPU (user + system, in clock ticks) of PID.
ticks() { [ -r "/proc/$1/stat" ] && sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }' || echo 0; }
children() { cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | grep -v '^$' || true; }

tb_cpus="0-$((TESTBED_CORES - 1))"
hr_cpus="$TESTBED_CORES-$((TESTBED_CORES + AGENTS - 1))"
log "$CORES cores: testbed on $tb_cpus, headroom on $hr_cpus ($AGENTS local agents); $USERS users, ramp $RAMP;" \
	"open files $need_fds (hard $hard); ports $lo-$hi, $addrs source address(es)"
tport=$(free_port)
taskset -c "$tb_cpus" "$HEADROOM" testbed --listen "127.0.0.1:$tport" --channels 1000 --workers 256 --scale 0.2 \
	>"$WORK/testbed.log" 2>&1 &
PIDS+=($!)
wait_port "$tport" 20 || die "the testbed did not start: $(tail -3 "$WORK/testbed.log")"
mport=$(free_port)
SETUP_WAIT=${SETUP_WAIT:-300}
SETUP_WAIT_RUN=$((SETUP_WAIT + 60)) # headroom's own window waits longer than the script does
srcs=127.0.0.1
[ "$addrs" -le 1 ] || srcs="127.0.0.1-127.0.0.$addrs"
taskset -c "$hr_cpus" "$HEADROOM" run "$ROOT/examples/chat.star" --target "http://127.0.0.1:$tport" --users "$USERS" \
	--ramp "$RAMP" --duration "$((DURATION + 15))s" --setup-timeout "$((SETUP_WAIT_RUN))s" --local-agents "$AGENTS" --source-addrs "$srcs" \
	--metrics-listen "127.0.0.1:$mport" --out "$WORK/run" --quiet --no-report >"$WORK/run.log" 2>&1 &
hpid=$!
PIDS+=("$hpid")
wait_port "$mport" 60 || die "headroom did not start: $(tail -5 "$WORK/run.log")"
log "waiting for $USERS users to be set up (at most SETUP_WAIT=$SETUP_WAIT s)..."
ready=0 since=$SECONDS
until [ "$ready" -ge "$USERS" ]; do
	kill -0 "$hpid" 2>/dev/null || die "headroom ended: $(tail -5 "$WORK/run.log")"
	if [ $((SECONDS - since)) -ge "$SETUP_WAIT" ]; then
		log "only $ready of $USERS users set up after $SETUP_WAIT s: the target sets up no more (its cores saturated?);" \
			"measuring them as they are: set USERS lower for a target that keeps up"
		break
	fi
	sleep 2
	ready=$(metric "127.0.0.1:$mport" loadtest_users_ready)
	printf '\r  %s set up' "$ready" >&2
done
echo >&2
WANT=$USERS USERS=$ready
sleep 5
hz=$(getconf CLK_TCK)
mapfile -t agents < <(children "$hpid")
snap() { # "ticks of the coordinator, of each agent; requests; messages in" now
	local out t
	out="$(ticks "$hpid")"
	for a in "${agents[@]}"; do out+=" $(ticks "$a")"; done
	echo "$out $(metric "127.0.0.1:$mport" loadtest_http_request_time_count) $(metric "127.0.0.1:$mport" loadtest_websocket_messages_total 'direction="in"')"
}
t0=$(date +%s.%N)
read -r -a s0 <<<"$(snap)"
sleep "$DURATION"
t1=$(date +%s.%N)
read -r -a s1 <<<"$(snap)"
el=$(calc "$t1 - $t0")
n=${#agents[@]}
req=$(calc "${s1[n + 1]} - ${s0[n + 1]}")
msgs=$(calc "${s1[n + 2]} - ${s0[n + 2]}")
total=0
printf '%-12s %9s %10s %12s\n' process users 'CPU cores' 'users/core'
for i in $(seq 0 $((n - 1))); do # --local-agents splits the users evenly
	c=$(calc "(${s1[i + 1]} - ${s0[i + 1]}) / $hz / $el")
	total=$(calc "$total + $c")
	printf '%-12s %9d %10.2f %12.0f\n' "agent $i" $((USERS / n)) "$c" "$(calc "$USERS / $n / $c")"
done
cc=$(calc "(${s1[0]} - ${s0[0]}) / $hz / $el")
total=$(calc "$total + $cc")
printf '%-12s %9s %10.2f\n' coordinator - "$cc"
printf '%-12s %9d %10.2f %12.0f   %.0f req/s, %.0f messages in/s, %.1f µs of CPU a request\n' total "$USERS" "$total" \
	"$(calc "$USERS / $total")" "$(calc "$req / $el")" "$(calc "$msgs / $el")" "$(calc "1e6 * $total * $el / $req")"
[ "$USERS" -ge "$WANT" ] || kill -INT "$hpid" 2>/dev/null || true # not every user set up: the window would wait on
wait "$hpid" || true
echo
echo "the run's own figures per agent (over the whole run, ramp included):"
awk '/^Agents$/ { on = 1 } on && /^Over time$|^Server$|^result: / { exit } on' "$WORK/run.log" | sed -n '1,40p'
log "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), $CORES cores," \
	"$((mem_kb / 1024 / 1024)) GiB available; examples/chat.star, $USERS users on $AGENTS local agents, $DURATION s measured"
