#!/usr/bin/env bash
# Cluster mode with etcd end to end (docs/design.md §7, membership/README.md), on separate
# processes on 127.0.0.1 started by `deploy/cluster.sh up --etcd`: a real etcd, 4 data nodes,
# 3 cache nodes and a gateway, all given etcd_endpoints in the cluster file.
#  1. Every daemon registers: `etcdctl get --prefix` shows 4 data, 3 cache and 1 gateway record.
#     `ringcachectl cluster finalize` raises the feature level from 1 to this release's (3):
#     everything below runs in a cluster that keeps its etcd values as versioned protobuf
#     messages (docs/upgrades.md, "What etcd holds"), beside the JSON records written before.
#  2. qemu-io writes patterns that stay dirty in the cache nodes; cache node 2 is killed with
#     SIGKILL. Its lease expires, the gateway takes it out of the ring by itself (its write-back
#     log is replayed home), and every pattern reads back through NBD.
#  3. Cache node 2 is restarted: it registers again and rejoins the ring (every member destages,
#     it drops its stale blocks); the epoch grew; the old patterns read back, new ones too.
#     `ringcachectl node remove 3` marks node 3 drained in etcd: it stays out while registered,
#     and rejoins once `ringcachectl node undrain 3` deleted the mark.
#  4. etcd is killed and restarted while a qemu-io write loop runs: no client error, and every
#     write of the loop reads back.
#  5. The cluster's feature level set past this release: a data node, a cache node and the
#     gateway each refuse to start, naming the level; at the cluster's own level they start.
#     Every value the steps above rewrote is a versioned message by then.
# Exits 77 (skipped) when etcd, etcdctl or qemu-io is not installed.
#
#   tests/e2e/etcd_cluster_test.sh BUILD_DIR
set -euo pipefail

for tool in etcd etcdctl qemu-io; do
  command -v "$tool" > /dev/null || { echo "$tool not installed: skipping"; exit 77; }
done
BUILD=$(cd "${1:?usage: etcd_cluster_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-etcd.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own, below the ephemeral range
ETCD_EP=127.0.0.1:$((BASE-1))  # where cluster.sh --etcd puts it
PREFIX=/ringcache

log() { echo "[etcd-cluster] $(date +%T) $*"; }
fail() {
  echo "[etcd-cluster] FAIL: $*" >&2
  tail -n 40 "$WORK"/cluster/logs/gateway-1.log >&2 || true
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" --command-timeout=3s "$@"; }
# has PATTERN COMMAND...: COMMAND's output matches PATTERN. The output is taken whole first: with
# pipefail, `COMMAND | grep -q` fails at random when grep exits before COMMAND's last write.
has() {
  local pattern=$1 out
  shift
  out=$("$@") || return 1
  grep -q -- "$pattern" <<< "$out"
}
# `up --etcd` on a running cluster starts only what is down: here, etcd.
start_etcd() { cluster up --etcd > "$WORK/etcd-up.log" 2>&1 || { cat "$WORK/etcd-up.log"; fail "etcd restart"; }; }
stop_etcd() {
  local pid
  pid=$(cat "$WORK/cluster/pids/etcd-0.pid")
  kill -9 "$pid"
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2> /dev/null || return 0
    [ "$(ps -o stat= -p "$pid" | cut -c1)" = Z ] && return 0
    sleep 0.05
  done
  fail "etcd still alive after kill -9"
}
cleanup() {
  set +e
  [ -n "${LOOP_PID:-}" ] && kill "$LOOP_PID" 2> /dev/null
  cluster down > /dev/null 2>&1  # stops etcd too
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
NBD="nbd://127.0.0.1:$((BASE+9))/disk"
qio() { qio_at "$NBD" "$@"; }  # COMMAND...: tests/e2e/patterns.sh
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"; }
node_state() {  # cache node id -> its state in `ringcachectl node list`
  "${CTL[@]}" --json node list | python3 -c "
import json, sys
nodes = json.load(sys.stdin)
nodes = nodes['nodes'] if isinstance(nodes, dict) else nodes
print([n.get('state') for n in nodes if n['role'] == 'cachenode' and int(n['id']) == $1][0])"
}
source "$(dirname "$0")/wait_for.sh"  # wait_for SECONDS WHAT COMMAND...
# etcd_value KEY: KEY holds a versioned EtcdValue (its first byte is field 1's tag, 0x08).
etcd_value() {
  [ "$(etcdctl_ get --print-value-only "$1" | head -c1 | od -An -tx1 | tr -d ' \n')" = 08 ]
}
# value_text KEY: KEY's value without its NUL bytes (a message holds strings as they are).
value_text() { etcdctl_ get --print-value-only "$1" | tr -d '\000'; }
registered() { has . etcdctl_ get --keys-only --prefix "$PREFIX/nodes/$1/$2"; }
not_registered() { ! registered "$@"; }
state_is() { [ "$(node_state "$1")" = "$2" ]; }
# Static mode reports 1 + removals; cluster mode the etcd revision (several puts in: > 1).
epoch_from_etcd() { [ "$("${CTL[@]}" --json status | json_field epoch)" -gt 1 ]; }

cluster up --etcd --base-port "$BASE" --cache-nodes 3 --data-nodes 4 --replication 3 \
  --ssd-size 128MiB --ram-size 8MiB --create-vdi disk:256MiB > "$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; fail "cluster up --etcd"; }
grep -q "^etcd: up" "$WORK/up.log" || fail "cluster.sh did not start etcd"
log "cluster up on base port $BASE, etcd on $ETCD_EP"

# 1. Registration.
keys=$(etcdctl_ get --keys-only --prefix "$PREFIX/nodes/" | grep . | sort)
echo "$keys"
[ "$(echo "$keys" | grep -c "^$PREFIX/nodes/data/")" = 4 ] || fail "expected 4 data node records"
[ "$(echo "$keys" | grep -c "^$PREFIX/nodes/cache/")" = 3 ] || fail "expected 3 cache node records"
[ "$(echo "$keys" | grep -c "^$PREFIX/nodes/gateway/")" = 1 ] || fail "expected 1 gateway record"
has '"role":"cache"' etcdctl_ get --print-value-only "$PREFIX/nodes/cache/2" ||
  fail "cache node 2's record"
wait_for 20 "a first membership epoch" epoch_from_etcd
epoch0=$("${CTL[@]}" --json status | json_field epoch)
log "all daemons registered; epoch $epoch0"
etcd_value "$PREFIX/nodes/cache/2" && fail "a record written before finalize is a message"
out=$("${CTL[@]}" cluster finalize) || fail "cluster finalize: $out"
case "$out" in "feature level raised from 1 to 3"*) ;; *) fail "cluster finalize: $out" ;; esac
log "$out"

# write_round / check_round SEED: tests/e2e/patterns.sh
source "$ROOT/tests/e2e/patterns.sh"

# 2. Kill -9 a cache node holding dirty data: its lease expires and the gateway settles it.
write_round 7
dirty=$("${CTL[@]}" --json status | json_field dirty_bytes)
# A loaded machine may let the nodes destage the round before it is counted (the rounds are
# slow, so the nodes look idle): the round again, at most twice. Nodes that destaged every
# round leave the settle of dirty data untested in this run (said in the log; the fault
# checker's kill nemeses test it in every run); every check of the data below still runs.
for _ in 1 2; do
  [ "$dirty" -gt 0 ] && break
  write_round 7
  dirty=$("${CTL[@]}" --json status | json_field dirty_bytes)
done
log "written; dirty bytes in the cache nodes: $dirty"
[ "$dirty" -gt 0 ] || log "NOTE: the cache nodes destaged each round before it was counted:" \
  "the settle of a killed node's dirty data is not exercised in this run"
cluster kill cachenode 2 > /dev/null
log "cache node 2 killed"
wait_for 20 "cache node 2's lease to expire" not_registered cache 2
log "its registration is gone"
wait_for 60 "the gateway to take cache node 2 out of the ring" state_is 2 removed
epoch1=$("${CTL[@]}" --json status | json_field epoch)
[ "$epoch1" -gt "$epoch0" ] || fail "epoch did not grow ($epoch0 -> $epoch1)"
check_round 7
log "cache node 2 removed at epoch $epoch1; all data read back (its log was replayed)"

# 2b. A per-VDI policy switched while node 2 is out: the live nodes switch at once, and the
# catalog in etcd gives it to node 2 when it rejoins (checked in 3).
"${CTL[@]}" vdi set-policy disk 'arc+sieve' > /dev/null || fail "vdi set-policy"
has '"policy":"arc+sieve"' "${CTL[@]}" --json stats --vdi disk ||
  fail "the live cache nodes did not switch disk to arc+sieve"
"${CTL[@]}" vdi set-policy disk uarc > /dev/null 2>&1 && fail "a complete policy was accepted per VDI"
has 'arc+sieve' value_text "$PREFIX/vdis/disk" ||
  fail "the catalog in etcd does not hold the policy"
etcd_value "$PREFIX/vdis/disk" || fail "the VDI record rewritten after finalize is not a message"
log "disk runs arc+sieve on the live cache nodes"

# 3. Restart it: it registers again and rejoins.
cluster start cachenode 2 > /dev/null || fail "restart cache node 2"
wait_for 20 "cache node 2 to register again" registered cache 2
wait_for 60 "cache node 2 to rejoin the ring" state_is 2 up
epoch2=$("${CTL[@]}" --json status | json_field epoch)
[ "$epoch2" -gt "$epoch1" ] || fail "epoch did not grow ($epoch1 -> $epoch2)"
check_round 7
write_round 11
check_round 11
grep -q "joined; its objects now go to it" "$WORK/cluster/logs/gateway-1.log" ||
  fail "the gateway did not log the rejoin"
stats=$("${CTL[@]}" --json stats --vdi disk)
echo "$stats" | grep -q '"policy":"arc+sieve"' || fail "after the rejoin: $stats"
case "$stats" in *" | "*) fail "cache node 2 rejoined without the VDI's policy: $stats" ;; esac
for key in nodes/cache/2 rings/cache ring-epochs/cache; do
  etcd_value "$PREFIX/$key" || fail "$PREFIX/$key, written after finalize, is not a message"
done
etcd_value "$PREFIX/nodes/cache/1" && fail "cache node 1's record (from before) was rewritten"
log "cache node 2 rejoined at epoch $epoch2; old and new data read back; it runs arc+sieve"

# 3b. An operator's removal sticks: node 3 stays out while registered, until its mark is gone.
"${CTL[@]}" node remove 3 > /dev/null || fail "node remove 3"
has . etcdctl_ get --keys-only "$PREFIX/draining/3" || fail "no drained mark for node 3"
etcd_value "$PREFIX/draining/3" || fail "the drained mark is not a message"
etcdctl_ put "$PREFIX/nodes/cache/99" '{"role":"cache","id":99,"address":"127.0.0.1:1"}' \
  > /dev/null  # a membership change (a node nobody runs: learned, but it never answers, so never joins)
sleep 2
[ "$(node_state 3)" = removed ] || fail "cache node 3 came back while marked drained"
etcdctl_ del "$PREFIX/nodes/cache/99" > /dev/null  # another change: node 3 is still marked
sleep 1
[ "$(node_state 3)" = removed ] || fail "cache node 3 came back while marked drained"
check_round 11
# `node undrain` clears the mark and has the coordinator look again (no membership change
# needed); it returns once the node serves.
out=$("${CTL[@]}" node undrain 1 2>&1) && fail "undrain of a node in the ring accepted: $out"
case "$out" in *"is in the ring: nothing to undrain"*) ;; *) fail "undrain 1: $out" ;; esac
out=$("${CTL[@]}" node undrain 3) || fail "node undrain 3: $out"
[ "$out" = "cache node 3: drained mark cleared; back in the ring" ] || fail "undrain 3: $out"
has . etcdctl_ get --keys-only "$PREFIX/draining/3" && fail "drained mark of node 3 still there"
[ "$(node_state 3)" = up ] || fail "cache node 3 not up after its undrain: $(node_state 3)"
check_round 11
log "an operator's removal of cache node 3 held until \`ringcachectl node undrain 3\`"

# 4. Restart etcd in the middle of a write loop: no client error.
(
  for i in $(seq 0 39); do
    qio "write -P $(( (23 + i) % 250 + 1 )) $(( i * 4 ))M 64k" > /dev/null ||
      { echo "write $i failed" >&2; exit 1; }
    sleep 0.1
  done
) > "$WORK/loop.log" 2>&1 &
LOOP_PID=$!
sleep 1
stop_etcd
log "etcd killed during the write loop"
sleep 2
start_etcd
log "etcd restarted"
wait "$LOOP_PID" || { cat "$WORK/loop.log"; LOOP_PID=""; fail "client error while etcd restarted"; }
LOOP_PID=""
reads=()
for i in $(seq 0 39); do reads+=("read -P $(( (23 + i) % 250 + 1 )) $(( i * 4 ))M 64k"); done
qio_round "the loop's writes across the etcd restart" "${reads[@]}"
wait_for 20 "every node registered after the etcd restart" bash -c \
  "[ \$(ETCDCTL_API=3 etcdctl --endpoints $ETCD_EP get --keys-only --prefix $PREFIX/nodes/ | grep -c .) = 8 ]"
[ "$(node_state 1)" = up ] || [ "$(node_state 1)" = configured ] || fail "cache node 1 left"
log "write loop across an etcd restart: no client error, every write read back"

# 5. A cluster finalized past this release (as a newer release's `cluster finalize` leaves it):
# none of its daemons starts in it, each naming the level in its log; back at this cluster's
# level (3, put back as text: both versions read) each starts again (docs/upgrades.md).
write_round 13
etcdctl_ put "$PREFIX/cluster/feature_level" 9 > /dev/null
# The gateway first: it would take the stopped cache node out of the ring meanwhile.
for d in gateway-1 datanode-4 cachenode-3; do
  cluster stop "${d%-*}" "${d#*-}" > /dev/null
  cluster start "${d%-*}" "${d#*-}" > "$WORK/start.log" 2>&1 &&
    fail "$d started in a cluster at feature level 9"
  grep -q "the cluster runs at feature level 9" "$WORK/cluster/logs/$d.log" ||
    fail "$d: no refusal naming level 9 in its log: $(tail -3 "$WORK/cluster/logs/$d.log")"
done
etcdctl_ put "$PREFIX/cluster/feature_level" 3 > /dev/null
for d in datanode-4 cachenode-3 gateway-1; do
  cluster start "${d%-*}" "${d#*-}" > /dev/null || fail "$d did not start at feature level 3"
done
wait_for 60 "cache node 3 back in the ring" state_is 3 up
check_round 13
log "a daemon refuses a cluster finalized past its release, and starts at the cluster's level"
wait_for 30 "a coordinator elected again" has . etcdctl_ get --keys-only "$PREFIX/coordinator"
for key in coordinator nodes/gateway/1 nodes/data/4 nodes/cache/3; do
  etcd_value "$PREFIX/$key" || fail "$PREFIX/$key, written at level 3, is not a message"
done
log "the restarted daemons registered, and the coordinator campaigned, in versioned messages"
log "PASS"
