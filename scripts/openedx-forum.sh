#!/usr/bin/env bash
# A real Open edX forum to load: the discussion service of Open edX (PyPI openedx-forum, the
# Django app `forum` that replaced the Ruby cs_comments_service), served on its own by gunicorn
# over a private MariaDB, bound to 127.0.0.1 only. The LMS calls this API for every discussion
# page; here headroom calls it as the LMS's client does (examples/openedx-forum.star).
#
#   ./scripts/openedx-forum.sh install        # a venv under ~/.cache/headroom (~40 s the first time)
#   ./scripts/openedx-forum.sh start DIR      # MariaDB, the host project's settings, logs in DIR
#   ./scripts/openedx-forum.sh stop DIR       # gunicorn and MariaDB, by the PIDs in DIR
#
#   headroom run examples/openedx-forum.star --target http://127.0.0.1:18000 \
#     --var forum=DIR/forum.json --scrape http://127.0.0.1:18001/metrics --users 10 --duration 2m
#
# Environment:
#   FORUM_VERSION (0.6.0)  the PyPI release; 0.4.2 and later need Python 3.12 (found on PATH or
#                          under ~/.pyenv/versions/3.12.*), 0.4.1.post1 and older run on 3.11.
#                          Two releases need two DIRs: a later release's migrations add NOT NULL
#                          columns an older one cannot fill.
#   PORT (18000)           the API: http://127.0.0.1:PORT/forum/api/v2/
#   METRICS_PORT (18001)   Prometheus metrics at /metrics: django-prometheus's request timings by
#                          view, and the CPU and memory of gunicorn (master and workers) and MariaDB
#   DB_PORT (13306)        MariaDB, on 127.0.0.1
#   DB_EXPORTER_PORT (19104)
#                          MariaDB's own counters (prometheus-mysqld-exporter, installed with the Debian
#                          packages): --scrape http://127.0.0.1:DB_EXPORTER_PORT/metrics gives the
#                          database's queries and rows read a request (docs/DATABASES.md);
#                          started when the exporter is installed, 0 for none
#   WORKERS (2)            gunicorn's worker processes (sync workers: one request each at a time)
#   START_TIMEOUT (60)     seconds `start` waits for MariaDB, and then for the API, to answer
#   PYTHON                 the Python that makes the venv (default: the one FORUM_VERSION needs)
#   FORUM_TOKEN, FORUM_API_KEY
#                          the service account's token and API key for a new DIR (16 to 40 letters and
#                          digits; random by default): two servers with one token give the scenario one
#                          forum.json, so their results are of one scenario (its hash covers data files)
#   HEADROOM_CACHE         where the venvs live ($HOME/.cache/headroom by default)
#
# What the script adds around the forum (scripts/openedx-forum/, each file says why): a host
# Django project (settings: MySQL, DRF tokens, FORUM_ENABLE_HTTP_API), a search backend that
# indexes nothing (no Elasticsearch, Meilisearch or Typesense in Debian: searching finds no
# threads), a stand-in for edx-platform's waffle_utils (flags off but the MySQL backend's), and
# gunicorn's settings (its master serves the metrics). `start` writes DIR/forum.json (mode 600):
# the service account's DRF token (a staff account, which the API requires from 0.5) and the
# X-Edx-Api-Key releases before it took, for the scenario's `--var forum=DIR/forum.json`.
#
# Exit codes: 0 done, 1 failed (the message says why), 2 usage, 3 `start` before `install`.
#
# `start` on a DIR that holds a forum already keeps its database (users, threads); use a new DIR
# for a fresh forum. It refuses a DIR whose forum is still running.
set -euo pipefail
source "$(dirname "$0")/pidfile.sh"
source "$(dirname "$0")/install.sh"

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HOST=$ROOT/scripts/openedx-forum
VERSION=${FORUM_VERSION:-0.6.0}
PORT=${PORT:-18000}
METRICS_PORT=${METRICS_PORT:-18001}
DB_PORT=${DB_PORT:-13306}
DB_EXPORTER_PORT=${DB_EXPORTER_PORT:-19104}
WORKERS=${WORKERS:-2}
START_TIMEOUT=${START_TIMEOUT:-60}
CACHE=${HEADROOM_CACHE:-$HOME/.cache/headroom}
VENV=$CACHE/openedx-forum-$VERSION
STAMP=$VENV/.headroom-installed
# The host's packages, pinned: Django on the 5.2 line the forum is tested with (pip
# would take 6.x), and what serves and measures it.
PINS=("Django==5.2.19" "gunicorn==27.0.1" "mysqlclient==2.3.2" "django-prometheus==2.5.0" "prometheus-client==0.26.0")
DEBS=(mariadb-server default-libmysqlclient-dev pkg-config build-essential prometheus-mysqld-exporter)

die() {
	echo "openedx-forum.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

installed() { [[ -x $VENV/bin/gunicorn && -f $STAMP && $(cat "$STAMP") == "$VERSION ${PINS[*]}" ]]; }

# needs_312 VERSION: true for the releases that need Python 3.12 (0.4.2 and later).
needs_312() { [[ $(printf '%s\n' "0.4.2" "$1" | sort -V | head -1) == 0.4.2 ]]; }

# python_for VERSION: the Python to make its venv with.
python_for() {
	if [[ -n ${PYTHON:-} ]]; then
		echo "$PYTHON"
		return
	fi
	local want=3.11 p
	needs_312 "$1" && want=3.12
	for p in "python$want" "$HOME"/.pyenv/versions/"$want".*/bin/python3 python3; do
		if command -v "$p" >/dev/null 2>&1 && "$p" -c "import sys; sys.exit(sys.version_info[:2] < ($want == 3.12 and (3, 12) or (3, 10)))" 2>/dev/null; then
			command -v "$p"
			return
		fi
	done
	die "install: openedx-forum $1 needs Python $want or later and none was found (python$want on PATH, ~/.pyenv/versions/$want.*, or PYTHON=/path/to/python3)"
}

# debs: the Debian packages MariaDB and mysqlclient's build need; installed when we are root.
debs() {
	local missing=() d
	for d in "${DEBS[@]}"; do
		dpkg-query -W -f='${Status}' "$d" 2>/dev/null | grep -q 'install ok installed' || missing+=("$d")
	done
	((${#missing[@]})) || return 0
	[[ $(id -u) == 0 ]] || die "install: missing Debian packages: ${missing[*]}; install them (sudo apt-get install ${missing[*]})"
	echo "openedx-forum: installing ${missing[*]} (apt-get)"
	apt_get update || die "install: apt-get update failed"
	apt_get install -y --no-install-recommends "${missing[@]}" || die "install: apt-get install ${missing[*]} failed"
}

install() {
	if installed; then
		echo "openedx-forum $VERSION: installed in $VENV"
		return 0
	fi
	debs
	local python
	python=$(python_for "$VERSION")
	echo "openedx-forum $VERSION: installing into $VENV with $("$python" --version 2>&1)"
	rm -rf "$VENV" # a half-made venv is made again
	mkdir -p "$CACHE"
	"$python" -m venv "$VENV" || die "install: could not make a venv with $python (on Debian: apt-get install python3-venv)"
	retry "$VENV/bin/pip" install --quiet --disable-pip-version-check "openedx-forum==$VERSION" "${PINS[@]}" ||
		die "install: pip failed (above); the venv is left in $VENV to look at, and the next install starts over"
	"$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('openedx-forum') != '$VERSION')" ||
		die "install: the venv does not hold openedx-forum $VERSION"
	echo "$VERSION ${PINS[*]}" >"$STAMP"
	echo "openedx-forum $VERSION: installed in $VENV"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

running() { running_as gunicorn "$1" "headroom_forum.wsgi"; }
running_db() { running_as mariadb "$1" "--datadir=$1/db"; }
running_exporter() { running_as mysqld-exporter "$1" "127.0.0.1:$(cat "$1/mysqld-exporter.port" 2>/dev/null)"; }

# start_exporter DIR: MariaDB's counters served by mysqld_exporter on DB_EXPORTER_PORT, when it is
# installed: SHOW GLOBAL STATUS alone (its other default collectors send SELECTs a scrape, which would
# count among the forum's queries), over the socket as this user (socket authentication).
start_exporter() {
	local dir=$1 bin
	running_exporter "$dir" && return 0
	[[ $DB_EXPORTER_PORT != 0 ]] || return 0
	bin=$(command -v prometheus-mysqld-exporter || command -v mysqld_exporter) || {
		echo "openedx-forum.sh: no prometheus-mysqld-exporter: the database's queries a request are not served (apt-get install prometheus-mysqld-exporter)" >&2
		return 0
	}
	port_free "$DB_EXPORTER_PORT" || die "start: port $DB_EXPORTER_PORT (DB_EXPORTER_PORT) is taken; set a free one, or 0 for no exporter"
	echo "$DB_EXPORTER_PORT" >"$dir/mysqld-exporter.port"
	(DATA_SOURCE_NAME="$(id -un)@unix($dir/mariadb.sock)/" exec setsid "$bin" --web.listen-address="127.0.0.1:$DB_EXPORTER_PORT" \
		--no-collect.global_variables --no-collect.slave_status --no-collect.info_schema.innodb_cmp \
		--no-collect.info_schema.innodb_cmpmem --no-collect.info_schema.query_response_time \
		</dev/null >"$dir/mysqld-exporter.log" 2>&1) &
	echo $! >"$dir/mysqld-exporter.pid"
	await_answer mysqld-exporter "$dir" "$!" "http://127.0.0.1:$DB_EXPORTER_PORT/metrics" "$START_TIMEOUT" "mysqld_exporter" "$dir/mysqld-exporter.log"
}

# secrets DIR: the directory's secret key, database password, API key and token, made once (mode 600);
# the token and API key are FORUM_TOKEN's and FORUM_API_KEY's when they are set.
secrets() {
	local f=$1/secrets.env k v
	if [[ ! -f $f ]]; then
		for k in FORUM_API_KEY FORUM_TOKEN; do
			[[ -z ${!k:-} || ${!k} =~ ^[A-Za-z0-9]{16,40}$ ]] || die "start: $k must be 16 to 40 letters and digits"
		done
		(
			umask 077
			for k in FORUM_SECRET_KEY FORUM_DB_PASSWORD FORUM_API_KEY FORUM_TOKEN; do
				v=$(head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n')
				[[ $k == FORUM_API_KEY || $k == FORUM_TOKEN ]] && v=${!k:-$v}
				echo "$k=$v"
			done >"$f"
		)
	fi
	set -a
	source "$f"
	set +a
}

mariadb_bin() {
	command -v "$1" 2>/dev/null || ls /usr/sbin/"$1" 2>/dev/null ||
		die "start: no $1; run ./scripts/openedx-forum.sh install (as root it installs mariadb-server), or apt-get install mariadb-server"
}

start_db() {
	local dir=$1 sql
	running_db "$dir" && return 0
	port_free "$DB_PORT" || die "start: port $DB_PORT (DB_PORT) is taken; set DB_PORT to a free one"
	if [[ ! -d $dir/db/mysql ]]; then
		"$(mariadb_bin mariadb-install-db)" --datadir="$dir/db" --user="$(id -un)" --auth-root-authentication-method=socket \
			--skip-test-db >"$dir/mariadb-install.log" 2>&1 || die "start: mariadb-install-db failed: $(tail -5 "$dir/mariadb-install.log")"
	fi
	# Our own user (root too: the data directory is ours, whatever DIR's parents allow), own session.
	# The log is flushed to disk once a second, not at each commit: the forum commits every write
	# (Django's autocommit), and at a flush a commit this VM's disk, not the forum, set the pace
	# (a data phase ran at 5 requests/s on 2 cores with 0.4 of a core busy).
	setsid "$(mariadb_bin mariadbd)" --no-defaults --datadir="$dir/db" --user="$(id -un)" --socket="$dir/mariadb.sock" \
		--port="$DB_PORT" --bind-address=127.0.0.1 --pid-file="$dir/db/mariadbd.pid" --log-error="$dir/mariadb.log" \
		--max-connections=200 --innodb-buffer-pool-size=256M --skip-name-resolve \
		--innodb-flush-log-at-trx-commit=2 </dev/null >/dev/null 2>&1 &
	echo $! >"$dir/mariadb.pid"
	local deadline=$((SECONDS + START_TIMEOUT))
	until mariadb --no-defaults --socket="$dir/mariadb.sock" -uroot -e 'SELECT 1' >/dev/null 2>&1; do
		kill -0 "$(cat "$dir/mariadb.pid")" 2>/dev/null || die "start: MariaDB exited: $(tail -5 "$dir/mariadb.log")"
		((SECONDS < deadline)) || die "start: MariaDB did not answer within ${START_TIMEOUT}s: $(tail -5 "$dir/mariadb.log")"
		sleep 0.2
	done
	sql="CREATE DATABASE IF NOT EXISTS forum CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
CREATE USER IF NOT EXISTS 'forum'@'127.0.0.1' IDENTIFIED BY '$FORUM_DB_PASSWORD';
GRANT ALL ON forum.* TO 'forum'@'127.0.0.1';"
	mariadb --no-defaults --socket="$dir/mariadb.sock" -uroot -e "$sql" || die "start: creating the database failed"
}

# django ARGS: django-admin in the host project, with DIR's settings.
django() { (cd "$DIR" && "$VENV/bin/django-admin" "$@"); }

start() {
	[[ $# -eq 1 ]] || usage
	if ! installed; then
		echo "openedx-forum.sh: start: openedx-forum $VERSION is not installed in $VENV; run FORUM_VERSION=$VERSION ./scripts/openedx-forum.sh install first" >&2
		exit 3
	fi
	mkdir -p "$1"
	DIR=$(cd "$1" && pwd)
	running "$DIR" && die "start: a forum is running on $DIR already (pid $(cat "$DIR/gunicorn.pid")); stop it first: $0 stop $DIR"
	if [[ -f $DIR/version && $(cat "$DIR/version") != "$VERSION" ]]; then
		die "start: $DIR holds the database of openedx-forum $(cat "$DIR/version"), not $VERSION; use a new DIR for another release"
	fi
	for p in "$PORT" "$METRICS_PORT"; do
		port_free "$p" || die "start: port $p is taken (PORT=$PORT, METRICS_PORT=$METRICS_PORT); set free ones"
	done
	secrets "$DIR"
	start_db "$DIR"
	start_exporter "$DIR"
	echo "$VERSION" >"$DIR/version"
	export PYTHONPATH=$HOST DJANGO_SETTINGS_MODULE=headroom_forum.settings PYTHONPYCACHEPREFIX=$DIR/pycache
	export FORUM_DB_PORT=$DB_PORT FORUM_PORT=$PORT FORUM_METRICS_PORT=$METRICS_PORT FORUM_WORKERS=$WORKERS
	export FORUM_DB_PID_FILE=$DIR/mariadb.pid PROMETHEUS_MULTIPROC_DIR=$DIR/prometheus
	echo "openedx-forum $VERSION: migrating the database"
	django migrate --no-input >"$DIR/migrate.log" 2>&1 || die "start: migrate failed: $(tail -8 "$DIR/migrate.log")"
	service_account "$DIR"
	rm -rf "$PROMETHEUS_MULTIPROC_DIR" && mkdir -p "$PROMETHEUS_MULTIPROC_DIR"
	(cd "$DIR" && exec setsid "$VENV/bin/gunicorn" -c "$HOST/gunicorn.conf.py" headroom_forum.wsgi \
		</dev/null >"$DIR/gunicorn.log" 2>&1) &
	local pid=$!
	echo "$pid" >"$DIR/gunicorn.pid"
	await_answer gunicorn "$DIR" "$pid" "http://127.0.0.1:$METRICS_PORT/metrics" "$START_TIMEOUT" "the forum's gunicorn" "$DIR/gunicorn.log"
	local code
	code=$(curl -sS -o /dev/null -w '%{http_code}' -H "Authorization: Token $FORUM_TOKEN" \
		"http://127.0.0.1:$PORT/forum/api/v2/users/0") || true
	[[ $code == 404 || $code == 200 ]] ||
		die "start: the API answered $code to its service account (want 404 for a user that does not exist): $(tail -5 "$DIR/gunicorn.log")"
	echo "openedx-forum $VERSION: http://127.0.0.1:$PORT/forum/api/v2/ (pid $pid, $WORKERS workers), metrics on http://127.0.0.1:$METRICS_PORT/metrics, MariaDB on 127.0.0.1:$DB_PORT; the scenario's --var forum=$DIR/forum.json"
	if running_exporter "$DIR"; then
		echo "MariaDB's counters: http://127.0.0.1:$DB_EXPORTER_PORT/metrics (pid $(cat "$DIR/mysqld-exporter.pid")): scrape it too for the database's queries a request"
	fi
}

# service_account DIR: the staff user the API requires (from 0.5) and its DRF token, and DIR/forum.json.
service_account() {
	django shell -c "
from django.contrib.auth.models import User
from rest_framework.authtoken.models import Token
u, _ = User.objects.get_or_create(username='headroom-service', defaults={'id': 1})
u.is_staff = True
u.save()
Token.objects.filter(user=u).exclude(key='$FORUM_TOKEN').delete()
Token.objects.get_or_create(user=u, key='$FORUM_TOKEN')
" >"$DIR/account.log" 2>&1 || die "start: making the service account failed: $(tail -5 "$DIR/account.log")"
	(
		umask 077
		printf '{"token": "%s", "api_key": "%s"}\n' "$FORUM_TOKEN" "$FORUM_API_KEY" >"$DIR/forum.json"
	)
}

stop() {
	[[ $# -eq 1 ]] || usage
	[[ -d $1 ]] || die "stop: no directory $1"
	local dir
	dir=$(cd "$1" && pwd)
	stop_pidfile gunicorn "$dir"
	running() { running_exporter "$1"; } # stop_pidfile asks `running`
	stop_pidfile mysqld-exporter "$dir"
	running() { running_db "$1"; }
	stop_pidfile mariadb "$dir"
}

case ${1:-} in
install) install ;;
start) shift && start "$@" ;;
stop) shift && stop "$@" ;;
*) usage ;;
esac
