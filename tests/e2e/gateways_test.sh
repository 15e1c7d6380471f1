#!/usr/bin/env bash
# Several gateways and an elected coordinator (membership/README.md "Control plane"), end to end
# on processes started by `deploy/cluster.sh up --etcd --gateways 2`: etcd, 3 data nodes, 3 cache
# nodes and gateways 1 and 2, both coordinator candidates.
#  1. One of them is elected (P/coordinator names it); both serve NBD. Patterns written through
#     gateway A read back through gateway B, and writes alternating between the two (the same
#     objects, interleaved) read back through both.
#  2. The gateway that does not lead refuses a change, naming the leader; `status` through it
#     names the leader too.
#  3. Under a client write loop through the follower, cache node 2 is killed (its dirty data
#     must be replayed from its log) and, once the leader starts removing it, the leader is
#     killed with SIGKILL. The other gateway is elected within the lease TTL, decides the removal
#     again and finishes it; the write loop sees no error; every write reads back through both
#     gateways (the old leader restarted as a follower). The takeover time is printed.
#  4. Under a write loop through the follower, data node 4 is added (`cluster.sh add datanode 4`)
#     and, once the leader logs that the rebalance copies replicas, the leader is killed with
#     SIGKILL. The other gateway is elected, resumes the rebalance from the data ring saved in
#     etcd (the copy again, the switch, the purge of former homes) and finishes it: the rebalance
#     is idle with 4 data nodes, the purge mark in etcd is gone, the write loop saw no error,
#     every write reads back through both gateways.
#  5. A resize of cache node 3's SSD tier to twice its size: at feature level 1 done with the
#     ring weight left as it was (and said why); after `cluster finalize` (last: the checks
#     above read etcd's values as text) through the follower the same (the weight takes the
#     coordinator, it says), through the leader the ring weight follows (2) at both gateways,
#     and every write reads back through both.
# Exits 77 (skipped) when etcd, etcdctl or qemu-io is not installed.
#
#   tests/e2e/gateways_test.sh BUILD_DIR
set -euo pipefail

for tool in etcd etcdctl qemu-io; do
  command -v "$tool" > /dev/null || { echo "$tool not installed: skipping"; exit 77; }
done
BUILD=$(cd "${1:?usage: gateways_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-gateways.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own
ETCD_EP=127.0.0.1:$((BASE-1))
PREFIX=/ringcache

log() { echo "[gateways] $(date +%T) $*"; }
fail() {
  echo "[gateways] FAIL: $*" >&2
  for g in 1 2; do
    echo "--- gateway-$g.log" >&2
    tail -n 30 "$WORK/cluster/logs/gateway-$g.log" >&2 || true
  done
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" --command-timeout=3s "$@"; }
cleanup() {
  set +e
  [ -n "${LOOP_PID:-}" ] && kill "$LOOP_PID" 2> /dev/null
  cluster down > /dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
source "$(dirname "$0")/wait_for.sh"  # wait_for SECONDS WHAT COMMAND...
nbd_port() { if [ "$1" = 1 ]; then echo $((BASE+9)); else echo $((BASE+500+$1)); fi; }
admin_port() { if [ "$1" = 1 ]; then echo $((BASE+10)); else echo $((BASE+600+$1)); fi; }
ctl() {  # gateway args...
  local g=$1
  shift
  "$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$(admin_port "$g")" "$@"
}
GW=1  # the gateway qio uses
qio() { qio_at "nbd://127.0.0.1:$(nbd_port "$GW")/disk" "$@"; }  # COMMAND...: tests/e2e/patterns.sh
leader() {  # prints the id of the elected coordinator (fails when none)
  etcdctl_ get --print-value-only "$PREFIX/coordinator" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['id'])"
}
leader_is() { [ "$(leader 2> /dev/null)" = "$1" ]; }
gateway_state() {  # through gateway, id: the state `node list` shows for gateway id
  ctl "$1" --json node list | python3 -c "
import json, sys
d = json.load(sys.stdin)
d = d['nodes'] if isinstance(d, dict) else d
print([n.get('state') for n in d if n['role'] == 'gateway' and int(n['id']) == $2][0])"
}
gateway_is() { [ "$(gateway_state "$1" "$2")" = "$3" ]; }
json_field() { python3 -c "import json,sys; print(json.load(sys.stdin)[\"$1\"])"; }
source "$ROOT/tests/e2e/patterns.sh"

cluster up --etcd --gateways 2 --base-port "$BASE" --cache-nodes 3 --data-nodes 3 \
  --replication 2 --ssd-size 128MiB --ram-size 8MiB --create-vdi disk:256MiB \
  > "$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "cluster up --etcd --gateways 2"; }
wait_for 20 "a coordinator to be elected" leader
L=$(leader)
F=$((3 - L))
log "cluster up on base port $BASE; gateway $L leads, gateway $F follows"
wait_for 20 "the VDI at the follower" bash -c \
  "qemu-io -f raw nbd://127.0.0.1:$(nbd_port "$F")/disk -c 'read 0 4k' > /dev/null 2>&1"

# 1. Write through one gateway, read through the other; then interleaved.
GW=1; write_round 7
GW=2; check_round 7
# Object i: a 64 KiB write through gateway i % 2 + 1, then a 16 KiB write over its middle through
# the other gateway. Each pass is one qemu-io per gateway (rounds, tests/e2e/patterns.sh): the
# first writes of every object, then the second ones, so each object's second write still comes
# through the other gateway after its first.
declare -a first1=() first2=() second1=() second2=() reads=()
for i in $(seq 0 63); do
  a="write -P $(( (40 + i) % 250 + 1 )) $(( i * 4 ))M 64k"
  b="write -P $(( (90 + i) % 250 + 1 )) $(( i * 4096 + 32 ))k 16k"
  if [ $(( i % 2 )) -eq 0 ]; then
    first1+=("$a"); second2+=("$b")
  else
    first2+=("$a"); second1+=("$b")
  fi
  reads+=("read -P $(( (40 + i) % 250 + 1 )) $(( i * 4 ))M 32k"
          "read -P $(( (90 + i) % 250 + 1 )) $(( i * 4096 + 32 ))k 16k")
done
GW=1; qio_round "first writes via gateway 1" "${first1[@]}"
GW=2; qio_round "first writes via gateway 2" "${first2[@]}"
GW=1; qio_round "second writes via gateway 1" "${second1[@]}"
GW=2; qio_round "second writes via gateway 2" "${second2[@]}"
for GW in 1 2; do qio_round "interleaved writes read through gateway $GW" "${reads[@]}"; done
log "written through gateway 1, read through gateway 2; interleaved writes read back through both"

# 2. Changes go to the coordinator.
if out=$(ctl "$F" vdi create other --size 16MiB 2>&1); then fail "the follower created a VDI: $out"; fi
echo "$out" | grep -q "not the coordinator; the coordinator is gateway $L" ||
  fail "the follower's refusal does not name the leader: $out"
grep -q "^gateway $L " <<< "$(ctl "$F" --json status | json_field coordinator)" ||
  fail "status through the follower does not name the leader"
ctl "$L" vdi create other --size 16MiB > /dev/null || fail "vdi create through the leader"
wait_for 10 "the follower to serve the new VDI" bash -c \
  "qemu-io -f raw nbd://127.0.0.1:$(nbd_port "$F")/other -c 'read 0 4k' > /dev/null 2>&1"
log "the follower refuses changes naming gateway $L and follows the catalog"

start_loop() {  # gateway: a qemu-io write loop through it (patterns.sh's loop layout)
  rm -f "$WORK/stop" "$WORK/loop.ops"
  local uri
  uri="nbd://127.0.0.1:$(nbd_port "$1")/disk"
  (
    k=0
    while [ ! -f "$WORK/stop" ]; do
      qemu-io -f raw "$uri" -c "write -P $(( k % 250 + 1 )) $(( (k % 64) * 4 + 1 ))M 64k" \
        > /dev/null || { echo "loop write $k failed" >&2; exit 1; }
      k=$((k + 1))
      echo "$k" > "$WORK/loop.ops"
      nap "$LOOP_PAUSE"  # a client, not a load (tests/e2e/patterns.sh); no process
    done
  ) > "$WORK/loop.log" 2>&1 &
  LOOP_PID=$!
}
kill_leader() {  # leader next what: kill -9 the leader, wait for next's election; sets took
  local killed elected
  cluster kill gateway "$1" > /dev/null
  killed=$(date +%s.%N)
  log "gateway $1 (the leader) killed $3"
  wait_for 30 "gateway $2 to be elected" leader_is "$2"
  elected=$(date +%s.%N)
  took=$(python3 -c "print(f'{$elected - $killed:.1f}')")
  log "gateway $2 elected ${took}s after the kill (lease TTL 5 s)"
}
stop_loop() {  # what: stops the loop (fails if it saw an error); sets ops to its writes
  touch "$WORK/stop"
  wait "$LOOP_PID" || { cat "$WORK/loop.log"; LOOP_PID=""; fail "client error during $1"; }
  LOOP_PID=""
  ops=$(cat "$WORK/loop.ops")
}

# 3. Kill the leader while it removes a killed cache node, under a write loop via the follower.
GW=$F
write_round 13  # dirty data on every cache node
start_loop "$F"
sleep 1
cluster kill cachenode 2 > /dev/null
log "cache node 2 killed"
wait_for 30 "the leader to start removing cache node 2" \
  grep -q "remove cache node 2" "$WORK/cluster/logs/gateway-$L.log"
kill_leader "$L" "$F" "while removing cache node 2"
takeover=$took
gateway_is "$F" "$L" down || fail "node list through gateway $F shows the killed gateway $L $(gateway_state "$F" "$L")"
ring_removed_2() {  # the published cache ring has node 2 removed and nothing under way
  local ring
  ring=$(etcdctl_ get --print-value-only "$PREFIX/rings/cache")
  echo "$ring" | grep -qx "removed 2" && ! echo "$ring" | grep -q "^removing\|^joining"
}
wait_for 60 "cache node 2's removal to be finished (by either leader)" ring_removed_2
grep -q "remove cache node 2: removed" "$WORK/cluster/logs/gateway-$F.log" &&
  log "gateway $F decided the removal again and finished it"
sleep 2
stop_loop "the takeover"
log "write loop: $ops writes through gateway $F, no error"
check_round 13
check_loop_slots "$ops"
cluster start gateway "$L" > /dev/null || fail "restart gateway $L"
wait_for 10 "node list to show the restarted gateway $L up" gateway_is "$F" "$L" up
GW=$L
check_round 13
check_loop_slots "$ops"
leader_is "$F" || fail "the restarted gateway took the lead back"
log "every write read back through both gateways; gateway $L follows gateway $F"

# 4. Kill the leader (now F) during a data rebalance, under a write loop via the other (L).
L2=$F
F2=$L
GW=$F2
# 64 MiB more on the data nodes (between the rounds' and the loop's slots), so the copy lasts.
fill=()
for i in $(seq 0 63); do fill+=(-c "write -P 51 $(( i * 4 + 2 ))M 1M"); done
qemu-io -f raw "nbd://127.0.0.1:$(nbd_port "$F2")/disk" "${fill[@]}" > /dev/null || fail "fill"
ctl "$L2" flush > /dev/null || fail "flush through the leader"
write_round 29
start_loop "$F2"
sleep 1
marks=$(wc -c < "$WORK/cluster/logs/gateway-$L2.log")
cluster add datanode 4 > "$WORK/add-data.log" 2>&1 ||
  { cat "$WORK/add-data.log"; fail "cluster.sh add datanode 4"; }
copying() { tail -c +"$((marks + 1))" "$WORK/cluster/logs/gateway-$L2.log" |
              grep -q "data rebalance: copying"; }
wait_for 60 "the leader to copy replicas to data node 4" copying
kill_leader "$L2" "$F2" "while the rebalance to data node 4 copied"
takeover2=$took
rebalanced() {  # idle, 4 data ring members, no purge left
  ctl "$F2" --json status | python3 -c "
import json, sys
r = json.load(sys.stdin).get('rebalance', {})
sys.exit(0 if r.get('state') == 'idle' and len(r.get('members', [])) == 4 else 1)" &&
    [ -z "$(etcdctl_ get --print-value-only "$PREFIX/rings/data-purge")" ]
}
wait_for 120 "gateway $F2 to finish the rebalance (idle, 4 data nodes, purged)" rebalanced
if ! grep -q "data rebalance: done" "$WORK/cluster/logs/gateway-$F2.log"; then
  grep -q "data rebalance: done" "$WORK/cluster/logs/gateway-$L2.log" ||
    fail "neither gateway logged the end of the rebalance"
  log "note: the rebalance had finished before gateway $L2 was killed"
fi
log "gateway $F2 resumed the rebalance and finished it: $(grep "data rebalance: done" \
  "$WORK/cluster/logs/gateway-$F2.log" | tail -n 1 | sed 's/.*data rebalance: //')"
sleep 1
stop_loop "the rebalance takeover"
log "write loop: $ops writes through gateway $F2, no error"
check_round 29
check_loop_slots "$ops"
cluster start gateway "$L2" > /dev/null || fail "restart gateway $L2"
GW=$L2
check_round 29
check_loop_slots "$ops"
log "every write read back through both gateways after the rebalance takeover"
# 5. A cache node's ring weight follows its SSD tier (docs/cache-node.md "Resizing the tiers"):
# a reweight takes the coordinator, and cluster feature level 3 (the published ring's weights).
L3=$F2
F3=$L2
leader_is "$L3" || fail "gateway $L3 no longer leads"
ring_weight() {  # gateway node: node's weight in the cache ring that gateway routes over
  ctl "$1" --json status | python3 -c "
import json, sys
print(float([m['weight'] for m in json.load(sys.stdin)['cache_ring'] if m['id'] == $2][0]))"
}
out=$(ctl "$L3" node resize 3 --ssd 256MiB 2>&1) || fail "resize at level 1: $out"
echo "$out" | grep -q "ring weight unchanged: .*needs cluster feature level 3" ||
  fail "a resize at level 1 does not say why the weight stays: $out"
ctl "$L3" cluster finalize > /dev/null || fail "cluster finalize"
out=$(ctl "$F3" node resize 3 --ssd 256MiB 2>&1) || fail "resize through the follower: $out"
echo "$out" | grep -q "ring weight unchanged: .*not the coordinator; the coordinator is gateway $L3" ||
  fail "a resize through the follower does not say the weight takes the coordinator: $out"
out=$(ctl "$L3" node resize 3 --ssd 256MiB 2>&1) || fail "resize after finalize: $out"
echo "$out" | grep -q "ring weight 2$" || fail "node 3 at twice its 128 MiB is not weight 2: $out"
for _ in $(seq 1 50); do
  [ "$(ring_weight "$F3" 3 2> /dev/null)" = 2.0 ] && break
  sleep 0.2
done
if [ "$(ring_weight "$L3" 3)" != 2.0 ] || [ "$(ring_weight "$F3" 3)" != 2.0 ]; then
  fail "node 3's ring weight: $(ring_weight "$L3" 3) at the leader, $(ring_weight "$F3" 3) at the follower"
fi
for GW in 1 2; do check_round 29; check_loop_slots "$ops"; done
log "node 3 resized to twice its size: ring weight 2 at both gateways, every write reads back"

echo "takeover_seconds=$takeover"
echo "rebalance_takeover_seconds=$takeover2"
log "PASS"
