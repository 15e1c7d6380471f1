#!/usr/bin/env bash
# Cache-node removal end to end (issue 6 §3, docs/design.md §7), on separate processes started by
# deploy/cluster.sh on 127.0.0.1: 3 cache nodes, 4 data nodes, one VDI with N = 3.
#  1. qemu-io writes patterns that stay dirty in the cache nodes (write-back, not destaged).
#  2. Cache node 2 is killed with SIGKILL and removed with `ringcachectl node remove 2`: its
#     write-back log is replayed home from the data nodes and its objects move to the others.
#  3. Every pattern reads back through NBD; then cache node 3 (alive) is removed too (it
#     destages first), a second round of patterns is written and read back.
#  4. The gateway restarts: it still routes around the removed nodes (the removal is persistent)
#     and every pattern still reads back.
#  5. `ringcachectl node undrain 3` brings node 3 back; the second round reads back, a third
#     overwrites it; after another gateway restart node 3 is still in the ring, node 2 still
#     out, and the third round reads back.
#
#   tests/e2e/remove_node_test.sh BUILD_DIR
set -euo pipefail

BUILD=$(cd "${1:?usage: remove_node_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-remove.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own, below the ephemeral range

log() { echo "[remove] $*"; }
fail() {
  echo "[remove] FAIL: $*" >&2
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

command -v qemu-io > /dev/null || { echo "qemu-io not installed: skipping"; exit 0; }
CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+10))")
NBD="nbd://127.0.0.1:$((BASE+9))/disk"
qio() { qio_at "$NBD" "$@"; }  # COMMAND...: tests/e2e/patterns.sh

cluster up --base-port "$BASE" --cache-nodes 3 --data-nodes 4 --replication 3 \
  --ssd-size 128MiB --ram-size 8MiB --create-vdi disk:256MiB > "$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; fail "cluster up"; }
log "cluster up on base port $BASE"

# write_round / check_round SEED: tests/e2e/patterns.sh
source "$ROOT/tests/e2e/patterns.sh"

write_round 7
dirty=$("${CTL[@]}" --json status | python3 -c 'import json,sys; print(json.load(sys.stdin)["dirty_bytes"])')
log "written; dirty bytes in the cache nodes: $dirty"
[ "$dirty" -gt 0 ] || fail "expected dirty data before the removal"

cluster kill cachenode 2 > /dev/null
log "cache node 2 killed; removing it"
"${CTL[@]}" node remove 2 || fail "node remove 2"
check_round 7
log "all data read back after replaying cache node 2's log"

"${CTL[@]}" node drain 3 || fail "node drain 3 (alive)"
check_round 7
write_round 11
check_round 11
log "cache node 3 drained; second round written and read back"

"${CTL[@]}" --json node list > "$WORK/nodes.json"
python3 - "$WORK/nodes.json" <<'EOF' || fail "node list does not show the removals"
import json, sys
nodes = json.load(open(sys.argv[1]))
nodes = nodes["nodes"] if isinstance(nodes, dict) else nodes
state = {(n["role"], int(n["id"])): n.get("state") for n in nodes}
assert state[("cachenode", 2)] == "removed", state
assert state[("cachenode", 3)] == "removed", state
EOF

cluster kill gateway 1 > /dev/null
cluster start gateway 1 > /dev/null || fail "gateway restart"
check_round 11
log "gateway restarted without the removed nodes; all data read back"

# 5. Undrain: drained node 3 (still running) comes back into the ring and takes writes; the
#    undrain is as persistent as the removal was. Node 2 (dead) stays out.
out=$("${CTL[@]}" node undrain 3) || fail "node undrain 3: $out"
[ "$out" = "cache node 3: back in the ring" ] || fail "node undrain 3 said: $out"
out=$("${CTL[@]}" node undrain 3 2>&1) && fail "a second undrain of node 3 was accepted: $out"
case "$out" in *"is in the ring: nothing to undrain"*) ;; *) fail "second undrain: $out" ;; esac
check_round 11
write_round 13
check_round 13
cluster kill gateway 1 > /dev/null
cluster start gateway 1 > /dev/null || fail "gateway restart after the undrain"
# The health watch's first round turns "configured" into "up"; "removed" holds from the start.
states() {
  "${CTL[@]}" --json node list | python3 -c '
import json, sys
print(" ".join("%d=%s" % (n["id"], n["state"]) for n in json.load(sys.stdin) if n["role"] == "cachenode"))'
}
for _ in $(seq 1 100); do
  [ "$(states)" = "1=up 2=removed 3=up" ] && break
  sleep 0.1
done
[ "$(states)" = "1=up 2=removed 3=up" ] ||
  fail "cache node states after the undrain and a gateway restart: $(states)"
check_round 13
log "cache node 3 undrained: back in the ring, kept across a gateway restart; all data read back"
log "PASS"
