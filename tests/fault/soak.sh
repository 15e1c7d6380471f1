#!/usr/bin/env bash
# Soak run of the fault checker (tests/fault/fault_test.py): cluster mode with etcd and every
# nemesis (kill -9 of cache and data nodes, operator removal, removal and rejoin, SIGSTOP past
# the lease and heal, data node loss during a join, restart during a log replay) for a duration
# instead of a fault count. Prints the checker's output, ending with its summary line
#
#   fault_test: acknowledged=N faults=F verified=V lost=L stale=S zeros=Z
#
# and exits with its status (0 pass, 1 lost or stale blocks or another failure, 2 set-up error,
# 77 no etcd). Not part of ctest.
#
#   tests/fault/soak.sh [--duration SECONDS] [--bin BUILD_DIR] [fault_test.py options...]
#
# --duration (or SOAK_DURATION) defaults to 3600 s of faults, split over the checker's phases
# (one per replication factor, default 2 and 3); verification and the final flush come on top.
# --bin (or RINGCACHE_BIN) defaults to ./build. SOAK_SEED or --seed replays a schedule. Any
# other option goes to fault_test.py (e.g. --lease-ttl 5, --nemeses pause,rejoin, --keep).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
DURATION=${SOAK_DURATION:-3600}
BIN=${RINGCACHE_BIN:-$ROOT/build}
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --duration=*) DURATION=${1#*=}; shift ;;
    --bin) BIN=$2; shift 2 ;;
    --bin=*) BIN=${1#*=}; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
if ! [[ "$DURATION" =~ ^[0-9]+$ ]] || [ "$DURATION" -lt 1 ]; then
  echo "soak.sh: --duration wants whole seconds > 0, got '$DURATION'" >&2
  exit 2
fi
if [ -n "${SOAK_SEED:-}" ]; then ARGS=(--seed "$SOAK_SEED" "${ARGS[@]}"); fi

echo "soak.sh: $DURATION s of faults against $BIN ($(date '+%F %T'))"
start=$(date +%s)
set +e
# Python applies the last of repeated options, so ARGS can override these defaults.
python3 "$ROOT/tests/fault/fault_test.py" --bin "$BIN" --etcd --nemeses all \
  --duration "$DURATION" --lease-ttl 3 --max-gap 3 "${ARGS[@]}"
rc=$?
set -e
echo "soak.sh: exit $rc after $(( $(date +%s) - start )) s"
exit $rc
