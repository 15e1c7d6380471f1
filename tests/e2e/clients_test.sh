#!/usr/bin/env bash
# End-to-end test with real clients (qemu-img, qemu-io, nbdinfo, nbdcopy, fio, promtool) against
# ringcache in single-process mode (MODE=local: ringcache-local) or as separate processes
# (MODE=cluster: deploy/cluster.sh). Starts what it needs on 127.0.0.1 and removes it after.
#
#   tests/e2e/clients_test.sh local|cluster BUILD_DIR
set -euo pipefail

MODE=${1:?usage: clients_test.sh local|cluster BUILD_DIR}
BUILD=$(cd "${2:?usage: clients_test.sh local|cluster BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-e2e-$MODE.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own, below the ephemeral range
PIDS=()

log() { echo "[$MODE] $*"; }
fail() { echo "[$MODE] FAIL: $*" >&2; exit 1; }

cleanup() {
  set +e
  if [ "$MODE" = cluster ]; then
    RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" down --dir "$WORK/cluster" > /dev/null
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

json_field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }

# --- start -----------------------------------------------------------------------------------
start_local() {
  rm -f "$WORK/ready.json"
  "$BUILD/tools/ringcache-local" --data-dir "$WORK/data" --create-vdi disk:512MiB \
    --create-vdi second:64MiB --nbd-listen "127.0.0.1:$((BASE+1))" \
    --admin-listen "127.0.0.1:$((BASE+2))" --http-listen "127.0.0.1:$((BASE+3))" \
    --ssd-size 384MiB --ram-size 32MiB --ready-file "$WORK/ready.json" >> "$WORK/local.log" 2>&1 &
  LOCAL_PID=$!
  PIDS+=("$LOCAL_PID")
  for _ in $(seq 1 300); do
    [ -f "$WORK/ready.json" ] && break
    kill -0 "$LOCAL_PID" 2>/dev/null || { tail "$WORK/local.log"; fail "ringcache-local died"; }
    sleep 0.1
  done
  [ -f "$WORK/ready.json" ] || fail "ringcache-local not ready"
  NBD="nbd://127.0.0.1:$((BASE+1))"
  METRICS_PORTS=("$((BASE+3))")
}

cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }

start_cluster() {
  cluster up --base-port "$BASE" --cache-nodes 3 --data-nodes 3 --ssd-size 256MiB \
    --ram-size 16MiB --create-vdi disk:512MiB --create-vdi second:64MiB > "$WORK/up.log" 2>&1 ||
    { cat "$WORK/up.log"; tail -n 20 "$WORK"/cluster/logs/*.log; fail "cluster up"; }
  NBD="nbd://127.0.0.1:$((BASE+9))"
  METRICS_PORTS=("$((BASE+11))")
  for i in 1 2 3; do METRICS_PORTS+=("$((BASE+200+i))" "$((BASE+400+i))"); done
}

if [ "$MODE" = local ]; then start_local; else start_cluster; fi
DISK="$NBD/disk"
# The first 256 MiB of the export (what qemu-img convert wrote below) as an image of its own.
DISK_HEAD='json:{"driver": "raw", "size": 268435456, "file": {"driver": "nbd", "export": "disk",
  "server": {"type": "inet", "host": "127.0.0.1", "port": "'${NBD##*:}'"}}}'
log "serving $DISK"

# --- nbdinfo ---------------------------------------------------------------------------------
nbdinfo --json "$DISK" > "$WORK/info.json"
python3 - "$WORK/info.json" <<'PY' || fail "nbdinfo flags"
import json, sys
e = json.load(open(sys.argv[1]))["exports"][0]
for k in ("can_flush", "can_fua", "can_trim", "can_zero", "can_multi_conn"):
    assert e[k] is True, k
assert e["block_size_minimum"] == 512 and e["block_size_preferred"] == 4096, e
assert e["block_size_maximum"] >= 1 << 20, e
assert e["export-size"] == 512 << 20, e
PY
nbdinfo --list "$NBD" > "$WORK/list.txt"
grep -q 'export="disk"' "$WORK/list.txt" && grep -q 'export="second"' "$WORK/list.txt" ||
  fail "nbdinfo --list: $(cat "$WORK/list.txt")"
if nbdinfo "$NBD/nosuch" > /dev/null 2>&1; then fail "unknown export accepted"; fi
log "nbdinfo ok"

# --- holes before anything is written --------------------------------------------------------
qemu-img map --output=json -f raw "$DISK" > "$WORK/map0.json"
python3 - "$WORK/map0.json" <<'PY' || fail "fresh VDI should map as one hole"
import json, sys
m = json.load(open(sys.argv[1]))
assert all(x["data"] is False and x["zero"] is True for x in m), m
assert sum(x["length"] for x in m) == 512 << 20
PY

# --- qemu-io patterns at unaligned offsets and across object boundaries (4 MiB objects) ---------
QIO=(qemu-io -f raw)
"${QIO[@]}" -c "write -P 0x41 1000 9000" -c "write -P 0x42 4190000 20000" \
  -c "write -P 0x43 8388000 1" -c "write -P 0x44 33554431 3" "$DISK" > /dev/null
"${QIO[@]}" -c "read -P 0x41 1000 9000" -c "read -P 0x42 4190000 20000" \
  -c "read -P 0x43 8388000 1" -c "read -P 0x44 33554431 3" -c "read -P 0 0 1000" \
  -c "read -P 0 10000 100" -c "read -P 0 4210000 4096" "$DISK" > "$WORK/qio.txt" ||
  { cat "$WORK/qio.txt"; fail "qemu-io pattern"; }
grep -q "Pattern verification failed" "$WORK/qio.txt" && { cat "$WORK/qio.txt"; fail "pattern"; }
log "qemu-io ok"

# --- qemu-img convert in and out, compare ------------------------------------------------------
head -c 256M /dev/urandom > "$WORK/in.raw"
qemu-img convert -n -f raw -O raw "$WORK/in.raw" "$DISK"
qemu-img convert -f raw -O raw "$DISK" "$WORK/out.raw"
truncate -s 256M "$WORK/out.raw"
qemu-img compare -q -f raw -F raw "$WORK/in.raw" "$WORK/out.raw" || fail "qemu-img compare"
log "qemu-img convert/compare ok"

# --- holes: written range is data, the never-written tail is a hole ---------------------------
qemu-img map --output=json -f raw "$DISK" > "$WORK/map1.json"
python3 - "$WORK/map1.json" <<'PY' || fail "qemu-img map holes"
import json, sys
m = json.load(open(sys.argv[1]))
def at(off):
    return next(x for x in m if x["start"] <= off < x["start"] + x["length"])
assert at(0)["data"] is True
assert at(100 << 20)["data"] is True
tail = at(400 << 20)
assert tail["data"] is False and tail["zero"] is True, tail
PY
log "qemu-img map ok"

# --- nbdcopy with several connections, in and out ------------------------------------------
head -c 64M /dev/urandom > "$WORK/copy.raw"
nbdcopy --connections=4 "$WORK/copy.raw" "$NBD/second"
nbdcopy --connections=4 "$NBD/second" "$WORK/copy.out"
[ "$(sha256sum < "$WORK/copy.raw")" = "$(sha256sum < "$WORK/copy.out")" ] || fail "nbdcopy checksums"
log "nbdcopy ok"

# --- fio with verify ------------------------------------------------------------------------
fio --name=verify --ioengine=nbd --uri="$DISK" --rw=randwrite --bs=4k --iodepth=32 \
  --numjobs=2 --size=32M --offset=300M --offset_increment=64M --verify=crc32c \
  --verify_fatal=1 --do_verify=1 --verify_state_save=0 --group_reporting --output="$WORK/fio.txt" ||
  { cat "$WORK/fio.txt"; fail "fio verify"; }
grep -q "err= 0" "$WORK/fio.txt" || { cat "$WORK/fio.txt"; fail "fio errors"; }
log "fio verify ok"

# --- metrics on every process ---------------------------------------------------------------
for port in "${METRICS_PORTS[@]}"; do
  curl -sf "http://127.0.0.1:$port/metrics" > "$WORK/metrics.txt" || fail "metrics on $port"
  promtool check metrics < "$WORK/metrics.txt" > "$WORK/promtool.txt" 2>&1 ||
    { cat "$WORK/promtool.txt"; fail "promtool on port $port"; }
  out=$(curl -sf "http://127.0.0.1:$port/healthz") || fail "healthz on $port"
  grep -q "^ringcache_healthy 1" <<< "$out" || fail "healthz on $port: $out"
done
grep -q 'ringcache_nbd_requests_total' "$WORK/metrics.txt" || [ "$MODE" = cluster ] ||
  fail "NBD metrics missing"
log "metrics ok (${#METRICS_PORTS[@]} processes)"

# --- kill -9 and restart; every acknowledged write reads back -------------------------------
# Acknowledged writes to check after each kill: unaligned patterns past the converted image
# (one across the 264 MiB object boundary), plus the converted image and the nbdcopy'd VDI.
"${QIO[@]}" -c "write -P 0x61 $(( (260 << 20) + 1000 )) 9000" \
  -c "write -P 0x62 $(( (264 << 20) - 5000 )) 20000" "$DISK" > /dev/null
verify_patterns() {
  "${QIO[@]}" -c "read -P 0x61 $(( (260 << 20) + 1000 )) 9000" \
    -c "read -P 0x62 $(( (264 << 20) - 5000 )) 20000" "$DISK" > "$WORK/qio2.txt" 2>&1 || return 1
  ! grep -q "Pattern verification failed" "$WORK/qio2.txt" || return 1
  # The converted image against the export's first 256 MiB, read straight from the server: a
  # copy into a file first wrote (and faulted in) 256 MiB of memory each time, six times.
  qemu-img compare -q -f raw "$WORK/in.raw" "$DISK_HEAD" || return 1
  nbdcopy "$NBD/second" "$WORK/copy.out2" || return 1
  [ "$(sha256sum < "$WORK/copy.raw")" = "$(sha256sum < "$WORK/copy.out2")" ]
}
if [ "$MODE" = local ]; then
  kill -9 "$LOCAL_PID"
  wait "$LOCAL_PID" 2>/dev/null || true
  start_local
  verify_patterns || { cat "$WORK/qio2.txt"; fail "data lost after kill -9 of ringcache-local"; }
  log "kill -9 ringcache-local: all acknowledged writes read back"
else
  for victim in datanode-1 cachenode-1 cachenode-2 cachenode-3 gateway-1 datanode-3; do
    # A fresh acknowledged write right before the kill.
    "${QIO[@]}" -c "write -P 0x55 $((270 << 20)) 65536" "$DISK" > /dev/null
    # cluster.sh kill: kill -9, then wait until every thread is gone (a restart before that finds
    # the data node's RocksDB lock or the ports still held).
    cluster kill "${victim%-*}" "${victim##*-}" > /dev/null
    cluster up > "$WORK/up2.log" 2>&1 || { cat "$WORK/up2.log"; fail "restart after killing $victim"; }
    verify_patterns || { cat "$WORK/qio2.txt"; fail "data lost after kill -9 of $victim"; }
    grep -q "verification failed" <<< "$("${QIO[@]}" -c "read -P 0x55 $((270 << 20)) 65536" "$DISK")" &&
      fail "fresh write lost after kill -9 of $victim"
    log "kill -9 $victim: all acknowledged writes read back"
  done
fi
log "PASS"
