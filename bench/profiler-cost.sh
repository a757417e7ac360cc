#!/usr/bin/env bash
# profiler-cost.sh — what `headroom profiler` (py-spy beside the server, 100 samples a second) costs the
# Python server it samples: the server's CPU a request, with and without --profile through the profiler,
# in alternating runs against one server.
#
# Usage: bash bench/profiler-cost.sh
#   env ROUNDS=3      rounds of one run without and one with the profiler
#       DURATION=10   seconds each run holds its users
#       HASH=30000    the server's pure-Python hash rounds a request (~2 ms of CPU here)
#       SLICE=2s      --profile-slice
#
# The server is cmd/headroom's test server (http.server, one thread, a hash a request) with a /count of
# requests served; its CPU is its /proc/PID/stat utime+stime over each run. 4 users, no think time.
set -euo pipefail
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-10}
HASH=${HASH:-30000}
SLICE=${SLICE:-2s}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$WORK"
}
trap cleanup EXIT

PYSPY=$("$ROOT/scripts/py-spy.sh" path)
(cd "$ROOT" && go build -o "$WORK/headroom" ./cmd/headroom)
cat >"$WORK/server.py" <<'PY'
import http.server, sys
count = 0
def hash_password(password, rounds):
    h = 5381
    for i in range(rounds):
        h = (h * 33 + i + len(password)) & 0xffffffff
    return h
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global count
        if self.path == "/count":
            body = str(count).encode()
        else:
            count += 1
            body = str(hash_password("correct-horse", int(sys.argv[2]))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
printf 'def login(user):\n    user.http.get("/login", name="GET /login")\nactions = [action("login", login)]\nthink_time = think.constant("0s")\n' >"$WORK/login.star"

python3 "$WORK/server.py" 18931 "$HASH" &
server=$!
pids+=("$server")
"$WORK/headroom" profiler --pid "$server" --listen 127.0.0.1:18932 --py-spy "$PYSPY" 2>"$WORK/profiler.log" &
pids+=("$!")
sleep 1

ticks() { awk '{print $14 + $15}' "/proc/$server/stat"; }
served() { curl -s http://127.0.0.1:18931/count; }
hz=$(getconf CLK_TCK)

# run LABEL ARGS...: one run; prints the server's CPU a request in ms.
run() {
	local label=$1 t0 n0 t1 n1
	shift
	t0=$(ticks) n0=$(served)
	"$WORK/headroom" run "$WORK/login.star" --target http://127.0.0.1:18931 --users 4 --ramp 1s --duration "${DURATION}s" \
		--quiet --no-report --out "$WORK/run-$label-$RANDOM" "$@" >/dev/null 2>&1
	t1=$(ticks) n1=$(served)
	awk -v t=$((t1 - t0)) -v n=$((n1 - n0 - 1)) -v hz="$hz" -v l="$label" 'BEGIN { printf "%-8s %6d requests  %.3f ms CPU a request\n", l, n, 1000 * t / hz / n }'
}

for r in $(seq 1 "$ROUNDS"); do
	echo "round $r"
	run without
	run with --profile http://127.0.0.1:18932/debug/pprof --profile-slice "$SLICE"
done
