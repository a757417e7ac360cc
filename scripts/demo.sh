#!/usr/bin/env bash
# The main job on a fresh machine: build headroom, start the built-in testbed
# on loopback, and find how many chat users it supports while the reference's
# health checks pass, with the embedded PromQL engine (no servers to set up).
#
#   ./scripts/demo.sh              # about three minutes
#   MODE=run ./scripts/demo.sh     # a bounded run instead: 200 users, 10 s ramp, 60 s measured
#
# Needs only Go 1.26 (on this kind of machine already); Go modules download on first build.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${MODE:-ceiling}
PORT=${PORT:-8065}

command -v go >/dev/null || { echo "demo: Go 1.26 is needed (https://go.dev/dl/)" >&2; exit 1; }
echo "== building headroom"
go build -o bin/headroom ./cmd/headroom

# The demo loads only the testbed it starts: a port that answers already is
# someone else's server (8065 is Mattermost's own default), and the testbed
# counts as started once it says it listens on the port, not when the port
# answers.
if (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null; then
  echo "demo: 127.0.0.1:$PORT is taken by another server, and the demo loads only the testbed it starts (8065 is also Mattermost's default port): set PORT to a free one, e.g. PORT=18065 ./scripts/demo.sh" >&2
  exit 1
fi
# 2 workers, every service time x10: a small server, so the demo is quick;
# short check windows (5 s; 10 s by default) for the same reason.
echo "== starting the testbed on 127.0.0.1:$PORT (2 workers, scale 10)"
LOG=$(mktemp)
bin/headroom testbed --listen "127.0.0.1:$PORT" --workers 2 --scale 10 2>"$LOG" &
TESTBED=$!
trap 'kill "$TESTBED" 2>/dev/null || true; wait "$TESTBED" 2>/dev/null || true; rm -f "$LOG"' EXIT
for i in $(seq 100); do
  grep -q "testbed listening on http://127.0.0.1:$PORT " "$LOG" && break
  if ! kill -0 "$TESTBED" 2>/dev/null || [[ $i == 100 ]]; then
    echo "demo: the testbed did not start on 127.0.0.1:$PORT (set PORT to a free port):" >&2
    cat "$LOG" >&2
    exit 1
  fi
  sleep 0.1
done

OUT=runs/demo-$(date +%Y%m%d-%H%M%S)
if [[ $MODE == run ]]; then
  echo "== running examples/chat.star: 200 users, ramp 10s, then 60s measured"
  bin/headroom run examples/chat.star --target "http://127.0.0.1:$PORT" --scrape "http://127.0.0.1:$PORT/metrics" \
    --users 200 --ramp 10s --duration 60s --out "$OUT"
else
  echo "== finding the ceiling with examples/chat.star"
  bin/headroom ceiling examples/chat.star --target "http://127.0.0.1:$PORT" \
    --scrape "http://127.0.0.1:$PORT/metrics" --start-users 25 --window 5s --judge 4s --measure 10s --out "$OUT"
fi
