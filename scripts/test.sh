#!/usr/bin/env bash
# Every test, as CI runs it (.ci/run calls this). Installs what the tests
# need (Go modules; Debian's prometheus, prometheus-node-exporter,
# chromium, which opens the HTML report as a reader would, and nginx, a
# real token-bucket rate limiter with limit_req; Synapse, a real
# Matrix homeserver, from pinned PyPI packages into a venv; py-spy 0.4.3,
# which headroom profiler runs beside a Python server, into another; Centrifugo, a
# real WebSocket pub/sub server, built from its pinned Go module), then
# vets, checks formatting, vets for Windows and macOS the packages with code
# or tests per system (scripts/cross.sh), decodes deploy/kubernetes's
# manifests strictly (a module of its own), runs every test (hostile
# servers over HTTP/1.1 and HTTP/2 among them)
# with a brief pass of every fuzz target beside them, and the concurrent
# packages again under the race detector, and a 2-minute run against a
# real token bucket beside two busy loops. Takes about 9 minutes on 2
# cores (8m58s with CI=true on 2026-11-29, each stage's
# start shown; 11 min before the server tests ran beside each other), most
# of it the end-to-end tests of cmd/headroom and the token bucket's 2
# minutes (the first time on a machine about 20: apt, Synapse's venv,
# Centrifugo's build). docs/TESTING.md: how a test is made to hold on any
# machine, and scripts/flake-hunt.sh, which proves it.
#
#   ./scripts/test.sh
#   FUZZTIME=30s ./scripts/test.sh   # fuzz longer (./scripts/fuzz.sh alone: 2 minutes a target)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/install.sh # apt_get waits for another apt's lock; retry tries a download again

command -v go >/dev/null || { echo "test: Go 1.26 is needed" >&2; exit 1; }
# stage NAME: a heading, with the time since the start, to see where the minutes go.
stage() { printf '== %s [%dm%02ds]\n' "$*" $((SECONDS / 60)) $((SECONDS % 60)); }
stage "go modules"
retry go mod download

# Centrifugo is built from its own pinned module (2-4 min the first time):
# in the background, beside vet and the other installs, and waited for
# before the tests.
cflog=$(mktemp)
./scripts/centrifugo.sh install >"$cflog" 2>&1 &
cfinstall=$!

# deploy/kubernetes's manifests, decoded strictly into k8s.io/api v0.33.0
# by a module of its own (seconds; ~75 s and ~200 MB of modules the first
# time): in the background too, waited for before the tests.
k8slog=$(mktemp)
(cd deploy/kubernetes/check && export GOWORK=off && go mod download && go vet ./... && go test -count=1 ./...) >"$k8slog" 2>&1 &
k8scheck=$!

# Windows and macOS: the packages with code or tests of their own per
# system, vetted for each (scripts/cross.sh; ~1 min cold), in the background too.
xlog=$(mktemp)
./scripts/cross.sh >"$xlog" 2>&1 &
cross=$!

stage "vet and format"
go vet ./...
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [[ -n $unformatted ]]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi


stage "programs the tests run (Debian packages: prometheus 2.42, prometheus-node-exporter 1.5, chromium, nginx 1.22, mariadb-server 10.11, prometheus-mysqld-exporter 0.14, linux-perf)"
if [[ ! -x /usr/bin/prometheus || ! -x /usr/bin/prometheus-node-exporter || ! -x /usr/bin/chromium || ! -x /usr/sbin/nginx ||
  ! -x /usr/sbin/mariadbd || ! -x /usr/bin/prometheus-mysqld-exporter || ! -x /usr/bin/perf ]]; then
  apt_get update
  apt_get install -y --no-install-recommends prometheus prometheus-node-exporter chromium nginx mariadb-server prometheus-mysqld-exporter linux-perf
fi

stage "Synapse 1.163.2 (pinned PyPI packages in a venv under \${HEADROOM_CACHE:-~/.cache/headroom}; ~25 s the first time)"
if ! python3 -m venv --help >/dev/null 2>&1; then # Debian splits venv out of python3
  apt_get update
  apt_get install -y --no-install-recommends python3 python3-venv
fi
./scripts/synapse.sh install

stage "py-spy 0.4.3 (pinned, in a venv under \${HEADROOM_CACHE:-~/.cache/headroom}; headroom profiler's end-to-end test samples a Python server with it)"
./scripts/py-spy.sh install

stage "Centrifugo 5.4.9 (built from its pinned Go module into \${HEADROOM_CACHE:-~/.cache/headroom}, begun in the background above)"
if ! wait "$cfinstall"; then
  cat "$cflog"
  echo "test: installing Centrifugo failed" >&2
  exit 1
fi
cat "$cflog"
rm -f "$cflog"

stage "deploy/kubernetes: the manifests decoded strictly into k8s.io/api v0.33.0 (begun in the background above)"
if ! wait "$k8scheck"; then
  cat "$k8slog"
  echo "test: the Kubernetes manifests' check failed" >&2
  exit 1
fi
cat "$k8slog"
rm -f "$k8slog"

stage "Windows and macOS vets (begun in the background above)"
if ! wait "$cross"; then
  cat "$xlog"
  echo "test: vetting for Windows or macOS failed" >&2
  exit 1
fi
cat "$xlog"
rm -f "$xlog"

stage "tests (real traffic on 127.0.0.1: the testbed, go-httpbin, hostile servers, Prometheus, node_exporter, Synapse, Centrifugo, nginx, MariaDB and its exporter; headless Chromium)"
# The fuzz targets run beside the tests, on one worker: the ceiling searches
# wait on the testbed's modelled time, not on CPU (hence -parallel 3 too).
fuzzlog=$(mktemp)
FUZZTIME=${FUZZTIME:-10s} FUZZ_WORKERS=1 FUZZ_MINIMIZE=${FUZZ_MINIMIZE:-1x} ./scripts/fuzz.sh >"$fuzzlog" 2>&1 &
fuzz=$!
trap 'kill "$fuzz" 2>/dev/null || true; rm -f "$fuzzlog"' EXIT
go test -count=1 -parallel 3 -timeout 14m -skip '^TestLimiterUnderContention$' ./...
stage "fuzz targets, ${FUZZTIME:-10s} each (beside the tests)"
if ! wait "$fuzz"; then
  cat "$fuzzlog"
  exit 1
fi
cat "$fuzzlog"

# Alone, after the rest: its two busy loops are the contention it measures,
# and would slow every other test beside it; and beside the whole suite the
# target itself (nginx) stalled for half a second at times, holding every
# request in flight, which bunches any closed-loop client's users (beside
# the race detector, that step's own timing bounds failed).
stage "the generator beside two busy loops: a real token bucket (nginx limit_req) at half its rate, 2 minutes"
go test -count=1 -timeout 5m -run '^TestLimiterUnderContention$' ./cmd/headroom/

stage "race detector on the packages that share memory between goroutines"
# Less metrics' property test of one goroutine: the detector has nothing to
# find in it, and it took 110 of metrics' 126 s under -race (7 s without).
go test -race -count=1 -skip '^TestStatFollowsItsBuckets$' ./engine/ ./metrics/ ./transport/ ./scenario/... ./starjson/ ./control/ ./testbed/ ./health/ ./prom/ ./agents/ ./live/
stage "all passed"
