#!/usr/bin/env bash
# The opt-in end-to-end check of headroom on a real Open edX forum (docs/OPENEDX.md), not part of
# ./scripts/test.sh (the test command checks examples/openedx-forum.star against a fake of the API):
# installs the forum (scripts/openedx-forum.sh), starts it on a fresh MariaDB, makes the data set
# (the example's data phase), runs a bounded run and a short step run, and checks their figures:
#
#   - data: every author set up, the threads there (counted by the forum);
#   - bounded run: every user set up, errors under 1%, every one of the reference's tasks seen,
#     the server's timings by view (django-prometheus) and its CPU in the result;
#   - step run: each level held, with requests and errors under 1%, and the knee stated.
#
#   ./scripts/openedx-forum-e2e.sh             # ~9 minutes once installed (~1 more the first time)
#
# Environment:
#   FORUM_VERSION (0.6.0)   the release
#   USERS (20), DURATION (4m)          the bounded run (DELETE_thread is 40 in 11,295 tasks: at 20
#                                      users a task each 5 s, 4 minutes see it about 3 times)
#   LEVELS (4,12), HOLD (30s)          the step run
#   THREADS (100)                      the data phase's threads
#   KEEP (0)     1: keep the working directory (kept anyway on failure)
#   PORT, METRICS_PORT, DB_PORT        as scripts/openedx-forum.sh (free ones are picked by default)
#
# Exit codes: 0 every check passed, 1 a check, an install or a start failed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
USERS=${USERS:-20}
DURATION=${DURATION:-4m}
LEVELS=${LEVELS:-4,12}
HOLD=${HOLD:-30s}
THREADS=${THREADS:-100}
KEEP=${KEEP:-0}

die() {
	echo "openedx-forum-e2e: FAIL: $*" >&2
	exit 1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export PORT=${PORT:-$(free_port)} METRICS_PORT=${METRICS_PORT:-$(free_port)} DB_PORT=${DB_PORT:-$(free_port)}
export DB_EXPORTER_PORT=${DB_EXPORTER_PORT:-$(free_port)}

WORK=$(mktemp -d /tmp/openedx-forum-e2e.XXXXXX)
ok=0
cleanup() {
	"$ROOT/scripts/openedx-forum.sh" stop "$WORK/server" >/dev/null 2>&1 || true
	if [[ $ok == 1 && $KEEP != 1 ]]; then
		rm -rf "$WORK"
	else
		echo "openedx-forum-e2e: the working directory is kept: $WORK" >&2
	fi
}
trap cleanup EXIT

T0=$SECONDS
step() { echo "== $(date -u +%H:%M:%S) (+$((SECONDS - T0)) s) $*"; }

step "the forum (scripts/openedx-forum.sh install, start)"
"$ROOT/scripts/openedx-forum.sh" install
(cd "$ROOT" && go build -o "$WORK/headroom" ./cmd/headroom) || die "go build ./cmd/headroom"
HR=$WORK/headroom
"$ROOT/scripts/openedx-forum.sh" start "$WORK/server"
TARGET=http://127.0.0.1:$PORT
METRICS=http://127.0.0.1:$METRICS_PORT/metrics
SC=$ROOT/examples/openedx-forum.star
FORUM=(--var forum="$WORK/server/forum.json")

# field RESULT PYTHON-EXPR: a value of a result.json, r being the result.
field() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$1/result.json"; }
# errors_pct RESULT PYTHON-EXPR-OF-REQUESTS: the errors in percent of those requests.
errors_pct() { field "$1" "(lambda q: 100 * sum(x['errors'] for x in q) / max(1, sum(x['count'] for x in q)))($2)"; }
under() { python3 -c "import sys; sys.exit(not float(sys.argv[1]) < float(sys.argv[2]))" "$1" "$2"; }

step "the data phase: $THREADS threads by 20 authors, each with 4 responses and 2 comments"
"$HR" run "$SC" "${FORUM[@]}" --target "$TARGET" --setup-only --users 20 --ramp 5s --setup-timeout 10m \
	--var data=yes --var threads="$THREADS" --no-report --out "$WORK/data"
[[ $(field "$WORK/data" 'r["setup"]["users"]') == 20 ]] || die "data: not every author set up: $(field "$WORK/data" 'r["setup"]["attempts"]')"
threads=$(curl -fsS "$METRICS" | awk '/^django_http_requests_latency_seconds_by_view_method_count\{method="POST",view="create-thread-api"\}/{print $2}')
[[ ${threads%.*} -ge $THREADS ]] || die "data: the forum counted ${threads:-no} thread creations, want $THREADS"
echo "data: 20 authors set up, $THREADS threads ($(field "$WORK/data" 'r["setup"]["totals"]["count"]') requests, $(field "$WORK/data" 'round(r["setup"]["totals"]["rps"], 1)') a second)"

step "a bounded run: $USERS users, $DURATION"
R=$WORK/run
DB=http://127.0.0.1:$DB_EXPORTER_PORT/metrics # MariaDB's exporter, which openedx-forum.sh starts
"$HR" run "$SC" "${FORUM[@]}" --target "$TARGET" --scrape "$METRICS" --scrape "$DB" --users "$USERS" --ramp 10s --duration "$DURATION" --out "$R"
[[ $(field "$R" 'r["setup"]["users"]') == "$USERS" ]] || die "bounded: $(field "$R" 'r["setup"]["users"]') of $USERS users set up"
err=$(errors_pct "$R" 'r["requests"]')
under "$err" 1 || die "bounded: errors $err% (want under 1%)"
missing=$(field "$R" '" ".join(sorted({"GET_thread", "GET_comment_list", "GET_thread_list", "POST_comment", "DELETE_comment", "POST_thread", "PATCH_thread", "PATCH_comment", "DELETE_thread"} - {a["name"] for a in r["actions"] if a["count"] > 0}))')
[[ -z $missing ]] || die "bounded: tasks never seen: $missing"
field "$R" "[t['metric'] for s in r['server']['targets'] for t in s['window'].get('timings', [])]" |
	grep -q django_http_requests_latency_seconds_by_view_method || die "bounded: no server timings by view in the result"
cpu=$(field "$R" "round(r['server']['targets'][0]['window']['cpu_cores_mean'], 2)")
queries=$(field "$R" "round(r['server']['targets'][1]['window']['database']['queries'] / r['totals']['count'], 1)") ||
	die "bounded: no database figures from MariaDB's exporter ($DB) in the result"
under 1 "$queries" || die "bounded: $queries database queries a request (want more than 1: every view reads the database)"
echo "bounded: $USERS users set up, errors $err%, every task seen, the server's timings by view, its CPU (${cpu} cores mean) and the database's queries ($queries a request) in $R/result.json"

step "a step run: levels $LEVELS, $HOLD each"
S=$WORK/step
"$HR" step "$SC" "${FORUM[@]}" --target "$TARGET" --scrape "$METRICS" --levels "$LEVELS" --hold "$HOLD" --out "$S"
held=$(field "$S" '",".join(str(l["users"]) for l in r["step"]["levels"])')
[[ $held == "$LEVELS" ]] || die "step: held levels $held, want $LEVELS"
for u in ${LEVELS//,/ }; do
	err=$(errors_pct "$S" "next(l for l in r['step']['levels'] if l['users'] == $u)['requests']")
	under "$err" 1 || die "step: level $u: errors $err% (want under 1%)"
done
echo "step: levels $held held, errors under 1% at each; knee: $(field "$S" '(lambda k: "past %d users" % k["users"] if k["found"] else "none")(r["step"]["knee"])')"

ok=1
step "every check passed"
