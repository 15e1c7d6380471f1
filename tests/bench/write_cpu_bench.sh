#!/usr/bin/env bash
# Server CPU per acknowledged durable 4K write (issue 35; results in docs/benchmarks.md, "A
# durable write's CPU, by process"). Not a ctest test: it prints numbers, it asserts nothing.
#
# Runs, back to back in one run, fio 4K random writes at QD16 over NBD against
#   qemu-nbd-wt   qemu-nbd --cache=writethrough on a raw file in the same temp dir (the anchor:
#                 every write durable before its reply, as ringcache's);
#   log-port      a deploy/cluster.sh cluster (3 cache nodes, 4 data nodes, replication 3),
#                 log appends and destage writes on the data nodes' log ports (the default);
#   appends       the same cluster with RINGCACHE_LOG_TRANSPORT=appends (appends on the log
#                 ports, destage writes as WriteBlocks RPCs: the default until 2026-11-30);
#   grpc          the same cluster with RINGCACHE_LOG_TRANSPORT=grpc (both as RPCs);
#   handoff       (only when --transports names it) log ports, but every append handed to the
#                 link's sender thread, as before 2026-11-30, and every destaged block write
#                 as before 2026-12-01 (RINGCACHE_LOG_TRANSPORT=handoff; the default sends an
#                 append, and a block write, on the writer's thread when its link is idle);
#   runs          (only when --transports names it) log ports, each destaged run in a request
#                 of its own to each home, as before 2026-12-01 (RINGCACHE_DESTAGE_BATCH_RUNS=1;
#                 the default sends a data node the runs of up to 16 objects in one request);
# and for each the servers' CPU (utime + stime from /proc, per process kind) over the measured
# run divided by fio's completed writes, after a 5 s warm-up. Prints a table and the ratios.
#
# Usage: tests/bench/write_cpu_bench.sh [--runtime S] [--rounds N] [--base-port P]
#                                        [--iodepth Q] [--transports LIST] [--ssd-size S] [--rate N]
#   --runtime S    seconds per measured run (default 15)
#   --rounds N     how many times the cluster configurations alternate (default 1)
#   --iodepth Q    fio's queue depth (default 16)
#   --transports L the cluster configurations, a comma list (default log-port,appends,grpc)
#   --ssd-size S   each cache node's SSD tier (default 256MiB: the run destages almost nothing;
#                  8MiB: the warm-up fills it, and every write is destaged during the run)
#   --rate N       fio's rate_iops in the measured run (default: none, a closed loop at QD)
#   --base-port P  the cluster's ports (default 31000; P..P+40 must be free)
# Environment: RINGCACHE_BIN (default <repo>/build).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNTIME=15
ROUNDS=1
QD=16
TRANSPORTS=log-port,appends,grpc
BASE=31000
SSD=256MiB
RATE=()
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) RUNTIME=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --base-port) BASE=$2; shift 2 ;;
    --iodepth) QD=$2; shift 2 ;;
    --transports) TRANSPORTS=$2; shift 2 ;;
    --ssd-size) SSD=$2; shift 2 ;;
    --rate) RATE=(--rate_iops="$2"); shift 2 ;;
    -h|--help) sed -n '2,33p' "$0"; exit 0 ;;
    *) echo "write_cpu_bench.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
export RINGCACHE_BIN=${RINGCACHE_BIN:-$PWD/build}
for tool in fio qemu-nbd qemu-img; do
  command -v $tool > /dev/null || { echo "write_cpu_bench.sh: $tool is not installed" >&2; exit 2; }
done
TMP=$(mktemp -d /tmp/write-cpu-bench.XXXXXX)
CLUSTER=$TMP/cluster
QPID=""
cleanup() {
  [ -n "$QPID" ] && kill "$QPID" 2> /dev/null || true
  deploy/cluster.sh down --dir "$CLUSTER" > /dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT

# CPU ticks (utime + stime) of the processes whose command line matches $1.
ticks() {
  local t=0 pid
  for pid in $(pgrep -f "$1" || true); do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$pid/stat" 2> /dev/null || echo 0)))
  done
  echo $t
}
HZ=$(getconf CLK_TCK)

# run NAME URI KINDS...: warm-up, then the measured run; prints one row per kind and the total.
run() {
  local name=$1 uri=$2
  shift 2
  fio --name=w --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth="$QD" --size=1g \
    --time_based=1 --runtime=5 > /dev/null 2>&1
  local -a before=()
  local k
  for k in "$@"; do before+=("$(ticks "$k")"); done
  fio --name=w --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth="$QD" --size=1g \
    --time_based=1 --runtime="$RUNTIME" "${RATE[@]}" --output-format=json \
    --output="$TMP/fio.json" > /dev/null
  local ios
  ios=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['jobs'][0]['write']['total_ios'])" "$TMP/fio.json")
  local i=0 total=0 d label
  for k in "$@"; do
    d=$(( $(ticks "$k") - before[i] ))
    total=$((total + d))
    label=${k%% *}
    printf "%-12s %-22s %8.0f us\n" "$name" "${label#ringcache-}" \
      "$(echo "$d * 1000000 / $HZ / $ios" | bc -l)"
    i=$((i + 1))
  done
  printf "%-12s %-22s %8.0f us   %6.0f writes/s\n" "$name" "all" \
    "$(echo "$total * 1000000 / $HZ / $ios" | bc -l)" "$(echo "$ios / $RUNTIME" | bc -l)"
  echo "$name $(echo "$total * 1000000 / $HZ / $ios" | bc -l) $(echo "$ios / $RUNTIME" | bc -l)" >> "$TMP/rows"
}

echo "write_cpu_bench: fio randwrite 4k QD$QD${RATE:+ (${RATE[*]})}, ${RUNTIME}s after a 5 s" \
  "warm-up; SSD tiers $SSD; CPU per acknowledged write"
printf "%-12s %-22s %11s\n" "config" "process" "CPU/write"

# The anchor: qemu-nbd, writethrough, on a raw file of the same size.
qemu-img create -f raw "$TMP/disk.raw" 1G > /dev/null
qemu-nbd --fork --persistent --shared=4 --format=raw --cache=writethrough --bind=127.0.0.1 \
  --port=$((BASE + 39)) --pid-file="$TMP/qemu-nbd.pid" "$TMP/disk.raw"
QPID=$(cat "$TMP/qemu-nbd.pid")
run qemu-nbd-wt "nbd://127.0.0.1:$((BASE + 39))" "qemu-nbd .*$TMP/disk.raw"
kill "$QPID"
QPID=""

for ((r = 0; r < ROUNDS; r++)); do
  for transport in ${TRANSPORTS//,/ }; do
    deploy/cluster.sh down --dir "$CLUSTER" > /dev/null 2>&1 || true
    rm -rf "$CLUSTER"
    env_word=""
    case $transport in
      log-port) ;;
      runs) env_word="RINGCACHE_DESTAGE_BATCH_RUNS=1" ;;
      *) env_word="RINGCACHE_LOG_TRANSPORT=$transport" ;;
    esac
    env $env_word deploy/cluster.sh up --dir "$CLUSTER" --cache-nodes 3 --data-nodes 4 \
      --base-port "$BASE" --ssd-size "$SSD" --replication 3 --create-vdi v1:1GiB \
      > "$TMP/up.log" 2>&1 || { tail -20 "$TMP/up.log"; exit 1; }
    run "$transport" "nbd://127.0.0.1:$((BASE + 9))/v1" \
      "ringcache-datanode " "ringcache-cachenode " "ringcache-gateway "
  done
done

python3 - "$TMP/rows" <<'EOF'
import collections, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    name, cpu, iops = line.split()
    rows[name].append((float(cpu), float(iops)))
mean = {n: (sum(c for c, _ in v) / len(v), sum(i for _, i in v) / len(v)) for n, v in rows.items()}
q = mean["qemu-nbd-wt"]
print()
for n in ("log-port", "runs", "handoff", "appends", "grpc"):
    if n in mean:
        c, i = mean[n]
        print(f"{n:10s} CPU per write {c:6.0f} us = {c / q[0]:5.2f}x qemu-nbd writethrough's "
              f"({q[0]:.0f} us); {i:6.0f} writes/s = {i / q[1]:4.2f}x its {q[1]:.0f}")
for other in ("runs", "handoff", "appends", "grpc"):
    if "log-port" in mean and other in mean:
        print(f"log port / {other}: CPU per write {mean['log-port'][0] / mean[other][0]:.2f}x, "
              f"writes/s {mean['log-port'][1] / mean[other][1]:.2f}x")
EOF
