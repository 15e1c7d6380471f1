#!/usr/bin/env bash
# Destage benchmark (issue 6 §2): prints numbers, asserts nothing about speed.
#   Part 1 — foreground p99 under forced destage. ringcache-local (2 cache nodes of 64 MiB SSD,
#     HDD-emulated data nodes, idle destage off) gets a rate-limited 4K random-write workload over
#     a 96 MiB region (75% of the 128 MiB of SSD) for RUNTIME seconds, twice: with the dirty high watermark
#     at 0.6 (dirty data crosses it, so destage is forced under load, rate-limited) and at 0.99
#     (never crossed: the same workload without forced destage, the anchor). Prints the p50/p99
#     write latency of both and the ratio (aim: p99 ratio <= 2).
#   Part 2 — log pushback. The same server with a 4 MiB log limit per data node and a high dirty
#     watermark: 64 MiB of writes. Prints the largest log area seen on any data node, the limit,
#     the over-limit answers, and fio's error count (must be 0: pushback never fails a write).
#
#   tests/bench/destage_bench.sh [--runtime S] [--keep]
# Environment: RINGCACHE_BIN (default <repo>/build).
set -euo pipefail

RUNTIME=20
KEEP=0
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) RUNTIME=$2; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "destage_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${RINGCACHE_BIN:-$ROOT/build}
LOCAL=$BIN/tools/ringcache-local
for tool in fio python3 curl; do
  command -v "$tool" > /dev/null || { echo "destage_bench.sh: $tool is not installed" >&2; exit 1; }
done
[ -x "$LOCAL" ] || { echo "destage_bench.sh: $LOCAL missing (build ringcache-local)" >&2; exit 1; }
WORK=$(mktemp -d /tmp/destage-bench.XXXXXX)
BASE=$(( 30000 + (RANDOM % 300) * 50 ))
PID=""
stop() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null || true; PID=""; fi; }
cleanup() { stop; if [ "$KEEP" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi; }
trap cleanup EXIT

start() {  # name, extra flags...
  local name=$1; shift
  rm -rf "$WORK/$name"
  "$LOCAL" --data-dir "$WORK/$name" --cache-nodes 2 --data-nodes 3 --ssd-size 64MiB \
    --ram-size 8MiB --hdd-emulation --hdd-seek-ms 2 --idle-ops-per-s 0 --dirty-age-target-ms 0 \
    --nbd-listen "127.0.0.1:$((BASE+1))" --admin-listen "127.0.0.1:$((BASE+2))" \
    --http-listen "127.0.0.1:$((BASE+3))" --create-vdi disk:512MiB \
    --ready-file "$WORK/$name.ready" "$@" > "$WORK/$name.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 300); do [ -f "$WORK/$name.ready" ] && return 0; sleep 0.1; done
  tail "$WORK/$name.log"; echo "ringcache-local did not start" >&2; exit 1
}

fio_write() {  # name, size, extra fio args...
  local name=$1 size=$2; shift 2
  fio --name="$name" --ioengine=nbd --uri="nbd://127.0.0.1:$((BASE+1))/disk" --rw=randwrite \
    --bs=4k --iodepth=4 --size="$size" --direct=1 --output-format=json \
    --output="$WORK/$name.json" "$@" > /dev/null
}
pct() {  # json, percentile key -> microseconds
  python3 -c "import json; j=json.load(open('$1'))['jobs'][0]['write']; \
print('%.0f' % (j['clat_ns']['percentile']['$2']/1000))"
}

echo "== Part 1: foreground write latency with and without forced destage (${RUNTIME}s each)"
declare -A P50 P99
for wm in 0.99 0.6; do
  start "wm$wm" --dirty-high-watermark "$wm" --forced-destage-mb-s 16
  fio_write "wm$wm" 96M --time_based --runtime="$RUNTIME" --rate_iops=1500
  P50[$wm]=$(pct "$WORK/wm$wm.json" 50.000000)
  P99[$wm]=$(pct "$WORK/wm$wm.json" 99.000000)
  destaged=$(curl -s "127.0.0.1:$((BASE+3))/metrics" |
    awk '/^ringcache_cachenode_destage_bytes_total/ {s += $2} END {printf "%.0f", s}')
  printf '  high watermark %-4s  p50 %6s us  p99 %6s us  destaged %s bytes\n' \
    "$wm" "${P50[$wm]}" "${P99[$wm]}" "${destaged:-0}"
  stop
done
python3 -c "print('  p99 ratio (forced destage / none): %.2f  (aim <= 2)' % (${P99[0.6]} / max(1, ${P99[0.99]})))"

echo "== Part 2: log pushback (limit 4 MiB per data node, 64 MiB written)"
start pushback --dirty-high-watermark 0.99 --log-limit 4MiB
max=0
( while kill -0 "$PID" 2>/dev/null; do
    curl -s "127.0.0.1:$((BASE+3))/metrics" | awk '/^ringcache_datanode_log_bytes/ {print $2}'
    sleep 0.2
  done > "$WORK/logbytes.txt" ) &
SAMPLER=$!
fio_write pushback 64M --rate_iops=3000
errors=$(python3 -c "import json; print(json.load(open('$WORK/pushback.json'))['jobs'][0]['error'])")
over=$(curl -s "127.0.0.1:$((BASE+3))/metrics" |
  awk '/^ringcache_datanode_log_over_limit_total/ {s += $2} END {printf "%.0f", s}')
stop
wait "$SAMPLER" 2>/dev/null || true
max=$(sort -g "$WORK/logbytes.txt" | tail -1)
printf '  largest log area seen: %s bytes (limit %s), over-limit answers %s, fio errors %s\n' \
  "${max:-0}" $((4 << 20)) "${over:-0}" "$errors"
