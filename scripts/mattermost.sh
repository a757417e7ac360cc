#!/usr/bin/env bash
# A real Mattermost to load: the server built from the Go module proxy at a
# pinned commit (a pseudo-version of github.com/mattermost/mattermost/server/v8),
# with PostgreSQL from the distribution started in DIR. Bound to 127.0.0.1
# only, open sign-up, no email verification, rate limiting off, Prometheus
# metrics and Go's pprof on the metrics port, one open team ("headroom") made
# by the first user (the system admin).
#
#   ./scripts/mattermost.sh install          # ~10 min and ~3 GB of Go caches the first time; instant after
#   ./scripts/mattermost.sh start DIR        # database, config, data and logs in DIR (see "As root" below)
#   ./scripts/mattermost.sh stop DIR         # the server and its PostgreSQL, by the PIDs in DIR
#
#   headroom run examples/mattermost.star --target http://127.0.0.1:18065 \
#     --scrape http://127.0.0.1:18067/metrics --profile http://127.0.0.1:18067/debug/pprof \
#     --users 50 --ramp 30s --duration 2m
#
# Environment:
#   MATTERMOST_VERSION    the module's pseudo-version (default v8.0.0-20260113162330-9e1d4c2072c0,
#                         a commit of 2026-01-13 that calls itself 11.4.0); another commit's is
#                         v8.0.0-<its UTC commit time, yyyymmddhhmmss>-<its first 12 hex digits>
#   PUBLIC_VERSION        the pseudo-version of .../server/public to build with, the same commit's
#                         (default v0.1.22-0.20260113165922-8e4cadbc88ee, the default server's)
#   PORT (18065)          the API and WebSocket: http://127.0.0.1:PORT
#   METRICS_PORT (18067)  Prometheus metrics at /metrics, Go's profiles at /debug/pprof
#   PG_PORT (15432)       PostgreSQL, on 127.0.0.1 and a socket in DIR/pg
#   PG_FALLBACK_DIR       where, as root, the database goes when the user postgres cannot reach DIR
#                         (default /var/tmp/headroom-postgres; see "As root" below)
#   NODE_PORT (19100)     a node_exporter (Debian's prometheus-node-exporter, when installed) on
#                         127.0.0.1:NODE_PORT: the machine's CPU and memory, for the reference's two
#                         server checks (--scrape http://127.0.0.1:NODE_PORT/metrics); 0: none
#   ADMIN_PASSWORD        the admin's (user "admin"; default the one examples/mattermost.star knows)
#   RATE_LIMIT (false)    true turns Mattermost's rate limiter on (its defaults)
#   LTNG (false)          true: what Mattermost's own load-test tool (mattermost-load-test-ng) needs to run
#                         on this build: plugins on (its users ask for the webapp's plugins and log in
#                         again on a 501), the feature flags CustomProfileAttributes and ChannelBookmarks off
#                         and scheduled posts off (unlicensed, its logins and team loads fail otherwise);
#                         bench/mattermost-ltng.sh starts the server so, for both tools
#   START_TIMEOUT (120)   seconds `start` waits for the API to answer
#   HEADROOM_CACHE        where the build lives ($HOME/.cache/headroom by default)
#
# What the build is: `-tags sourceavailable` and BuildNumber "dev", the only build that serves its
# Prometheus metrics (mattermost_api_time, mattermost_db_store_time, mattermost_http_requests_total,
# mattermost_websocket_*) without a licence. "dev" also turns on developer mode and local mode
# (mmctl --local, a socket in DIR): a server for load tests on loopback, not for people.
# Unlicensed, it refuses sign-ups past 250 active users: more users share accounts (the scenario's
# "accounts" var). It hashes passwords with PBKDF2 at 600,000 rounds: ~0.5 s of CPU a login.
#
# Exit codes: 0 done, 1 failed (the message says why), 2 usage, 3 `start` before `install`.
#
# `start` on a DIR that holds a server already keeps its database and files; use a new DIR for a fresh
# server. It refuses a DIR whose server is still running.
#
# As root, PostgreSQL runs as the user postgres (initdb refuses root), and nothing here changes the owner
# or mode of DIR or of a directory above it. When postgres can reach DIR, the database is in DIR/pg and its
# log DIR/postgres.log, both postgres's. When it cannot (DIR, or a directory above it, is closed to other
# users: `mktemp -d` makes mode 700, and root's home is 700), the database is in
# PG_FALLBACK_DIR/<hash of DIR's path>/pg (that directory postgres's, mode 700) with DIR/pg and
# DIR/postgres.log links to it, and `start` says so once; `stop` and a later `start` go through the link.
# Removing DIR leaves that database behind until a later such `start` (for any DIR) removes every one there
# whose DIR no longer links to it and that is not running; to remove it with DIR:
# rm -rf "$(dirname "$(readlink -f DIR/pg)")" DIR (after `stop DIR`).
set -euo pipefail
source "$(dirname "$0")/pidfile.sh"

VERSION=${MATTERMOST_VERSION:-v8.0.0-20260113162330-9e1d4c2072c0}
PUBLIC=${PUBLIC_VERSION:-v0.1.22-0.20260113165922-8e4cadbc88ee}
PORT=${PORT:-18065}
METRICS_PORT=${METRICS_PORT:-18067}
PG_PORT=${PG_PORT:-15432}
NODE_PORT=${NODE_PORT:-19100}
ADMIN_PASSWORD=${ADMIN_PASSWORD:-headroom-Admin-1}
RATE_LIMIT=${RATE_LIMIT:-false}
LTNG=${LTNG:-false}
START_TIMEOUT=${START_TIMEOUT:-120}
CACHE=${HEADROOM_CACHE:-$HOME/.cache/headroom}
HOME_DIR=$CACHE/mattermost-$VERSION # bin/mattermost, i18n/, templates/, fonts/, client/
BIN=$HOME_DIR/bin/mattermost
MODULE=github.com/mattermost/mattermost/server/v8

die() {
	echo "mattermost.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

installed() { [[ -x $BIN && -f $HOME_DIR/.headroom-installed ]]; }

install() {
	if installed; then
		echo "mattermost $VERSION: installed in $HOME_DIR"
		return 0
	fi
	command -v go >/dev/null || die "install: no Go; install Go 1.25 or later (https://go.dev/dl/) and put it on PATH"
	[[ $VERSION =~ ^v8\.0\.0-[0-9]{14}-[0-9a-f]{12}$ ]] ||
		die "install: MATTERMOST_VERSION=$VERSION is not a pseudo-version (v8.0.0-yyyymmddhhmmss-<12 hex>): the proxy serves no other"
	echo "mattermost $VERSION: building into $HOME_DIR (~10 min and ~3 GB of Go caches the first time)"
	rm -rf "$HOME_DIR"
	local build=$HOME_DIR/build
	mkdir -p "$build" "$HOME_DIR/bin"
	# A module of our own that requires the server's, so `go build` takes the
	# server's main package at the pinned version; its enterprise imports are
	# private (-e leaves them out), and its checksums are not in sum.golang.org.
	cat >"$build/go.mod" <<EOF
module headroom.invalid/mattermost-build

go 1.25

require (
	$MODULE $VERSION
	github.com/mattermost/mattermost/server/public $PUBLIC
)
EOF
	cat >"$build/tools.go" <<EOF
//go:build tools

package tools

import _ "$MODULE/cmd/mattermost"
EOF
	export GONOSUMDB=github.com/mattermost/mattermost GOFLAGS=-mod=mod
	# The server's own replace directives (tablewriter held at v0.0.5) bind
	# only its own module: a module that requires it must repeat them.
	local gomod
	gomod=$(cd "$build" && go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
	[[ -f $gomod ]] || die "install: the module proxy did not serve $MODULE@$VERSION (is it a pseudo-version of a real commit?)"
	awk '/^replace \(/ { block = 1; next } block && /^\)/ { block = 0; next }
		block && NF { print "replace " $0; next } /^replace / { print }' "$gomod" | grep -v '=> *\.' >>"$build/go.mod" || true
	(cd "$build" && go mod tidy -e >"$build/tidy.log" 2>&1) ||
		die "install: go mod tidy failed: $(tail -5 "$build/tidy.log")"
	(cd "$build" && go build -tags sourceavailable -trimpath \
		-ldflags "-X github.com/mattermost/mattermost/server/public/model.BuildNumber=dev" \
		-o "$BIN" "$MODULE/cmd/mattermost" >"$build/build.log" 2>&1) ||
		die "install: go build failed (all of it in $build/build.log): $(tail -8 "$build/build.log")"
	local src
	src=$(cd "$build" && go list -m -f '{{.Dir}}' "$MODULE") || die "install: the module's source is not in the module cache"
	for d in i18n templates fonts; do
		cp -r "$src/$d" "$HOME_DIR/$d" || die "install: $src/$d: not copied"
		chmod -R u+w "$HOME_DIR/$d"
	done
	# No web client: the server answers / with 500 until a root.html exists.
	mkdir -p "$HOME_DIR/client"
	echo '<!doctype html><title>Mattermost</title><p>No web client: a server for load tests.' >"$HOME_DIR/client/root.html"
	echo "$VERSION" >"$HOME_DIR/.headroom-installed"
	echo "mattermost $VERSION: installed in $HOME_DIR ($("$BIN" version 2>/dev/null | grep -m1 -i 'version' || echo built))"
}

# The database runs as a user that is not root (initdb refuses root): "postgres" when we are root.
PG_USER=$(id -un)
[[ $(id -u) == 0 ]] && PG_USER=postgres
PG_FALLBACK=${PG_FALLBACK_DIR:-/var/tmp/headroom-postgres}

as_pg() { # as_pg CMD ARGS: CMD as PG_USER; as root from /, since the caller's directory may be closed to it
	if [[ $(id -u) == 0 ]]; then
		(cd / && runuser -u "$PG_USER" -- "$@")
	else
		"$@"
	fi
}

pg() { # pg CMD ARGS: a PostgreSQL command as PG_USER
	local bin
	bin=$(pg_bin "$1")
	shift
	as_pg "$bin" "$@"
}

pg_bin() {
	local b
	b=$(command -v "$1" 2>/dev/null || ls /usr/lib/postgresql/*/bin/"$1" 2>/dev/null | sort -V | tail -1)
	[[ -n $b ]] || die "start: no $1; install PostgreSQL (Debian: apt-get install postgresql)"
	echo "$b"
}

# running DIR: true when DIR/mattermost.pid names a live server of DIR.
running() { running_as mattermost "$1" "$1/config.json"; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# reachable PATH: true when PG_USER can reach PATH (search it and every directory above it).
reachable() { as_pg test -x "$1"; }

# closed PATH: the first directory on PATH, from /, that PG_USER cannot search, with its mode and owner.
closed() {
	local p="" c parts
	IFS=/ read -ra parts <<<"$1"
	for c in "${parts[@]}"; do
		[[ -n $c ]] || continue
		p=$p/$c
		reachable "$p" || break
	done
	echo "$p ($(stat -c '%A %U' "$p"))"
}

# pg_runs PGDATA: true when the cluster in PGDATA runs.
pg_runs() { [[ -f $1/PG_VERSION ]] && pg pg_ctl -D "$1" status >/dev/null 2>&1; }

# prune TOP: removes from TOP (PG_FALLBACK_DIR) each cluster whose DIR no longer links to it (DIR removed,
# or started afresh) and that does not run.
prune() {
	local e d
	for e in "$1"/*; do
		[[ ${e##*/} =~ ^[0-9a-f]{12}$ && -f $e/dir ]] || continue
		d=$(<"$e/dir")
		[[ -e $d/pg && $(readlink -f "$d/pg") == "$(readlink -f "$e/pg")" ]] && continue
		pg_runs "$e/pg" && continue
		rm -rf -- "$e"
		echo "mattermost.sh: removed $e, the database of $d, which no longer links to it" >&2
	done
}

# elsewhere DIR: sets PG_HOME to a new directory for DIR's cluster that PG_USER can reach:
# PG_FALLBACK_DIR/<hash of DIR's real path>, PG_USER's, mode 700, with the cluster's log and a file naming DIR.
elsewhere() {
	local dir=$1 top=${PG_FALLBACK%/} real e
	[[ $top == /?* ]] || die "start: PG_FALLBACK_DIR=$PG_FALLBACK is not an absolute path"
	if [[ ! -e $top && ! -L $top ]]; then
		mkdir -p "$(dirname "$top")"
		mkdir -m 755 "$top"
	fi
	[[ -d $top && ! -L $top && $(stat -c %u "$top") == 0 ]] ||
		die "start: $top (PG_FALLBACK_DIR) is not a directory of root's; remove it, or set PG_FALLBACK_DIR to another"
	reachable "$top" ||
		die "start: $PG_USER, which runs PostgreSQL (initdb refuses root), can reach neither $dir nor $top (PG_FALLBACK_DIR): $(closed "$top") is closed to it; set PG_FALLBACK_DIR to a directory it can reach, or start in a DIR it can reach"
	prune "$top"
	real=$(realpath "$dir")
	e=$top/$(printf %s "$real" | sha256sum | cut -c1-12)
	if [[ -e $e ]]; then
		pg_runs "$e/pg" &&
			die "start: $e holds the PostgreSQL of an earlier $dir, still running; stop it: runuser -u $PG_USER -- $(pg_bin pg_ctl) -D $e/pg stop"
		die "start: $e holds what is left of an earlier $dir's PostgreSQL; remove it: rm -rf $e"
	fi
	mkdir -m 700 "$e"
	echo "$real" >"$e/dir"
	: >"$e/postgres.log"
	chown "$PG_USER" "$e" "$e/postgres.log"
	PG_HOME=$e
}

# init_postgres DIR: a new cluster in DIR/pg or, as root when PG_USER cannot reach DIR, in the directory
# `elsewhere` makes, with DIR/pg and DIR/postgres.log links to it.
init_postgres() {
	local dir=$1 pgdata=$1/pg home=""
	if [[ $(id -u) == 0 ]]; then
		id "$PG_USER" >/dev/null 2>&1 || die "start: no user $PG_USER to run PostgreSQL as (it will not run as root)"
		if ! reachable "$dir"; then
			# An empty DIR/pg is what an initdb that could not reach DIR left.
			[[ -L $dir/pg ]] && rm -f "$dir/pg"
			[[ ! -e $dir/pg ]] || rmdir "$dir/pg" 2>/dev/null ||
				die "start: $dir/pg holds no database but is not empty; remove it, or start in a new DIR"
			elsewhere "$dir"
			home=$PG_HOME pgdata=$PG_HOME/pg
		fi
	fi
	mkdir -p "$pgdata"
	if [[ $(id -u) == 0 ]]; then
		chown "$PG_USER" "$pgdata"
	fi
	pg initdb -D "$pgdata" -U mmuser --auth=trust -E UTF8 >"$dir/initdb.log" 2>&1 ||
		die "start: initdb failed: $(tail -5 "$dir/initdb.log")"
	if [[ -n $home ]]; then
		ln -sfn "$pgdata" "$dir/pg"
		ln -sfn "$home/postgres.log" "$dir/postgres.log"
		echo "mattermost.sh: PostgreSQL runs as $PG_USER (initdb refuses root), which cannot reach $dir: $(closed "$dir") is closed to it. Its database is in $pgdata instead, with $dir/pg and $dir/postgres.log links to it; stop and start on $dir find it there. To remove it with $dir: rm -rf $home $dir" >&2
	fi
}

# start_postgres DIR: DIR's PostgreSQL, on 127.0.0.1:PG_PORT and a socket in its data directory, with the
# database "mattermost"; a new cluster when DIR has none.
start_postgres() {
	local dir=$1 pgdata log
	[[ ! -L $dir/pg || -e $dir/pg ]] ||
		die "start: $dir/pg links to $(readlink "$dir/pg"), which is gone, and its database with it; remove the link (rm $dir/pg) for a new database, or start in a new DIR"
	[[ -f $dir/pg/PG_VERSION ]] || init_postgres "$dir"
	# The cluster's own path, not through DIR, which PG_USER may not reach; its log beside it (DIR/postgres.log,
	# or where that links), its socket in it.
	pgdata=$(readlink -f "$dir/pg")
	log=$(dirname "$pgdata")/postgres.log
	if [[ $(id -u) == 0 ]]; then
		reachable "$pgdata" ||
			die "start: $PG_USER, which runs PostgreSQL, can no longer reach $pgdata: $(closed "$pgdata") is closed to it; make that directory searchable by others again (chmod o+x), or start in a new DIR"
		[[ -e $log ]] || : >"$log"
		chown "$PG_USER" "$log"
	fi
	if pg pg_ctl -D "$pgdata" status >/dev/null 2>&1; then
		return 0
	fi
	port_free "$PG_PORT" || die "start: port $PG_PORT (PG_PORT) is taken; set PG_PORT to a free one"
	pg pg_ctl -D "$pgdata" -l "$log" -w -t 60 \
		-o "-p $PG_PORT -c listen_addresses=127.0.0.1 -k $pgdata -c max_connections=300 -c shared_buffers=256MB" start >/dev/null ||
		die "start: PostgreSQL did not start: $(tail -5 "$log")"
	pg psql -h 127.0.0.1 -p "$PG_PORT" -U mmuser -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='mattermost'" | grep -q 1 ||
		pg createdb -h 127.0.0.1 -p "$PG_PORT" -U mmuser mattermost || die "start: createdb failed"
}

start() {
	[[ $# -eq 1 ]] || usage
	if ! installed; then
		echo "mattermost.sh: start: mattermost $VERSION is not installed in $HOME_DIR; run ./scripts/mattermost.sh install first" >&2
		exit 3
	fi
	mkdir -p "$1"
	local dir
	dir=$(cd "$1" && pwd)
	running "$dir" && die "start: a Mattermost is running on $dir already (pid $(cat "$dir/mattermost.pid")); stop it first: $0 stop $dir"
	for p in "$PORT" "$METRICS_PORT"; do
		port_free "$p" || die "start: port $p is taken (PORT=$PORT, METRICS_PORT=$METRICS_PORT); set free ones"
	done
	start_postgres "$dir"
	mkdir -p "$dir/data" "$dir/logs" "$dir/plugins" "$dir/client-plugins"
	# Settings by environment: they win over config.json, which the server
	# writes with its defaults on the first start.
	local env=(
		MM_SQLSETTINGS_DRIVERNAME=postgres
		"MM_SQLSETTINGS_DATASOURCE=postgres://mmuser@127.0.0.1:$PG_PORT/mattermost?sslmode=disable&connect_timeout=10"
		MM_SQLSETTINGS_MAXOPENCONNS=100
		"MM_SERVICESETTINGS_LISTENADDRESS=127.0.0.1:$PORT"
		"MM_SERVICESETTINGS_SITEURL=http://127.0.0.1:$PORT"
		MM_SERVICESETTINGS_ENABLELOCALMODE=true
		"MM_SERVICESETTINGS_LOCALMODESOCKETLOCATION=$dir/mattermost_local.socket"
		MM_METRICSSETTINGS_ENABLE=true
		"MM_METRICSSETTINGS_LISTENADDRESS=127.0.0.1:$METRICS_PORT"
		"MM_RATELIMITSETTINGS_ENABLE=$RATE_LIMIT"
		MM_TEAMSETTINGS_ENABLEOPENSERVER=true
		MM_TEAMSETTINGS_ENABLEUSERCREATION=true
		MM_TEAMSETTINGS_MAXUSERSPERTEAM=100000
		MM_TEAMSETTINGS_MAXCHANNELSPERTEAM=100000
		MM_EMAILSETTINGS_REQUIREEMAILVERIFICATION=false
		MM_EMAILSETTINGS_SENDEMAILNOTIFICATIONS=false
		MM_EMAILSETTINGS_ENABLESIGNUPWITHEMAIL=true
		MM_SERVICESETTINGS_ENABLEUSERACCESSTOKENS=true
		MM_SERVICESETTINGS_COLLAPSEDTHREADS=default_on
		MM_SERVICESETTINGS_ENABLESECURITYFIXALERT=false
		MM_LOGSETTINGS_CONSOLELEVEL=ERROR
		MM_LOGSETTINGS_FILELEVEL=INFO
		"MM_LOGSETTINGS_FILELOCATION=$dir/logs"
		"MM_FILESETTINGS_DIRECTORY=$dir/data/"
		"MM_PLUGINSETTINGS_DIRECTORY=$dir/plugins"
		"MM_PLUGINSETTINGS_CLIENTDIRECTORY=$dir/client-plugins"
		MM_PLUGINSETTINGS_ENABLE=false
		MM_ANNOUNCEMENTSETTINGS_USERNOTICESENABLED=false
		MM_ANNOUNCEMENTSETTINGS_ADMINNOTICESENABLED=false
		MM_LOGSETTINGS_ENABLEDIAGNOSTICS=false
	)
	if [[ $LTNG == true ]]; then
		env+=(MM_PLUGINSETTINGS_ENABLE=true MM_FEATUREFLAGS_CUSTOMPROFILEATTRIBUTES=false
			MM_FEATUREFLAGS_CHANNELBOOKMARKS=false MM_SERVICESETTINGS_SCHEDULEDPOSTS=false)
	fi
	# Own session and no terminal: the caller's Ctrl-C does not reach it, and
	# `stop` ends it by PID. It runs in HOME_DIR, where its i18n/ and templates/ are.
	(cd "$HOME_DIR" && exec setsid env "${env[@]}" "$BIN" server --config "$dir/config.json" \
		</dev/null >"$dir/mattermost.out" 2>&1) &
	local pid=$! url=http://127.0.0.1:$PORT/api/v4/system/ping
	echo "$pid" >"$dir/mattermost.pid"
	await_answer mattermost "$dir" "$pid" "$url" "$START_TIMEOUT" Mattermost "$dir/mattermost.out"
	make_team "$dir"
	echo "mattermost: http://127.0.0.1:$PORT (pid $pid), metrics and pprof on 127.0.0.1:$METRICS_PORT, PostgreSQL on 127.0.0.1:$PG_PORT; logs in $dir/logs"
	start_node_exporter "$dir"
}

# running_node DIR: true when DIR/node_exporter.pid names a live node_exporter of DIR's.
running_node() { running_as node_exporter "$1" "127.0.0.1:$(cat "$1/node_exporter.port" 2>/dev/null)"; }

# start_node_exporter DIR: the machine's CPU and memory on 127.0.0.1:NODE_PORT, when a node_exporter is
# installed and NODE_PORT is not 0; a note, not an error, otherwise.
start_node_exporter() {
	local dir=$1 bin
	[[ $NODE_PORT != 0 ]] || return 0
	bin=$(command -v prometheus-node-exporter || command -v node_exporter || true)
	if [[ -z $bin ]]; then
		echo "mattermost.sh: no node_exporter (Debian: apt-get install prometheus-node-exporter): the CPU and memory checks stay inactive" >&2
		return 0
	fi
	running_node "$dir" && return 0
	port_free "$NODE_PORT" || die "start: port $NODE_PORT (NODE_PORT) is taken; set a free one, or NODE_PORT=0 for no node_exporter"
	echo "$NODE_PORT" >"$dir/node_exporter.port"
	setsid "$bin" --web.listen-address="127.0.0.1:$NODE_PORT" </dev/null >"$dir/node_exporter.out" 2>&1 &
	echo $! >"$dir/node_exporter.pid"
	echo "node_exporter: http://127.0.0.1:$NODE_PORT/metrics (pid $!): scrape it too for the CPU and memory checks"
}

# make_team DIR: the admin (the first user signed up is the system admin) and the open team "headroom",
# once; both kept when they exist.
make_team() {
	local api=http://127.0.0.1:$PORT/api/v4 token code
	code=$(curl -sS -o "$1/admin.json" -w '%{http_code}' -X POST "$api/users" -H 'Content-Type: application/json' \
		-d "{\"username\":\"admin\",\"email\":\"admin@headroom.invalid\",\"password\":\"$ADMIN_PASSWORD\"}")
	[[ $code == 201 || $code == 400 || $code == 403 ]] || die "start: signing the admin up: status $code: $(cat "$1/admin.json")"
	token=$(curl -sS -D - -o /dev/null -X POST "$api/users/login" -H 'Content-Type: application/json' \
		-d "{\"login_id\":\"admin\",\"password\":\"$ADMIN_PASSWORD\"}" | tr -d '\r' | awk 'tolower($1)=="token:"{print $2}')
	[[ -n $token ]] || die "start: the admin could not log in (another ADMIN_PASSWORD on this DIR's first start?)"
	code=$(curl -sS -o "$1/team.json" -w '%{http_code}' -H "Authorization: Bearer $token" "$api/teams/name/headroom")
	if [[ $code != 200 ]]; then
		code=$(curl -sS -o "$1/team.json" -w '%{http_code}' -X POST "$api/teams" -H "Authorization: Bearer $token" \
			-H 'Content-Type: application/json' \
			-d '{"name":"headroom","display_name":"headroom","type":"O","allow_open_invite":true}')
		[[ $code == 201 ]] || die "start: creating the team: status $code: $(cat "$1/team.json")"
	fi
}

stop() {
	[[ $# -eq 1 ]] || usage
	[[ -d $1 ]] || die "stop: no directory $1"
	local dir
	dir=$(cd "$1" && pwd)
	stop_pidfile mattermost "$dir"
	if [[ -f $dir/node_exporter.pid ]]; then
		running() { running_node "$1"; } # stop_pidfile asks `running`
		stop_pidfile node_exporter "$dir" >/dev/null
	fi
	# Through DIR/pg, which may link to the cluster elsewhere (see start_postgres).
	local pgdata
	pgdata=$(readlink -f "$dir/pg" 2>/dev/null) || true
	if [[ -n $pgdata && -f $pgdata/PG_VERSION && $(id -u) == 0 ]] && ! reachable "$pgdata"; then
		echo "mattermost.sh: stop: $PG_USER, which runs PostgreSQL, cannot reach $pgdata ($(closed "$pgdata") is closed to it); if it runs, stop it: kill -INT \$(head -1 $pgdata/postmaster.pid)" >&2
	elif [[ -n $pgdata ]] && pg_runs "$pgdata"; then
		pg pg_ctl -D "$pgdata" -m fast -w stop >/dev/null && echo "postgresql: stopped ($pgdata)"
	fi
}

case ${1:-} in
install) install ;;
start) shift && start "$@" ;;
stop) shift && stop "$@" ;;
*) usage ;;
esac
