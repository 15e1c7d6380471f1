#!/usr/bin/env bash
# Recovery benchmark (issue 30): how long a cluster takes to make again the replicas of a data
# node that went out, and what the recovery costs the clients meanwhile.
#
# A static cluster of 3 cache nodes and 4 data nodes (deploy/cluster.sh) holds one 1 GiB VDI at
# replication 3, switched to passthrough and then written: nothing is cached, so every read goes
# to the data nodes (the recovery's copies compete with exactly those reads).
#   baseline  fio 4K random reads (ioengine=nbd, QD 4) for --runtime seconds: p99 latency.
#   recovery  data node 1 killed and taken out (`ringcachectl datanode out 1`); the same fio load
#             runs until the rebalance is idle again, with every block back at 3 copies on the
#             3 data nodes left. Prints the time to restore the copies and the p99 of the reads
#             during it, and their ratio to the baseline (goal: at most 2x).
# The copies run at the gateway's --rebalance-mb-s (default 64 MB/s; --mb-s here), and at its
# --rebalance-busy-mb-s while the data nodes serve clients (default 16; --busy-mb-s here).
#
#   tests/bench/recovery_bench.sh [--bin BUILD_DIR] [--size 1GiB] [--runtime 20] [--mb-s 64]
#                                 [--busy-mb-s 16] [--out DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${RINGCACHE_BIN:-$ROOT/build}
SIZE=1GiB
RUNTIME=20
MBS=64
BUSY=16
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --size) SIZE=$2; shift 2 ;;
    --runtime) RUNTIME=$2; shift 2 ;;
    --mb-s) MBS=$2; shift 2 ;;
    --busy-mb-s) BUSY=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
    *) echo "recovery_bench.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
for tool in fio python3; do
  command -v $tool > /dev/null || { echo "recovery_bench.sh: $tool not installed" >&2; exit 2; }
done
BIN=$(cd "$BIN" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/rc-recovery.XXXXXX")
[ -n "$OUT" ] || OUT=$WORK/out
mkdir -p "$OUT"
source "$ROOT/tests/e2e/ports.sh"
cluster() { RINGCACHE_BIN=$BIN bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
FIO_PID=""
cleanup() {
  set +e
  [ -z "$FIO_PID" ] || kill "$FIO_PID" 2> /dev/null
  cluster down > /dev/null 2>&1
  rm -rf "$WORK/cluster"
}
trap cleanup EXIT
log() { echo "[recovery] $*"; }

pick_base_port
CTL=("$BIN/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
URI="nbd://127.0.0.1:$((BASE+9))/disk"
cluster up --base-port "$BASE" --cache-nodes 3 --data-nodes 4 --replication 3 \
  --ssd-size 1536MiB --ram-size 32MiB --create-vdi "disk:$SIZE" --rebalance-mb-s "$MBS" \
  --rebalance-busy-mb-s "$BUSY" \
  > "$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; exit 2; }
log "cluster up on base port $BASE: 3 cache nodes, 4 data nodes, replication 3, VDI of $SIZE"

# Passthrough before the fill: the writes go home and nothing is cached, so every read of the
# load misses the cache nodes and goes to the data nodes (a cached block would be served from
# the cache node's SSD even in passthrough).
"${CTL[@]}" vdi set-mode disk passthrough > /dev/null
fio --name=fill --ioengine=nbd --uri="$URI" --rw=write --bs=1M --iodepth=8 --size="$SIZE" \
  --output-format=json --output="$OUT/fill.json" > /dev/null
"${CTL[@]}" flush > /dev/null
log "written home in passthrough: nothing cached, every read goes to the data nodes"

# Runs the read load; with a runtime it ends by itself, without one it runs until SIGINT (exec:
# started in the background, its pid is fio's own).
read_load() {  # NAME [RUNTIME]
  local extra=(--time_based --runtime="${2:-3600}")
  exec fio --name="$1" --ioengine=nbd --uri="$URI" --rw=randread --bs=4k --iodepth=4 \
    --size="$SIZE" --norandommap --randrepeat=0 "${extra[@]}" --output-format=json \
    --output="$OUT/$1.json" > "$OUT/$1.stdout" 2>&1
}
p99_ms() {  # JSON
  python3 -c '
import json, sys
text = open(sys.argv[1]).read()  # fio prints "terminating on signal 2" first when interrupted
j = json.loads(text[text.index("{"):])["jobs"][0]["read"]
p99 = j["clat_ns"]["percentile"]["99.000000"] / 1e6
print("%.2f %.0f" % (p99, j["iops"]))' "$1"
}
rebalance() {
  "${CTL[@]}" --json status | python3 -c '
import json, sys
r = json.load(sys.stdin)["rebalance"]
print(r["state"], ",".join(map(str, sorted(r["members"]))), r["blocks_copied"])'
}

# The fill left the data nodes compacting: the same load warms them up first, unmeasured, so the
# baseline is the steady state.
(read_load warmup "$RUNTIME")
(read_load baseline "$RUNTIME")
read -r base_p99 base_iops < <(p99_ms "$OUT/baseline.json")
log "baseline: 4K random reads QD4 for ${RUNTIME}s: p99 ${base_p99} ms, ${base_iops} IOPS"

cluster kill datanode 1 > /dev/null
(read_load recovery) &
FIO_PID=$!
sleep 1
t0=$(date +%s.%N)
"${CTL[@]}" datanode out 1 > /dev/null
# The end of the move is watched in the gateway's log, not by asking its status: a process per
# poll (ringcachectl, python) costs CPU the reads measured here would miss (polling ten times a
# second took up to a third of a core, and the reads' p99 with it).
GWLOG="$WORK/cluster/logs/gateway-1.log"
done_line="data rebalance: done; data ring 2,3,4 "
for _ in $(seq 1 36000); do
  if grep -qF "$done_line" "$GWLOG"; then break; fi
  sleep 0.1
done
t1=$(date +%s.%N)
kill -INT "$FIO_PID"
wait "$FIO_PID" || true
FIO_PID=""
state=$(rebalance)
case "$state" in "idle 2,3,4 "*) ;; *) log "the recovery did not finish: $state"; exit 1 ;; esac
copied=${state##* }
secs=$(python3 -c "print(f'{$t1 - $t0:.1f}')")
read -r rec_p99 rec_iops < <(p99_ms "$OUT/recovery.json")
ratio=$(python3 -c "print(f'{$rec_p99 / $base_p99:.2f}')")
mib=$(python3 -c "print(f'{$copied * 4096 / 1048576:.0f}')")
log "recovery: data node 1 out, ${copied} blocks (${mib} MiB) copied to restore 3 copies of $SIZE in ${secs} s (limit ${MBS} MB/s, ${BUSY} MB/s while clients are served)"
log "reads during the recovery: p99 ${rec_p99} ms, ${rec_iops} IOPS"
# The same load once the recovery is done: 3 data nodes, nothing copying (what the cluster costs
# without the failed node, apart from the copies).
(read_load after "$RUNTIME")
read -r after_p99 after_iops < <(p99_ms "$OUT/after.json")
after_ratio=$(python3 -c "print(f'{$rec_p99 / $after_p99:.2f}')")
log "after the recovery (3 data nodes): p99 ${after_p99} ms, ${after_iops} IOPS"
echo "recovery_bench: size=$SIZE restore_seconds=$secs copied_mib=$mib p99_baseline_ms=$base_p99 p99_recovery_ms=$rec_p99 ratio=${ratio}x (goal <= 2x) p99_after_ms=$after_p99 ratio_to_after=${after_ratio}x"
