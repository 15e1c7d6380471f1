#!/usr/bin/env bash
# Per-VDI I/O limits (docs/qos.md), measured: two VDIs of one ringcache-local (gateway, 2 cache
# nodes, 3 data nodes in one process). First the free VDI alone; then both at once, the limited
# one held to --limit IOPS by `ringcachectl vdi set-qos`. Prints the limited VDI's IOPS as
# a share of its limit (goal: within 10%) and the free VDI's IOPS as a share of its solo run
# (goal: at least 0.9x), and the gateway's delay counters.
# With --reserve, reservations instead (docs/qos.md "Reservations"): a light VDI ("reserved", 4K
# random reads at --reserved-depth) alone, then beside the free VDI at --depth without and with
# `set-qos reserved --reserve-iops`; prints what it got with its reservation as a share of it
# (goal: at least 0.9x) and without one, and what the free VDI kept.
#
#   tests/bench/qos_bench.sh [--runtime S] [--rounds N] [--limit IOPS] [--rw RW] [--depth QD]
#                            [--reserve IOPS|auto] [--reserved-depth QD] [--out DIR]
#
# --runtime S   seconds per fio run (default 20)
# --rounds N    solo and shared runs, alternated N times; the medians are compared (default 3:
#               a shared machine's speed drifts between runs)
# --limit IOPS  the limited VDI's IOPS (`set-qos --iops`, default 1000)
# --rw RW       the limited VDI's fio workload (default randread, as the free one's; randwrite
#               shows what its writes cost the other VDI on a machine of few cores)
# --depth QD    queue depth of each fio (default 16)
# --reserve R   reservations: the reserved VDI's --reserve-iops; auto: 0.7x of its first solo run
# --reserved-depth QD  the reserved VDI's queue depth (default 2)
# --out DIR     where fio's JSON and the server log go (default a temporary directory, kept)
# Environment: RINGCACHE_BIN (default <repo>/build). Needs fio with its nbd engine, curl.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${RINGCACHE_BIN:-$ROOT/build}
RUNTIME=20
ROUNDS=3
LIMIT=1000
RW=randread
DEPTH=16
RESERVE=""
RDEPTH=2
OUT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) RUNTIME=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --limit) LIMIT=$2; shift 2 ;;
    --rw) RW=$2; shift 2 ;;
    --depth) DEPTH=$2; shift 2 ;;
    --reserve) RESERVE=$2; shift 2 ;;
    --reserved-depth) RDEPTH=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    -h|--help) sed -n '2,27p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "qos_bench.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
for t in fio curl python3; do
  command -v "$t" > /dev/null || { echo "qos_bench.sh: needs $t" >&2; exit 1; }
done
LOCAL=$BIN/tools/ringcache-local
CTL=$BIN/tools/ctl/ringcachectl
[ -x "$LOCAL" ] && [ -x "$CTL" ] || { echo "qos_bench.sh: build $BIN first" >&2; exit 1; }
OUT=${OUT:-$(mktemp -d /tmp/qos-bench.XXXXXX)}
mkdir -p "$OUT"
# shellcheck source=../e2e/ports.sh
. "$ROOT/tests/e2e/ports.sh"
pick_base_port
NBD=$((BASE + 20)) ADMIN=$((BASE + 21)) HTTP=$((BASE + 22))
"$LOCAL" --data-dir "$OUT/data" --create-vdi free:1GiB --create-vdi limited:1GiB --create-vdi reserved:1GiB \
  --cache-nodes 2 --data-nodes 3 --ssd-size 2GiB --nbd-listen 127.0.0.1:$NBD \
  --admin-listen 127.0.0.1:$ADMIN --http-listen 127.0.0.1:$HTTP \
  --ready-file "$OUT/ready.json" > "$OUT/ringcache-local.log" 2>&1 &
SERVER=$!
# The VDIs' data (gigabytes of SSD and data node files) goes at the end; fio's JSON and the log stay.
trap 'kill $SERVER 2> /dev/null; wait $SERVER 2> /dev/null || true; rm -rf "$OUT/data"' EXIT
for _ in $(seq 1 300); do [ -s "$OUT/ready.json" ] && break; sleep 0.1; done
[ -s "$OUT/ready.json" ] || { echo "qos_bench.sh: ringcache-local did not start" >&2; exit 1; }
ctl() { "$CTL" --gateway 127.0.0.1:$ADMIN "$@"; }

# fio NAME VDI RW [QD]: a time-based run at QD (default DEPTH), 4K random, its JSON in
# $OUT/NAME.json.
fio_job() {
  fio --name="$1" --ioengine=nbd --uri="nbd://127.0.0.1:$NBD/$2" --rw="$3" --bs=4k \
    --iodepth="${4:-$DEPTH}" --size=256m --time_based --runtime="$RUNTIME" --ramp_time=2 \
    --output-format=json --output="$OUT/$1.json" > /dev/null
}
iops() {
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["jobs"][0]; print(round(j["read"]["iops"]+j["write"]["iops"]))' "$1"
}

# Both working sets written (and so cached) first, so that every run reads the same way.
for v in free limited reserved; do
  fio --name=warm --ioengine=nbd --uri="nbd://127.0.0.1:$NBD/$v" --rw=write --bs=1m \
    --size=256m --iodepth=4 > /dev/null
done

if [ -n "$RESERVE" ]; then
  SOLO="" BESIDE="" WITH="" FREE_BESIDE="" FREE_WITH=""
  for r in $(seq 1 "$ROUNDS"); do
    echo "qos_bench.sh: round $r/$ROUNDS: the reserved VDI alone (4K random read QD$RDEPTH)"
    ctl vdi set-qos reserved --none > /dev/null 2>&1 || true
    fio_job "rsolo-$r" reserved randread "$RDEPTH"
    if [ "$RESERVE" = auto ]; then
      RESERVE=$(python3 -c 'import sys; print(max(1, round(0.7 * float(sys.argv[1]))))' \
        "$(iops "$OUT/rsolo-$r.json")")
      echo "qos_bench.sh: reservation: $RESERVE IOPS (0.7x of the first solo run)"
    fi
    for mode in beside with; do
      if [ $mode = with ]; then
        ctl vdi set-qos reserved --reserve-iops "$RESERVE" > /dev/null
      fi
      echo "qos_bench.sh: round $r/$ROUNDS: beside the free VDI (QD$DEPTH), reservation: $mode"
      fio_job "free-$mode-$r" free randread &
      F1=$!
      fio_job "reserved-$mode-$r" reserved randread "$RDEPTH"
      wait $F1
    done
    SOLO+="$(iops "$OUT/rsolo-$r.json") "
    BESIDE+="$(iops "$OUT/reserved-beside-$r.json") "
    WITH+="$(iops "$OUT/reserved-with-$r.json") "
    FREE_BESIDE+="$(iops "$OUT/free-beside-$r.json") "
    FREE_WITH+="$(iops "$OUT/free-with-$r.json") "
  done
  short=$(curl -s "http://127.0.0.1:$HTTP/metrics" |
    awk '/^ringcache_gateway_qos_reservation_short_windows_total\{vdi="reserved"\}/ {print $2}')
  python3 - "$SOLO" "$BESIDE" "$WITH" "$FREE_BESIDE" "$FREE_WITH" "$RESERVE" "${short:-0}" << 'PY'
import statistics, sys
names = ("reserved VDI alone", "reserved, no reservation", "reserved, with reservation",
         "free VDI beside, no reservation", "free VDI beside, with reservation")
runs = [[float(x) for x in a.split()] for a in sys.argv[1:6]]
for name, v in zip(names, runs):
    print(f"{name:34s} runs: {' '.join(f'{x:.0f}' for x in v)}")
solo, beside, with_, free_beside, free_with = (statistics.median(v) for v in runs)
reserve, short = float(sys.argv[6]), float(sys.argv[7])
print(f"{'medians':34s}{'IOPS':>10s}  ratio")
print(f"{'reserved VDI alone':34s}{solo:10.0f}")
print(f"{'reserved VDI, no reservation':34s}{beside:10.0f}  {beside / reserve:.2f}x of {reserve:.0f}")
print(f"{'reserved VDI, with reservation':34s}{with_:10.0f}  {with_ / reserve:.2f}x of its "
      f"reservation {reserve:.0f} (goal >= 0.90x)")
print(f"{'free VDI, no reservation':34s}{free_beside:10.0f}")
print(f"{'free VDI, with reservation':34s}{free_with:10.0f}  {free_with / free_beside:.2f}x")
print(f"windows the reserved VDI was short (250 ms each): {short:.0f}")
PY
  echo "qos_bench.sh: fio JSON and the server log in $OUT"
  exit 0
fi

ctl vdi set-qos limited --iops "$LIMIT" --burst-ms 200
SOLO="" FREE="" LIMITED=""
for r in $(seq 1 "$ROUNDS"); do
  echo "qos_bench.sh: round $r/$ROUNDS: the free VDI alone (4K random read QD$DEPTH, ${RUNTIME}s)"
  fio_job "solo-$r" free randread
  echo "qos_bench.sh: round $r/$ROUNDS: both at once; limited VDI: 4K $RW QD$DEPTH, $LIMIT IOPS"
  fio_job "shared-free-$r" free randread &
  F1=$!
  fio_job "shared-limited-$r" limited "$RW"
  wait $F1
  SOLO+="$(iops "$OUT/solo-$r.json") "
  FREE+="$(iops "$OUT/shared-free-$r.json") "
  LIMITED+="$(iops "$OUT/shared-limited-$r.json") "
done
delayed=$(curl -s "http://127.0.0.1:$HTTP/metrics" |
  awk '/^ringcache_gateway_qos_delayed_requests_total\{vdi="limited"\}/ {print $2}')

python3 - "$SOLO" "$FREE" "$LIMITED" "$LIMIT" "${delayed:-0}" << 'PY'
import statistics, sys
runs = [[float(x) for x in a.split()] for a in sys.argv[1:4]]
for name, v in zip(("free VDI alone", "free VDI beside", "limited VDI"), runs):
    print(f"{name:16s} runs: {' '.join(f'{x:.0f}' for x in v)}")
solo, free, limited = (statistics.median(v) for v in runs)
limit, delayed = float(sys.argv[4]), float(sys.argv[5])
print(f"{'medians':28s}{'IOPS':>10s}  ratio")
print(f"{'free VDI alone':28s}{solo:10.0f}")
print(f"{'free VDI beside the limited':28s}{free:10.0f}  {free / solo:.2f}x of alone (goal >= 0.90x)")
print(f"{'limited VDI':28s}{limited:10.0f}  {limited / limit:.2f}x of its limit {limit:.0f} "
      f"(goal 0.90-1.10x)")
print(f"requests of the limited VDI held back by the gateway: {delayed:.0f}")
PY
echo "qos_bench.sh: fio JSON and the server log in $OUT"
