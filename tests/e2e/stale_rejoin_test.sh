#!/usr/bin/env bash
# A cache node that comes back after its removal must not serve (or destage) the data it held
# before it left (docs/design.md §7, membership/README.md): cluster mode with etcd, separate
# processes on 127.0.0.1 started by `deploy/cluster.sh up --etcd`: 3 cache nodes, 3 data nodes,
# replication 2, one 64 MiB VDI `t` (16 objects of 4 MiB, so every cache node owns some).
#  1. qemu-io writes 0x11 over the whole VDI (write-back: partly dirty in the cache nodes).
#  2. Cache node 1 is killed with SIGKILL: its lease expires, the gateway takes it out of the
#     ring and replays its write-back log from the data nodes.
#  3. qemu-io writes 0x22 over the whole VDI (node 1's objects now go to their next owners);
#     `ringcachectl flush --wait` destages it home.
#  4. Cache node 1 starts again (with the SSD state it had when it was killed), registers, and
#     rejoins the ring. The VDI is read back with `qemu-img convert`: every 4 KiB block must be
#     0x22; then again after another `ringcachectl flush --wait`.
# Modes (second argument):
#   after-removed  (default) node 1 restarts after step 3, once `node list` shows it removed.
#   during-replay  node 1 restarts while its removal is running: right after the gateway logs
#                  that it replays node 1's write-back log; step 3 runs once the removal is done
#                  (the gateway logs "removed"), the rejoin follows by itself.
# Prints `stale_rejoin: mode=M read=R blocks=16384 stale=N ...` for each read-back (R is
# after-rejoin, then after-flush); fails if any block is not 0x22. Waits are bounded by a
# wall-clock deadline (DEADLINE seconds, default 420), nothing asserts on speed.
# Exits 77 (skipped) when etcd, etcdctl, qemu-io or qemu-img is not installed. KEEP=1 keeps the
# work directory (cluster logs, read-back images).
#
#   tests/e2e/stale_rejoin_test.sh BUILD_DIR [after-removed|during-replay]
set -euo pipefail

for tool in etcd etcdctl qemu-io qemu-img; do
  command -v "$tool" > /dev/null || { echo "$tool not installed: skipping"; exit 77; }
done
BUILD=$(cd "${1:?usage: stale_rejoin_test.sh BUILD_DIR [after-removed|during-replay]}" && pwd)
MODE=${2:-after-removed}
case "$MODE" in
  after-removed|during-replay) ;;
  *) echo "stale_rejoin_test.sh: unknown mode $MODE (after-removed or during-replay)" >&2; exit 2 ;;
esac
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-stale.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own, below the ephemeral range
START=$(date +%s)
DEADLINE=$((START + ${DEADLINE:-420}))
GWLOG=$WORK/cluster/logs/gateway-1.log
VDI_BYTES=$((64 * 1024 * 1024))

log() { echo "[stale-rejoin:$MODE] $(date +%T) $*"; }
fail() {
  echo "[stale-rejoin:$MODE] FAIL: $*" >&2
  for f in gateway-1 cachenode-1; do
    echo "--- $f.log (tail)" >&2
    tail -n 30 "$WORK/cluster/logs/$f.log" >&2 || true
  done
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
cleanup() {
  set +e
  cluster down > /dev/null 2>&1  # stops etcd too
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
NBD="nbd://127.0.0.1:$((BASE+9))/t"
source "$(dirname "$0")/node_state.sh"  # json_field, node_state, state_is
in_gwlog() { grep -qF "$1" "$GWLOG"; }
source "$(dirname "$0")/wait_for.sh"  # wait_for SECONDS WHAT COMMAND...
# A wait ends early, failed, at the test's deadline.
deadline_guard() {
  local now
  printf -v now '%(%s)T' -1
  [ "$now" -lt "$DEADLINE" ] || fail "the test's deadline passed waiting for: $1"
}
WAIT_FOR_GUARD=deadline_guard
write_all() {  # pattern byte
  local out
  out=$(qemu-io -f raw -c "write -P $1 0 64M" "$NBD" 2>&1) || fail "write $1: $out"
  if echo "$out" | grep -qi "failed\|error"; then fail "write $1: $out"; fi
}
flush_wait() { "${CTL[@]}" flush --wait > "$WORK/flush.log" 2>&1 || { cat "$WORK/flush.log"; fail "flush --wait"; }; }
# read_back NAME: reads the whole VDI with qemu-img convert, prints the summary line, and leaves
# the number of blocks that are not all 0x22 in STALE.
read_back() {
  local img=$WORK/read-$1.raw
  qemu-img convert -f raw -O raw "$NBD" "$img" > "$WORK/convert.log" 2>&1 ||
    { cat "$WORK/convert.log"; fail "qemu-img convert ($1)"; }
  STALE=$(python3 - "$img" "$MODE" "$1" "$WORK/summary-$1.txt" << 'PY'
import sys
path, mode, name, summary = sys.argv[1:5]
data = open(path, "rb").read()
bs, obj = 4096, 4 << 20
want, old = b"\x22" * bs, b"\x11" * bs
blocks = len(data) // bs
stale = old_n = 0
per_obj = {}
for i in range(blocks):
    b = data[i * bs:(i + 1) * bs]
    if b != want:
        stale += 1
        old_n += b == old
        o = i * bs // obj
        per_obj[o] = per_obj.get(o, 0) + 1
objs = " ".join(f"{o}:{n}" for o, n in sorted(per_obj.items())) or "-"
print(f"stale_rejoin: mode={mode} read={name} blocks={blocks} stale={stale} "
      f"(0x11: {old_n}, other: {stale - old_n}; stale blocks per 4 MiB object: {objs})",
      file=open(summary, "w"))
print(stale)
PY
  )
  cat "$WORK/summary-$1.txt"
  [ "$(stat -c %s "$img")" = "$VDI_BYTES" ] || fail "read back $(stat -c %s "$img") bytes, want $VDI_BYTES"
  [ "${KEEP:-0}" = 1 ] || rm -f "$img"
}

# 1. The cluster and the first pattern.
cluster up --etcd --base-port "$BASE" --cache-nodes 3 --data-nodes 3 --replication 2 \
  --create-vdi t:64M > "$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "cluster up --etcd"; }
grep -q "^etcd: up" "$WORK/up.log" || fail "cluster.sh did not start etcd"
log "cluster up on base port $BASE, etcd on 127.0.0.1:$((BASE-1))"
wait_for 30 "cache node 1 up in node list" state_is 1 up
write_all 0x11
log "0x11 written over the whole VDI; dirty bytes in the cache nodes:" \
  "$("${CTL[@]}" --json status | json_field dirty_bytes)"

# 2. Kill cache node 1; 3. write 0x22 while it is out, and flush; 4. restart it.
cluster kill cachenode 1 > /dev/null || fail "kill cache node 1"
log "cache node 1 killed"
if [ "$MODE" = after-removed ]; then
  wait_for 90 "the gateway to take cache node 1 out of the ring (node list: removed)" state_is 1 removed
  log "node list: cache node 1 removed (lease expired, its log replayed)"
  write_all 0x22
  flush_wait
  log "0x22 written over the whole VDI and flushed"
  cluster start cachenode 1 > /dev/null || fail "restart cache node 1"
  log "cache node 1 restarted"
else
  wait_for 90 "the gateway to start replaying cache node 1's log" \
    in_gwlog "remove cache node 1: node does not answer: replaying its write-back log"
  log "the gateway replays cache node 1's log: restarting it now"
  cluster start cachenode 1 > /dev/null || fail "restart cache node 1"
  if in_gwlog "remove cache node 1: removed"; then
    log "note: the removal had finished by the time cache node 1 was ready"
  else
    log "cache node 1 ready while its removal still runs"
  fi
  wait_for 120 "the removal of cache node 1 to finish (gateway log: removed)" \
    in_gwlog "remove cache node 1: removed"
  log "removal done (node list now: $(node_state 1))"
  write_all 0x22
  flush_wait
  log "0x22 written over the whole VDI and flushed"
fi

# 5. Rejoin, then read back.
wait_for 120 "cache node 1 to rejoin the ring (node list: up)" state_is 1 up
in_gwlog "add cache node 1: joined" || fail "node list shows cache node 1 up, but the gateway did not log its rejoin"
log "cache node 1 rejoined (epoch $("${CTL[@]}" --json status | json_field epoch)); settling 3 s"
sleep 3
read_back after-rejoin
stale1=$STALE
flush_wait
read_back after-flush
stale2=$STALE
log "total $(( $(date +%s) - START )) s"
if [ "$stale1" != 0 ] || [ "$stale2" != 0 ]; then
  fail "blocks not 0x22 after cache node 1 rejoined: $stale1 (after the rejoin), $stale2 (after another flush)"
fi
log "PASS"
