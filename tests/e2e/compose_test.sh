#!/usr/bin/env bash
# The compose cluster end to end (deploy/compose/): etcd, 3 data nodes, 3 cache nodes, the gateway
# and Prometheus in containers of the image built from BUILD_DIR, in cluster mode, with the NBD
# port published on 127.0.0.1. The client (qemu-img, qemu-io, ringcachectl) runs on the host.
#  0. Starts dockerd when `docker info` fails (and stops it at the end); makes the base image when
#     Docker does not have it (deploy/compose/make-base-image.sh: debootstrap, the first time
#     only); builds the image (deploy/compose/build-image.sh, tag ringcache:compose-test);
#     `docker-compose up -d` under a project name and free host ports of this run; waits until
#     every container is healthy and the gateway sees 3 cache nodes up.
#  1. qemu-img info of the VDI the gateway created; `ringcachectl vdi create` (through the
#     published admin port) of a second one; qemu-io writes 1 MiB of 0x5a and reads it back;
#     Prometheus scrapes every daemon.
#  2. While a client loop writes (one qemu-io per write, each acknowledged write logged), cache
#     node 2 is killed (`docker kill`) holding dirty blocks. Its lease expires, the gateway takes
#     it out of the ring and replays its log; `docker-compose start` brings it back and it
#     rejoins. The loop saw no client error and every acknowledged write reads back.
#  3. Cache node 2 is cut off (`docker network disconnect`) holding dirty blocks: it fences itself
#     (its log), the gateway removes it; what was acknowledged before reads back, a newer round
#     over its blocks reads back new (no stale read). Reconnected (same alias), it re-registers,
#     is re-admitted and rejoins; the newer round still reads back, and a new one too.
#  4. `docker-compose down -v`: no container, volume or network of the project is left.
#  5. The same cluster under TLS (-f docker-compose.tls.yml, a second project): tls-init makes
#     the CA and certificates (into a directory of this run), every container becomes healthy
#     with its HTTPS health check; qemu-io with tls-creds-x509 and the client certificate writes
#     and reads back, a plaintext client is refused with the reason; ringcachectl works with the
#     admin certificate and is refused without; Prometheus scrapes every daemon and etcd over
#     HTTPS; down -v leaves nothing (the CA volume too).
#     COMPOSE_TEST_ONLY=tls runs this phase alone.
# Exits 77 (skipped) only when no Docker engine can run: docker or dockerd missing, dockerd
# cannot be started (not root, or it fails), or it does not answer within 60 s.
#
# A running Docker engine sets the iptables FORWARD policy to DROP (tests/e2e/
# netns_cluster_test.sh adds its own ACCEPT rules for that). When this test started dockerd it
# stops it at the end and puts the FORWARD policy back as it found it; an engine that was running
# already is left running.
#
#   tests/e2e/compose_test.sh BUILD_DIR
set -euo pipefail

BUILD=$(cd "${1:?usage: compose_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-compose.XXXXXX")
START=$SECONDS
COMPOSE_FILE_=$ROOT/deploy/compose/docker-compose.yml
PROJECT=rctest$(date +%s)$((RANDOM % 1000))
IMAGE=${RINGCACHE_TEST_IMAGE:-ringcache:compose-test}

log() { echo "[compose] $(date +%T) $*"; }
skip() { echo "[compose] SKIP: $*"; exit 77; }
fail() {
  echo "[compose] FAIL: $*" >&2
  if [ -n "${UP:-}" ]; then
    for s in gateway cachenode2; do
      echo "--- $s (last lines of its log)" >&2
      dc logs --no-color --tail 25 "$s" >&2 2> /dev/null || true
    done
  fi
  exit 1
}

STARTED_DOCKERD=""
FORWARD_POLICY=""
stop_dockerd() {
  [ -n "$STARTED_DOCKERD" ] || return 0
  kill -TERM "$STARTED_DOCKERD" 2> /dev/null || true
  for _ in $(seq 1 150); do
    kill -0 "$STARTED_DOCKERD" 2> /dev/null || break
    sleep 0.2
  done
  kill -0 "$STARTED_DOCKERD" 2> /dev/null && kill -KILL "$STARTED_DOCKERD" 2> /dev/null
  wait "$STARTED_DOCKERD" 2> /dev/null || true
  STARTED_DOCKERD=""
  # dockerd set the FORWARD policy to DROP and leaves it so: put back what was there before.
  if [ -n "$FORWARD_POLICY" ] && command -v iptables > /dev/null; then
    iptables -w 5 -P FORWARD "$FORWARD_POLICY" 2> /dev/null || true
  fi
  log "stopped the dockerd this test started (FORWARD policy ${FORWARD_POLICY:-unchanged})"
}
cleanup() {
  set +e
  [ -n "${LOOP_PID:-}" ] && kill "$LOOP_PID" 2> /dev/null
  if [ -n "${UP:-}" ]; then
    dc down -v --remove-orphans --timeout 10 > "$WORK/down-cleanup.log" 2>&1
  fi
  stop_dockerd
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  if [ -n "${PASSED:-}" ] && [ -n "${DOCKERD_LOG:-}" ]; then rm -f "$DOCKERD_LOG"; fi
}
trap cleanup EXIT

# 0. A Docker engine: the one running, or one started here.
command -v docker > /dev/null || skip "docker is not installed (Debian: docker.io)"
if ! docker info > /dev/null 2>&1; then
  command -v dockerd > /dev/null || skip "docker info fails and dockerd is not installed"
  [ "$(id -u)" = 0 ] || skip "docker info fails and starting dockerd needs root (uid $(id -u))"
  if command -v iptables > /dev/null; then
    FORWARD_POLICY=$(iptables -w 5 -S FORWARD 2> /dev/null | sed -n 's/^-P FORWARD //p')
  fi
  DOCKERD_LOG=$(mktemp /tmp/rc-compose-dockerd.XXXXXX.log)
  dockerd > "$DOCKERD_LOG" 2>&1 &
  STARTED_DOCKERD=$!
  log "docker info failed: started dockerd (pid $STARTED_DOCKERD, log $DOCKERD_LOG)"
  for _ in $(seq 1 120); do
    docker info > /dev/null 2>&1 && break
    kill -0 "$STARTED_DOCKERD" 2> /dev/null || break
    sleep 0.5
  done
  if ! docker info > /dev/null 2>&1; then
    tail -n 15 "$DOCKERD_LOG" >&2
    stop_dockerd
    skip "the Docker engine cannot start here (dockerd log above: $DOCKERD_LOG)"
  fi
fi
for tool in docker-compose qemu-img qemu-io curl python3; do
  command -v "$tool" > /dev/null ||
    fail "$tool is not installed (deploy/install-deps.sh installs it)"
done
log "Docker engine $(docker version -f '{{.Server.Version}}' 2> /dev/null), $(docker-compose version --short 2> /dev/null | head -1 | sed 's/^/docker-compose /')"

# The base image (the first time: debootstrap from Debian's mirror) and the image of BUILD_DIR.
bash "$ROOT/deploy/compose/make-base-image.sh" > "$WORK/base.log" 2>&1 ||
  { cat "$WORK/base.log" >&2; fail "making the base image"; }
t=$SECONDS
RINGCACHE_IMAGE=$IMAGE bash "$ROOT/deploy/compose/build-image.sh" "$BUILD" > "$WORK/build.log" 2>&1 ||
  { cat "$WORK/build.log" >&2; fail "building the image"; }
log "image $IMAGE built from $BUILD in $((SECONDS - t)) s"

# Free host ports (tests/e2e/ports.sh: P+9, P+10 and P+11 are free on 127.0.0.1).
source "$(dirname "$0")/ports.sh"
BASE=$(pick_base_port)
NBD_PORT=$((BASE + 9))
ADMIN_PORT=$((BASE + 10))
PROM_PORT=$((BASE + 11))
COMPOSE_FILES=(-f "$COMPOSE_FILE_")
TLS_DIR=$WORK/tls
dc() {
  RINGCACHE_IMAGE=$IMAGE RINGCACHE_NBD_PORT=$NBD_PORT RINGCACHE_ADMIN_PORT=$ADMIN_PORT \
    RINGCACHE_PROMETHEUS_PORT=$PROM_PORT RINGCACHE_VDI=demo:1GiB RINGCACHE_TLS_DIR=$TLS_DIR \
    docker-compose --ansi never -p "$PROJECT" "${COMPOSE_FILES[@]}" "$@"
}
LABEL=com.docker.compose.project=$PROJECT
# down -v, then nothing of the project may be left.
down_clean() {
  local t=$SECONDS
  dc down -v --timeout 20 > "$WORK/down.log" 2>&1 ||
    { cat "$WORK/down.log" >&2; fail "docker-compose down -v"; }
  UP=""
  left_c=$(docker ps -aq --filter "label=$LABEL")
  left_v=$(docker volume ls -q --filter "label=$LABEL")
  left_n=$(docker network ls -q --filter "label=$LABEL")
  [ -z "$left_c$left_v$left_n" ] ||
    fail "left after down -v: containers [$left_c] volumes [$left_v] networks [$left_n]"
  log "down -v in $((SECONDS - t)) s: no container, volume or network of $PROJECT left"
}
SERVICES=(etcd datanode1 datanode2 datanode3 cachenode1 cachenode2 cachenode3 gateway prometheus)
declare -A CID  # service -> container id (kept across stop and start)
health() { docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "${CID[$1]}"; }
all_healthy() {
  local s
  for s in "${SERVICES[@]}"; do [ "$(health "$s")" = healthy ] || return 1; done
}
wait_for() {  # seconds description command...
  local secs=$1 what=$2 t0=$SECONDS
  shift 2
  while ! "$@" > /dev/null 2>&1; do
    [ $((SECONDS - t0)) -lt "$secs" ] || fail "timed out after ${secs}s waiting for: $what"
    sleep 0.5
  done
}
prom_up() {  # every scrape target up; $1: the scheme the daemons' targets must use
  curl -sf --max-time 5 "http://127.0.0.1:$PROM_PORT/api/v1/targets" | python3 -c '
import json, sys
t = json.load(sys.stdin)["data"]["activeTargets"]
scheme = sys.argv[1]
daemons = [x for x in t if x["labels"]["job"] != "prometheus"]
sys.exit(0 if len(t) >= 9 and all(x["health"] == "up" for x in t)
         and all(x["scrapeUrl"].startswith(scheme + "://") for x in daemons) else 1)' "${1:-http}"
}
source "$(dirname "$0")/node_state.sh"  # json_field, role_state, node_state, state_is
dc_up() {  # LOG: up -d, then the container id of every service in CID
  UP=1
  dc up -d > "$WORK/$1" 2>&1 || { cat "$WORK/$1" >&2; fail "docker-compose up ($1)"; }
  local s
  for s in "${SERVICES[@]}"; do
    CID[$s]=$(dc ps -q "$s")
    [ -n "${CID[$s]}" ] || fail "no container for service $s ($1)"
  done
}

if [ "${COMPOSE_TEST_ONLY:-}" != tls ]; then

t=$SECONDS
dc_up up.log
wait_for 120 "every container healthy" all_healthy
log "project $PROJECT up and healthy in $((SECONDS - t)) s: NBD 127.0.0.1:$NBD_PORT, admin" \
  "127.0.0.1:$ADMIN_PORT, Prometheus 127.0.0.1:$PROM_PORT"

CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$ADMIN_PORT")
for i in 1 2 3; do wait_for 60 "cache node $i up in node list" state_is "$i" up; done
published=$(docker port "${CID[gateway]}" 10809/tcp)
[ "$published" = "127.0.0.1:$NBD_PORT" ] || fail "NBD published at '$published', not 127.0.0.1 only"

# 1. The VDIs and a first pattern.
qemu-img info "nbd://127.0.0.1:$NBD_PORT/demo" > "$WORK/info.txt" 2>&1 ||
  { cat "$WORK/info.txt" >&2; fail "qemu-img info of demo"; }
grep -q "virtual size: 1 GiB" "$WORK/info.txt" || { cat "$WORK/info.txt" >&2; fail "demo is not 1 GiB"; }
"${CTL[@]}" vdi create disk --size 256MiB > /dev/null || fail "ringcachectl vdi create disk"
dc exec -T gateway ringcachectl --gateway 127.0.0.1:7200 vdi list > "$WORK/vdis.txt" 2>&1 ||
  { cat "$WORK/vdis.txt" >&2; fail "ringcachectl in the gateway container"; }
grep -q "^disk " "$WORK/vdis.txt" || { cat "$WORK/vdis.txt" >&2; fail "disk not in vdi list"; }
NBD="nbd://127.0.0.1:$NBD_PORT/disk"
out=$(qemu-io -f raw -c "write -P 0x5a 0 1M" -c "read -P 0x5a 0 1M" "$NBD" 2>&1) ||
  fail "qemu-io 0x5a: $out"
if echo "$out" | grep -qi "failed\|error"; then fail "qemu-io 0x5a: $out"; fi
log "qemu-img info demo (1 GiB); disk created with ringcachectl; 1 MiB of 0x5a written and read back"
wait_for 60 "Prometheus to scrape every daemon and etcd" prom_up
log "Prometheus scrapes every daemon and etcd"

qio() { qemu-io -f raw "$NBD" -c "$1"; }
source "$ROOT/tests/e2e/patterns.sh"  # write_round / check_round SEED: 64 runs of 64 KiB at i*4 MiB
write_fast() {  # seed: the runs of write_round from one qemu-io process (about a second)
  local i args=()
  for i in $(seq 0 63); do args+=(-c "write -P $(( ($1 + i) % 250 + 1 )) $(( i * 4 ))M 64k"); done
  qemu-io -f raw "$NBD" "${args[@]}" > "$WORK/fast.out" 2>&1 || fail "round $1: $(cat "$WORK/fast.out")"
  if grep -qi "failed\|error" "$WORK/fast.out"; then fail "round $1: $(cat "$WORK/fast.out")"; fi
}
metric() {  # service, port, metric name -> its value (summed over labels), read in the container
  docker exec "${CID[$1]}" curl -sf --max-time 5 "http://127.0.0.1:$2/metrics" |
    awk -v m="$3" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%d\n", s }'
}

# The client loop: write k puts pattern (k % 250) + 1 at (k % 64) * 4 MiB + 1 MiB (apart from the
# rounds' runs); each acknowledged write is logged. Any client error ends the loop (and the test).
LOOP_LOG=$WORK/loop.log
client_loop() {
  local k=0 out
  while [ ! -f "$WORK/stop-loop" ]; do
    out=$(qio "write -P $(( k % 250 + 1 )) $(( (k % 64) * 4 + 1 ))M 64k" 2>&1) ||
      { echo "write $k failed: $out"; exit 1; }
    if echo "$out" | grep -qi "failed\|error"; then echo "write $k failed: $out"; exit 1; fi
    echo "$k $(date +%s.%N)" >> "$LOOP_LOG"
    k=$((k + 1))
  done
}
loop_ops() { wc -l < "$LOOP_LOG"; }
loop_grew() {  # by N writes since a count, or the loop ended (then the caller checks)
  [ "$(loop_ops)" -ge $(($1 + $2)) ] || ! kill -0 "$LOOP_PID"
}
stop_loop() {
  touch "$WORK/stop-loop"
  wait "$LOOP_PID" || { cat "$WORK/loop.out" >&2; LOOP_PID=""; fail "client error in the write loop"; }
  LOOP_PID=""
  rm -f "$WORK/stop-loop"
}
check_loop() {  # every slot holds the last acknowledged write to it
  local ops
  ops=$(loop_ops)
  check_loop_slots "$ops"
  echo "$ops"
}
since() { python3 -c "import time; print(f'{time.time() - $1:.1f}')"; }

# 2. docker kill of a cache node holding dirty blocks, under the write loop; then it restarts.
: > "$LOOP_LOG"
client_loop > "$WORK/loop.out" 2>&1 &
LOOP_PID=$!
wait_for 30 "the write loop to get going" loop_grew 0 5
write_fast 7
dirty=$(metric cachenode2 9300 ringcache_cachenode_dirty_bytes)
docker kill "${CID[cachenode2]}" > /dev/null
killed_at=$(date +%s.%N)
log "cache node 2 killed (docker kill) holding $dirty dirty bytes; write loop at $(loop_ops) writes"
[ "$dirty" -gt 0 ] || fail "cache node 2 held no dirty blocks at the kill"
wait_for 60 "the gateway to take cache node 2 out of the ring" state_is 2 removed
removed_after=$(since "$killed_at")
n=$(loop_ops)
wait_for 60 "the write loop to go on after the removal" loop_grew "$n" 10
kill -0 "$LOOP_PID" 2> /dev/null || { cat "$WORK/loop.out" >&2; fail "client error after the kill"; }
check_round 7  # acknowledged before the kill, dirty on the killed node: its log was replayed
state=$(docker inspect -f '{{.State.Status}}' "${CID[cachenode2]}")
[ "$state" = exited ] || fail "cache node 2 restarted by itself (it is $state)"
dc start cachenode2 > "$WORK/start.log" 2>&1 || { cat "$WORK/start.log" >&2; fail "docker-compose start"; }
wait_for 60 "cache node 2 to rejoin the ring" state_is 2 up
rejoined_after=$(since "$killed_at")
n=$(loop_ops)
wait_for 60 "the write loop to go on after the rejoin" loop_grew "$n" 10
stop_loop
ops=$(check_loop)
check_round 7
node2_healthy() { [ "$(health cachenode2)" = healthy ]; }
wait_for 60 "cache node 2 healthy again" node2_healthy
log "cache node 2 removed ${removed_after} s and back in the ring ${rejoined_after} s after the" \
  "kill; $ops loop writes without a client error, each slot's last one read back; round 7" \
  "(dirty on it at the kill) read back"

# 3. docker network disconnect of a cache node holding dirty blocks, under the write loop: it is
# fenced and removed; no acknowledged write is lost and no read is stale.
NET=$(docker network ls -q --filter "label=$LABEL" --filter label=com.docker.compose.network=default)
[ -n "$NET" ] || fail "no default network of project $PROJECT"
NET_NAME=$(docker network inspect -f '{{.Name}}' "$NET")
node2_log_has() {  # the log to a file first: under pipefail, grep -q could cut the writer off
  docker logs --tail 100 "${CID[cachenode2]}" > "$WORK/cachenode2.log" 2>&1
  grep -q "$1" "$WORK/cachenode2.log"
}
fenced() { node2_log_has "fenced until a renewal succeeds"; }
: > "$LOOP_LOG"
client_loop > "$WORK/loop.out" 2>&1 &
LOOP_PID=$!
wait_for 30 "the write loop to get going" loop_grew 0 5
write_fast 31
docker network disconnect "$NET_NAME" "${CID[cachenode2]}"
cut_at=$(date +%s.%N)
# Read inside the cut-off container (its loopback still works); it cannot destage any more.
dirty=$(metric cachenode2 9300 ringcache_cachenode_dirty_bytes)
log "cache node 2 disconnected from $NET_NAME holding $dirty dirty bytes"
[ "$dirty" -gt 0 ] || fail "cache node 2 held no dirty blocks at the disconnect"
wait_for 30 "cache node 2 to fence itself (its log)" fenced
fenced_after=$(since "$cut_at")
wait_for 60 "the gateway to take cache node 2 out of the ring" state_is 2 removed
removed_after=$(since "$cut_at")
n=$(loop_ops)
wait_for 60 "the write loop to go on after the removal" loop_grew "$n" 10
kill -0 "$LOOP_PID" 2> /dev/null || { cat "$WORK/loop.out" >&2; fail "client error during the cut"; }
check_round 31  # acknowledged before the cut: replayed from its log, not lost
write_round 11  # newer data over its blocks, now on the other cache nodes
check_round 11  # new data, not what the cut node holds
log "cache node 2's log showed it fenced ${fenced_after} s after the cut (polled), removed after" \
  "${removed_after} s; round 31 read back, round 11 written over it and read back new"
docker network connect --alias cachenode2 "$NET_NAME" "${CID[cachenode2]}"
healed_at=$(date +%s.%N)
wait_for 90 "cache node 2 to rejoin after the reconnect" state_is 2 up
rejoined_after=$(since "$healed_at")
node2_log_has "re-admitted by the gateway" || fail "cache node 2 was not re-admitted"
n=$(loop_ops)
wait_for 60 "the write loop to go on after the rejoin" loop_grew "$n" 10
stop_loop
ops=$(check_loop)
check_round 11  # its objects are back on it: the newer round, not its stale blocks
write_round 19
check_round 19
"${CTL[@]}" flush --wait > /dev/null || fail "ringcachectl flush --wait"
check_round 19
for i in 1 2 3; do state_is "$i" up || fail "cache node $i is not up in node list"; done
log "reconnected: cache node 2 re-admitted and back in the ring ${rejoined_after} s later;" \
  "$ops loop writes across the cut without a client error, each slot's last one read back;" \
  "round 11 still reads back new, round 19 written, flushed and read back"

# 4. down -v leaves nothing of the project.
down_clean
fi

# 5. The same cluster under TLS: a second project with the TLS override file.
PROJECT=${PROJECT}tls
LABEL=com.docker.compose.project=$PROJECT
COMPOSE_FILES=(-f "$COMPOSE_FILE_" -f "$ROOT/deploy/compose/docker-compose.tls.yml")
t=$SECONDS
dc_up up-tls.log
init=$(dc ps -q tls-init)
[ "$(docker inspect -f '{{.State.ExitCode}}' "$init")" = 0 ] ||
  fail "tls-init failed: $(docker logs "$init" 2>&1 | tail -5)"
wait_for 120 "every container healthy (TLS)" all_healthy
log "TLS project $PROJECT up and healthy in $((SECONDS - t)) s; certificates in $TLS_DIR"
CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$ADMIN_PORT" --tls-dir "$TLS_DIR/admin")
for i in 1 2 3; do wait_for 60 "TLS: cache node $i up in node list" state_is "$i" up; done
"${CTL[@]}" vdi create disk --size 256MiB > /dev/null || fail "TLS: ringcachectl vdi create disk"
if out=$("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$ADMIN_PORT" vdi list 2>&1); then
  fail "TLS: the admin API answered ringcachectl without a certificate: $out"
fi
dc exec -T gateway ringcachectl --gateway 127.0.0.1:7200 --tls-dir /tls/admin vdi list \
  > "$WORK/vdis-tls.txt" 2>&1 || { cat "$WORK/vdis-tls.txt" >&2; fail "TLS: ringcachectl in the gateway container"; }
grep -q "^disk " "$WORK/vdis-tls.txt" || { cat "$WORK/vdis-tls.txt" >&2; fail "TLS: disk not listed"; }
TLS_OBJ="tls-creds-x509,id=tls0,dir=$TLS_DIR/client,endpoint=client"
TLS_IMG="driver=nbd,host=127.0.0.1,port=$NBD_PORT,export=disk,tls-creds=tls0"
out=$(qemu-io --object "$TLS_OBJ" --image-opts "$TLS_IMG" -c "write -P 0x6b 0 1M" \
  -c "read -P 0x6b 0 1M" 2>&1) || fail "TLS: qemu-io 0x6b: $out"
if echo "$out" | grep -qi "failed\|error"; then fail "TLS: qemu-io 0x6b: $out"; fi
out=$(qemu-img info "nbd://127.0.0.1:$NBD_PORT/disk" 2>&1) && fail "TLS: a plaintext client was served"
echo "$out" | grep -q "TLS is required" || fail "TLS: the plaintext refusal does not say why: $out"
log "TLS: qemu-io with the client certificate wrote and read 1 MiB; plaintext refused; ringcachectl" \
  "only with the admin certificate"
wait_for 90 "Prometheus to scrape every daemon and etcd over HTTPS" prom_up https
log "TLS: Prometheus scrapes every daemon and etcd over HTTPS"
down_clean
PASSED=1
log "PASS in $((SECONDS - START)) s"
