#!/usr/bin/env bash
# A real burst-sensitive server to load: Debian's nginx with `limit_req`, a
# token bucket of RATE requests a second with a small BURST allowance, shared
# by every client (one bucket: the key is the server's name). A request past
# the bucket is answered 503 at once (nodelay), which headroom's default 5xx
# checks count. Its capacity is fixed, so the true ceiling of a scenario of
# one request per user per second (bench/limiter.star) is RATE users; load
# that arrives in bunches meets 503s well below it. One worker process, bound
# to 127.0.0.1 only, config, logs and temp files in DIR (nothing under /var).
#
#   ./scripts/nginx.sh install            # apt-get install nginx, once
#   ./scripts/nginx.sh start DIR          # config, logs and the served file in DIR
#   ./scripts/nginx.sh stop DIR           # by the PID in DIR/nginx.pid
#
#   headroom run bench/limiter.star --target http://127.0.0.1:8080 --users 100 --ramp 10s --duration 60s
#
# Every path answers 200 with the 3-byte body "ok\n", a static file
# (DIR/www/ok.txt) served through try_files: nginx's `return` would answer in
# the rewrite phase, before limit_req's (preaccess) runs, and so would never be
# limited. DIR/access.log has one line a request:
#
#   $msec $status $limit_req_status $request_time "$request"
#   1764280694.123 503 REJECTED 0.000 "GET / HTTP/1.1"
#
# (seconds since the epoch to the millisecond; PASSED or REJECTED).
#
# Environment:
#   PORT (8080)           http://127.0.0.1:PORT
#   RATE (200)            the bucket's rate, requests a second, all clients together
#   BURST (5)             requests past the rate it lets through at once (limit_req's burst)
#   START_TIMEOUT (10)    seconds `start` waits for nginx to answer
#   NICE (0)              nginx's nice value; root may make it negative, so that a test that loads
#                         the machine on purpose keeps nginx's own stalls out of what it measures
#   NGINX (/usr/sbin/nginx)
#                         the nginx binary (Debian's package installs it there)
#
# Exit codes: 0 done, 1 failed (the message says why), 2 usage, 3 `start`
# before `install`.
#
# Where systemd runs, Debian's package starts its own nginx (its default site
# on port 80) when it installs; this script neither uses nor stops that one.
# `start` rewrites DIR's config and empties its logs; it refuses a DIR whose
# server is still running.
set -euo pipefail
source "$(dirname "$0")/pidfile.sh"
source "$(dirname "$0")/install.sh"

NGINX=${NGINX:-/usr/sbin/nginx}

die() {
	echo "nginx.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

installed() { [[ -x $NGINX ]]; }

install() {
	if installed; then
		echo "nginx: installed ($NGINX, $("$NGINX" -v 2>&1))"
		return 0
	fi
	command -v apt-get >/dev/null || die "install: no apt-get; install nginx (1.17.6 or later, with limit_req) yourself and set NGINX=/path/to/nginx"
	echo "nginx: installing Debian's nginx package"
	apt_get update || die "install: apt-get update failed"
	apt_get install -y --no-install-recommends nginx || die "install: apt-get install nginx failed"
	installed || die "install: the nginx package is installed but $NGINX is not there (set NGINX=/path/to/nginx)"
	echo "nginx: installed ($NGINX, $("$NGINX" -v 2>&1))"
}

# running DIR: true when DIR/nginx.pid names a live nginx master of DIR (its
# process title keeps the command line it was started with).
running() { running_as nginx "$1" "-c $1/nginx.conf"; }

# configure DIR: the whole config and the served file, written on every start.
configure() {
	local dir=$1 user=""
	mkdir -p "$dir/www" "$dir/tmp"
	printf 'ok\n' >"$dir/www/ok.txt"
	# As root, nginx's workers would run as nobody, who may not enter DIR (a
	# test's temp dir is 0700): they run as the user who started it instead.
	[[ $(id -u) -eq 0 ]] && user="user $(id -un);"
	cat >"$dir/nginx.conf" <<EOF
# Written by scripts/nginx.sh start; rewritten on every start.
$user
worker_processes 1;
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events {
    worker_connections 4096;
}
http {
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    log_format limiter '\$msec \$status \$limit_req_status \$request_time "\$request"';
    access_log $dir/access.log limiter;
    keepalive_requests 1000000;
    keepalive_timeout 75s;
    # One bucket for every client: the key is the server's name, which must
    # not be empty (limit_req does not count requests whose key is empty).
    limit_req_zone \$server_name zone=one:1m rate=${RATE}r/s;
    server {
        listen 127.0.0.1:$PORT backlog=4096;
        server_name limiter;
        limit_req zone=one burst=$BURST nodelay;
        limit_req_status 503;
        # A rejection is in the access log (REJECTED); not in the error log too.
        limit_req_log_level info;
        location / {
            default_type text/plain;
            root $dir/www;
            # A static file, not \`return\`: return answers in the rewrite
            # phase, before limit_req runs, so it would never be limited.
            try_files /ok.txt =404;
        }
    }
}
EOF
}

start() {
	[[ $# -eq 1 ]] || usage
	if ! installed; then
		echo "nginx.sh: start: nginx is not installed ($NGINX); run ./scripts/nginx.sh install first" >&2
		exit 3
	fi
	mkdir -p "$1"
	local dir
	dir=$(cd "$1" && pwd)
	running "$dir" && die "start: an nginx is running on $dir already (pid $(cat "$dir/nginx.pid")); stop it first: $0 stop $dir"
	configure "$dir"
	rm -f "$dir/nginx.pid"
	: >"$dir/access.log"
	: >"$dir/error.log"
	"$NGINX" -t -q -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/nginx.out" 2>&1 ||
		die "start: nginx refuses $dir/nginx.conf: $(cat "$dir/nginx.out")"
	# Own session and no terminal: the caller's Ctrl-C does not reach it, and
	# `stop` (or the caller's cleanup) ends it by PID. daemon off: the PID is
	# the master's, which writes the same into DIR/nginx.pid itself.
	setsid nice -n "${NICE:-0}" "$NGINX" -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" </dev/null >"$dir/nginx.out" 2>&1 &
	local pid=$! url=http://127.0.0.1:$PORT/
	echo "$pid" >"$dir/nginx.pid"
	local deadline=$((SECONDS + START_TIMEOUT))
	until curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$dir/nginx.pid"
			die "start: nginx (pid $pid) exited before it answered $url. Last lines of its output and error log:
$(tail -n 15 "$dir/nginx.out" 2>/dev/null)
$(tail -n 15 "$dir/error.log" 2>/dev/null)"
		fi
		if ((SECONDS >= deadline)); then
			kill -TERM "$pid" 2>/dev/null || true
			rm -f "$dir/nginx.pid"
			die "start: nginx (pid $pid) did not answer $url within ${START_TIMEOUT}s (stopped). Last lines of its error log:
$(tail -n 15 "$dir/error.log" 2>/dev/null)"
		fi
		sleep 0.1
	done
	# The readiness probe is not part of any run's figures.
	: >"$dir/access.log"
	echo "nginx: pid $pid, http://127.0.0.1:$PORT (limit_req ${RATE}r/s, burst $BURST, 503 past it), config and logs in $dir"
}

stop() {
	[[ $# -eq 1 ]] || usage
	[[ -d $1 ]] || die "stop: no directory $1"
	stop_pidfile nginx "$(cd "$1" && pwd)"
}

PORT=${PORT:-8080}
RATE=${RATE:-200}
BURST=${BURST:-5}
START_TIMEOUT=${START_TIMEOUT:-10}
[[ $PORT =~ ^[0-9]+$ && $PORT -ge 1 && $PORT -le 65535 ]] || die "PORT=$PORT: want a number from 1 to 65535"
[[ $RATE =~ ^[0-9]+$ && $RATE -ge 1 ]] || die "RATE=$RATE: want a whole number of requests a second, 1 or more"
[[ $BURST =~ ^[0-9]+$ ]] || die "BURST=$BURST: want a whole number (0: no burst allowance)"
[[ $START_TIMEOUT =~ ^[0-9]+$ ]] || die "START_TIMEOUT=$START_TIMEOUT: want a whole number of seconds"

case "${1:-}" in
install) install ;;
start) start "${@:2}" ;;
stop) stop "${@:2}" ;;
*) usage ;;
esac
