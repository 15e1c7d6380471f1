#!/usr/bin/env bash
# The fault runs of ctest at full load: the same checker configurations as the FaultInjection.*
# entries of tests/CMakeLists.txt and Upgrade.rolling, with the same faults, but with the writers
# unlimited (closed loops, no --max-iops) on the checker's default 32 MiB SSD and 8 MiB RAM tiers,
# as ctest ran them until 2026-12-01 (ctest caps them now to fit the suite's time). One run after
# another, so that each has the machine to itself; prints each run's summary line
#
#   NAME: acknowledged=N faults=F verified=V lost=L stale=S zeros=Z (exit E, S s)
#
# and exits 1 if any run failed (0 otherwise; a run skipped for want of etcd counts as passed).
# Not part of ctest: about 1.5 hours on 2 cores.
#
#   tests/fault/long_runs.sh [--bin BUILD_DIR] [--only NAME[,NAME...]] [fault_test.py options...]
#
# NAME is one of: cluster disks nemeses hung tls gateways upgrade. Other options go to every run
# (e.g. --seed 7, --keep). Logs in $TMPDIR/ringcache-long-runs.XXXXXX (printed).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${RINGCACHE_BIN:-$ROOT/build}
ONLY=""
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --only) ONLY=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) ARGS+=("$1"); shift ;;
  esac
done
FT=(python3 "$ROOT/tests/fault/fault_test.py" --bin "$BIN")
CLUSTER=(--etcd --lease-ttl 3 --max-gap 1.5 --writers 4 --depth 3 --no-write-errors)
declare -A RUNS=(
  [cluster]="--faults 24 --max-gap 1.5"
  [disks]="--nemeses wipe-data,wipe-cache,lose-data,rot-data,slow-data,full-data,slow-cache,resize-cache --faults 10 --vdi-size 128MiB"
  [nemeses]="${CLUSTER[*]} --nemeses all --faults 60 --placement uarc(exclusive)"
  [hung]="--etcd --nemeses pause --pause-s 20 --faults 3 --lease-ttl 5 --side-load 32 --replications 2 --no-write-errors --writers 2 --depth 2"
  [tls]="${CLUSTER[*]} --tls --nemeses all --faults 16"
  [gateways]="${CLUSTER[*]} --gateways 2 --nemeses all,lose-etcd --faults 24"
)
ORDER=(cluster disks nemeses hung tls gateways upgrade)
if [ -n "$ONLY" ]; then IFS=, read -r -a ORDER <<< "$ONLY"; fi
for name in "${ORDER[@]}"; do
  if [ "$name" != upgrade ] && [ -z "${RUNS[$name]+x}" ]; then
    echo "long_runs.sh: unknown run '$name' (cluster disks nemeses hung tls gateways upgrade)" >&2
    exit 2
  fi
done
LOGS=$(mktemp -d "${TMPDIR:-/tmp}/ringcache-long-runs.XXXXXX")
echo "long_runs.sh: ${ORDER[*]} against $BIN; logs in $LOGS"
failed=0
for name in "${ORDER[@]}"; do
  start=$(date +%s)
  set +e
  if [ "$name" = upgrade ]; then
    # the ctest entry's script with the writers unlimited
    bash "$ROOT/tests/upgrade/rolling_upgrade_test.sh" "$BIN" --max-iops 0 \
      "${ARGS[@]}" > "$LOGS/$name.log" 2>&1
  else
    # shellcheck disable=SC2086 # RUNS holds options split on spaces on purpose
    "${FT[@]}" ${RUNS[$name]} "${ARGS[@]}" > "$LOGS/$name.log" 2>&1
  fi
  rc=$?
  set -e
  [ "$rc" = 0 ] || [ "$rc" = 77 ] || failed=1
  summary=$(grep '^fault_test: ' "$LOGS/$name.log" | tail -1 | sed 's/^fault_test: //')
  echo "$name: ${summary:-no summary (see $LOGS/$name.log)} (exit $rc, $(( $(date +%s) - start )) s)"
done
exit $failed
