#!/usr/bin/env bash
# The Debian package (cmake/Packaging.cmake): builds it with cpack from BUILD_DIR, checks what it
# holds (the programs, a systemd unit per daemon, the conffiles, the maintainer scripts, runtime
# dependencies from dpkg-shlibdeps), then unpacks it into a scratch root and runs a cluster there
# the way systemd would: every daemon started by its unit's ExecStart line (the unit's %i and
# the package's cluster file, with this test's ports and state directory) under a
# NOTIFY_SOCKET of the test's, which must hear READY=1 from each (Type=notify); a VDI created
# with the packaged ringcachectl takes writes and reads them back over NBD; the daemons stop
# with STOPPING=1, start again, and the data is still there. Last, in a clean container (the
# compose tests' Debian base image, on the host's network): the package installs with its
# dependencies, adds the ringcache user and /var/lib/ringcache, a cluster started from the
# units' ExecStart lines as that user serves a VDI, `apt-get remove` keeps the state and the
# user, `apt-get purge` deletes both. That part is skipped, with a message, where Docker cannot
# run.
#
#   tests/deploy/package_test.sh BUILD_DIR
set -euo pipefail

BUILD=$(cd "${1:?usage: package_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-package.XXXXXX")
source "$ROOT/tests/e2e/ports.sh"
source "$ROOT/tests/e2e/docker_engine.sh"  # ensure_docker, stop_dockerd

log() { echo "[package] $(date +%T) $*"; }
skip() { echo "[package] SKIP: $*"; exit 77; }
fail() {
  echo "[package] FAIL: $*" >&2
  for f in "$WORK"/logs/*.log; do
    [ -f "$f" ] || continue
    echo "--- $f" >&2
    tail -n 15 "$f" >&2
  done
  exit 1
}
PIDS=()
cleanup() {
  set +e
  for p in "${PIDS[@]}"; do kill "$p" 2> /dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null; done
  [ -n "${LISTENER:-}" ] && kill "$LISTENER" 2> /dev/null
  [ -n "${CONTAINER:-}" ] && docker rm -f "$CONTAINER" > /dev/null 2>&1
  release_project_lock
  stop_dockerd
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

for tool in cpack dpkg-deb qemu-io python3; do
  command -v "$tool" > /dev/null || { echo "SKIP: $tool is not installed"; exit 77; }
done

# 1. The package.
cpack --config "$BUILD/CPackConfig.cmake" -B "$WORK/cpack" > "$WORK/cpack.log" 2>&1 ||
  { tail -30 "$WORK/cpack.log"; fail "cpack"; }
DEB=$(ls "$WORK"/cpack/ringcache_*.deb 2> /dev/null | head -1)
[ -n "$DEB" ] || fail "cpack made no ringcache_*.deb ($(ls "$WORK/cpack"))"
log "built $(basename "$DEB") ($(( $(stat -c %s "$DEB") / 1048576 )) MiB)"

[ "$(dpkg-deb -f "$DEB" Package)" = ringcache ] || fail "package name"
depends=$(dpkg-deb -f "$DEB" Depends)
for d in adduser libgrpc++1.51 libgnutls30 libprometheus-cpp-pull1.0 libspdlog1.10; do
  case ", $depends," in *", $d"*) ;; *) fail "Depends lacks $d: $depends" ;; esac
done
dpkg-deb -c "$DEB" | awk '{print $6}' | sed 's|^\./|/|' > "$WORK/contents"
for f in /usr/bin/ringcache-gateway /usr/bin/ringcache-cachenode /usr/bin/ringcache-datanode \
         /usr/bin/ringcachectl /usr/bin/ringcache-local \
         /lib/systemd/system/ringcache-gateway@.service \
         /lib/systemd/system/ringcache-cachenode@.service \
         /lib/systemd/system/ringcache-datanode@.service /etc/ringcache/cluster.yaml \
         /etc/default/ringcache-gateway /usr/share/doc/ringcache/README.md; do
  grep -qx "$f" "$WORK/contents" || fail "the package lacks $f"
done
if grep -v -E '^/(usr/bin|usr/share/doc/ringcache|lib/systemd/system|etc/ringcache|etc/default)(/|$)|^/(usr|usr/share|usr/share/doc|lib|lib/systemd|etc)?/?$' \
    "$WORK/contents" > "$WORK/stray"; then
  fail "the package holds files outside its places: $(head -5 "$WORK/stray" | tr '\n' ' ')"
fi
mkdir -p "$WORK/control"
dpkg-deb -e "$DEB" "$WORK/control"
for s in postinst prerm postrm; do
  [ -x "$WORK/control/$s" ] || fail "no executable $s in the package"
done
grep -qx /etc/ringcache/cluster.yaml "$WORK/control/conffiles" ||
  fail "/etc/ringcache/cluster.yaml is not a conffile"
log "contents: programs, three unit templates, conffiles, maintainer scripts; Depends: $depends"

# 2. Unpacked into a scratch root, started the way the units start the daemons.
R=$WORK/root
dpkg-deb -x "$DEB" "$R"
if readelf -S "$R/usr/bin/ringcache-gateway" | grep -q '\.debug_info'; then
  fail "the packaged programs are not stripped"
fi
pick_base_port
mkdir -p "$WORK/logs" "$R/var/lib/ringcache"
# The package's cluster file, with this test's ports and state directory.
python3 - "$R/etc/ringcache/cluster.yaml" "$WORK/cluster.yaml" "$BASE" "$R/var/lib/ringcache" << 'PY'
import re, sys
src, dst, base, data = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(src).read()
ports = {}
def port(m):
    p = int(m.group(1))
    ports.setdefault(p, base + 100 + len(ports))
    return f"127.0.0.1:{ports[p]}"
text = re.sub(r"127\.0\.0\.1:(\d+)", port, text)
text = text.replace("data_dir: /var/lib/ringcache", f"data_dir: {data}")
text = text.replace("ssd_bytes: 1GiB", "ssd_bytes: 128MiB")
open(dst, "w").write(text)
PY
grep -q "data_dir: $R/var/lib/ringcache" "$WORK/cluster.yaml" || fail "cluster file rewrite"
port_of() {  # ROLE ID KEY: the port of that node's KEY address in the test's cluster file
  sed -n "s/.*role: $1, id: $2,.*$3: 127\.0\.0\.1:\([0-9]*\).*/\1/p" "$WORK/cluster.yaml"
}
NBD=$(port_of gateway 1 nbd_listen)
ADMIN=$(port_of gateway 1 admin_listen)

# The systemd side of Type=notify: a datagram socket that records what each daemon says.
NOTIFY=$WORK/notify.sock
python3 - "$NOTIFY" "$WORK/notify.log" << 'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "a", buffering=1) as out:
    while True:
        data, _ = s.recvfrom(4096)
        out.write(data.decode().replace("\n", " ") + "\n")
PY
LISTENER=$!
for _ in $(seq 1 100); do [ -S "$NOTIFY" ] && break; sleep 0.05; done
[ -S "$NOTIFY" ] || fail "the notify socket did not appear"

# start ROLE ID: runs the unit's ExecStart line for instance ID (its binary from the package).
start() {
  local unit=$R/lib/systemd/system/ringcache-$1@.service line
  line=$(sed -n 's/^ExecStart=//p' "$unit")
  [ -n "$line" ] || fail "no ExecStart in $unit"
  line=${line//%i/$2}
  line=${line//\/etc\/ringcache\/cluster.yaml/$WORK/cluster.yaml}
  line=${line//\/usr\/bin\//$R/usr/bin/}
  line=${line//\$RINGCACHE_ARGS/}
  local before
  before=$(grep -c "^READY=1" "$WORK/notify.log" 2> /dev/null || true)
  # shellcheck disable=SC2086
  NOTIFY_SOCKET=$NOTIFY WATCHDOG_USEC=2000000 $line > "$WORK/logs/$1-$2.log" 2>&1 &
  PIDS+=($!)
  eval "PID_$1_$2=$!"
  local t=$SECONDS
  until [ "$(grep -c "^READY=1" "$WORK/notify.log" 2> /dev/null || true)" -gt "${before:-0}" ]; do
    kill -0 "${PIDS[-1]}" 2> /dev/null || fail "$1 $2 exited before READY=1"
    [ $((SECONDS - t)) -lt 120 ] || fail "$1 $2 sent no READY=1 in 120 s"
    sleep 0.1
  done
}
up() {
  for i in 1 2 3; do start datanode "$i"; done
  start cachenode 1
  start gateway 1
}
up
log "3 data nodes, a cache node and a gateway started from the units' ExecStart lines: READY=1 from each"
CTL=("$R/usr/bin/ringcachectl" --gateway "127.0.0.1:$ADMIN")
"${CTL[@]}" vdi create disk1 --size 64MiB > "$WORK/create.log" 2>&1 ||
  { cat "$WORK/create.log"; fail "vdi create with the packaged ringcachectl"; }
qemu-io -f raw -c "write -P 0x6b 0 4M" "nbd://127.0.0.1:$NBD/disk1" > "$WORK/w.log" 2>&1 ||
  { cat "$WORK/w.log"; fail "write over NBD"; }
qemu-io -f raw -c "read -P 0x6b 0 4M" "nbd://127.0.0.1:$NBD/disk1" > "$WORK/r.log" 2>&1 ||
  { cat "$WORK/r.log"; fail "read back over NBD"; }
log "VDI disk1: 4 MiB written and read back over NBD"
sleep 3  # two watchdog intervals: the daemons feed it on their own
grep -q "^WATCHDOG=1 STATUS=serving" "$WORK/notify.log" || fail "no WATCHDOG=1 from the daemons"

# Stop as systemd does (SIGTERM, gateway first) and start again: the data is still there.
for p in "$PID_gateway_1" "$PID_cachenode_1" "$PID_datanode_1" "$PID_datanode_2" "$PID_datanode_3"; do
  kill -TERM "$p"
  wait "$p" 2> /dev/null || fail "a daemon did not stop cleanly on SIGTERM"
done
PIDS=()
[ "$(grep -c "^STOPPING=1" "$WORK/notify.log")" -ge 5 ] || fail "not every daemon said STOPPING=1"
up
qemu-io -f raw -c "read -P 0x6b 0 4M" "nbd://127.0.0.1:$NBD/disk1" > "$WORK/r2.log" 2>&1 ||
  { cat "$WORK/r2.log"; fail "read back after a restart"; }
log "restarted: the 4 MiB read back"
for p in "${PIDS[@]}"; do kill -TERM "$p" 2> /dev/null; wait "$p" 2> /dev/null || true; done
PIDS=()

# 3. In a clean container. Docker missing or unable to start: the package's own checks above
# stand, and this part says why it did not run.
if ! command -v docker > /dev/null; then
  log "container part skipped: docker is not installed (deploy/install-deps.sh --with-compose)"
  log "PASS"
  exit 0
fi
skip() {
  log "container part skipped: $*"
  log "PASS"
  exit 0
}
# This run's container carries a label that names the run, under a lock held for the run's life;
# the container of a killed run (its daemons still serving on the host's network) goes first.
RUN_NAME=rcpkg$(date +%s)$((RANDOM % 1000))
hold_project_lock "$RUN_NAME" || fail "run $RUN_NAME: its lock is held by another run"
ensure_docker
sweep_stale_projects rcpkg ringcache.test.run
BASE_IMG=${BASE_IMAGE:-debian:bookworm-slim}
if ! docker image inspect "$BASE_IMG" > /dev/null 2>&1; then
  log "base image $BASE_IMG missing: making it (deploy/compose/make-base-image.sh)"
  BASE_IMAGE=$BASE_IMG bash "$ROOT/deploy/compose/make-base-image.sh" > "$WORK/base.log" 2>&1 ||
    { tail -20 "$WORK/base.log"; skip "the base image cannot be made here (no Debian mirror?)"; }
fi
# The package's dependencies in an image of their own (Docker's build cache keeps it while the
# list stays the same), so that the run itself needs no mirror; dpkg -i then installs the
# package as apt would, maintainer scripts and all.
deps=$(echo "$depends" | tr ',' '\n' | sed 's/(.*)//; s/|.*//; s/^ *//; s/ *$//' | grep -v '^$' |
  sort -u | tr '\n' ' ')
mkdir -p "$WORK/depsctx"
cat > "$WORK/depsctx/Dockerfile" << DOCKERFILE
FROM $BASE_IMG
RUN printf '#!/bin/sh\\nexit 101\\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d && \
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      $deps procps && apt-get clean && rm -rf /var/lib/apt/lists/*
DOCKERFILE
DEPS_IMG=ringcache-package-test:deps
DOCKER_BUILDKIT=0 docker build -q -t "$DEPS_IMG" "$WORK/depsctx" > "$WORK/deps-build.log" 2>&1 ||
  { tail -20 "$WORK/deps-build.log"; skip "the dependencies' image cannot be built here (no Debian mirror?)"; }
cp "$DEB" "$WORK/ringcache.deb"
# --init: a PID 1 that reaps, so that a stopped daemon does not linger as a zombie
CONTAINER=$(docker run -d --init --network host --label "ringcache.test.run=$RUN_NAME" -v "$WORK:/pkg" "$DEPS_IMG" sleep infinity)
in_c() { docker exec "$CONTAINER" bash -c "$1"; }
in_c "dpkg -i /pkg/ringcache.deb" > "$WORK/dpkg-i.log" 2>&1 ||
  { cat "$WORK/dpkg-i.log"; fail "dpkg -i in a clean container"; }
in_c "id ringcache && [ \"\$(stat -c %U:%a /var/lib/ringcache)\" = ringcache:750 ]" \
  > /dev/null 2>&1 || fail "the package did not add the ringcache user and /var/lib/ringcache"
log "installed in a clean $BASE_IMG container: the ringcache user and /var/lib/ringcache"
# The test's ports, the package's state directory.
sed "s|data_dir: $R/var/lib/ringcache|data_dir: /var/lib/ringcache|" "$WORK/cluster.yaml" \
  > "$WORK/cluster-container.yaml"
in_c "cp /pkg/cluster-container.yaml /etc/ringcache/cluster.yaml"
cstart() {  # ROLE ID: the unit's ExecStart line, as the unit's user, inside the container
  docker exec -d -u ringcache "$CONTAINER" bash -c \
    "\$(sed -n 's/^ExecStart=//p' /lib/systemd/system/ringcache-$1@.service | sed 's/%i/$2/; s/\\\$RINGCACHE_ARGS//') > /tmp/$1-$2.log 2>&1"
}
# ROLE ID: /readyz says ready within 240 s (a loaded host was seen to need more than 120), else
# the test fails with the last answer and the daemons' logs in the container.
cready() {
  local t=$SECONDS port answer
  port=$(port_of "$1" "$2" http_listen)
  until answer=$(curl -s "http://127.0.0.1:$port/readyz" 2>&1) && [ "$answer" = ready ]; do
    if [ $((SECONDS - t)) -ge 240 ]; then
      for f in datanode-1 datanode-2 datanode-3 cachenode-1 gateway-1; do
        echo "--- (container) /tmp/$f.log" >&2
        in_c "tail -n 15 /tmp/$f.log" >&2 2> /dev/null || true
      done
      fail "container: $1 $2 not ready after 240 s (/readyz: ${answer:-no answer})"
    fi
    sleep 0.2
  done
}
for i in 1 2 3; do
  cstart datanode "$i"
  cready datanode "$i"
done
cstart cachenode 1
cready cachenode 1
cstart gateway 1
cready gateway 1
in_c "ringcachectl --gateway 127.0.0.1:$ADMIN vdi create disk2 --size 64MiB" > /dev/null ||
  fail "container: vdi create"
qemu-io -f raw -c "write -P 0x2c 0 4M" "nbd://127.0.0.1:$NBD/disk2" > "$WORK/cw.log" 2>&1 &&
  qemu-io -f raw -c "read -P 0x2c 0 4M" "nbd://127.0.0.1:$NBD/disk2" > "$WORK/cr.log" 2>&1 ||
  { cat "$WORK/cw.log" "$WORK/cr.log"; fail "container: write and read over NBD"; }
in_c "ps -o user= -C ringcache-gateway,ringcache-cachenode,ringcache-datanode | sort -u" \
  > "$WORK/users"
[ "$(cat "$WORK/users")" = ringcache ] || fail "the daemons do not run as ringcache: $(cat "$WORK/users")"
log "container: a cluster from the units' ExecStart lines, as user ringcache, served a VDI"
in_c "pkill -TERM -u ringcache; for i in \$(seq 1 100); do pgrep -u ringcache > /dev/null || exit 0; sleep 0.1; done; exit 1" ||
  fail "container: the daemons did not stop on SIGTERM"
in_c "apt-get remove -y ringcache" > "$WORK/remove.log" 2>&1 ||
  { cat "$WORK/remove.log"; fail "apt-get remove"; }
in_c "[ ! -e /usr/bin/ringcache-gateway ] && [ -s /var/lib/ringcache/cachenode-1/ssd.slots ] && id ringcache && [ -f /etc/ringcache/cluster.yaml ]" \
  > /dev/null 2>&1 || fail "apt-get remove did not keep the state, the user and the configuration"
log "apt-get remove: programs gone; /var/lib/ringcache, the user and /etc/ringcache kept"
in_c "apt-get purge -y ringcache" > "$WORK/purge.log" 2>&1 || { cat "$WORK/purge.log"; fail "apt-get purge"; }
in_c "[ ! -e /var/lib/ringcache ] && ! id ringcache && [ ! -e /etc/ringcache/cluster.yaml ]" \
  > /dev/null 2>&1 || fail "apt-get purge left the state, the user or the configuration"
log "apt-get purge: state, user and configuration gone"
log "PASS"
