# Sourced by the e2e scripts: pick_base_port sets BASE, the base port P of a deploy/cluster.sh
# cluster, and reserves its ports for as long as this shell (and what it starts) lives.
#
# Tests run side by side (ctest -j), so "free right now" is not enough: two tests that probe at
# the same moment can pick overlapping ranges, and the second one's etcd or gateway then finds
# the first one's on its port (seen: a gateway that followed another test's VDI catalog). So the
# ranges are fixed slots that never overlap, P = 20010 + 1000 * k for k in 0..11 (etcd P-2..P-1,
# single-process P+1..P+3, gateway P+9..P+11, nodes P+100..P+409, more gateways P+501..P+709,
# all below the ephemeral range 32768+), and a slot is taken by holding an exclusive flock on
# /tmp/ringcache-port-slots/k.lock (tests/fault/fault_test.py takes them the same way). The lock
# lives on an open descriptor of this shell, so it ends with the test, however it ends; the
# slot's ports must also be free (another program may use them).
pick_base_port() {
  local dir=/tmp/ringcache-port-slots k
  mkdir -p "$dir"
  for k in $(shuf -i 0-11); do
    exec {PORT_SLOT_FD}> "$dir/$k.lock"
    if flock -n "$PORT_SLOT_FD" && python3 - "$((20010 + 1000 * k))" << 'PY'; then
import socket, sys
base = int(sys.argv[1])
for off in list(range(-2, 12)) + list(range(100, 410)) + list(range(501, 710)):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", base + off))
        except OSError:
            sys.exit(1)
PY
      BASE=$((20010 + 1000 * k))
      return 0
    fi
    exec {PORT_SLOT_FD}>&-
  done
  echo "pick_base_port: every port slot is taken or busy (/tmp/ringcache-port-slots)" >&2
  return 1
}
