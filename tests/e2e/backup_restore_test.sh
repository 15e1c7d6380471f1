#!/usr/bin/env bash
# etcd lost and brought back from a backup (issue 34, docs/upgrades.md "Backup and restore"), on a
# `deploy/cluster.sh up --etcd` cluster (4 data nodes, 3 cache nodes, a gateway):
#  1. `ringcachectl cluster finalize` raises the feature level to 3 (etcd's values from then on
#     are versioned messages beside the text written before: docs/upgrades.md "What etcd
#     holds"). VDIs `disk` and `gone` are written; `ringcachectl backup DIR` saves etcd's
#     snapshot and a manifest (etcdctl checks the snapshot).
#  2. After the backup the cluster moves on: `disk` is written again and grown, VDI `later` is
#     created and written, `gone` is deleted and created again (a new id), the gateway restarts
#     (a new coordinator term), a cache node is killed and rejoins (new cache ring epochs,
#     control steps of the new term) and data node 4 is taken out (a new data ring; its replicas
#     made again on 1-3). Then `disk` is written once more: data node 4 does not get these
#     writes.
#  3. etcd is lost: the gateway stopped, etcd killed, its data directory removed, the backup's
#     snapshot restored with `etcdctl snapshot restore`, etcd started on it.
#  4. `ringcachectl restore DIR` must find what the nodes did after the backup: `later` added
#     back, `disk` resized, the old `gone` removed and the new one added, the data ring (node 4
#     out) taken from the data nodes, the cache ring's epoch and etcd's revision raised, each
#     written as a message (the snapshot's level is 3).
#  5. The nodes restart, the gateway starts: the last writes read back, `later` reads back, and
#     a new VDI gets an id of its own.
# Exits 77 (skipped) when etcd, etcdctl or qemu-io is not installed.
#
#   tests/e2e/backup_restore_test.sh BUILD_DIR
set -euo pipefail

for tool in etcd etcdctl qemu-io; do
  command -v "$tool" > /dev/null || { echo "$tool not installed: skipping"; exit 77; }
done
BUILD=$(cd "${1:?usage: backup_restore_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-restore.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE
ETCD_EP=127.0.0.1:$((BASE-1))  # where cluster.sh --etcd puts it (peer port BASE-2)
PREFIX=/ringcache

log() { echo "[backup-restore] $(date +%T) $*"; }
fail() {
  echo "[backup-restore] FAIL: $*" >&2
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

CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
ECTL=("$BUILD/tools/ctl/ringcachectl" --etcd "$ETCD_EP")
VDI=disk
qio() { qio_at "nbd://127.0.0.1:$((BASE+9))/$VDI" "$@"; }  # COMMAND...: tests/e2e/patterns.sh
source "$(dirname "$0")/patterns.sh"
source "$(dirname "$0")/wait_for.sh"  # wait_for SECONDS WHAT COMMAND...
source "$(dirname "$0")/node_state.sh"  # state_is, rebalance
all_up() { state_is 1 up && state_is 2 up && state_is 3 up; }
rebalance_is() { [ "$(rebalance)" = "$1" ]; }
vdi_ids() { "${CTL[@]}" --json vdi list | python3 -c "
import json, sys
d = json.load(sys.stdin)
vdis = d['vdis'] if isinstance(d, dict) else d
for v in vdis: print(v['name'], v['vdi_id'] if 'vdi_id' in v else v['id'], v['size_bytes'])"; }

cluster up --etcd --base-port "$BASE" --cache-nodes 3 --data-nodes 4 --replication 2 \
  --ssd-size 64MiB --ram-size 8MiB --create-vdi disk:256MiB --create-vdi gone:16MiB \
  > "$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "cluster up --etcd"; }
log "cluster up on base port $BASE, etcd on $ETCD_EP"

# 1. Level 3, data, then the backup.
out=$("${CTL[@]}" cluster finalize) || fail "cluster finalize: $out"
case "$out" in "feature level raised from 1 to 3"*) ;; *) fail "cluster finalize: $out" ;; esac
write_round 10
"${ECTL[@]}" backup "$WORK/backup" > "$WORK/backup.out" 2>&1 || { cat "$WORK/backup.out"; fail "backup"; }
cat "$WORK/backup.out"
grep -q "2 VDI(s)" "$WORK/backup.out" || fail "the backup does not list 2 VDIs"
[ -s "$WORK/backup/etcd.db" ] && [ -s "$WORK/backup/manifest.json" ] || fail "backup files missing"
ETCDCTL_API=3 etcdctl snapshot status "$WORK/backup/etcd.db" > /dev/null ||
  fail "etcdctl does not accept the snapshot"
if "${ECTL[@]}" backup "$WORK/backup" > /dev/null 2>&1; then
  fail "a second backup into the same directory was accepted"
fi

# 2. The cluster moves on.
write_round 20
"${CTL[@]}" vdi resize disk --size 320MiB > /dev/null || fail "resize disk"
"${CTL[@]}" vdi create later --size 32MiB > /dev/null || fail "create later"
VDI=later qio "write -P 77 0 1M" > /dev/null || fail "write later"
"${CTL[@]}" vdi delete gone --yes > /dev/null || fail "delete gone"
"${CTL[@]}" vdi create gone --size 8MiB > /dev/null || fail "create gone again"  # a new id
cluster stop gateway 1 > /dev/null && cluster start gateway 1 > /dev/null || fail "gateway restart"
wait_for 30 "cache nodes up after the gateway restart" all_up
cluster kill cachenode 2 > /dev/null || fail "kill cache node 2"
cluster start cachenode 2 > /dev/null || fail "start cache node 2"
wait_for 60 "cache node 2 back in the ring" all_up
"${CTL[@]}" datanode out 4 > /dev/null || fail "datanode out 4"
wait_for 120 "data node 4 out, its replicas made again" rebalance_is "idle 1,2,3 4"
before=$(vdi_ids)
log "after the backup: $(echo "$before" | tr '\n' ';') data node 4 out"
write_round 30  # the newest data, not on data node 4: it must survive the restore

# 3. etcd lost, restored from the snapshot.
cluster stop gateway 1 > /dev/null || fail "stop gateway"
cluster kill etcd 0 > /dev/null || fail "kill etcd"
rm -rf "$WORK/cluster/etcd"
ETCDCTL_API=3 etcdctl snapshot restore "$WORK/backup/etcd.db" --data-dir "$WORK/cluster/etcd" \
  --name ringcache --initial-cluster "ringcache=http://127.0.0.1:$((BASE-2))" \
  --initial-advertise-peer-urls "http://127.0.0.1:$((BASE-2))" > "$WORK/snap-restore.log" 2>&1 ||
  { cat "$WORK/snap-restore.log"; fail "etcdctl snapshot restore"; }
cluster start etcd > /dev/null || fail "start etcd"
log "etcd restored from the snapshot"

# 4. ringcachectl restore.
if "${ECTL[@]}" restore "$WORK/cluster" > /dev/null 2>&1; then
  fail "restore accepted a directory that is no backup"
fi
"${ECTL[@]}" restore "$WORK/backup" --dry-run > "$WORK/dry.out" 2>&1 ||
  { cat "$WORK/dry.out"; fail "restore --dry-run"; }
grep -q "dry run" "$WORK/dry.out" || fail "the dry run does not say so"
"${ECTL[@]}" restore "$WORK/backup" > "$WORK/restore.out" 2>&1 ||
  { cat "$WORK/restore.out"; fail "restore"; }
cat "$WORK/restore.out"
grep -q "VDI 'later' .*added back" "$WORK/restore.out" || fail "restore did not add back 'later'"
grep -q "VDI 'disk' .*resized" "$WORK/restore.out" || fail "restore did not see disk's resize"
grep -q "VDI 'gone' (id 2).*removed" "$WORK/restore.out" || fail "restore did not remove the old 'gone'"
grep -q "VDI 'gone' (id [0-9]*, 8388608 bytes).*added back" "$WORK/restore.out" ||
  fail "restore did not add back the new 'gone' under its name"
grep -q "^cache ring: epoch [0-9]* -> " "$WORK/restore.out" || fail "the cache ring epoch was not raised"
grep -q "^data ring: epoch 0 -> [1-9]" "$WORK/restore.out" || fail "the data ring was not restored"
data_epoch=$(sed -n 's/^data ring: epoch 0 -> \([0-9]*\).*/\1/p' "$WORK/restore.out")
# The restore wrote at the snapshot's level: messages (a number: field 6). The ring itself is
# checked through the gateway below (data node 4 out).
for key in rings/data ring-epochs/data rings/cache vdis/later; do
  [ "$(ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" get --print-value-only "$PREFIX/$key" |
       head -c1 | od -An -tx1 | tr -d ' \n')" = 08 ] || fail "$PREFIX/$key is not a message"
done
[ "$(ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" get -w json "$PREFIX/ring-epochs/data" |
     python3 -c '
import base64, json, sys
b = base64.b64decode(json.load(sys.stdin)["kvs"][0]["value"])
assert b[:3] == b"\x08\x02\x30", b  # format 2, then field 6 (number), a varint
n, shift = 0, 0
for c in b[3:]:
    n |= (c & 0x7F) << shift
    shift += 7
print(n)')" = "$data_epoch" ] || fail "etcd does not hold data ring $data_epoch"
grep -q "is past it" "$WORK/restore.out" || fail "etcd's revision is not past the nodes' term"
ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" get "$PREFIX/cluster/restoring" | grep -q . &&
  fail "the restoring mark is still in etcd"

# 5. Nodes restarted, the gateway started: the newest data reads back.
cluster stop cachenode 1 2 3 > /dev/null || fail "stop cache nodes"
cluster stop datanode 1 2 3 4 > /dev/null || fail "stop data nodes"
cluster start datanode 1 2 3 4 > /dev/null || fail "start data nodes"
cluster start cachenode 1 2 3 > /dev/null || fail "start cache nodes"
cluster start gateway 1 > /dev/null || fail "start gateway"
wait_for 60 "every cache node up after the restore" all_up
rebalance_is "idle 1,2,3 4" || fail "after the restore the data ring is '$(rebalance)'"
after=$(vdi_ids)
log "after the restore: $(echo "$after" | tr '\n' ';')"
[ "$(echo "$before" | sort)" = "$(echo "$after" | sort)" ] ||
  fail "the catalog after the restore differs: before [$before] after [$after]"
check_round 30
VDI=later
out=$(qio "read -P 77 0 1M" 2>&1) || fail "read later: $out"
if echo "$out" | grep -q "Pattern verification failed"; then fail "'later' lost its data: $out"; fi
VDI=disk
"${CTL[@]}" vdi create fresh --size 16MiB > /dev/null || fail "create fresh"
ids=$(vdi_ids | awk '{print $2}' | sort)
[ "$(echo "$ids" | uniq -d)" = "" ] || fail "a VDI id was given twice: $ids"
log "PASS: restored from the backup; the writes made after it read back"
