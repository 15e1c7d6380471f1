#!/usr/bin/env bash
# A cache node's SSD replaced (docs/durability.md, "Incarnations"), end to end on separate
# processes started by deploy/cluster.sh: 3 cache nodes, 3 data nodes, replication 3, one 64 MiB
# VDI.
#  1. The VDI is written with 0x11 and flushed home, then rewritten with 0x22: every block is
#     dirty in a cache node and in its log records on the data nodes.
#  2. Cache node 2 is killed -9, its directory (SSD slot file, sequence mark, VDI table) removed:
#     a new disk. It starts again: a new store incarnation. It must replay its old incarnation's
#     log home before it serves, so every block reads back 0x22, never 0x11.
#  3. 0x33 is written and flushed (the new incarnation's sequences must order after the old
#     one's: a destage the data nodes refused as older would fail the flush), then rewritten with
#     0x44, and node 2's disk is replaced once more: every block reads 0x44.
#  3b. The old disk put back (docs/durability.md, "Incarnations"): 0x4c written and flushed, then
#     cache node 2 is started on the disk it had before the second replacement (still holding
#     0x44 as dirty blocks). It must refuse to start (the data nodes record its newer store as
#     the node's current one); started again on its current disk, every block reads 0x4c.
#  4. A data node's disk replaced (docs/durability.md, "Absent is not zero"): 0x55 flushed home,
#     the VDI switched to passthrough (reads go to the data nodes), data node 1 killed, its
#     directory removed, started again. Every read returns 0x55 at once (the new store's
#     "absent" is not taken for zeros); the coordinator registers the VDI there, incomplete,
#     and refills it from the other replicas. Then data nodes 2 and 3 are killed: data node 1
#     alone still returns 0x55 for every block.
#
#   tests/e2e/disk_loss_test.sh BUILD_DIR [static|etcd]
set -euo pipefail

BUILD=$(cd "${1:?usage: disk_loss_test.sh BUILD_DIR [static|etcd]}" && pwd)
MODE=${2:-static}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-diskloss.XXXXXX")
source "$(dirname "$0")/ports.sh"

log() { echo "[disk-loss $MODE] $*"; }
fail() {
  echo "[disk-loss $MODE] FAIL: $*" >&2
  tail -n 20 "$WORK"/cluster/logs/cachenode-2.log >&2 || true
  tail -n 20 "$WORK"/cluster/logs/gateway-1.log >&2 || true
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
cleanup() {
  set +e
  cluster down > /dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

command -v qemu-io > /dev/null || { echo "qemu-io not installed: skipping"; exit 77; }
UP=()
case $MODE in
  static) ;;
  etcd)
    for t in etcd etcdctl; do
      command -v $t > /dev/null || { echo "$t not installed: skipping"; exit 77; }
    done
    UP=(--etcd) ;;
  *) echo "usage: disk_loss_test.sh BUILD_DIR [static|etcd]" >&2; exit 2 ;;
esac
pick_base_port  # sets BASE: a port slot of its own, below the ephemeral range

CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
NBD="nbd://127.0.0.1:$((BASE+9))/disk"
qio() { qemu-io -f raw "$NBD" -c "$1"; }

cluster up "${UP[@]}" --base-port "$BASE" --cache-nodes 3 --data-nodes 3 --replication 3 \
  --ssd-size 128MiB --ram-size 8MiB --create-vdi disk:64MiB > "$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; fail "cluster up"; }
log "cluster up on base port $BASE"

dirty_bytes() {
  "${CTL[@]}" --json status |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["dirty_bytes"])'
}
write_all() {  # PATTERN
  qio "write -P $1 0 64M" > /dev/null || fail "write -P $1"
}
check_all() {  # PATTERN WHAT
  local out
  out=$(qio "read -P $1 0 64M" 2>&1) || fail "$2: read failed: $out"
  if echo "$out" | grep -q "Pattern verification failed"; then fail "$2: $out"; fi
}
# Kills cache node 2, removes its directory (a new, empty disk; moved to SAVE_TO when given) and
# starts it again.
replace_disk() {  # [SAVE_TO]
  local dir="$WORK/cluster/state/cachenode-2"
  [ -d "$dir" ] || fail "no state directory $dir"
  cluster kill cachenode 2 > /dev/null
  if [ -n "${1:-}" ]; then mv "$dir" "$1"; else rm -rf "$dir"; fi
  cluster start cachenode 2 > /dev/null || fail "cache node 2 does not start on a new disk"
  grep -q "new store incarnation" "$WORK/cluster/logs/cachenode-2.log" ||
    fail "cache node 2 did not notice its new disk"
}
# Waits until the gateway routes to cache node 2 again (cluster mode: it rejoined).
settle() {
  if [ "$MODE" = etcd ]; then
    for _ in $(seq 1 120); do
      if "${CTL[@]}" --json node list 2> /dev/null | python3 -c '
import json, sys
nodes = json.load(sys.stdin)
nodes = nodes["nodes"] if isinstance(nodes, dict) else nodes
st = {(n["role"], int(n["id"])): n.get("state") for n in nodes}
sys.exit(0 if st.get(("cachenode", 2)) == "up" else 1)'; then return 0; fi
      sleep 0.5
    done
    fail "cache node 2 did not come back up"
  fi
}

write_all 0x11
"${CTL[@]}" flush > /dev/null || fail "flush after 0x11"
write_all 0x22
d=$(dirty_bytes)
log "0x11 flushed home, 0x22 written: $d dirty bytes in the cache nodes"
[ "$d" -gt 0 ] || fail "expected dirty data before the disk is replaced"

replace_disk
settle
check_all 0x22 "after cache node 2's disk was replaced"
n=$(grep -c "old incarnation's log is home" "$WORK/cluster/logs/cachenode-2.log" || true)
[ "$n" -ge 1 ] || fail "cache node 2 did not replay its old log"
log "new disk on cache node 2: every block reads 0x22"

write_all 0x33
"${CTL[@]}" flush > /dev/null || fail "flush after 0x33 (the new incarnation's writes refused?)"
check_all 0x33 "after 0x33 was flushed"
write_all 0x44
replace_disk "$WORK/old-disk"
settle
check_all 0x44 "after cache node 2's second new disk"
log "second new disk: every block reads 0x44"
"${CTL[@]}" flush > /dev/null || fail "final flush"
check_all 0x44 "after the final flush"

write_all 0x4c
"${CTL[@]}" flush > /dev/null || fail "flush after 0x4c"
cur="$WORK/current-disk"
cluster kill cachenode 2 > /dev/null
mv "$WORK/cluster/state/cachenode-2" "$cur"
mv "$WORK/old-disk" "$WORK/cluster/state/cachenode-2"
if cluster start cachenode 2 > "$WORK/stale-start.log" 2>&1; then
  fail "cache node 2 started on its old disk (stale blocks of 0x44)"
fi
grep -q "records incarnation" "$WORK/cluster/logs/cachenode-2.log" ||
  { cat "$WORK/stale-start.log"; fail "cache node 2 did not say why its old disk is refused"; }
log "old disk put back: cache node 2 refuses to start on it"
rm -rf "$WORK/cluster/state/cachenode-2"
mv "$cur" "$WORK/cluster/state/cachenode-2"
cluster start cachenode 2 > /dev/null || fail "cache node 2 does not start on its current disk"
settle
check_all 0x4c "after cache node 2 came back on its current disk"
log "current disk back: every block reads 0x4c"

write_all 0x55
"${CTL[@]}" vdi set-mode disk passthrough > /dev/null || fail "set-mode passthrough"
check_all 0x55 "in passthrough"
dn1="$WORK/cluster/state/datanode-1"
[ -d "$dn1" ] || fail "no state directory $dn1"
cluster kill datanode 1 > /dev/null
rm -rf "$dn1"
cluster start datanode 1 > /dev/null || fail "data node 1 does not start on a new disk"
check_all 0x55 "right after data node 1's disk was replaced"
log "new disk on data node 1: every block still reads 0x55"
for _ in $(seq 1 240); do
  if grep -q "data node 1: refilled" "$WORK"/cluster/logs/gateway-*.log; then break; fi
  sleep 0.5
done
grep -h "data node 1: refilled" "$WORK"/cluster/logs/gateway-*.log ||
  fail "data node 1 was not refilled"
cluster kill datanode 2 3 > /dev/null
check_all 0x55 "from data node 1 alone (refilled)"
log "data nodes 2 and 3 down: data node 1 alone returns 0x55 for every block"
log "PASS"
