#!/usr/bin/env bash
# Health in static mode (no etcd): deploy/cluster.sh starts 3 cache nodes and 3 data nodes on
# 127.0.0.1 without leases. A cache node killed with SIGKILL must show as `down` in
# `ringcachectl node list` (the gateway's health watch asks every node each second), the
# gateway must log it, `status` and `stats` must answer (with what they know, not after a long
# hang blamed on the gateway), and the node shows `up` again once restarted. A data node killed
# the same way shows `down` too. Every daemon answers /readyz (200 "ready") and /loglevel (GET;
# PUT changes it at run time, a bad level is refused); a cache node whose SSD fails (the disk
# fault seam: ENOSPC) is fenced and its /readyz says 503 while /healthz stays 200. Waits are
# bounded by a wall-clock deadline; nothing asserts on speed (the times are printed).
#
#   tests/e2e/static_health_test.sh BUILD_DIR
set -euo pipefail

BUILD=$(cd "${1:?usage: static_health_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-health.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own

log() { echo "[health] $(date +%T) $*"; }
fail() {
  echo "[health] FAIL: $*" >&2
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
source "$(dirname "$0")/node_state.sh"  # role_state
wait_state() {  # ROLE ID STATE: bounded wait; prints the seconds it took
  local start=$SECONDS
  while [ "$(role_state "$1" "$2")" != "$3" ]; do
    [ $((SECONDS - start)) -lt 60 ] || fail "$1 $2 not $3 after 60 s (node list: $(role_state "$1" "$2"))"
    sleep 0.2
  done
  echo $((SECONDS - start))
}

cluster up --base-port "$BASE" --cache-nodes 3 --data-nodes 3 --replication 2 \
  --ssd-size 64MiB --ram-size 8MiB --create-vdi disk:64MiB --fault-seams > "$WORK/up.log" 2>&1 ||
  { cat "$WORK/up.log"; fail "cluster up"; }
log "static cluster up on base port $BASE"
wait_state cachenode 2 up > /dev/null

# /readyz and /loglevel on every daemon's HTTP port.
http() {  # METHOD PORT PATH [BODY]: prints "<status> <body>"
  curl -s -o "$WORK/body" -w '%{http_code}' -X "$1" ${4:+--data-binary "$4"} \
    "http://127.0.0.1:$2$3" > "$WORK/code" || true
  echo "$(cat "$WORK/code") $(tr '\n' ' ' < "$WORK/body")"
}
for port in $((BASE+11)) $((BASE+201)) $((BASE+202)) $((BASE+203)) $((BASE+401)) $((BASE+402)) \
            $((BASE+403)); do
  got=$(http GET "$port" /readyz)
  [ "$got" = "200 ready " ] || fail "/readyz on port $port: $got"
done
log "every daemon's /readyz says ready"
got=$(http GET $((BASE+201)) /loglevel)
[ "$got" = "200 info " ] || fail "GET /loglevel on data node 1: $got"
got=$(http PUT $((BASE+201)) /loglevel debug)
[ "$got" = "200 debug " ] || fail "PUT /loglevel debug on data node 1: $got"
[ "$(http GET $((BASE+201)) /loglevel)" = "200 debug " ] || fail "the level did not stay debug"
got=$(http PUT $((BASE+201)) /loglevel loud)
case "$got" in "400 unknown log level 'loud'"*) ;; *) fail "PUT /loglevel loud: $got" ;; esac
grep -q "log level info -> debug (PUT /loglevel)" "$WORK"/cluster/logs/datanode-1.log ||
  fail "data node 1 did not log the change of its log level"
log "/loglevel: read, changed to debug at run time, a bad level refused"

cluster kill cachenode 2 > /dev/null
log "cache node 2 killed"
took=$(wait_state cachenode 2 down)
log "node list shows cache node 2 down after ${took} s"
grep -q "cache node 2: down" "$WORK"/cluster/logs/gateway-1.log ||
  fail "the gateway did not log cache node 2's failure"
start=$SECONDS
timeout 20 "${CTL[@]}" status > "$WORK/status.txt" 2>&1 || { cat "$WORK/status.txt"; fail "status did not answer"; }
timeout 20 "${CTL[@]}" stats > "$WORK/stats.txt" 2>&1 || { cat "$WORK/stats.txt"; fail "stats did not answer"; }
log "status and stats answered in $((SECONDS - start)) s with cache node 2 down"
grep -q "down" "$WORK/status.txt" || { cat "$WORK/status.txt"; fail "status does not show the down node"; }
head -1 "$WORK/status.txt" | grep -q "^health: *ERR: cache node 2 down" ||
  { cat "$WORK/status.txt"; fail "status does not open with the ERR health line"; }

cluster start cachenode 2 > /dev/null || fail "restart cache node 2"
took=$(wait_state cachenode 2 up)
log "cache node 2 up again after ${took} s"

cluster kill datanode 3 > /dev/null
took=$(wait_state datanode 3 down)
log "node list shows data node 3 down after ${took} s"
grep -q "data node 3: down" "$WORK"/cluster/logs/gateway-1.log ||
  fail "the gateway did not log data node 3's failure"

# A cache node whose SSD fails is fenced: not ready, still alive. (Static mode: it stays fenced
# until removed, so this comes last.)
echo "full=1" > "$WORK/cluster/faults/cachenode-1"
start=$SECONDS
while :; do
  # Writes over the whole VDI reach every cache node; those of node 1 fail (unacknowledged).
  timeout 30 qemu-io -f raw -c "write -P 0x33 0 8M" "nbd://127.0.0.1:$((BASE+9))/disk" \
    > /dev/null 2>&1 || true
  got=$(http GET $((BASE+401)) /readyz)
  case "$got" in "503 not ready: cache node: "*) break ;; esac
  [ $((SECONDS - start)) -lt 60 ] || fail "cache node 1's /readyz with a full SSD: $got"
  sleep 0.5
done
log "cache node 1 with a full SSD: /readyz $got"
got=$(http GET $((BASE+401)) /healthz)
case "$got" in "200 "*) ;; *) fail "cache node 1's /healthz when fenced: $got" ;; esac
log "PASS"
