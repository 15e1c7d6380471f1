#!/usr/bin/env bash
# Nightly run of the control plane simulation (coordinator/sim/control_sim.h): a million seeds
# (CI runs 10,000), split into one shard per core. Prints each shard's summary line
#
#   control-sim: seeds=N failed=F writes_acked=A changes=C term_changes=T steps_refused=R ...
#
# and every failing seed with the first invariant it broke; exits 0 if no seed failed, 1
# otherwise. A failing seed reproduces exactly: ringcache-control-sim --seed N --trace.
# About 50 minutes of CPU (25 on 2 cores). Not part of ctest.
#
#   tests/sim/control_sim_nightly.sh [--seeds N] [--first S] [--bin BUILD_DIR]
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${RINGCACHE_BIN:-$ROOT/build}
SEEDS=1000000
FIRST=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seeds) SEEDS=$2; shift 2 ;;
    --first) FIRST=$2; shift 2 ;;
    --bin) BIN=$2; shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "control_sim_nightly.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
SIM=$BIN/coordinator/ringcache-control-sim
if [ ! -x "$SIM" ]; then
  echo "control_sim_nightly.sh: $SIM not built (cmake --build $BIN --target ringcache-control-sim)" >&2
  exit 2
fi
SHARDS=$(nproc)
PER=$(( (SEEDS + SHARDS - 1) / SHARDS ))
pids=()
for ((i = 0; i < SHARDS; i++)); do
  start=$(( FIRST + i * PER ))
  n=$(( PER < SEEDS - i * PER ? PER : SEEDS - i * PER ))
  [ "$n" -gt 0 ] || break
  "$SIM" --seed "$start" --seeds "$n" &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
echo "control_sim_nightly: $SEEDS seeds from $FIRST: $([ $rc = 0 ] && echo PASS || echo FAIL)"
exit $rc
