#!/usr/bin/env bash
# The run command: installs dependencies, builds, and starts ringcache in single-process mode
# (ringcache-local: gateway + 2 cache nodes + 3 data nodes) with a 1 GiB VDI named "demo".
# Prints the NBD URI and the metrics URL; Ctrl-C shuts it down cleanly.
#
#   deploy/run.sh                 # state in ./ringcache-data, NBD on 127.0.0.1:10809
#   DATA_DIR=/tmp/rc NBD_PORT=10810 deploy/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo > /dev/null
# Every daemon and the tools, not the tests: deploy/compose/build-image.sh can pack this build.
cmake --build build -j "$(nproc)" --target daemons

DATA_DIR=${DATA_DIR:-./ringcache-data}
NBD_PORT=${NBD_PORT:-10809}
ADMIN_PORT=${ADMIN_PORT:-7200}
HTTP_PORT=${HTTP_PORT:-9200}
READY=$(mktemp -u /tmp/ringcache-run.XXXXXX.json)

./build/tools/ringcache-local --data-dir "$DATA_DIR" --create-vdi demo:1GiB \
  --nbd-listen "127.0.0.1:$NBD_PORT" --admin-listen "127.0.0.1:$ADMIN_PORT" \
  --http-listen "127.0.0.1:$HTTP_PORT" --ready-file "$READY" &
PID=$!
trap 'kill -TERM $PID 2>/dev/null; wait $PID; rm -f "$READY"; echo "ringcache stopped"' INT TERM
for _ in $(seq 1 300); do
  [ -f "$READY" ] && break
  kill -0 $PID 2>/dev/null || { echo "ringcache-local failed to start" >&2; exit 1; }
  sleep 0.1
done
echo
echo "ringcache is serving the VDI 'demo' (1 GiB):"
echo "  NBD URI:  nbd://127.0.0.1:$NBD_PORT/demo"
echo "  metrics:  http://127.0.0.1:$HTTP_PORT/metrics"
echo "  admin:    build/tools/ctl/ringcachectl --gateway 127.0.0.1:$ADMIN_PORT vdi list"
echo "  try:      qemu-img info nbd://127.0.0.1:$NBD_PORT/demo"
echo "Ctrl-C to stop."
wait $PID
