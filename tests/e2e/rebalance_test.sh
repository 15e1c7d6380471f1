#!/usr/bin/env bash
# Rebalancing under load (issue 5 §4, docs/design.md §7): fio writes with verification through NBD
# (ioengine=nbd) to a cluster started by `deploy/cluster.sh up --etcd` (etcd, 4 data nodes with
# replication 2, 3 cache nodes, a gateway) for the whole time while, one after another:
#  1. cache node 4, which the cluster file does not list, is added (`cluster.sh add cachenode 4`):
#     it registers in etcd and the gateway takes it into the ring (`ringcachectl node list`: up);
#  2. cache node 2 is drained (`ringcachectl node drain 2`: destage, leave the ring);
#  3. data node 5 is added (`cluster.sh add datanode 5`): the gateway moves replicas to it;
#     `ringcachectl --json status` shows the rebalance idle again with 5 data nodes up.
# Each change waits for a fio run to end after the one before, so that blocks written before a
# change are read back after it. The writer is a loop of fio runs. Each run writes its whole region once (randwrite, random map)
# with crc32c headers, verifies what it wrote while writing (verify_backlog) and everything at the
# end (do_verify), and uses its own block size, so that a block left over from an earlier run
# fails verification (bad header length) instead of passing as valid. The loop stops after the
# run that follows the last change. Then: every run exited 0 with no verify error, and a separate
# fio verify-only pass over the last run's blocks reads everything back. Prints fio's numbers.
# Exits 77 (skipped) when etcd, etcdctl or fio is not installed.
#
#   tests/e2e/rebalance_test.sh BUILD_DIR
set -euo pipefail

for tool in etcd etcdctl fio python3; do
  command -v "$tool" > /dev/null || { echo "$tool not installed: skipping"; exit 77; }
done
fio --enghelp=nbd > /dev/null 2>&1 || { echo "fio has no nbd engine: skipping"; exit 77; }
BUILD=$(cd "${1:?usage: rebalance_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-rebalance.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own, below the ephemeral range
REGION=40M  # per fio job; 2 jobs, 64 MiB apart

log() { echo "[rebalance] $(date +%T) $*"; }
fail() {
  echo "[rebalance] FAIL: $*" >&2
  tail -n 30 "$WORK"/cluster/logs/gateway-1.log >&2 || true
  exit 1
}
cluster() { RINGCACHE_BIN=$BUILD bash "$ROOT/deploy/cluster.sh" "$@" --dir "$WORK/cluster"; }
cleanup() {
  set +e
  if [ -n "${LOOP_PID:-}" ]; then
    touch "$WORK/stop-now"
    kill "$LOOP_PID" 2> /dev/null
    [ -f "$WORK/fio.pid" ] && kill "$(cat "$WORK/fio.pid")" 2> /dev/null
    wait "$LOOP_PID" 2> /dev/null
  fi
  cluster down > /dev/null 2>&1  # stops etcd too
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
URI="nbd://127.0.0.1:$((BASE+9))/disk"
source "$(dirname "$0")/wait_for.sh"  # wait_for SECONDS WHAT COMMAND...
# A wait ends early, failed, if the fio loop stopped.
fio_loop_guard() {
  loop_alive || fail "the fio loop stopped while waiting for: $1 ($(tail -3 "$WORK/loop.log"))"
}
WAIT_FOR_GUARD=fio_loop_guard
loop_alive() { [ -z "${LOOP_PID:-}" ] || kill -0 "$LOOP_PID" 2> /dev/null; }
# State of node ROLE ID in `ringcachectl --json node list` ("absent" if it is not listed).
node_state() {
  "${CTL[@]}" --json node list | python3 -c "
import json, sys
nodes = json.load(sys.stdin)
nodes = nodes['nodes'] if isinstance(nodes, dict) else nodes
print(([n.get('state') for n in nodes if n['role'] == '$1' and int(n['id']) == $2] + ['absent'])[0])"
}
state_is() { [ "$(node_state "$1" "$2")" = "$3" ]; }
# True when the data rebalance is idle and the data ring has `$1` members, all listed up.
data_ring_settled() {
  "${CTL[@]}" --json status | python3 -c "
import json, sys
s = json.load(sys.stdin)
up = [n for n in s['nodes'] if n['role'] == 'datanode' and n.get('state') == 'up']
r = s.get('rebalance', {})
ok = r.get('state') == 'idle' and len(up) == $1 and len(r.get('members', [])) == $1
sys.exit(0 if ok else 1)"
}
dirty_bytes() {
  "${CTL[@]}" --json status | python3 -c "import json,sys; print(json.load(sys.stdin)['dirty_bytes'])"
}
has_dirty() { [ "$(dirty_bytes)" -gt 0 ]; }
run_after() { [ "$(cat "$WORK/current")" -gt "$1" ]; }
# Waits until the fio run in progress has finished (its verify pass included) and the next began:
# so every change happens with blocks written before it and read back after it.
next_run() {
  local r
  r=$(cat "$WORK/current")
  wait_for 300 "fio run $r to finish" run_after "$r"
}

# The job of fio run $1: block size 4 KiB × run (a block of an earlier run never verifies).
write_job() {  # run
  local bs=$(( (($1 - 1) % 16 + 1) * 4 ))k
  cat > "$WORK/run-$1.fio" << EOF
[global]
ioengine=nbd
uri=$URI
rw=randwrite
bs=$bs
iodepth=8
size=$REGION
numjobs=2
offset_increment=64M
verify=crc32c
verify_backlog=128
verify_fatal=1
do_verify=1
verify_state_save=0
randseed=$1
group_reporting
[run$1]
EOF
}

cluster up --etcd --base-port "$BASE" --cache-nodes 3 --data-nodes 4 --replication 2 \
  --ssd-size 128MiB --ram-size 8MiB --create-vdi disk:128MiB > "$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; fail "cluster up --etcd"; }
log "cluster up on base port $BASE: etcd, 4 data nodes (replication 2), 3 cache nodes, a gateway"

# The writer: fio runs one after another until the run named in $WORK/last has finished.
(
  run=0
  while :; do
    run=$((run + 1))
    echo "$run" > "$WORK/current"
    write_job "$run"
    fio --output-format=json --output="$WORK/run-$run.json" "$WORK/run-$run.fio" \
      2> "$WORK/run-$run.err" &
    echo $! > "$WORK/fio.pid"
    if ! wait $!; then
      echo "fio run $run failed: $(head -c 600 "$WORK/run-$run.err")"
      exit 1
    fi
    echo "fio run $run done"
    if [ -f "$WORK/stop-now" ]; then exit 1; fi
    if [ -f "$WORK/last" ] && [ "$run" -ge "$(cat "$WORK/last")" ]; then exit 0; fi
  done
) > "$WORK/loop.log" 2>&1 &
LOOP_PID=$!
wait_for 60 "fio to write (dirty data in the cache nodes)" has_dirty
next_run
log "fio writing to $URI (run $(cat "$WORK/current")); dirty: $(dirty_bytes) bytes"

# 1. A cache node that the cluster file does not list joins.
t0=$SECONDS
cluster add cachenode 4 > "$WORK/add-cache.log" 2>&1 ||
  { cat "$WORK/add-cache.log"; fail "cluster.sh add cachenode 4"; }
wait_for 120 "the gateway to take cache node 4 into the ring" \
  grep -q "add cache node 4: joined" "$WORK/cluster/logs/gateway-1.log"
wait_for 30 "cache node 4 (joined the ring) to show up in ringcachectl node list" \
  state_is cachenode 4 up
log "1. cache node 4 added and in the ring after $((SECONDS - t0)) s (fio at run $(cat "$WORK/current"))"
next_run

# 2. Drain a cache node of the cluster file.
t0=$SECONDS
log "draining cache node 2; dirty bytes in the cache nodes: $(dirty_bytes)"
"${CTL[@]}" node drain 2 > "$WORK/drain.log" 2>&1 || { cat "$WORK/drain.log"; fail "node drain 2"; }
state_is cachenode 2 removed || fail "cache node 2 is $(node_state cachenode 2) after its drain"
# Progress lines come once a second while the drain runs (a short drain may show none).
if grep -v "drained and removed" "$WORK/drain.log" | grep -q "^cachenode 2: "; then
  grep -Eq "cachenode 2: destaging its dirty data, .* dirty left, .*% done, .*, ETA" \
    "$WORK/drain.log" || { cat "$WORK/drain.log"; fail "drain progress lines look wrong"; }
fi
sed 's/^/    /' "$WORK/drain.log"
loop_alive || fail "the fio loop stopped: $(tail -3 "$WORK/loop.log")"
log "2. cache node 2 drained in $((SECONDS - t0)) s (fio at run $(cat "$WORK/current"))"
next_run

# 3. A data node joins; replicas move to it.
t0=$SECONDS
log "adding data node 5; dirty bytes in the cache nodes: $(dirty_bytes)"
cluster add datanode 5 > "$WORK/add-data.log" 2>&1 ||
  { cat "$WORK/add-data.log"; fail "cluster.sh add datanode 5"; }
wait_for 600 "the rebalance to data node 5 to finish (idle, 5 data nodes up)" data_ring_settled 5
log "3. data node 5 added; rebalance done after $((SECONDS - t0)) s (fio at run $(cat "$WORK/current"))"
"${CTL[@]}" status | sed 's/^/    /'

# One more full run after the last change, then the loop ends.
echo $(( $(cat "$WORK/current") + 1 )) > "$WORK/last"
log "waiting for fio run $(cat "$WORK/last") to finish"
wait "$LOOP_PID" || { LOOP_PID=""; cat "$WORK/loop.log"; fail "fio loop"; }
LOOP_PID=""
last=$(cat "$WORK/last")

# Every run: exit 0 (checked by the loop), no job error, no verify message.
python3 - "$WORK" "$last" << 'EOF' || fail "fio reported errors"
import json, sys
work, last = sys.argv[1], int(sys.argv[2])
tw = tr = 0
bad = 0
for run in range(1, last + 1):
    job = json.load(open(f"{work}/run-{run}.json"))["jobs"][0]
    w, r = job["write"], job["read"]
    errs = [l for l in open(f"{work}/run-{run}.err") if "verify" in l]
    bad += job["error"] != 0 or len(errs) > 0
    tw += w["io_bytes"]
    tr += r["io_bytes"]
    bs = [l.split("=")[1].strip() for l in open(f"{work}/run-{run}.fio") if l.startswith("bs=")][0]
    print(f"    run {run}: bs {bs}: wrote {w['io_bytes'] >> 20} MiB "
          f"({w['bw_bytes'] / 2**20:.1f} MiB/s, {w['iops']:.0f} IOPS, "
          f"{w['clat_ns']['mean'] / 1e3:.0f} us mean), verified {r['io_bytes'] >> 20} MiB "
          f"({r['total_ios']} blocks), error {job['error']}, verify messages {len(errs)}")
print(f"    total: wrote {tw >> 20} MiB, verified {tr >> 20} MiB in {last} runs, "
      f"{bad} runs with errors")
sys.exit(1 if bad else 0)
EOF

# A separate pass: read back every block of the last run.
start=$(date +%s.%N)
fio --verify_only --output-format=json --output="$WORK/final.json" "$WORK/run-$last.fio" \
  2> "$WORK/final.err" || { head -c 2000 "$WORK/final.err"; fail "final verify-only pass"; }
! grep -q verify "$WORK/final.err" || { head -c 2000 "$WORK/final.err"; fail "final verify messages"; }
python3 - "$WORK/final.json" "$start" << 'EOF'
import json, sys, time
job = json.load(open(sys.argv[1]))["jobs"][0]
r = job["read"]
print(f"    final verify-only pass: {r['io_bytes'] >> 20} MiB, {r['total_ios']} blocks "
      f"in {time.time() - float(sys.argv[2]):.2f} s, error {job['error']}")
if job["error"] != 0 or r["io_bytes"] == 0:
    sys.exit(1)
EOF
log "PASS"
