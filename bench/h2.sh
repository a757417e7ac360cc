#!/usr/bin/env bash
# h2.sh — requests per second over HTTP/2 from one client core: headroom
# beside k6 and vegeta (and h2load, nghttp2's wrk, as the reference when it
# is installed), against one nginx with TLS and http2.
#
# Usage: bash bench/h2.sh
#   env ROUNDS=3        rounds; each runs every tool once (the order rotates)
#       DURATION=10     seconds per measurement
#       CONNS=64        connections = users = VUs = workers, one stream at a time each
#       TOOLS="h2load headroom k6 vegeta"
#       SERVER_CPU=0    core nginx is pinned to
#       CLIENT_CPU=1    core every client is pinned to (Go's clients then run on one P)
#       HEADROOM=path   this binary instead of building ./cmd/headroom
#       QUIET_WAIT=120  seconds to wait, before each measurement, for the machine to be idle
#
# nginx: one worker, `listen ssl http2`, a self-signed P-256 certificate made
# here by openssl, a 13-byte body on every path, no access log, keep-alive
# without a request limit. Every client holds CONNS TLS connections that
# negotiated h2 by ALPN and sends GET / on each as fast as nginx answers,
# without compression (none of the others asks for it either), verifying
# no certificate. headroom's result must say every response came over
# HTTP/2. Prints each measurement (requests/s, the client's CPU ms per 1,000
# requests) and the medians, with each tool's ratio to the first in TOOLS.
# Traffic goes to 127.0.0.1 only.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ROUNDS=${ROUNDS:-3} DURATION=${DURATION:-10} CONNS=${CONNS:-64}
SERVER_CPU=${SERVER_CPU:-0} CLIENT_CPU=${CLIENT_CPU:-1} QUIET_WAIT=${QUIET_WAIT:-120}
TOOLS=${TOOLS:-h2load headroom k6 vegeta}
bench_workdir h2

need nginx nginx
need openssl openssl
need jq jq
need taskset util-linux
[ -x /usr/bin/time ] || need /usr/bin/time time
[ "$(nproc --all)" -ge 2 ] || die "needs 2 cores (server and client pinned apart)"
for t in $TOOLS; do
	case $t in
	h2load) command -v h2load >/dev/null || die "h2load is not installed: apt-get install nghttp2-client, or TOOLS without it" ;;
	headroom) build_headroom ;;
	k6) find_k6 ;;
	vegeta) find_vegeta ;;
	*) die "unknown tool $t (TOOLS: h2load headroom k6 vegeta)" ;;
	esac
done
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 -subj /CN=127.0.0.1 \
	-addext subjectAltName=IP:127.0.0.1 -keyout "$WORK/key.pem" -out "$WORK/cert.pem" 2>"$WORK/openssl.log" ||
	die "openssl: $(cat "$WORK/openssl.log")"
PORT=$(free_port)
TLS_LISTEN="ssl http2" TLS_CERT=$WORK/cert.pem TLS_KEY=$WORK/key.pem start_nginx "$WORK/nginx" "$PORT" "$SERVER_CPU" 4096 75s
URL=https://127.0.0.1:$PORT/

cat >"$WORK/h2.star" <<'STAR'
def hit(user):
    user.http.get("/", name="GET /")

actions = [action("Hit", hit)]
think_time = think.constant(0)
STAR
cat >"$WORK/k6.js" <<JS
import http from 'k6/http';
export const options = { vus: $CONNS, duration: '${DURATION}s', insecureSkipTLSVerify: true, discardResponseBodies: true };
export default function () { http.get('$URL'); }
JS

# measure TOOL N: runs TOOL once; sets RPS and CPU_MS.
measure() {
	local t=$1 n=$2 out=$WORK/$1-$2
	case $t in
	h2load)
		watched "$t-$n" taskset -c "$CLIENT_CPU" h2load -t1 -c"$CONNS" -m1 -D "$DURATION" "$URL" >"$out.txt"
		RPS=$(awk '/^finished in/ {print $4}' "$out.txt")
		local done
		done=$(awk '/^requests:/ {print $8}' "$out.txt")
		grep -q 'Application protocol: h2' "$out.txt" || die "h2load did not speak h2: $(head -20 "$out.txt")"
		CPU_MS=$(calc "$CLIENT_CPU_S * 1e6 / $done")
		;;
	headroom)
		watched "$t-$n" timeout $((DURATION + 60)) taskset -c "$CLIENT_CPU" "$HEADROOM" run "$WORK/h2.star" --target "${URL%/}" \
			--insecure --no-compression --users "$CONNS" --ramp 0s --duration "${DURATION}s" --out "$out" --quiet >"$out.txt" 2>"$out.err" ||
			die "headroom failed: $(tail -5 "$out.err")"
		RPS=$(jq -r '.totals.rps' "$out/result.json")
		jq -e '.totals.http2 == .totals.count' "$out/result.json" >/dev/null || die "headroom: not every response came over HTTP/2"
		CPU_MS=$(jq -r '.generator.cpu_seconds * 1e6 / .totals.count' "$out/result.json")
		;;
	k6)
		watched "$t-$n" taskset -c "$CLIENT_CPU" "$K6_BIN" run --quiet --no-color --summary-export "$out.json" "$WORK/k6.js" >"$out.txt" 2>&1
		RPS=$(jq -r '.metrics.http_reqs.rate' "$out.json")
		CPU_MS=$(calc "$CLIENT_CPU_S * 1e6 / $(jq -r '.metrics.http_reqs.count' "$out.json")")
		;;
	vegeta)
		echo "GET $URL" >"$WORK/targets.txt"
		watched "$t-$n" taskset -c "$CLIENT_CPU" "$VEGETA_BIN" attack -targets "$WORK/targets.txt" -insecure -http2 -rate 0 \
			-workers "$CONNS" -max-workers "$CONNS" -connections "$CONNS" -duration "${DURATION}s" -output "$out.bin"
		"$VEGETA_BIN" report -type json "$out.bin" >"$out.json"
		RPS=$(jq -r '.throughput' "$out.json")
		CPU_MS=$(calc "$CLIENT_CPU_S * 1e6 / $(jq -r '.requests' "$out.json")")
		;;
	esac
	printf '%-6s %-9s %9.0f %10.2f %8.0f%% %8.1f%% %7.1f%%\n' "$n" "$t" "$RPS" "$CPU_MS" "$NGINX_PCT" "$OTHERS_PCT" "$STEAL_PCT"
}

# Warm nginx up and check it answers over HTTP/2.
curl -fsk --http2 -o /dev/null -w '%{http_version}\n' "$URL" 2>/dev/null | grep -qx 2 ||
	die "nginx does not answer over HTTP/2 at $URL"

log "$ROUNDS rounds of ${DURATION}s, $CONNS connections, nginx on cpu $SERVER_CPU, clients on cpu $CLIENT_CPU: $TOOLS"
printf '%-6s %-9s %9s %10s %9s %9s %8s\n' round client req/s cpu_ms/1k nginx% others% steal%
declare -A RPS_OF CPU_OF
read -r -a tools <<<"$TOOLS"
for n in $(seq 1 "$ROUNDS"); do
	for i in "${!tools[@]}"; do
		t=${tools[$(((i + n - 1) % ${#tools[@]}))]} # rotate the order: a drift favours none
		measure "$t" "$n"
		RPS_OF[$t]+="$RPS " CPU_OF[$t]+="$CPU_MS "
	done
done
echo
first=${tools[0]}
# shellcheck disable=SC2086
base=$(median ${RPS_OF[$first]})
printf 'medians of %d rounds  %10s %10s %10s\n' "$ROUNDS" req/s cpu_ms/1k "/$first"
for t in "${tools[@]}"; do
	# shellcheck disable=SC2086
	r=$(median ${RPS_OF[$t]}) c=$(median ${CPU_OF[$t]})
	printf '  %-18s %10.0f %10.2f %10.3f\n' "$t" "$r" "$c" "$(calc "$r / $base")"
done
