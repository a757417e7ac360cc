#!/usr/bin/env bash
# idle-memory.sh — resident memory per idle user of headroom (and of k6, beside it).
#
# Usage: bash bench/idle-memory.sh               # HTTP: each user holds a keep-alive connection
#        MODE=ws bash bench/idle-memory.sh       # and a WebSocket too; k6 measured beside it
#        MODE=h2 bash bench/idle-memory.sh       # an HTTP/2 connection over TLS instead
#   env MODE=http       http: one keep-alive HTTP connection per user; ws: that and one idle
#                       WebSocket (two connections per user); h2: one HTTP/2 connection over
#                       TLS per user (nginx with "ssl http2" and a certificate openssl makes)
#       USERS=20000     idle users; lowered to fit the open-files limit if it must be
#                       (19,900 for http, 9,900 for ws where that limit is 20,000)
#       BASE_USERS=10   users of the baseline run
#       RAMP=20         seconds over which the USERS are added
#       HOLD=40         seconds all of them are held (the run ends by itself)
#       ROUNDS=1        rounds; each measures every tool once; medians are printed
#       K6=0|1          also measure k6 doing the same (default 1 for ws, 0 for http)
#       K6_VERSION=v1.8.1, K6_BIN=path   which k6 (see find_k6 in lib.sh)
#       K6_INIT=180     seconds k6 may take to initialise its VUs before the ramp starts
#       HEADROOM=path   use this binary instead of building ./cmd/headroom
#       OUT=dir         keep the raw outputs there (default: a temp dir, removed)
#
# Each headroom user sends one request in setup and one action (so it opens its own
# connection and keeps it), then thinks for 300 s: idle, holding its socket. With MODE=ws
# its setup also opens a WebSocket (user.ws.connect, with an on_message handler that never
# runs) to bench/wsidle, a gorilla/websocket server that reads and sends nothing. Each k6
# VU does the same in one iteration (an HTTP GET, then a WebSocket of k6/websockets held
# open until the end of the hold, or a sleep for MODE=http).
# The HTTP target is nginx (one worker, worker_connections above USERS,
# keepalive_timeout 300s) at 127.0.0.1. Once every connection is ESTABLISHED
# and a few seconds have passed, VmRSS of the tool's process is sampled
# from /proc/PID/status. A second run with BASE_USERS users gives the fixed
# cost (binary, runtime, scenario), so
#   KB per idle user = (RSS_USERS - RSS_BASE) / (USERS - BASE_USERS).
set -euo pipefail

MODE=${MODE:-http}
USERS=${USERS:-20000}
BASE_USERS=${BASE_USERS:-10}
RAMP=${RAMP:-20}
HOLD=${HOLD:-40}
ROUNDS=${ROUNDS:-1}
K6_INIT=${K6_INIT:-180}
case $MODE in
http) PER_USER=1 K6=${K6:-0} ;;
ws) PER_USER=2 K6=${K6:-1} ;;
h2) PER_USER=1 K6=${K6:-0} ;;
*)
	echo "MODE=$MODE: want http, ws or h2" >&2
	exit 2
	;;
esac

source "$(dirname "$0")/lib.sh"

bench_workdir idle

need nginx nginx
need jq jq
need ss iproute2
build_headroom
if [ "$K6" = 1 ]; then find_k6; fi

# Each side needs a descriptor per connection, and a user holds PER_USER
# of them. Raise the limit as far as we may (Go raises its own soft limit
# to the hard one; nginx gets worker_rlimit_nofile from this shell's limit).
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
NOFILE=$(ulimit -n)
if [ "$NOFILE" != unlimited ] && [ $(((USERS + 100) * PER_USER)) -gt "$NOFILE" ]; then
	fit=$((NOFILE / PER_USER - 100))
	log "open-files limit is $NOFILE here (hard limit $(ulimit -Hn)), $PER_USER per user: running $fit users instead of $USERS"
	USERS=$fit
fi
read -r plo phi </proc/sys/net/ipv4/ip_local_port_range
if [ $((USERS + 1000)) -gt $((phi - plo)) ]; then
	die "USERS=$USERS needs more local ports than ip_local_port_range ($plo-$phi) has"
fi

PORT=$(free_port)
# nginx starts closing idle keep-alive connections once fewer than 1/16 of
# its worker_connections are free, so give it twice as many as users.
URL=http://127.0.0.1:$PORT
TLS_ARGS=()
if [ "$MODE" = h2 ]; then
	need openssl openssl
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>"$WORK/openssl.log" ||
		die "openssl: $(cat "$WORK/openssl.log")"
	export TLS_LISTEN="ssl http2" TLS_CERT=$WORK/cert.pem TLS_KEY=$WORK/key.pem
	URL=https://127.0.0.1:$PORT
	TLS_ARGS=(--ca "$WORK/cert.pem")
fi
start_nginx "$WORK/nginx" "$PORT" "" $((2 * USERS + 1000)) 300s
PORTS="dport = :$PORT"

if [ "$MODE" = ws ]; then
	log "building bench/wsidle -> $WORK/wsidle"
	(cd "$BENCH_ROOT" && go build -o "$WORK/wsidle" ./bench/wsidle)
	WSPORT=$(free_port)
	# It exits by itself well after the last run would have ended.
	"$WORK/wsidle" -listen "127.0.0.1:$WSPORT" -for "$((ROUNDS * 4 * (RAMP + HOLD + K6_INIT + 60) + 300))s" \
		>"$WORK/wsidle.txt" 2>&1 &
	BENCH_PIDS+=("$!")
	wait_port "$WSPORT" 10 || die "wsidle did not start: $(cat "$WORK/wsidle.txt")"
	log "wsidle pid $! on 127.0.0.1:$WSPORT"
	WSURL=ws://127.0.0.1:$WSPORT/
	PORTS="$PORTS or dport = :$WSPORT"
fi

{
	echo "# Each user opens its own keep-alive connection in setup, then stays idle."
	[ "$MODE" = ws ] && cat <<STAR
# And holds an idle WebSocket: the server sends nothing, so on_message never runs.
def on_message(user, msg):
    pass

STAR
	echo "def setup(user):"
	echo '    r = user.http.get("/", name="setup")'
	[ "$MODE" = h2 ] && printf '    if r.protocol != "HTTP/2.0":\n        fail("setup over " + r.protocol)\n'
	[ "$MODE" = ws ] && echo "    user.ws.connect(\"$WSURL\", name=\"WS idle\", on_message=on_message)"
	cat <<'STAR'

def hit(user):
    user.http.get("/", name="GET /")

actions = [action("Hit", hit)]
think_time = think.constant("300s")
STAR
} >"$WORK/idle.star"

# k6: one iteration per VU, started (RAMP * (vu - 1) / vus) seconds into the
# scenario so the VUs connect over RAMP as headroom's users do; every VU
# holds its connections until RAMP + HOLD seconds after the scenario's start.
{
	cat <<'JS'
import http from "k6/http";
import { sleep } from "k6";
import exec from "k6/execution";
JS
	[ "$MODE" = ws ] && echo 'import { WebSocket } from "k6/websockets";'
	cat <<'JS'

const users = Number(__ENV.USERS), ramp = Number(__ENV.RAMP), hold = Number(__ENV.HOLD);
export const options = {
  discardResponseBodies: true,
  scenarios: {
    idle: { executor: "per-vu-iterations", vus: users, iterations: 1, maxDuration: `${ramp + hold + 30}s`, gracefulStop: "10s" },
  },
};

// Milliseconds left until the end of the hold.
const left = () => Math.max(0, exec.scenario.startTime + (ramp + hold) * 1000 - Date.now());

export default function () {
  sleep((ramp * (exec.vu.idInTest - 1)) / users);
  http.get(__ENV.URL);
JS
	if [ "$MODE" = ws ]; then
		cat <<'JS'
  const ws = new WebSocket(__ENV.WSURL);
  ws.onopen = () => setTimeout(() => ws.close(), left());
  ws.onerror = (e) => console.error("websocket: " + e.error);
}
JS
	else
		echo '  sleep(left() / 1000);'
		echo '}'
	fi
} >"$WORK/idle.js"

# rss_kb PID: VmRSS of PID in KB.
rss_kb() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }

# established: client-side connections to nginx and wsidle (those the tool holds).
established() { ss -Htn state established "( $PORTS )" | wc -l; }

# measure TOOL N RAMP HOLD NAME: runs TOOL (headroom or k6) with N users,
# waits until all their connections are up and idle, samples VmRSS five
# times a second apart and sets RSS_KB (their median) and PEAK_MB (the
# largest VmHWM seen, or headroom's own peak), then waits for the run to end
# by itself (k6's within a bound, else it is stopped).
measure() {
	local tool=$1 n=$2 ramp=$3 hold=$4 name=$5 dir=$WORK/$5 pid rsspid init=0
	local start_s=$SECONDS
	log "$name: $tool, $n users, ramp ${ramp}s, hold ${hold}s"
	if [ "$tool" = headroom ]; then
		"$HEADROOM" run "$WORK/idle.star" --target "$URL" "${TLS_ARGS[@]}" --users "$n" --ramp "${ramp}s" \
			--duration "${hold}s" --out "$dir" --quiet >"$dir.txt" 2>"$dir.err" &
		pid=$!
		rsspid=$pid
	else
		init=$K6_INIT
		mkdir -p "$dir"
		USERS=$n RAMP=$ramp HOLD=$hold URL=$URL/ WSURL=${WSURL:-} K6_NO_USAGE_REPORT=true \
			timeout -k 10 "$((init + ramp + hold + 60))" "$K6_BIN" run --quiet --no-color --no-usage-report \
			--address "" --summary-export "$dir/summary.json" "$WORK/idle.js" >"$dir.txt" 2>"$dir.err" &
		pid=$!
		for _ in $(seq 1 50); do
			rsspid=$(pgrep -P "$pid" || true)
			[ -n "$rsspid" ] && break
			sleep 0.1
		done
		[ -n "$rsspid" ] || die "$name: k6 did not start: $(tail -5 "$dir.err")"
	fi
	BENCH_PIDS+=("$pid")
	# Wait for the connections until 20 s past the ramp (and k6's VU
	# initialisation), leaving at least 12 s of the hold for settling and sampling.
	local want=$((n * PER_USER)) est=0
	local deadline=$((SECONDS + init + ramp + (hold - 12 < 20 ? hold - 12 : 20)))
	while [ $SECONDS -lt "$deadline" ]; do
		est=$(established)
		[ "$est" -ge "$want" ] && break
		kill -0 "$pid" 2>/dev/null || die "$name: $tool exited early: $(tail -5 "$dir.err")"
		sleep 1
	done
	if [ "$est" -lt "$want" ]; then
		log "$name: WARNING only $est of $want connections are established (see $WORK/nginx/error.log)"
	fi
	# Past the ramp, plus a settling pause for the last users' first think
	# (k6: 5 s after its last connection, its start having waited for init).
	local settle=$((ramp + 5 - (SECONDS - start_s)))
	[ "$tool" = k6 ] && settle=5
	[ "$settle" -gt 3 ] || settle=3
	sleep "$settle"
	local samples=()
	for _ in 1 2 3 4 5; do
		samples+=("$(rss_kb "$rsspid")")
		sleep 1
	done
	RSS_KB=$(median "${samples[@]}")
	EST=$(established)
	PEAK_MB=$(calc "$(awk '/^VmHWM:/ {print $2}' "/proc/$rsspid/status") / 1024")
	log "$name: $EST connections established, VmRSS samples ${samples[*]} KB"
	local rc=0
	wait "$pid" || rc=$?
	if [ "$tool" = headroom ]; then
		# The run ends by itself after ramp + hold (+ the grace for stopping users).
		# Exit 4 ("measured nothing") is this benchmark working: idle users
		# send nothing in the measured window, by design.
		[ "$rc" = 0 ] || [ "$rc" = 4 ] || die "$name: headroom failed (exit $rc): $(tail -5 "$dir.err")"
		PEAK_MB=$(jq -r '.generator.peak_rss_mb' "$dir/result.json")
		local errs
		errs=$(jq -r '[.totals, .ramp_totals, .setup.totals | (.errors // 0) + (.timeouts // 0)] | add' "$dir/result.json")
		if [ "$errs" != 0 ]; then log "$name: $errs requests failed (see $dir.txt)"; fi
	else
		[ "$rc" = 0 ] || die "$name: k6 failed (exit $rc): $(tail -5 "$dir.err")"
		local sessions=""
		[ "$MODE" = ws ] && sessions=" and $(jq -r '.metrics.ws_sessions.count // 0' "$dir/summary.json") WebSocket sessions"
		log "$name: k6 made $(jq -r '.metrics.http_reqs.count // 0' "$dir/summary.json") requests" \
			"($(jq -r '.metrics.http_req_failed.value // .metrics.http_req_failed.rate // 0' "$dir/summary.json") failed)$sessions"
	fi
}

TOOLS=(headroom)
[ "$K6" = 1 ] && TOOLS+=(k6)
declare -A PER GROSS BASE IDLE BPEAK IPEAK
for round in $(seq 1 "$ROUNDS"); do
	for tool in "${TOOLS[@]}"; do
		measure "$tool" "$BASE_USERS" 2 15 "$tool-baseline-$round"
		BASE[$tool.$round]=$RSS_KB BPEAK[$tool.$round]=$PEAK_MB
		measure "$tool" "$USERS" "$RAMP" "$HOLD" "$tool-idle-$round"
		IDLE[$tool.$round]=$RSS_KB IPEAK[$tool.$round]=$PEAK_MB
		PER[$tool.$round]=$(calc "(${IDLE[$tool.$round]} - ${BASE[$tool.$round]}) / ($USERS - $BASE_USERS)")
		GROSS[$tool.$round]=$(calc "${IDLE[$tool.$round]} / $USERS")
	done
done

what="connected, thinking"
[ "$MODE" = ws ] && what="HTTP + WebSocket"
echo
printf '%-6s %-9s %-24s %10s %12s %12s %10s\n' round tool run users 'VmRSS (MB)' 'peak (MB)' 'KB/user'
for round in $(seq 1 "$ROUNDS"); do
	for tool in "${TOOLS[@]}"; do
		k=$tool.$round
		printf '%-6s %-9s %-24s %10d %12.1f %12.1f\n' "$round" "$tool" baseline "$BASE_USERS" \
			"$(calc "${BASE[$k]} / 1024")" "${BPEAK[$k]}"
		printf '%-6s %-9s %-24s %10d %12.1f %12.1f %10.1f\n' "$round" "$tool" "idle ($what)" "$USERS" \
			"$(calc "${IDLE[$k]} / 1024")" "${IPEAK[$k]}" "${PER[$k]}"
	done
done
echo
declare -A MED
for tool in "${TOOLS[@]}"; do
	pers=() grosses=()
	for round in $(seq 1 "$ROUNDS"); do
		pers+=("${PER[$tool.$round]}") grosses+=("${GROSS[$tool.$round]}")
	done
	MED[$tool]=$(median "${pers[@]}")
	printf '%s RSS / users: %.1f KB per user (median of %d)\n' "$tool" "$(median "${grosses[@]}")" "$ROUNDS"
done
target=16 peers="k6 ~160, Locust FastHttpUser ~17"
[ "$MODE" = ws ] && target=24 peers="each also holding a WebSocket"
printf 'headroom idle memory: %.1f KB per idle user ((RSS_N - RSS_base) / (N - base), median of %d; %s; target < %d)\n' \
	"${MED[headroom]}" "$ROUNDS" "$peers" "$target"
if [ "$K6" = 1 ]; then
	printf 'k6 %s idle memory: %.1f KB per idle VU; k6/headroom: %.1f\n' "$K6_VERSION" "${MED[k6]}" \
		"$(calc "${MED[k6]} / ${MED[headroom]}")"
fi
if [ -n "${KEEP:-}" ]; then log "raw outputs kept in $WORK"; fi
