#!/usr/bin/env bash
# The main job on a fresh machine: build headroom, start the built-in testbed
# on loopback, run the chat scenario against it and print the table.
#
#   ./scripts/demo.sh                       # 200 users, 10 s ramp, 60 s measured
#   USERS=50 DURATION=20s ./scripts/demo.sh
#
# Needs only Go 1.26 (on this kind of machine already); Go modules download on first build.
set -euo pipefail
cd "$(dirname "$0")/.."

USERS=${USERS:-200}
RAMP=${RAMP:-10s}
DURATION=${DURATION:-60s}
PORT=${PORT:-8065}

command -v go >/dev/null || { echo "demo: Go 1.26 is needed (https://go.dev/dl/)" >&2; exit 1; }
echo "== building headroom"
go build -o bin/headroom ./cmd/headroom

echo "== starting the testbed on 127.0.0.1:$PORT"
bin/headroom testbed --listen "127.0.0.1:$PORT" &
TESTBED=$!
trap 'kill "$TESTBED" 2>/dev/null || true; wait "$TESTBED" 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break
  kill -0 "$TESTBED" 2>/dev/null || { echo "demo: the testbed did not start (is port $PORT taken? set PORT=...)" >&2; exit 1; }
  sleep 0.1
done

OUT=runs/demo-$(date +%Y%m%d-%H%M%S)
echo "== running examples/chat.star: $USERS users, ramp $RAMP, then $DURATION measured"
bin/headroom run examples/chat.star --target "http://127.0.0.1:$PORT" \
  --users "$USERS" --ramp "$RAMP" --duration "$DURATION" --out "$OUT"
