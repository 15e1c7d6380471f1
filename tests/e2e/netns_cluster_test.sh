#!/usr/bin/env bash
# Multi-host cluster mode (issue 5 §4, docs/design.md §7, membership/README.md): every node in its
# own network namespace with its own address, two gateways that are both coordinator candidates
# (membership/README.md "Control plane"), and first one cache node, then the leading gateway cut
# off by its link going down.
#
# Network: a Linux bridge in the root namespace (10.231.X.1/24, X random) and one namespace per
# node, each joined to the bridge by a veth pair: etcd .2, data nodes .11-.14, cache nodes
# .21-.23, gateways .30 (id 1) and .31 (id 2). Daemons run with `ip netns exec`; the cluster file
# names each node's own address and etcd_lease_ttl_s: 3. The client (qemu-io, ringcachectl,
# etcdctl) runs in the root namespace and reaches them over the bridge. With iptables installed,
# two rules at the head of FORWARD accept the bridge's traffic (Docker sets the FORWARD policy to
# DROP, and with br_netfilter bridged frames pass FORWARD). Everything (processes in the
# namespaces, the namespaces, veths, bridge, those two rules) is removed on exit, also after a
# failure. The gateway elected first (P/coordinator in etcd) is called L, the other one F.
#  1. Every daemon registers in etcd and one gateway is elected; a round of patterns written
#     through L reads back through F, and F refuses a change naming L.
#  2. Two client loops write and read back (each write verified at once), one through L and one
#     through F (slots of their own). A round of patterns is written and cache node 2's link is
#     set down at once, so it holds dirty blocks. It fences itself (its log says so), its lease
#     expires, L takes it out of the ring and replays its write-back log from the data nodes; F
#     follows. Both loops go on without an error (their longest stalls are printed, bounded only
#     generously); every acknowledged pattern reads back (no lost write) and a newer round
#     written over the cut node's dirty blocks reads back (no stale read) and is destaged home.
#  3. Still during that cut, the loop through L stops and L's link goes down: L steps down (its
#     log), its lease expires and F is elected (the time from the cut to F in P/coordinator is
#     printed as the takeover time); the loop through F goes on without an error (its longest
#     stall during the leader's cut is printed and bounded) and a round is written through F.
#  4. Cache node 2's link comes up: the node finds its lease lost, registers under a new one,
#     stays quarantined until the new leader F re-admits it (dropping every block it had), and
#     rejoins the ring (decided by F, its log). Between the cut (kept for over 13 s, past its
#     relog_after_ms of 8 s) and its re-admission it destaged nothing and logged nothing again
#     (its counters did not move), so its objects, which come back to it and are read from home,
#     show the newest round.
#  5. L's link comes up: L registers again under a new lease and comes back as a follower of F
#     (F's term in P/coordinator is unchanged, L was not elected again, L follows F's ring epoch
#     and refuses a change naming F). Every pattern written before and during the cuts (the
#     round written through F, both loops' last writes) reads back through both gateways; new
#     rounds read back through both, also after `ringcachectl flush --wait`.
#  6. A partial partition: cache node 3 cut (iptables in its namespace) from the coordinator F
#     and etcd only, while L still reaches it and a third client loop writes through L. F
#     removes it (sealing its log, replaying it); the loop sees no error and every write it made
#     reads back through both gateways; the node rejoins after the heal.
# Exits 77 (skipped) when not root, when `ip netns add` or the bridge cannot be created, or when
# etcd, etcdctl, qemu-io or curl is not installed.
#
#   tests/e2e/netns_cluster_test.sh BUILD_DIR
set -euo pipefail

skip() { echo "[netns] SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root (uid $(id -u))"
for tool in ip etcd etcdctl qemu-io curl; do
  command -v "$tool" > /dev/null || skip "$tool not installed"
done
BUILD=$(cd "${1:?usage: netns_cluster_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-netns.XXXXXX")
mkdir -p "$WORK/logs" "$WORK/ready"
START=$(date +%s)

# Names unique per run (interface names: at most 15 characters). Each run writes its pid to
# $NETNS_RUNS/SUFFIX.pid before its namespaces exist, so that a later run can tell the namespaces
# of a killed run (ctest's timeout or an ended session kill it without its EXIT trap) from those
# of a live one: sweep_stale_runs kills the daemons still running in the former and removes their
# namespaces, veths, bridge and FORWARD rules. (Not a lock held on a file descriptor: the
# daemons, started in the background, would inherit it and keep it held after the run died.)
NODES=(etcd d1 d2 d3 d4 c1 c2 c3 g1 g2)
NETNS_RUNS=/tmp/ringcache-netns-runs
mkdir -p "$NETNS_RUNS"
run_alive() {  # SUFFIX: its run's pid file names a live netns_cluster_test.sh
  local pid cmd
  [ -r "$NETNS_RUNS/$1.pid" ] && read -r pid < "$NETNS_RUNS/$1.pid" || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
  read -r -d '' cmd < <(tr '\0' ' ' < "/proc/$pid/cmdline") || true
  [[ $cmd == *netns_cluster_test* ]]
}
sweep_stale_runs() {
  local ns each sfx swept="" link rule
  for ns in $(ip netns list 2> /dev/null | awk '{print $1}' | grep -E '^rc[0-9a-f]{4}etcd$'); do
    sfx=${ns:2:4}
    if run_alive "$sfx"; then continue; fi
    for each in $(ip netns list 2> /dev/null | awk '{print $1}' | grep "^rc$sfx"); do
      ip netns pids "$each" 2> /dev/null | xargs -r kill -9 2> /dev/null
      ip netns del "$each" 2> /dev/null
    done
    for link in $(ip -o link show 2> /dev/null | awk -F': ' '{print $2}' | cut -d@ -f1 |
                  grep -E "^(rv$sfx|rcbr$sfx$)"); do
      ip link del "$link" 2> /dev/null
    done
    for rule in "-i rcbr$sfx" "-o rcbr$sfx"; do
      # shellcheck disable=SC2086  # "-i BR" / "-o BR"
      while iptables -w 5 -D FORWARD $rule -j ACCEPT 2> /dev/null; do :; done
    done
    rm -f "$NETNS_RUNS/$sfx.pid"
    swept="$swept rc$sfx"
  done
  [ -z "$swept" ] || echo "[netns] removed what killed runs left behind:$swept"
}
sweep_stale_runs
for _ in $(seq 1 20); do
  SUFFIX=$(printf '%04x' $((RANDOM % 65536)))
  if ! run_alive "$SUFFIX" && ! ip netns list 2> /dev/null | grep -q "^rc$SUFFIX" &&
      ! ip link show "rcbr$SUFFIX" > /dev/null 2>&1; then
    echo $$ > "$NETNS_RUNS/$SUFFIX.pid"
    break
  fi
done
BR=rcbr$SUFFIX
ns_of() { echo "rc$SUFFIX$1"; }   # node -> namespace
veth_of() { echo "rv$SUFFIX$1"; } # node -> its veth end on the bridge (root namespace)
PREFIX=/ringcache
TTL=3

log() { echo "[netns] $(date +%T) $*"; }
fail() {
  echo "[netns] FAIL: $*" >&2
  for f in gateway-1 gateway-2 cachenode-2; do
    echo "--- $f.log (tail)" >&2
    tail -n 25 "$WORK/logs/$f.log" >&2 || true
  done
  exit 1
}
cleanup() {
  set +e
  [ -n "${LOOP_A_PID:-}" ] && kill "$LOOP_A_PID" 2> /dev/null
  [ -n "${LOOP_B_PID:-}" ] && kill "$LOOP_B_PID" 2> /dev/null
  [ -n "${LOOP_C_PID:-}" ] && kill "$LOOP_C_PID" 2> /dev/null
  local n ns
  {  # kill and reap them without "Killed" job notices (bash reaps some during the loop)
    for n in "${NODES[@]}"; do
      ns=$(ns_of "$n")
      ip netns pids "$ns" 2> /dev/null | xargs -r kill -9 2> /dev/null
    done
    wait
  } 2> /dev/null
  for n in "${NODES[@]}"; do
    ns=$(ns_of "$n")
    ip netns del "$ns" 2> /dev/null
    ip link del "$(veth_of "$n")" 2> /dev/null  # gone with the namespace, unless it failed
  done
  ip link del "$BR" 2> /dev/null
  local rule
  for rule in ${FW_RULES[@]+"${FW_RULES[@]}"}; do  # exactly the rules this run inserted
    # shellcheck disable=SC2086  # "-i BR" / "-o BR"
    iptables -w 5 -D FORWARD $rule -j ACCEPT 2> /dev/null
  done
  rm -f "$NETNS_RUNS/$SUFFIX.pid"
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
FW_RULES=()  # iptables FORWARD rules this run inserted ("-i BR", "-o BR"), deleted by cleanup
trap cleanup EXIT

# A /24 that the root namespace has no address or route in yet.
NET=""
for _ in $(seq 1 20); do
  x=$((16 + RANDOM % 230))
  if [ -z "$(ip -4 route show to root "10.231.$x.0/24")" ] &&
      ! ip -4 addr show | grep -q "inet 10\.231\.$x\."; then
    NET=10.231.$x
    break
  fi
done
[ -n "$NET" ] || skip "no free 10.231.X.0/24 subnet in the root namespace"
ip_of() {  # node -> its address
  case "$1" in
    etcd) echo "$NET.2" ;;
    d*) echo "$NET.$((10 + ${1#d}))" ;;
    c*) echo "$NET.$((20 + ${1#c}))" ;;
    g*) echo "$NET.$((29 + ${1#g}))" ;;  # gateway N
  esac
}

ip netns add "$(ns_of etcd)" 2> "$WORK/netns.err" || skip "ip netns add failed: $(cat "$WORK/netns.err")"
ip link add "$BR" type bridge 2> "$WORK/netns.err" || skip "cannot create a bridge: $(cat "$WORK/netns.err")"
ip addr add "$NET.1/24" dev "$BR"
ip link set "$BR" up
# With br_netfilter loaded (Docker loads it) frames bridged between the namespaces go through
# iptables' FORWARD chain, whose policy Docker sets to DROP: accept this run's bridge (only it)
# at the head of FORWARD, which every forwarded packet traverses whether or not Docker's chains
# (DOCKER-USER ...) are hooked in. The policy stays as it is; cleanup deletes exactly these rules.
nf_call=$(cat /proc/sys/net/bridge/bridge-nf-call-iptables 2> /dev/null || echo "n/a (br_netfilter not loaded)")
if command -v iptables > /dev/null; then
  for dir in -i -o; do
    if iptables -w 5 -I FORWARD 1 "$dir" "$BR" -j ACCEPT 2> "$WORK/iptables.err"; then
      FW_RULES+=("$dir $BR")
    else
      log "warning: iptables -I FORWARD $dir $BR -j ACCEPT failed: $(cat "$WORK/iptables.err")"
    fi
  done
  fw_policy=$(iptables -w 5 -S FORWARD 2> /dev/null | sed -n 's/^-P FORWARD //p')
  log "bridge-nf-call-iptables: $nf_call; iptables FORWARD policy ${fw_policy:-unknown}:" \
    "${#FW_RULES[@]} ACCEPT rules added for $BR"
elif [ "$nf_call" = 1 ]; then
  log "warning: bridge-nf-call-iptables is 1 but iptables is not installed: a FORWARD policy of" \
    "DROP (Docker) would drop traffic between the namespaces"
fi
for n in "${NODES[@]}"; do
  ns=$(ns_of "$n")
  [ "$n" = etcd ] || ip netns add "$ns"
  ip link add "$(veth_of "$n")" type veth peer name eth0 netns "$ns"
  ip link set "$(veth_of "$n")" master "$BR" up
  ip -n "$ns" addr add "$(ip_of "$n")/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
done
log "network $NET.0/24 on bridge $BR: ${#NODES[@]} namespaces rc$SUFFIX*"

ETCD_EP=$(ip_of etcd):2379
FILE=$WORK/cluster.yaml
{
  echo "# ringcache cluster file (written by netns_cluster_test.sh): one namespace per node"
  echo "data_dir: $WORK/state"
  echo "replication: 3"
  echo "block_size: 4096"
  echo "etcd_endpoints: $ETCD_EP"
  echo "etcd_prefix: $PREFIX"
  echo "etcd_lease_ttl_s: $TTL"
  echo "nodes:"
  for i in 1 2 3 4; do
    echo "  - {role: datanode, id: $i, listen: $(ip_of "d$i"):7401, http_listen: $(ip_of "d$i"):9401}"
  done
  for i in 1 2 3; do
    echo "  - {role: cachenode, id: $i, listen: $(ip_of "c$i"):7301, http_listen: $(ip_of "c$i"):9301, ssd_bytes: 128MiB, ram_bytes: 8MiB}"
  done
  for i in 1 2; do
    g=$(ip_of "g$i")
    echo "  - {role: gateway, id: $i, nbd_listen: $g:10809, admin_listen: $g:7200, http_listen: $g:9200}"
  done
} > "$FILE"

etcdctl_() { ETCDCTL_API=3 etcdctl --endpoints "$ETCD_EP" --command-timeout=3s "$@"; }
source "$(dirname "$0")/wait_for.sh"  # wait_for SECONDS WHAT COMMAND...
in_ns() { local n=$1; shift; ip netns exec "$(ns_of "$n")" "$@"; }

ip netns exec "$(ns_of etcd)" etcd --name rc --data-dir "$WORK/etcd" \
  --listen-client-urls "http://$ETCD_EP" --advertise-client-urls "http://$ETCD_EP" \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster rc=http://127.0.0.1:2380 > "$WORK/logs/etcd.log" 2>&1 &
wait_for 30 "etcd at $ETCD_EP (from the root namespace, over the bridge)" etcdctl_ endpoint health

start_daemon() {  # node role id [args...]
  local n=$1 role=$2 id=$3
  shift 3
  ip netns exec "$(ns_of "$n")" "$BUILD/$role/ringcache-$role" \
    --cluster "$FILE" --id "$id" --ready-file "$WORK/ready/$role-$id.json" --insecure "$@" \
    >> "$WORK/logs/$role-$id.log" 2>&1 &
}
ready() { [ -f "$WORK/ready/$1.json" ]; }
for i in 1 2 3 4; do start_daemon "d$i" datanode "$i"; done
for i in 1 2 3 4; do wait_for 60 "data node $i ready" ready "datanode-$i"; done
# relog_after_ms 8 s instead of 30: step 3 cuts cache node 2 off for longer than that.
RELOG_S=8
for i in 1 2 3; do start_daemon "c$i" cachenode "$i" --relog-after-ms $((RELOG_S * 1000)); done
for i in 1 2 3; do wait_for 60 "cache node $i ready" ready "cachenode-$i"; done
# Both gateways are coordinator candidates (the default); whichever is elected creates the VDI.
for i in 1 2; do start_daemon "g$i" gateway "$i" --create-vdi disk:256MiB; done
for i in 1 2; do wait_for 90 "gateway $i ready" ready "gateway-$i"; done

ctl() {  # gateway args...: ringcachectl against that gateway's admin port
  local g=$1
  shift
  "$BUILD/tools/ctl/ringcachectl" --gateway "$(ip_of "g$g"):7200" "$@"
}
nbd_of() { echo "nbd://$(ip_of "g$1"):10809/disk"; }
GW=1  # the gateway qio (and the rounds of patterns.sh) use
qio() { qio_at "$(nbd_of "$GW")" "$@"; }  # COMMAND...: tests/e2e/patterns.sh
leader() {  # prints the id of the elected coordinator (fails when none)
  etcdctl_ get --print-value-only "$PREFIX/coordinator" |
    python3 -c "import json,sys; print(json.load(sys.stdin)['id'])"
}
leader_is() { [ "$(leader 2> /dev/null)" = "$1" ]; }
term() {  # the leader's term: the create revision of P/coordinator (empty if none)
  etcdctl_ get -w json "$PREFIX/coordinator" | python3 -c "import json,sys
kv = json.load(sys.stdin).get('kvs', [])
print(kv[0]['create_revision'] if kv else '')"
}
log_time() {  # gateway pattern -> the time (seconds since the epoch) of its first log line with it
  python3 - "$WORK/logs/gateway-$1.log" "$2" << 'PY'
import datetime, re, sys
for line in open(sys.argv[1], errors="replace"):
    m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+)\]", line)
    if m and sys.argv[2] in line:
        print(datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S.%f").timestamp())
        break
PY
}
source "$(dirname "$0")/node_state.sh"  # json_field, node_state, state_is
lease_of() {  # role id -> lease id of its registration (empty if none)
  etcdctl_ get -w json "$PREFIX/nodes/$1/$2" |
    python3 -c "import json,sys; kv=json.load(sys.stdin).get('kvs',[]); print(kv[0].get('lease','') if kv else '')"
}
registered() { [ -n "$(lease_of "$1" "$2")" ]; }
not_registered() { ! registered "$@"; }
epoch() { "${CTL[@]}" --json status | json_field epoch; }
epoch_from_etcd() { [ "$(epoch)" -gt 1 ]; }
metric() {  # cache node id, metric name -> its value (summed over labels), read in its namespace
  in_ns "c$1" curl -sf --max-time 5 "http://$(ip_of "c$1"):9301/metrics" |
    awk -v m="$2" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%d\n", s }'
}
# write_round / check_round SEED: tests/e2e/patterns.sh (64 runs of 64 KiB at i * 4 MiB)
source "$ROOT/tests/e2e/patterns.sh"
rounds=0  # rounds of 64 runs written or verified
write_r() { write_round "$1"; rounds=$((rounds + 1)); }
check_r() { check_round "$1"; rounds=$((rounds + 1)); }
since() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }  # seconds since a date +%s.%N

# 1. Registration over the bridge.
wait_for 20 "every daemon registered" bash -c \
  "[ \$(ETCDCTL_API=3 etcdctl --endpoints $ETCD_EP get --keys-only --prefix $PREFIX/nodes/ | grep -c .) = 9 ]"
wait_for 20 "a coordinator to be elected" leader
L=$(leader)
F=$((3 - L))
CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "$(ip_of "g$L"):7200")  # node_state.sh: the leader
wait_for 20 "a first membership epoch" epoch_from_etcd
wait_for 20 "the VDI at gateway $F" bash -c "qemu-io -f raw $(nbd_of "$F") -c 'read 0 4k'"
grep -q "\"address\":\"$(ip_of c2):" <<< "$(etcdctl_ get --print-value-only "$PREFIX/nodes/cache/2")" ||
  fail "cache node 2 registered without its namespace's address"
epoch0=$(epoch)
lease0=$(lease_of cache 2)
log "4 data, 3 cache nodes and 2 gateways registered from their namespaces; epoch $epoch0;" \
  "gateway $L (at $(ip_of "g$L")) leads, gateway $F (at $(ip_of "g$F")) follows"
GW=$L; write_r 7
GW=$F; check_r 7
if out=$(ctl "$F" vdi create other --size 16MiB 2>&1); then fail "the follower created a VDI: $out"; fi
echo "$out" | grep -q "not the coordinator; the coordinator is gateway $L" ||
  fail "the follower's refusal does not name the leader: $out"
log "round 7 written through gateway $L read back through gateway $F; gateway $F refuses" \
  "changes naming gateway $L"

# The client loops, A through the leader L and B through the follower F: loop write k puts
# pattern (k % 250) + 1 at (k % 64) * 4 MiB + BASE MiB (A: 1, B: 2; patterns.sh) and reads it back
# at once through the same gateway; each acknowledged write is logged with the time its
# verification ended (loop-A.log, loop-B.log). A loop stops once loop-X.stop exists.
client_loop() {  # name gateway base_mib
  local k=0 off pat out uri
  uri=$(nbd_of "$2")
  # One qemu-io per write, which writes and then reads it back on its connection, and bash
  # alone around it (says_failed, EPOCHREALTIME, nap): a loop runs about three times a second
  # for minutes, and a second qemu-io and the grep, date and sleep it ran each time were most of
  # this test's CPU (docs/testing.md, "Waiting").
  while [ ! -f "$WORK/loop-$1.stop" ]; do
    off=$(( (k % 64) * 4 + $3 ))M
    pat=$(( k % 250 + 1 ))
    out=$(qemu-io -f raw "$uri" -c "write -P $pat $off 64k" -c "read -P $pat $off 64k" 2>&1) ||
      { echo "write $k or its read-back failed: $out"; exit 1; }
    says_failed "$out" && { echo "write $k: failed, or read back stale: $out"; exit 1; }
    echo "$k $EPOCHREALTIME" >> "$WORK/loop-$1.log"
    k=$((k + 1))
    nap "$LOOP_PAUSE"  # a client, not a load (tests/e2e/patterns.sh)
  done
}
loop_ops() { [ -f "$WORK/loop-$1.log" ] && wc -l < "$WORK/loop-$1.log" || echo 0; }
loop_pid() { case "$1" in A) echo "${LOOP_A_PID:-}" ;; B) echo "${LOOP_B_PID:-}" ;; *) echo "${LOOP_C_PID:-}" ;; esac; }
loop_alive() { kill -0 "$(loop_pid "$1")" 2> /dev/null; }
loop_progress() {  # name ops -> waits (up to 2 min) until the loop made ops more writes
  local n
  n=$(loop_ops "$1")
  wait_for 120 "client loop $1 to go on" bash -c \
    "[ \$(wc -l < $WORK/loop-$1.log) -ge $((n + $2)) ] || ! kill -0 $(loop_pid "$1")"
  loop_alive "$1" || { cat "$WORK/loop-$1.out"; fail "client loop $1 failed"; }
}
stop_loop() {  # name: stops it after its current write and checks that it saw no error
  local pid
  pid=$(loop_pid "$1")
  touch "$WORK/loop-$1.stop"
  case "$1" in A) LOOP_A_PID="" ;; B) LOOP_B_PID="" ;; *) LOOP_C_PID="" ;; esac
  wait "$pid" || { cat "$WORK/loop-$1.out"; fail "client loop $1 failed"; }
}
stall() {  # name from [until] -> the longest gap between two verified writes ending after from
  awk -v from="$2" -v until="${3:-1e12}" \
    'NR > 1 && $2 > from && $2 <= until && $2 - prev > max { max = $2 - prev }
     { prev = $2 } END { printf "%.1f\n", max }' "$WORK/loop-$1.log"
}
: > "$WORK/loop-A.log"
: > "$WORK/loop-B.log"
client_loop A "$L" 1 > "$WORK/loop-A.out" 2>&1 &
LOOP_A_PID=$!
client_loop B "$F" 2 > "$WORK/loop-B.out" 2>&1 &
LOOP_B_PID=$!
wait_for 30 "the client loops to get going" bash -c \
  "[ \$(wc -l < $WORK/loop-A.log) -ge 5 ] && [ \$(wc -l < $WORK/loop-B.log) -ge 5 ]"

# 2. A round the cut node still holds dirty, then its link goes down.
GW=$L; write_r 31
ip link set "$(veth_of c2)" down
cut_at=$(date +%s.%N)
ops_at_cut=$(( $(loop_ops A) + $(loop_ops B) ))
dirty_at_cut=$(metric 2 ringcache_cachenode_dirty_bytes)
destaged_at_cut=$(metric 2 ringcache_cachenode_destage_bytes_total)
logged_at_cut=$(metric 2 ringcache_cachenode_log_records_appended_total)
log "cache node 2 cut off (link $(veth_of c2) down) holding $dirty_at_cut dirty bytes"
[ "$dirty_at_cut" -gt 0 ] || fail "cache node 2 held no dirty data at the cut"
wait_for 30 "cache node 2 to fence itself (its log)" grep -q "fenced" "$WORK/logs/cachenode-2.log"
fenced_after=$(since "$cut_at")
wait_for 30 "cache node 2's lease to expire" not_registered cache 2
expired_after=$(since "$cut_at")
wait_for 120 "the leader to take cache node 2 out of the ring" state_is 2 removed
removed_after=$(since "$cut_at")
grep -q "cache node 2: registration gone" "$WORK/logs/gateway-$L.log" ||
  fail "the leader's log does not say why cache node 2 left"
grep -q "remove cache node 2: node does not answer: replaying its write-back log" \
  "$WORK/logs/gateway-$L.log" || fail "the leader did not replay cache node 2's log"
epoch1=$(epoch)
[ "$epoch1" -gt "$epoch0" ] || fail "epoch did not grow ($epoch0 -> $epoch1)"
log "cache node 2 fenced itself after ${fenced_after} s, its lease expired after" \
  "${expired_after} s, removed at epoch $epoch1 after ${removed_after} s"
# The loops go on: some more acknowledged and verified writes after the removal, through both.
loop_progress A 10
loop_progress B 10
GW=$F; check_r 31  # acknowledged before the cut, partly dirty on the cut node: replayed, not lost
GW=$L; write_r 11  # newer data over the cut node's dirty blocks, now on other owners
GW=$F; check_r 11
"${CTL[@]}" flush --wait > /dev/null || fail "flush --wait during the cut"
[ "$(metric 2 ringcache_cachenode_dirty_bytes)" -gt 0 ] ||
  fail "the cut node lost its dirty blocks (this test wants to see them never destaged)"
log "during the cut: round 31 read back, round 11 written over it and destaged home"

# 3. The leader's link goes down (cache node 2 is still cut off); loop A (through it) stops first.
stop_loop A
ops_a=$(loop_ops A)
term_l=$(term)
[ -n "$term_l" ] || fail "no term in $PREFIX/coordinator"
elected_l=$(grep -c "coordinator: elected leader" "$WORK/logs/gateway-$L.log" || true)
ip link set "$(veth_of "g$L")" down
lcut_at=$(date +%s.%N)
log "gateway $L (the leader, term $term_l) cut off (link $(veth_of "g$L") down)"
wait_for 30 "gateway $F to be elected" leader_is "$F"
takeover=$(since "$lcut_at")
term_f=$(term)
CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "$(ip_of "g$F"):7200")  # node_state.sh: the leader
wait_for 30 "gateway $L to step down (its log)" \
  grep -q "coordinator: no longer the leader (term $term_l)" "$WORK/logs/gateway-$L.log"
wait_for 60 "gateway $F to take over (its log)" \
  grep -q "coordinator: leading (term $term_f)" "$WORK/logs/gateway-$F.log"
leading_at=$(date +%s.%N)
stepped_down=$(log_time "$L" "coordinator: no longer the leader (term $term_l)")
elected=$(log_time "$F" "coordinator: elected leader (term $term_f)")
after_cut() { if [ -n "$1" ]; then python3 -c "print(f'{$1 - $lcut_at:.1f}')"; else echo "?"; fi; }
stepdown_after=$(after_cut "$stepped_down")
elected_after=$(after_cut "$elected")
log "gateway $F elected (term $term_f) ${takeover} s after the leader's cut (its log: after" \
  "${elected_after} s; gateway $L stepped down after ${stepdown_after} s; lease TTL $TTL s)"
GW=$F; write_r 41  # newest round, written through the new leader while the old one is cut off
loop_progress B 10
log "during the leader's cut: round 41 written through gateway $F, loop B went on"
# Cache node 2 cut for longer than relog_after_ms (RELOG_S): it must not log its dirty blocks
# again. It heals under a settled leader (F leading for 10 s): a heal in the first seconds of a
# takeover is another scenario (in one run the node showed up in the ring before F re-admitted
# it; issue 31's control-plane work covers takeovers).
while [ "$(python3 -c "print(int(float('$(since "$cut_at")') < $RELOG_S + 5 or \
                                   float('$(since "$leading_at")') < 10))")" = 1 ]; do
  sleep 1
done

# 4. Heal cache node 2: it re-registers, is quarantined, re-admitted by the new leader F and
# rejoins (gateway L is still cut off). Loop B pauses so that nothing is written to the node
# before its destage counter is read again.
stop_loop B
lheal_due=$(date +%s.%N)  # the leader's cut ends below; loop B's stall is measured up to here
destaged_before_heal=$(metric 2 ringcache_cachenode_destage_bytes_total)
ip link set "$(veth_of c2)" up
healed_at=$(date +%s.%N)
log "link $(veth_of c2) up again after $(since "$cut_at") s"
wait_for 30 "cache node 2 to register again" registered cache 2
lease1=$(lease_of cache 2)
[ "$lease1" != "$lease0" ] || fail "cache node 2 kept its old lease ($lease0)"
wait_for 120 "cache node 2 to rejoin the ring" state_is 2 up
grep -q "quarantined: etcd lease was lost" "$WORK/logs/cachenode-2.log" ||
  fail "cache node 2 did not quarantine itself after its lease was lost"
# The ring shows it up once the leader decided; the node logs its re-admission when the call
# reaches it, which may come a moment later.
wait_for 30 "cache node 2 to log its re-admission" \
  grep -q "re-admitted by the gateway" "$WORK/logs/cachenode-2.log"
grep -q "add cache node 2: joined" "$WORK/logs/gateway-$F.log" ||
  fail "no rejoin in the new leader's (gateway $F) log"
rejoined_after=$(since "$healed_at")
stale_destaged=$(( $(metric 2 ringcache_cachenode_destage_bytes_total) - destaged_at_cut))
stale_logged=$(( $(metric 2 ringcache_cachenode_log_records_appended_total) - logged_at_cut))
log "cache node 2 rejoined at epoch $(epoch) under lease $lease1, ${rejoined_after} s after the" \
  "heal; between cut and re-admission it destaged $stale_destaged bytes (before the heal:" \
  "$((destaged_before_heal - destaged_at_cut))) and logged $stale_logged records"
[ "$stale_destaged" = 0 ] || fail "cache node 2 destaged $stale_destaged bytes of stale blocks"
[ "$stale_logged" = 0 ] || fail "cache node 2 logged $stale_logged records while fenced"
[ "$(metric 2 ringcache_cachenode_dirty_bytes)" = 0 ] || fail "cache node 2 kept dirty blocks"
GW=$F; check_r 41  # its objects came back to it and are read from home: no stale pre-cut block

# 5. Heal the old leader: it registers again and follows F; it must not take the lead back.
lease_l=$(lease_of gateway "$L")
ip link set "$(veth_of "g$L")" up
lhealed_at=$(date +%s.%N)
log "link $(veth_of "g$L") up again after $(since "$lcut_at") s"
wait_for 30 "gateway $L to register again" registered gateway "$L"
[ "$(lease_of gateway "$L")" != "$lease_l" ] || fail "gateway $L kept a lease through its cut"
l_follows() {  # L names F as the coordinator, does not lead, and routes with F's ring epoch
  local st
  st=$(ctl "$L" --json status) || return 1
  echo "$st" | json_field coordinator | grep -q "^gateway $F " &&
    [ "$(echo "$st" | json_field answered_by_coordinator)" = False ] &&
    [ "$(echo "$st" | json_field epoch)" = "$(epoch)" ]
}
wait_for 30 "gateway $L to follow gateway $F (its status)" l_follows
followed_after=$(since "$lhealed_at")
sleep $((2 * TTL))  # it must stay a follower: F's term goes on
[ "$(term)" = "$term_f" ] || fail "the coordinator's term changed after the heal ($term_f -> $(term))"
leader_is "$F" || fail "gateway $L took the lead back"
[ "$(grep -c "coordinator: elected leader" "$WORK/logs/gateway-$L.log" || true)" = "$elected_l" ] ||
  fail "gateway $L was elected again"
if out=$(ctl "$L" vdi create other --size 16MiB 2>&1); then fail "gateway $L created a VDI: $out"; fi
echo "$out" | grep -q "not the coordinator; the coordinator is gateway $F" ||
  fail "gateway $L's refusal does not name gateway $F: $out"
l_follows || fail "gateway $L no longer follows gateway $F"
log "gateway $L follows gateway $F ${followed_after} s after its heal, refuses changes naming it;" \
  "term $term_f unchanged after $((2 * TTL)) s more"
# Every pattern written before and during the cuts reads back through both gateways: round 41
# (during the leader's cut), loop A's last writes (before it), loop B's (before and during).
ops_b=$(loop_ops B)
for GW in "$F" "$L"; do
  check_r 41
  check_loop_slots "$ops_a" 1
  check_loop_slots "$ops_b" 2
done
log "round 41 and the last writes of both loops read back through gateways $F and $L"
GW=$L; write_r 19
GW=$F; check_r 19
"${CTL[@]}" flush --wait > /dev/null || fail "flush --wait after the rejoin"
GW=$L; check_r 19
for i in 1 2 3; do state_is "$i" up || fail "cache node $i is not up in node list"; done

# 6. A partial partition (issue 31): cache node 3 cut from the coordinator F and from etcd only
# (iptables in its namespace), while gateway L still reaches it and client loop C writes through
# L over every cache node's objects. The node's lease runs out; F cannot reach it, so it seals
# its write-back log on every data node and replays it; L follows F's ring. A write cache node 3
# accepted before it knew is refused by the seal (or by its own lease check) instead of
# acknowledged and missed, so loop C sees no error, and every write it made reads back.
pp_note="skipped (iptables not installed)"
if command -v iptables > /dev/null; then
  : > "$WORK/loop-C.log"
  client_loop C "$L" 3 > "$WORK/loop-C.out" 2>&1 &
  LOOP_C_PID=$!
  wait_for 30 "client loop C to get going" bash -c "[ \$(wc -l < $WORK/loop-C.log) -ge 5 ]"
  sealed_before=0
  for d in 1 2 3 4; do
    sealed_before=$((sealed_before + $(in_ns "d$d" curl -sf --max-time 5 \
      "http://$(ip_of "d$d"):9401/metrics" | awk '$1 == "ringcache_datanode_sealed_log_appends_refused_total" { s += $2 } END { printf "%d", s }')))
  done
  for peer in "g$F" etcd; do
    in_ns c3 iptables -w 5 -I INPUT -s "$(ip_of "$peer")" -j DROP
    in_ns c3 iptables -w 5 -I OUTPUT -d "$(ip_of "$peer")" -j DROP
  done
  pcut_at=$(date +%s.%N)
  log "cache node 3 cut from gateway $F (the coordinator) and etcd; gateway $L still reaches it"
  wait_for 60 "the coordinator to take cache node 3 out of the ring" state_is 3 removed
  premoved_after=$(since "$pcut_at")
  grep -q "remove cache node 3: node does not answer: replaying its write-back log" \
    "$WORK/logs/gateway-$F.log" || fail "gateway $F did not replay cache node 3's log"
  loop_progress C 10
  for peer in "g$F" etcd; do
    in_ns c3 iptables -w 5 -D INPUT -s "$(ip_of "$peer")" -j DROP
    in_ns c3 iptables -w 5 -D OUTPUT -d "$(ip_of "$peer")" -j DROP
  done
  pheal_at=$(date +%s.%N)
  wait_for 120 "cache node 3 to rejoin the ring" state_is 3 up
  loop_progress C 10
  stop_loop C
  ops_c=$(loop_ops C)
  sealed=0
  for d in 1 2 3 4; do
    sealed=$((sealed + $(in_ns "d$d" curl -sf --max-time 5 \
      "http://$(ip_of "d$d"):9401/metrics" | awk '$1 == "ringcache_datanode_sealed_log_appends_refused_total" { s += $2 } END { printf "%d", s }')))
  done
  for GW in "$F" "$L"; do check_loop_slots "$ops_c" 3; done
  stall_c=$(stall C "$pcut_at" "$pheal_at")
  pp_note="removed after ${premoved_after} s, loop C ($ops_c writes through gateway $L) stalled at most ${stall_c} s and saw no error, $((sealed - sealed_before)) log appends refused by a seal, rejoined $(since "$pheal_at") s after the heal"
  log "partial partition: $pp_note; loop C's last writes read back through both gateways"
fi

stall_a=$(stall A "$cut_at")
stall_b=$(stall B "$cut_at" "$lcut_at")
stall_lcut=$(stall B "$lcut_at" "$lheal_due")
ops=$(( ops_a + ops_b ))
log "summary: $((rounds * 64)) pattern runs written or verified in $rounds rounds; $ops client" \
  "loop writes ($ops_a through gateway $L, $ops_b through gateway $F), each read back at once and" \
  "the last 64 of each loop again through both gateways, $((ops - ops_at_cut)) of them during" \
  "and after the cache node's cut; longest client stall after cache node 2's cut ${stall_a} s" \
  "through the leader, ${stall_b} s through the follower (lease TTL $TTL s: fenced after" \
  "${fenced_after} s, lease expired after ${expired_after} s, removed after ${removed_after} s);" \
  "$dirty_at_cut dirty bytes on the cut node, none destaged or logged again by it; rejoined" \
  "${rejoined_after} s after the heal, decided by the new leader"
log "leader cut: gateway $F elected ${takeover} s after gateway $L's cut (lease TTL $TTL s);" \
  "longest client stall through gateway $F during the leader's cut ${stall_lcut} s; gateway $L" \
  "followed again ${followed_after} s after its heal; partial partition: $pp_note;" \
  "total $(( $(date +%s) - START )) s"
echo "takeover_seconds=$takeover leader_cut_stall_seconds=$stall_lcut"
# Expected: about the lease time plus 2 s (a gateway cancels requests in flight to a removed
# node that does not answer after 2 s, Router::RemoveCacheNode); 60 s only bounds a noisy machine.
for s in "$stall_a" "$stall_b"; do
  python3 -c "import sys; sys.exit(0 if $s < 60 else 1)" ||
    fail "the client stalled $s s after the cache node's cut (bound: 60 s)"
done
# The follower's data path does not wait for the election: well under a second is expected.
python3 -c "import sys; sys.exit(0 if $stall_lcut < 20 else 1)" ||
  fail "the client through gateway $F stalled ${stall_lcut} s during the leader's cut (bound: 20 s)"
python3 -c "import sys; sys.exit(0 if $takeover < 30 else 1)" ||
  fail "the takeover took ${takeover} s"
log "PASS"
