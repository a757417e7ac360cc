#!/usr/bin/env bash
# A real WebSocket server to load: Centrifugo 5.4.9, the pub/sub server,
# built from its Go module with every dependency pinned (scripts/centrifugo/
# go.mod and go.sum: a module of its own, so nothing of it enters headroom's
# go.mod). Memory engine, no TLS, bound to 127.0.0.1 only; clients connect
# without a token (client_insecure) and may subscribe to any channel; the
# HTTP API takes the key API_KEY; channels keep a history so that every
# publication carries an offset (a subscriber sees a lost one as a gap).
#
#   ./scripts/centrifugo.sh install            # 2-4 min the first time (go build); instant after
#   ./scripts/centrifugo.sh start DIR [PORT]   # config and log in DIR
#   ./scripts/centrifugo.sh stop DIR           # by the PID in DIR/centrifugo.pid
#
#   headroom run examples/centrifugo.star --target http://127.0.0.1:8000 \
#     --scrape http://127.0.0.1:8000/metrics \
#     --server-latency centrifugo_api_command_duration_seconds_histogram:method \
#     --users 50 --ramp 5s --duration 60s
#
# Everything is on one port: WebSockets at /connection/websocket, the HTTP
# API at /api/..., Prometheus metrics at /metrics, /health.
#
# Environment:
#   PORT (8000)            the port, when not given after DIR
#   API_KEY (testkey)      the HTTP API's key (X-API-Key); examples/centrifugo.star's
#                          default, else give it --var api_key=...
#   DEBUG (false)          true serves Go's profiles at /debug/pprof/ (headroom's --profile)
#   PING_INTERVAL (25s), PONG_TIMEOUT (8s)
#                          Centrifugo's pings to clients, and how long it waits for the
#                          answer before it disconnects one; the test shortens them to
#                          see pings answered within a short run
#   HISTORY_SIZE (1000), HISTORY_TTL (300s)
#                          each channel's history: what gives publications offsets
#   START_TIMEOUT (30)     seconds `start` waits for /health to answer
#   HEADROOM_CACHE         where the binary lives ($HOME/.cache/headroom by default)
#   GO (go)                the Go that builds it (1.26 or later, as headroom's own)
#
# Exit codes: 0 done, 1 failed (the message says why), 2 usage, 3 `start`
# before `install`.
#
# Centrifugo keeps nothing on disk (memory engine): every `start` is an empty
# server. `start` refuses a DIR whose server is still running.
set -euo pipefail
source "$(dirname "$0")/pidfile.sh"

VERSION=5.4.9
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE=$ROOT/scripts/centrifugo # go.mod and go.sum: the pinned build
INSTALL_DIR=${HEADROOM_CACHE:-$HOME/.cache/headroom}/centrifugo-$VERSION
BIN=$INSTALL_DIR/centrifugo
STAMP=$INSTALL_DIR/.headroom-installed # holds the sha256 of the go.mod and go.sum built

die() {
	echo "centrifugo.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

module_hash() { cat "$MODULE/go.mod" "$MODULE/go.sum" | sha256sum | cut -d' ' -f1; }

installed() { [[ -x $BIN && -f $STAMP && $(cat "$STAMP") == "$(module_hash)" ]]; }

install() {
	if installed; then
		echo "centrifugo $VERSION: installed in $INSTALL_DIR"
		return 0
	fi
	# One install at a time per cache (two test commands at once): the
	# second waits for the first's build, then finds it done.
	mkdir -p "$(dirname "$INSTALL_DIR")"
	local lock
	exec {lock}>"$INSTALL_DIR.lock"
	flock "$lock"
	if installed; then
		echo "centrifugo $VERSION: installed in $INSTALL_DIR"
		return 0
	fi
	local go=${GO:-go}
	command -v "$go" >/dev/null || die "install: $go not found; install Go 1.26 or later (or set GO=/path/to/go)"
	echo "centrifugo $VERSION: building into $INSTALL_DIR (pinned modules of ${MODULE#"$ROOT"/}/go.mod; 2 to 4 minutes the first time)"
	# A half-made install (a build that failed or was cut short) is made again.
	rm -rf "$INSTALL_DIR"
	mkdir -p "$INSTALL_DIR"
	# -mod=readonly: the build uses go.sum as it is and never rewrites it;
	# GOWORK=off: a go.work above the repository cannot add modules to it.
	# The version is stamped as Centrifugo's own release builds do.
	(cd "$MODULE" && GOWORK=off "$go" build -mod=readonly -trimpath \
		-ldflags "-X github.com/centrifugal/centrifugo/v5/internal/build.Version=$VERSION" \
		-o "$BIN.part" github.com/centrifugal/centrifugo/v5) ||
		die "install: go build failed (above); the next install starts over"
	local says
	says=$("$BIN.part" version 2>&1) || die "install: the binary built does not run: $says"
	[[ $says == "Centrifugo v$VERSION "* ]] ||
		die "install: the binary built says \"$says\", not Centrifugo v$VERSION; see ${MODULE#"$ROOT"/}/go.mod"
	mv "$BIN.part" "$BIN"
	module_hash >"$STAMP"
	echo "centrifugo $VERSION: installed in $INSTALL_DIR"
}

# running DIR: true when DIR/centrifugo.pid names a live Centrifugo of DIR.
running() { running_as centrifugo "$1" "$BIN --config $1/config.json"; }

# configure DIR: the whole config, written on every start.
configure() {
	cat >"$1/config.json" <<EOF
{
  "address": "127.0.0.1",
  "port": "$PORT",
  "usage_stats_disable": true,
  "api_key": "$API_KEY",
  "client_insecure": true,
  "allow_subscribe_for_client": true,
  "history_size": $HISTORY_SIZE,
  "history_ttl": "$HISTORY_TTL",
  "ping_interval": "$PING_INTERVAL",
  "pong_timeout": "$PONG_TIMEOUT",
  "prometheus": true,
  "health": true,
  "debug": $DEBUG
}
EOF
}

start() {
	[[ $# -eq 1 || $# -eq 2 ]] || usage
	[[ $# -eq 2 ]] && PORT=$2
	[[ $PORT =~ ^[0-9]+$ && $PORT -ge 1 && $PORT -le 65535 ]] || die "start: port $PORT: want a number from 1 to 65535"
	if ! installed; then
		echo "centrifugo.sh: start: centrifugo $VERSION is not installed in $INSTALL_DIR; run ./scripts/centrifugo.sh install first" >&2
		exit 3
	fi
	mkdir -p "$1"
	local dir
	dir=$(cd "$1" && pwd)
	running "$dir" && die "start: a Centrifugo is running on $dir already (pid $(cat "$dir/centrifugo.pid")); stop it first: $0 stop $dir"
	configure "$dir"
	# Own session and no terminal: the caller's Ctrl-C does not reach it, and
	# `stop` (or the caller's cleanup) ends it by PID.
	setsid "$BIN" --config "$dir/config.json" </dev/null >"$dir/centrifugo.log" 2>&1 &
	local pid=$! url=http://127.0.0.1:$PORT/health
	echo "$pid" >"$dir/centrifugo.pid"
	await_answer centrifugo "$dir" "$pid" "$url" "$START_TIMEOUT" Centrifugo "$dir/centrifugo.log"
	echo "centrifugo $VERSION: pid $pid, http://127.0.0.1:$PORT (WebSockets /connection/websocket, API /api, metrics /metrics), config and log in $dir"
}

stop() {
	[[ $# -eq 1 ]] || usage
	[[ -d $1 ]] || die "stop: no directory $1"
	stop_pidfile centrifugo "$(cd "$1" && pwd)"
}

PORT=${PORT:-8000}
API_KEY=${API_KEY:-testkey}
PING_INTERVAL=${PING_INTERVAL:-25s}
PONG_TIMEOUT=${PONG_TIMEOUT:-8s}
HISTORY_SIZE=${HISTORY_SIZE:-1000}
DEBUG=${DEBUG:-false}
[[ $DEBUG == true || $DEBUG == false ]] || die "DEBUG=$DEBUG: want true or false"
HISTORY_TTL=${HISTORY_TTL:-300s}
START_TIMEOUT=${START_TIMEOUT:-30}
[[ $API_KEY =~ ^[A-Za-z0-9._~-]+$ ]] || die "API_KEY: want letters, digits and ._~- only (it is written into a JSON config and sent as a header)"
for d in PING_INTERVAL=$PING_INTERVAL PONG_TIMEOUT=$PONG_TIMEOUT HISTORY_TTL=$HISTORY_TTL; do
	[[ ${d#*=} =~ ^[0-9]+(\.[0-9]+)?(ms|s|m|h)$ ]] || die "$d: want a duration such as 500ms, 25s or 5m"
done
[[ $HISTORY_SIZE =~ ^[0-9]+$ ]] || die "HISTORY_SIZE=$HISTORY_SIZE: want a whole number (0: no history, and no offsets)"
[[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "START_TIMEOUT=$START_TIMEOUT: want a whole number of seconds"

case "${1:-}" in
install) install ;;
start) start "${@:2}" ;;
stop) stop "${@:2}" ;;
*) usage ;;
esac
