#!/usr/bin/env bash
# Speed benchmark of ringcache-sim (not a ctest test): generates a binary trace of at least 10M
# requests, replays it through each policy on one core, and prints requests/s and metadata bytes
# per cached block. The anchor is the "null" policy (caches nothing), measured in the same run:
# it is the simulator's own cost (binary reader, block split, cost model, statistics), so
# policy cost ~ 1/rate - 1/anchor. Mreq/s is wall clock (what issue 3's aims are stated in);
# Mreq/cpu-s divides by the replay thread's CPU time, which excludes time the thread spent
# descheduled on a busy shared host.
#
#   tools/sim/bench_sim.sh [BUILD_DIR]
# Environment: REQUESTS (default 10000000), BLOCKS (working set, default 1000000), CACHE (blocks,
# default 100000), REPEAT (runs per policy, best kept; default 3), POLICIES (comma list),
# TRACE (path of the generated trace, default $TMPDIR/ringcache_bench_<REQUESTS>.bin).
# Aims (issue 3): lru >= 10M req/s, vbq+lru+sieve >= 5M req/s, <= 48 metadata bytes per block.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-sim}
SIM=$BUILD/tools/sim/ringcache-sim
REQUESTS=${REQUESTS:-10000000}
BLOCKS=${BLOCKS:-1000000}
CACHE=${CACHE:-100000}
REPEAT=${REPEAT:-3}
POLICIES=${POLICIES:-null,lru,fifo,arc,s3fifo,cflru,lru+sieve,vbq+lru,vbq+lru+sieve,vbq+lru+sieve+lcr,lru+rpac,lru+cmf,uarc,opt}
TRACE=${TRACE:-${TMPDIR:-/tmp}/ringcache_bench_${REQUESTS}.bin}
GEN="zipf:blocks=$BLOCKS,theta=0.99,requests=$REQUESTS,write=0.3,seed=1"

if [ ! -x "$SIM" ]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja >/dev/null
  cmake --build "$BUILD" --target ringcache-sim -j1
fi
if [ ! -s "$TRACE" ]; then
  "$SIM" gen "$GEN" -o "$TRACE" -q
fi
PIN=()
if command -v taskset >/dev/null; then PIN=(taskset -c 0); fi

echo "trace: $TRACE ($GEN), $(stat -c %s "$TRACE") bytes"
echo "cache: $CACHE blocks of 4 KiB; best of $REPEAT runs; one core (${PIN[*]:-unpinned})"
echo "host: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-20s %10s %12s %14s %8s %12s\n' policy "Mreq/s" "ns/request" "Mreq/cpu-s" "hit%" "meta B/blk"
IFS=',' read -r -a LIST <<<"$POLICIES"
for p in "${LIST[@]}"; do
  extra=()
  case "$p" in iarc|garc|uarc) extra=(--ram $((CACHE / 10))) ;; esac
  best=""
  for _ in $(seq "$REPEAT"); do
    line=$("${PIN[@]}" "$SIM" "$TRACE" --policy "$p" --size "$CACHE" "${extra[@]}" --json --quiet)
    best=$(python3 -c '
import json, sys
cur = json.loads(sys.argv[1])
best = json.loads(sys.argv[2]) if sys.argv[2] else None
print(json.dumps(cur if best is None or cur["requests_per_second"] > best["requests_per_second"] else best))
' "$line" "$best")
  done
  python3 -c '
import json, sys
r = json.loads(sys.argv[1])
rate = r["requests_per_second"]
print("%-20s %10.2f %12.1f %14.2f %8.2f %12.1f" % (r["policy"], rate / 1e6, 1e9 / rate,
      r["requests_per_cpu_second"] / 1e6, 100 * r["hit_ratio"], r["metadata_bytes_per_block"]))
' "$best"
done
