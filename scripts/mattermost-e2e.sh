#!/usr/bin/env bash
# The opt-in end-to-end check of headroom on a real Mattermost (docs/MATTERMOST.md), not part of
# ./scripts/test.sh (the server's build takes ~10 minutes cold): builds or reuses the server
# (scripts/mattermost.sh), starts it with PostgreSQL in a fresh directory, makes a small data set
# (examples/mattermost.star's data phase), runs a short bounded run and a short ceiling search, and
# checks their figures:
#
#   - data: every user set up, the channels and posts there;
#   - bounded run: every user set up, errors under 1%, the server's API and store timings
#     (mattermost_api_time, mattermost_db_store_time) and its CPU profiles in the result;
#   - ceiling: an answer with its interval, or a search that says why it has none.
#
#   ./scripts/mattermost-e2e.sh             # ~8 minutes once the server is built
#
# Environment:
#   USERS (50), RAMP (30s), DURATION (90s)   the bounded run
#   CEILING_MAX (5m)                         the ceiling search's --max-duration
#   KEEP (0)           1: keep the working directory (kept anyway on failure)
#   PORT, METRICS_PORT, PG_PORT, NODE_PORT   as scripts/mattermost.sh (free ones are picked by default;
#                                            the ceiling scrapes the node_exporter too when one runs)
#
# Exit codes: 0 every check passed, 1 a check or a build failed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
USERS=${USERS:-50}
RAMP=${RAMP:-30s}
DURATION=${DURATION:-90s}
CEILING_MAX=${CEILING_MAX:-5m}
KEEP=${KEEP:-0}

die() {
	echo "mattermost-e2e: FAIL: $*" >&2
	exit 1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
export PORT=${PORT:-$(free_port)} METRICS_PORT=${METRICS_PORT:-$(free_port)} PG_PORT=${PG_PORT:-$(free_port)} NODE_PORT=${NODE_PORT:-$(free_port)}

WORK=$(mktemp -d /tmp/mattermost-e2e.XXXXXX)
chmod 755 "$WORK" # PostgreSQL runs as another user when we are root
ok=0
cleanup() {
	"$ROOT/scripts/mattermost.sh" stop "$WORK/server" >/dev/null 2>&1 || true
	if [[ $ok == 1 && $KEEP != 1 ]]; then
		rm -rf "$WORK"
	else
		echo "mattermost-e2e: the working directory is kept: $WORK" >&2
	fi
}
trap cleanup EXIT

T0=$SECONDS
step() { echo "== $(date -u +%H:%M:%S) (+$((SECONDS - T0)) s) $*"; }

step "the server (scripts/mattermost.sh install)"
"$ROOT/scripts/mattermost.sh" install
(cd "$ROOT" && go build -o "$WORK/headroom" ./cmd/headroom) || die "go build ./cmd/headroom"
HR=$WORK/headroom
# Plugins on, as a real deployment has them (LTNG=true): with them off every reload's GET /plugins/webapp is
# a 501 the server counts among its 5xx, and the ceiling's server-5xx check judges that, not the load.
LTNG=true "$ROOT/scripts/mattermost.sh" start "$WORK/server"
TARGET=http://127.0.0.1:$PORT
METRICS=http://127.0.0.1:$METRICS_PORT
SC=$ROOT/examples/mattermost.star

# field RESULT PYTHON-EXPR: a value of a result.json, r being the result.
field() { python3 -c "import json, sys; r = json.load(open(sys.argv[1])); print($2)" "$1/result.json"; }

step "the data phase: 20 accounts, 50 posts each"
"$HR" run "$SC" --target "$TARGET" --setup-only --users 20 --ramp 10s --setup-timeout 5m \
	--var data=yes --var posts=50 --out "$WORK/data"
[[ $(field "$WORK/data" 'r["setup"]["users"]') == 20 ]] || die "data: not every user set up: $(field "$WORK/data" 'r["setup"]["attempts"]')"
posts=$(curl -fsS "$METRICS/metrics" | awk '/^mattermost_post_total /{print $2}')
echo "data: 20 users set up, $(field "$WORK/data" 'r["setup"]["per_s"]') a second; posts counted by the server: ${posts:-?}"

step "a bounded run: $USERS users, ramp $RAMP, $DURATION"
"$HR" run "$SC" --target "$TARGET" --scrape "$METRICS/metrics" --profile "$METRICS/debug/pprof" --profile-slice 5s \
	--users "$USERS" --ramp "$RAMP" --duration "$DURATION" --out "$WORK/run"
R=$WORK/run
set_up=$(field "$R" 'r["setup"]["users"]')
[[ $set_up == "$USERS" ]] || die "bounded: $set_up of $USERS users set up"
err=$(field "$R" '100 * sum(q["errors"] for q in r["requests"]) / max(1, sum(q["count"] for q in r["requests"]))')
python3 -c "import sys; sys.exit(not float(sys.argv[1]) < 1)" "$err" || die "bounded: errors $err% (want under 1%)"
for fam in mattermost_api_time mattermost_db_store_time; do
	field "$R" "[t['metric'] for s in r['server']['targets'] for t in s['window'].get('timings', [])]" | grep -q "$fam" ||
		die "bounded: no $fam timings in the result"
done
[[ $(field "$R" 'len((r.get("profiles") or {}).get("phases", []))') -ge 1 ]] || die "bounded: no profiled phase"
echo "bounded: $set_up users set up, errors $err%, server timings and profiles in $R/result.json"

step "a ceiling search (--max-duration $CEILING_MAX)"
scrape=(--scrape "$METRICS/metrics")
if curl -fsS -o /dev/null "http://127.0.0.1:$NODE_PORT/metrics" 2>/dev/null; then
	scrape+=(--scrape "http://127.0.0.1:$NODE_PORT/metrics") # the machine's CPU and memory: all seven checks
fi
"$HR" ceiling "$SC" --target "$TARGET" "${scrape[@]}" --max-duration "$CEILING_MAX" --out "$WORK/ceiling" || true
C=$WORK/ceiling
[[ -f $C/result.json ]] || die "ceiling: no result"
su=$(field "$C" 'r["ceiling"]["supported_users"]')
echo "ceiling: $su"
[[ $(field "$C" '(lambda s: int(bool(s["found"] and s["low"] <= s["value"] <= s["high"] or s.get("why"))))(r["ceiling"]["supported_users"])') == 1 ]] ||
	die "ceiling: neither an answer with its interval nor why there is none: $su"

ok=1
step "every check passed"
