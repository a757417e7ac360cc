#!/usr/bin/env bash
# A real Matrix homeserver to load: Synapse 1.163.2 from PyPI, in a venv,
# every Python package pinned (scripts/synapse-requirements.txt, a `pip
# freeze` of a working install). SQLite, no federation, no TLS, bound to
# 127.0.0.1 only, registration open, rate limits raised so that the load
# test measures the server and not its rate limiter.
#
#   ./scripts/synapse.sh install            # ~25 s the first time; instant after
#   ./scripts/synapse.sh start DIR          # config, database and logs in DIR
#   ./scripts/synapse.sh stop DIR           # by the PID in DIR/synapse.pid
#
#   headroom run examples/matrix.star --target http://127.0.0.1:8008 \
#     --scrape http://127.0.0.1:9008/_synapse/metrics --users 50 --ramp 10s --duration 60s
#
# Environment:
#   PORT (8008)           the client API: http://127.0.0.1:PORT
#   METRICS_PORT (9008)   Prometheus metrics: http://127.0.0.1:METRICS_PORT/_synapse/metrics
#   SHARED_SECRET         registration_shared_secret (default the one examples/matrix.star uses)
#   START_TIMEOUT (90)    seconds `start` waits for the client API to answer
#   RC_MESSAGE_PER_SECOND (10000), RC_MESSAGE_BURST (100000)
#                         rc_message, Synapse's limit on each user's messages (reactions,
#                         edits, redactions included); the test tightens it to see 429s
#   BCRYPT_ROUNDS (12)    the password hash's cost, Synapse's default 12 (~0.25 s of CPU per
#                         register or login); the test lowers it to 4 to set users up quickly
#   NICE (-10 as root, else 0)
#                         Synapse's scheduling priority: ahead of other work on the machine (busy
#                         loops, other tests), so that a test measures the server and not what
#                         else runs; Synapse is one Python thread, so it takes one core at most
#   PROFILER_PORT         when set, `start` also starts `headroom profiler` beside Synapse (py-spy,
#                         scripts/py-spy.sh installs it; root, for ptrace) on 127.0.0.1:PROFILER_PORT, so
#                         that a run's --profile http://127.0.0.1:PROFILER_PORT/debug/pprof names Synapse's
#                         Python functions (docs/PROFILES.md); `stop` stops it first. Its log: DIR/profiler.log
#   HEADROOM              the headroom binary for PROFILER_PORT (default: bin/headroom, else on PATH)
#   HEADROOM_CACHE        where the venv lives ($HOME/.cache/headroom by default)
#   PYTHON (python3)      the Python that makes the venv (3.10 or later)
#
# Exit codes: 0 done, 1 failed (the message says why), 2 usage, 3 `start`
# before `install`.
#
# `start` on a DIR that holds a server already keeps its database (users,
# rooms) and its keys, and rewrites the settings below; use a new DIR for a
# fresh server. It refuses a DIR whose server is still running.
set -euo pipefail
source "$(dirname "$0")/pidfile.sh"
source "$(dirname "$0")/install.sh"

VERSION=1.163.2
ROOT=$(cd "$(dirname "$0")/.." && pwd)
REQUIREMENTS=$ROOT/scripts/synapse-requirements.txt
VENV=${HEADROOM_CACHE:-$HOME/.cache/headroom}/synapse-$VERSION
PY=$VENV/bin/python
STAMP=$VENV/.headroom-installed # holds the sha256 of the requirements installed

die() {
	echo "synapse.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

requirements_hash() { sha256sum "$REQUIREMENTS" | cut -d' ' -f1; }

installed() { [[ -x $PY && -f $STAMP && $(cat "$STAMP") == "$(requirements_hash)" ]]; }

install() {
	if installed; then
		echo "synapse $VERSION: installed in $VENV"
		return 0
	fi
	local python=${PYTHON:-python3}
	command -v "$python" >/dev/null || die "install: $python not found; install Python 3.10 or later (or set PYTHON=/path/to/python3)"
	"$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
		die "install: $python is $("$python" --version 2>&1); Synapse $VERSION needs Python 3.10 or later (set PYTHON=...)"
	echo "synapse $VERSION: installing into $VENV (pinned packages from ${REQUIREMENTS#"$ROOT"/})"
	# A half-made venv (an install that failed or was cut short) is made again.
	rm -rf "$VENV"
	mkdir -p "$(dirname "$VENV")"
	"$python" -m venv "$VENV" || die "install: could not make a venv with $python (on Debian: apt-get install python3-venv)"
	# Every package is pinned, so --no-deps: pip installs exactly the list, and
	# `pip check` then says if the list ever stops being consistent.
	retry "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps --require-virtualenv -r "$REQUIREMENTS" ||
		die "install: pip failed (above); the venv is left in $VENV to look at, and the next install starts over"
	"$VENV/bin/pip" check --disable-pip-version-check >/dev/null ||
		die "install: the pinned packages do not fit together: $("$VENV/bin/pip" check 2>&1 | head -5)"
	"$PY" -c 'import synapse, sys; sys.exit(synapse.__version__ != "'"$VERSION"'")' ||
		die "install: synapse $VERSION is not what the venv imports; see ${REQUIREMENTS#"$ROOT"/}"
	requirements_hash >"$STAMP"
	echo "synapse $VERSION: installed in $VENV"
}

# running DIR: true when DIR/synapse.pid names a live Synapse process.
running() { running_as synapse "$1" "synapse.app.homeserver --config-path $1/homeserver.yaml"; }

# configure DIR: generates the config (and signing key) once, then sets what
# the load test needs, on every start.
configure() {
	local dir=$1
	if [[ ! -f $dir/homeserver.yaml ]]; then
		(cd "$dir" && "$PY" -m synapse.app.homeserver --generate-config --server-name localhost \
			--config-path "$dir/homeserver.yaml" --config-directory "$dir" --data-directory "$dir" \
			--report-stats=no >"$dir/generate.log" 2>&1) ||
			die "start: --generate-config failed: $(tail -5 "$dir/generate.log")"
	fi
	PORT=$PORT METRICS_PORT=$METRICS_PORT SHARED_SECRET=$SHARED_SECRET BCRYPT_ROUNDS=$BCRYPT_ROUNDS \
		RC_MESSAGE_PER_SECOND=$RC_MESSAGE_PER_SECOND RC_MESSAGE_BURST=$RC_MESSAGE_BURST "$PY" - "$dir" <<'PY'
import os, sys, yaml

d = sys.argv[1]
path = os.path.join(d, "homeserver.yaml")
with open(path) as f:
    c = yaml.safe_load(f)

def lots():  # a new dict each time, or the YAML gets anchors
    return {"per_second": 10000, "burst_count": 100000}

c.update({
    "listeners": [
        {"port": int(os.environ["PORT"]), "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
         "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]},
        {"port": int(os.environ["METRICS_PORT"]), "bind_addresses": ["127.0.0.1"], "type": "metrics"},
    ],
    "enable_metrics": True,
    "database": {"name": "sqlite3", "args": {"database": os.path.join(d, "homeserver.db")}},
    "pid_file": os.path.join(d, "homeserver.pid"),
    "media_store_path": os.path.join(d, "media_store"),
    "enable_registration": True,
    "enable_registration_without_verification": True,
    "registration_shared_secret": os.environ["SHARED_SECRET"],
    "bcrypt_rounds": int(os.environ["BCRYPT_ROUNDS"]),
    "report_stats": False,
    # No federation: no key servers to ask, nothing leaves 127.0.0.1.
    "trusted_key_servers": [],
    "suppress_key_server_warning": True,
    "federation_domain_whitelist": [],
    "url_preview_enabled": False,
    # The scenario's shared rooms are published to the room directory, and
    # users find each other by name, as in the reference's user search.
    "room_list_publication_rules": [{"action": "allow"}],
    "user_directory": {"enabled": True, "search_all_users": True},
    # Rate limits out of the way: the load test measures the server.
    "rc_message": {"per_second": float(os.environ["RC_MESSAGE_PER_SECOND"]),
                   "burst_count": int(os.environ["RC_MESSAGE_BURST"])},
    "rc_registration": lots(),
    "rc_registration_token_validity": lots(),
    "rc_login": {"address": lots(), "account": lots(), "failed_attempts": lots()},
    "rc_admin_redaction": lots(),
    "rc_joins": {"local": lots(), "remote": lots()},
    "rc_joins_per_room": lots(),
    "rc_3pid_validation": lots(),
    "rc_invites": {"per_room": lots(), "per_user": lots(), "per_issuer": lots()},
    "rc_third_party_invite": lots(),
    "rc_room_creation": lots(),
    "rc_user_directory": lots(),
    "rc_profile": lots(),
    "rc_presence": {"per_user": lots()},
    "rc_delayed_event_mgmt": lots(),
    "rc_reports": lots(),
    "rc_media_create": lots(),
    "rc_key_requests": lots(),
})
with open(path, "w") as f:
    yaml.safe_dump(c, f, sort_keys=False)

# The generated log config logs to the directory generate-config ran in;
# log to DIR/homeserver.log instead.
log = c["log_config"]
with open(log) as f:
    lc = yaml.safe_load(f)
lc["handlers"]["file"]["filename"] = os.path.join(d, "homeserver.log")
with open(log, "w") as f:
    yaml.safe_dump(lc, f, sort_keys=False)
PY
}

start() {
	[[ $# -eq 1 ]] || usage
	if ! installed; then
		echo "synapse.sh: start: synapse $VERSION is not installed in $VENV; run ./scripts/synapse.sh install first" >&2
		exit 3
	fi
	mkdir -p "$1"
	local dir
	dir=$(cd "$1" && pwd)
	running "$dir" && die "start: a Synapse is running on $dir already (pid $(cat "$dir/synapse.pid")); stop it first: $0 stop $dir"
	configure "$dir"
	rm -f "$dir/homeserver.pid" # a stale one from a killed server stops Synapse from starting
	# Own session and no terminal: the caller's Ctrl-C does not reach it, and
	# `stop` (or the caller's cleanup) ends it by PID.
	local nice=${NICE:-0}
	[[ -z ${NICE:-} && $(id -u) == 0 ]] && nice=-10
	setsid nice -n "$nice" "$PY" -m synapse.app.homeserver --config-path "$dir/homeserver.yaml" \
		</dev/null >"$dir/synapse.out" 2>&1 &
	local pid=$! url=http://127.0.0.1:$PORT/_matrix/client/versions
	echo "$pid" >"$dir/synapse.pid"
	await_answer synapse "$dir" "$pid" "$url" "$START_TIMEOUT" Synapse "$dir/synapse.out" "$dir/homeserver.log"
	echo "synapse $VERSION: pid $pid, client http://127.0.0.1:$PORT, metrics http://127.0.0.1:$METRICS_PORT/_synapse/metrics, data and logs in $dir"
	[[ -n ${PROFILER_PORT:-} ]] && start_profiler "$dir" "$pid"
	return 0
}

# start_profiler DIR PID: `headroom profiler` sampling Synapse (PID) with py-spy,
# serving Go's pprof interface on 127.0.0.1:PROFILER_PORT; its PID in DIR/profiler.pid.
start_profiler() {
	local dir=$1 pid=$2 hr=${HEADROOM:-} pyspy ppid
	[[ $PROFILER_PORT =~ ^[0-9]+$ ]] || die "PROFILER_PORT=$PROFILER_PORT: want a port number"
	if [[ -z $hr ]]; then
		hr=$ROOT/bin/headroom
		[[ -x $hr ]] || hr=$(command -v headroom) ||
			die "PROFILER_PORT needs headroom: set HEADROOM=/path/to/headroom, or go build -o bin/headroom ./cmd/headroom"
	fi
	pyspy=$("$ROOT/scripts/py-spy.sh" path) || die "start: py-spy could not be installed (scripts/py-spy.sh)"
	setsid "$hr" profiler --pid "$pid" --py-spy "$pyspy" --listen "127.0.0.1:$PROFILER_PORT" </dev/null >"$dir/profiler.log" 2>&1 &
	ppid=$!
	echo "$ppid" >"$dir/profiler.pid"
	await_answer profiler "$dir" "$ppid" "http://127.0.0.1:$PROFILER_PORT/debug/pprof/" 20 "headroom profiler" "$dir/profiler.log"
	echo "profiler: pid $ppid, Synapse's CPU profiles at http://127.0.0.1:$PROFILER_PORT/debug/pprof (--profile), log $dir/profiler.log"
}

stop() {
	[[ $# -eq 1 ]] || usage
	[[ -d $1 ]] || die "stop: no directory $1"
	local dir
	dir=$(cd "$1" && pwd)
	if running_as profiler "$dir" "profiler --pid"; then
		kill -TERM "$(cat "$dir/profiler.pid")" 2>/dev/null || true
		echo "profiler: stopped pid $(cat "$dir/profiler.pid")"
	fi
	rm -f "$dir/profiler.pid"
	stop_pidfile synapse "$dir"
}

PORT=${PORT:-8008}
METRICS_PORT=${METRICS_PORT:-9008}
SHARED_SECRET=${SHARED_SECRET:-headroom-matrix-example}
START_TIMEOUT=${START_TIMEOUT:-90}
BCRYPT_ROUNDS=${BCRYPT_ROUNDS:-12}
RC_MESSAGE_PER_SECOND=${RC_MESSAGE_PER_SECOND:-10000}
RC_MESSAGE_BURST=${RC_MESSAGE_BURST:-100000}
[[ $RC_MESSAGE_PER_SECOND =~ ^[0-9]+(\.[0-9]+)?$ && $RC_MESSAGE_BURST =~ ^[0-9]+$ ]] ||
	die "RC_MESSAGE_PER_SECOND=$RC_MESSAGE_PER_SECOND RC_MESSAGE_BURST=$RC_MESSAGE_BURST: want a number and a whole number"
[[ $BCRYPT_ROUNDS =~ ^[0-9]+$ && $BCRYPT_ROUNDS -ge 4 && $BCRYPT_ROUNDS -le 31 ]] ||
	die "BCRYPT_ROUNDS=$BCRYPT_ROUNDS: want a number from 4 to 31 (bcrypt's range)"

case "${1:-}" in
install) install ;;
start) start "${@:2}" ;;
stop) stop "${@:2}" ;;
*) usage ;;
esac
