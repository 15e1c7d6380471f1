#!/usr/bin/env bash
# The rolling upgrade, tested (docs/upgrades.md): builds the previous release from git
# (tests/upgrade/build_release.sh, kept between runs), starts a cluster of it in cluster mode
# (etcd, two gateways, 4 data and 3 cache nodes) under the fault checker's writers, and moves one
# daemon at a time to this build: data nodes, cache nodes, then gateways, each stopped with
# SIGTERM and started from the other build. Then the same in reverse back to the previous
# release (a downgrade), and forward once more. Every acknowledged write must read back (lost 0,
# stale 0), no NBD request may fail (--no-write-errors: a client whose gateway restarts
# reconnects, as QEMU does), and each daemon must run the build it was moved to.
#
#   tests/upgrade/rolling_upgrade_test.sh BUILD_DIR [fault_test.py arguments...]
#
# Exits 77 (skipped) without etcd or etcdctl.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "${1:?usage: rolling_upgrade_test.sh BUILD_DIR}" && pwd)
shift
for t in etcd etcdctl; do
  if ! command -v "$t" > /dev/null; then echo "rolling_upgrade_test: no $t: skipping"; exit 77; fi
done
OLD=$(bash "$HERE/build_release.sh")
echo "rolling_upgrade_test: previous release: $("$OLD/gateway/ringcache-gateway" --version | head -1)" \
     "($OLD); this build: $("$BUILD/gateway/ringcache-gateway" --version | head -1)"
# 4 data + 3 cache nodes + 2 gateways = 9 daemons: 27 steps are up, down and up again (the
# checks after the last step want every daemon on this build). The writers are capped
# (--max-iops) as in the other ctest fault runs (tests/CMakeLists.txt); `--max-iops 0` after the
# build directory lifts the cap (tests/fault/long_runs.sh).
# Cache nodes of 128 MiB, not the checker's 32: a data node of 0.1.0 stopping on SIGTERM flushes
# its memtables at low priority, and with the restart it was away 30-65 s on a loaded machine
# (CI). Objects with a home on it cannot be destaged meanwhile (every home takes each destage),
# so a 32 MiB SSD filled with dirty blocks in about 20 s and a write ran out of slots (EIO).
# This test is about mixed releases; cache pressure under faults is the other runs' subject.
exec python3 "$HERE/../fault/fault_test.py" --bin "$BUILD" --old-bin "$OLD" --etcd --gateways 2 \
  --nemeses upgrade --faults 27 --lease-ttl 3 --max-gap 1.5 --writers 4 --depth 3 \
  --ssd-size 128MiB --max-iops 250 --no-write-errors "$@"
