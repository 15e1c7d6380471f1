#!/usr/bin/env bash
# A data node that never comes back (docs/durability.md, "A data node that never comes back"), end
# to end on separate processes started by deploy/cluster.sh: 3 cache nodes, 3 data nodes,
# replication 2, one 64 MiB VDI.
#  1. The VDI is written with 0x11 and flushed home; data node 1 is killed for good; the second
#     half is rewritten with 0x22 (acknowledged: the log records go to the data nodes left).
#  2. Data node 1 goes out: static mode by itself after the down-out interval (5 s here), cluster
#     mode by `ringcachectl datanode out 1`. Its replicas are made again on 2 and 3, `flush`
#     and `vdi set-mode passthrough` work again (destage no longer waits for it) and `node list`
#     shows it out.
#  3. Data node 2 dies too: every block still reads back (0x11, then 0x22) from data node 3.
#  4. Data nodes 2 and 1 start again (1 with its stale store); `datanode in 1` puts 1 back: it is
#     cleared and joins. With data node 3 killed, every block reads back from 1 and 2: a stale
#     copy kept on 1 would return 0x11 for the second half.
#
#   tests/e2e/datanode_out_test.sh BUILD_DIR [static|etcd]
set -euo pipefail

BUILD=$(cd "${1:?usage: datanode_out_test.sh BUILD_DIR [static|etcd]}" && pwd)
MODE=${2:-static}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-dnout.XXXXXX")
source "$(dirname "$0")/ports.sh"

log() { echo "[datanode-out $MODE] $*"; }
fail() {
  echo "[datanode-out $MODE] FAIL: $*" >&2
  tail -n 30 "$WORK"/cluster/logs/gateway-1.log >&2 || true
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
  static) UP=(--datanode-down-out 5) ;;
  etcd)
    for t in etcd etcdctl; do
      command -v $t > /dev/null || { echo "$t not installed: skipping"; exit 77; }
    done
    UP=(--etcd) ;;
  *) echo "usage: datanode_out_test.sh BUILD_DIR [static|etcd]" >&2; exit 2 ;;
esac
pick_base_port  # sets BASE: a port slot of its own, below the ephemeral range

CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
NBD="nbd://127.0.0.1:$((BASE+9))/disk"
qio() { qemu-io -f raw "$NBD" -c "$1"; }
check() {  # PATTERN OFFSET LENGTH WHAT
  local out
  out=$(qio "read -P $1 $2 $3" 2>&1) || fail "$4: read failed: $out"
  if echo "$out" | grep -q "Pattern verification failed"; then fail "$4: $out"; fi
}
check_all() { check 0x11 0 32M "$1 (first half)"; check 0x22 32M 32M "$1 (second half)"; }
source "$(dirname "$0")/node_state.sh"  # rebalance: "idle 2,3 1"
wait_rebalance() {  # EXPECTED WHAT
  local now=""
  for _ in $(seq 1 240); do
    now=$(rebalance || true)
    [ "$now" = "$1" ] && return 0
    sleep 0.5
  done
  fail "$2: the rebalance shows '$now', expected '$1'"
}

cluster up "${UP[@]}" --base-port "$BASE" --cache-nodes 3 --data-nodes 3 --replication 2 \
  --ssd-size 128MiB --ram-size 8MiB --create-vdi disk:64MiB > "$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; fail "cluster up"; }
log "cluster up on base port $BASE"

qio "write -P 0x11 0 64M" > /dev/null || fail "write 0x11"
"${CTL[@]}" flush > /dev/null || fail "flush after 0x11"
cluster kill datanode 1 > /dev/null
qio "write -P 0x22 32M 32M" > /dev/null || fail "write 0x22 with data node 1 down"
log "0x11 flushed home, data node 1 killed, second half rewritten with 0x22"

if [ "$MODE" = etcd ]; then
  out=$("${CTL[@]}" datanode out 1) || fail "datanode out 1"
  echo "$out" | grep -q "goes out" || fail "datanode out 1 said: $out"
fi
wait_rebalance "idle 2,3 1" "data node 1 out"
grep -h "data nodes 1 go out" "$WORK"/cluster/logs/gateway-*.log | head -1
"${CTL[@]}" node list | grep -E "^datanode +1 .* out *$" > /dev/null ||
  fail "node list does not show data node 1 out: $("${CTL[@]}" node list)"
"${CTL[@]}" flush > /dev/null || fail "flush with data node 1 out"
"${CTL[@]}" vdi set-mode disk passthrough > /dev/null || fail "set-mode passthrough"
check_all "data node 1 out"
log "data node 1 out: replicas made again on 2 and 3, flush and passthrough work"

cluster kill datanode 2 > /dev/null
check_all "data node 3 alone"
log "data node 2 down too: data node 3 alone returns every block"

cluster start datanode 2 > /dev/null || fail "data node 2 does not start"
cluster start datanode 1 > /dev/null || fail "data node 1 does not start (stale store)"
out=$("${CTL[@]}" datanode in 1) || fail "datanode in 1"
log "$out"
wait_rebalance "idle 1,2,3 " "data node 1 in again"
grep -q "data node 1: clearing the store" "$WORK/cluster/logs/datanode-1.log" ||
  fail "data node 1 was not cleared before it joined"
cluster kill datanode 3 > /dev/null
check_all "data nodes 1 (back in) and 2"
log "data node 1 back in (cleared, refilled); with data node 3 down every block reads back"
log "PASS"
