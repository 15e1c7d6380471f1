#!/usr/bin/env bash
# The test command: installs dependencies (Debian packages), configures, builds, and runs every
# test through ctest, then the sanitizer pass. Exits non-zero on any failure, and always ends with
# a table of where the time went (each stage's wall time, the ten slowest ctest entries).
# docs/testing.md says what runs where and how to run one test.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
  cat << 'EOF'
Usage: deploy/test.sh [--label L[,L...]] [--help]

Installs the Debian packages (deploy/install-deps.sh), configures and builds ./build
(RelWithDebInfo, -Werror), runs the tests through ctest by group, then builds the sanitizer
pass (./build-asan, ASan+UBSan, only what it runs) and runs it. Prints each stage's wall time
and the ten slowest ctest entries at the end, also when a stage fails.

Stages: deps, configure, build, unit tests (label unit; the sanitizer build starts beside
them), then the cross-process and fault tests (labels cluster, e2e and fault, one ctest run,
SIDE_JOBS at a time; the sanitizer build goes on beside them), then the sanitizer tests
(label sanitizer).

  --label L   run only the groups named (unit, cluster, e2e, fault, sanitizer; a comma list)
  --help      this text

Environment:
  JOBS=N            build jobs (default: nproc)
  CTEST_JOBS=N      unit and sanitizer tests run side by side (default: 2)
  SIDE_JOBS=N       cross-process and fault tests run side by side (default: 3; at most two
                    of them fault runs, tests/ctest_resources.json)
  CTEST_ARGS="..."  more ctest arguments for every test stage, e.g. "-R Ring"
  ASAN=0            skip the sanitizer pass
  ASAN_BACKGROUND=0 build the sanitizer pass after the other tests instead of beside them
  SANITIZE=1        build everything with ASan+UBSan in ./build-asan and run every test there
  WERROR=0          let warnings through (CI builds with -Werror)
  DEBUG_INFO=full   full debug info (-g) in ./build; the default is line tables (-g1), which
                    name function and file:line in a backtrace and compile a quarter faster
  BUILD_DIR=DIR     the build directory (default build, or build-asan with SANITIZE=1)
EOF
}

LABELS="unit,cluster,e2e,fault,sanitizer"
while [ $# -gt 0 ]; do
  case $1 in
    --label) [ $# -ge 2 ] || { echo "deploy/test.sh: --label needs a value" >&2; exit 2; }
             LABELS=$2; shift 2 ;;
    --label=*) LABELS=${1#--label=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "deploy/test.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done
IFS=, read -r -a WANT <<< "$LABELS"
for l in "${WANT[@]}"; do
  case $l in unit|cluster|e2e|fault|sanitizer) ;;
    *) echo "deploy/test.sh: unknown label '$l' (unit, cluster, e2e, fault, sanitizer)" >&2
       exit 2 ;;
  esac
done
wants() { local l; for l in "${WANT[@]}"; do [ "$l" = "$1" ] && return 0; done; return 1; }

JOBS=${JOBS:-$(nproc)}
CTEST_JOBS=${CTEST_JOBS:-2}
SIDE_JOBS=${SIDE_JOBS:-3}
if [ "${SANITIZE:-0}" = "1" ]; then
  BUILD_DIR=${BUILD_DIR:-build-asan}
  EXTRA=(-DRINGCACHE_SANITIZE=ON)
else
  BUILD_DIR=${BUILD_DIR:-build}
  EXTRA=()
fi
ASAN_DIR=build-asan
WERROR_OPT=$([ "${WERROR:-1}" = "1" ] && echo ON || echo OFF)
DEBUG_INFO=${DEBUG_INFO:-lines}
RUN_ASAN=0
if [ "${ASAN:-1}" = "1" ] && [ "${SANITIZE:-0}" != "1" ] && wants sanitizer; then RUN_ASAN=1; fi

RESULTS=$(mktemp -d /tmp/ringcache-test.XXXXXX)
STAGES=$RESULTS/stages.tsv
# Debian's python3 for every test (python3-libnbd, the checker's NBD client, is a Debian package).
# A version manager's shim first in PATH (pyenv's runs a chain of bash scripts at every start)
# took 0.9 CPU-seconds per python3 on a loaded machine against 0.08 for /usr/bin/python3, and
# the end-to-end tests' wait loops start python3 several times a second.
if [ -x /usr/bin/python3 ] && [ "$(command -v python3)" != /usr/bin/python3 ]; then
  echo "deploy/test.sh: the tests run /usr/bin/python3 (PATH's python3 is $(command -v python3))"
  mkdir -p "$RESULTS/bin"
  ln -sf /usr/bin/python3 "$RESULTS/bin/python3"
  export PATH="$RESULTS/bin:$PATH"
fi
: > "$STAGES"
START=$(date +%s.%N)
OWN_TMPDIR=""
FAILED=0
ASAN_PID=""

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
# record NAME SECONDS STATUS [NOTE]
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$STAGES"; }

report() {
  local rc=$?
  if [ -n "$ASAN_PID" ] && kill -0 "$ASAN_PID" 2> /dev/null; then
    kill -- "-$ASAN_PID" 2> /dev/null || kill "$ASAN_PID" 2> /dev/null || true
  fi
  if [ -n "${SIDE_PID:-}" ] && kill -0 "$SIDE_PID" 2> /dev/null; then
    kill "$SIDE_PID" 2> /dev/null || true
    cat "$RESULTS/cross-fault.log" 2> /dev/null || true
  fi
  record "total (wall)" "$(since "$START")" "$([ $rc -eq 0 ] && [ $FAILED -eq 0 ] && echo ok || echo FAILED)"
  stop_cpu_watch
  echo
  python3 deploy/test_report.py --cpu "$RESULTS/cpu.tsv" "$STAGES" "$RESULTS"/*.xml || true
  echo "deploy/test.sh: stage times and ctest results in $RESULTS"
  if [ -n "$OWN_TMPDIR" ]; then
    if [ $rc -eq 0 ] && [ $FAILED -eq 0 ]; then
      rm -rf "$OWN_TMPDIR"
    else
      keep_failure_logs
    fi
  fi
}

# The CPU each test uses (deploy/test_cpu.py: daemons and clients included, through a control
# group per test): the cross-process stage is CPU-bound on two cores, so its wall time is the
# CPU its tests use, and the table names the tests that used most.
CPU_WATCH_PID=""
start_cpu_watch() {
  python3 deploy/test_cpu.py watch "$RESULTS/cpu.tsv" &
  CPU_WATCH_PID=$!
}
stop_cpu_watch() {
  if [ -n "$CPU_WATCH_PID" ]; then
    kill "$CPU_WATCH_PID" 2> /dev/null || true
    wait "$CPU_WATCH_PID" 2> /dev/null || true
    CPU_WATCH_PID=""
  fi
}

# A failed run keeps its tests' directories for their logs. In memory (/dev/shm) they would hold
# gigabytes of RAM after the run is over (a killed fault run leaves its data nodes' RocksDB and
# its SSD files): the files over 32 MiB that are not logs are dropped and the rest moved to disk.
keep_failure_logs() {
  local kept=$OWN_TMPDIR
  case $OWN_TMPDIR in
    /dev/shm/*)
      find "$OWN_TMPDIR" -type f -size +32M ! -path '*/logs/*' -delete 2> /dev/null || true
      kept=$RESULTS/test-dirs
      if mv "$OWN_TMPDIR" "$kept" 2> /dev/null; then
        echo "deploy/test.sh: moved the tests' directories out of memory (files over 32 MiB" \
          "that are not logs dropped)"
      else
        kept=$OWN_TMPDIR
      fi ;;
  esac
  echo "deploy/test.sh: the tests' directories (logs of the failures) are kept in $kept"
}

# A run that was killed (a CI timeout, a session that ended) never reaches its EXIT trap, and its
# directory stays: in /dev/shm, gigabytes of memory the next run's daemons then lack (a run after
# one such leftover ran out of memory: the kernel killed data nodes and compilers). Each run holds
# a lock on a file in its directory while it and its children live; a directory whose lock
# nobody holds, or that has none, belongs to a run that is gone and is removed.
sweep_stale_dirs() {
  local d
  for d in /dev/shm/ringcache-ctest.* /tmp/ringcache-ctest.*; do
    [ -d "$d" ] || continue
    if [ -e "$d/.test-sh.lock" ] && ! flock -n "$d/.test-sh.lock" true 2> /dev/null; then
      continue
    fi
    echo "deploy/test.sh: removing $d ($(du -sh "$d" 2> /dev/null | cut -f1)), left by a run" \
      "that is gone"
    # Daemons that a killed run started in a session of their own outlive it, serving from $d.
    if pgrep -f -- "$d/" > /dev/null; then
      echo "deploy/test.sh: stopping $(pgrep -fc -- "$d/") processes still running from $d"
      pkill -KILL -f -- "$d/"
      sleep 0.5
    fi
    rm -rf "$d"
  done
}
trap report EXIT

# stage NAME CMD...: runs CMD, records its wall time; a failed build stage ends the run.
stage() {
  local name=$1 t0 rc=0
  shift
  echo "deploy/test.sh: == $name"
  t0=$(now)
  "$@" || rc=$?
  record "$name" "$(since "$t0")" "$([ $rc -eq 0 ] && echo ok || echo "FAILED")"
  return $rc
}

# tests NAME DIR JUNIT LABEL_REGEX: one ctest run over a group; a failure is remembered and the
# later stages still run, so that one run shows every failing group.
tests() {
  local name=$1 dir=$2 junit=$3 regex=$4
  # shellcheck disable=SC2086
  if ! stage "$name" bash -c 'cd "$1" && shift && exec ctest "$@"' _ "$dir" \
      --output-on-failure --timeout 600 -j "$CTEST_JOBS" -L "$regex" \
      --output-junit "$RESULTS/$junit.xml" ${CTEST_ARGS:-}; then
    FAILED=1
  fi
}

# The tests' directories (daemons' data, SSD files, RocksDB, logs) go to memory when /dev/shm has
# room: the daemons fsync as in production, and a tmpfs answers without a disk, so the CPU the
# cluster tests share goes to ringcache instead of the block layer (two fault runs side by side
# acknowledge more writes each than one did alone on disk; docs/testing.md). A passing run
# removes the directory; a failing one keeps it for its logs.
# Memory is the limit: the fault runs' data (up to 4 GiB each, two at a time), a compose
# cluster and the sanitizer build's compilers share it, so the tests go to /dev/shm only when it
# has 8 GiB free and the machine 14 GiB available; else to /tmp.
if [ -z "${TEST_TMPDIR:-}" ]; then
  sweep_stale_dirs
  tmp_root=/tmp
  shm_free_kb=$(df -Pk /dev/shm 2> /dev/null | awk 'NR == 2 {print $4}')
  mem_avail_kb=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2> /dev/null)
  if [ -w /dev/shm ] && [ "${shm_free_kb:-0}" -gt $((8 * 1024 * 1024)) ] &&
      [ "${mem_avail_kb:-0}" -gt $((14 * 1024 * 1024)) ]; then
    tmp_root=/dev/shm
  fi
  TEST_TMPDIR=$(mktemp -d "$tmp_root/ringcache-ctest.XXXXXX")
  OWN_TMPDIR=$TEST_TMPDIR
  exec {TMPDIR_LOCK}> "$TEST_TMPDIR/.test-sh.lock"
  flock -n "$TMPDIR_LOCK" || true
fi
export TEST_TMPDIR
echo "deploy/test.sh: test directories under $TEST_TMPDIR"

# The compose test (label e2e) needs Docker: install-deps adds it, or uses the engine there is.
DEPS_ARGS=()
if wants e2e; then DEPS_ARGS+=(--with-compose); fi
stage deps bash deploy/install-deps.sh "${DEPS_ARGS[@]}"

# The sanitizer pass's build: only the target it runs (sanitizer-tests), in $ASAN_DIR.
# Leaves the time it ended in $RESULTS/asan-build.end: the table shows how long the build took,
# not how long until the tests came to wait for it.
asan_pass_build() {
  local rc=0
  { cmake -S . -B "$ASAN_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGCACHE_SANITIZE=ON \
      -DRINGCACHE_WERROR="$WERROR_OPT" > "$RESULTS/asan-configure.log" &&
      cmake --build "$ASAN_DIR" -j "$JOBS" --target sanitizer-tests; } || rc=$?
  now > "$RESULTS/asan-build.end"
  return $rc
}

MAIN_LABELS=()
for l in unit cluster e2e fault; do if wants "$l"; then MAIN_LABELS+=("$l"); fi; done

if [ ${#MAIN_LABELS[@]} -gt 0 ]; then
  stage configure cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DRINGCACHE_WERROR="$WERROR_OPT" -DRINGCACHE_DEBUG_INFO="$DEBUG_INFO" "${EXTRA[@]}"
  stage build cmake --build "$BUILD_DIR" -j "$JOBS"
fi

# The sanitizer build starts beside the unit tests at normal priority: with a warm ccache it is
# done there in under a minute (it compiles nothing and links). What is left of it once the unit
# tests end (a cold build) goes on at the lowest priority beside the other tests, taking only
# the CPU they leave idle. Its tests start once the cross-process and fault tests are done.
ASAN_T0=""
start_asan_build() {
  ASAN_T0=$(now)
  set -m
  asan_pass_build > "$RESULTS/asan-build.log" 2>&1 &
  ASAN_PID=$!
  set +m
  echo "deploy/test.sh: building the sanitizer pass in the background (log: $RESULTS/asan-build.log)"
}
ASAN_BESIDE=0
if [ $RUN_ASAN = 1 ] && [ ${#MAIN_LABELS[@]} -gt 0 ] && [ "${ASAN_BACKGROUND:-1}" = "1" ]; then
  ASAN_BESIDE=1
  start_asan_build
fi

start_cpu_watch
if wants unit; then tests "unit tests" "$BUILD_DIR" unit '^unit$'; fi
ASAN_NOTE=""
if [ -n "$ASAN_PID" ] && kill -0 "$ASAN_PID" 2> /dev/null; then
  renice -n 19 -g "$ASAN_PID" > /dev/null 2>&1 || true
  ASAN_NOTE="normal priority for $(since "$ASAN_T0") s, then nice 19"
fi

# The cross-process and fault tests in one ctest run, SIDE_JOBS at a time: they wait on
# daemons, leases and clients as much as they compute, and one queue packs them tighter than
# two stages one after the other. Its output goes to a file while the sanitizer build runs
# beside it, and is printed when it ends.
side=()
for l in cluster e2e fault; do if wants "$l"; then side+=("$l"); fi; done
SIDE_PID=""
SIDE_RESOURCES=$PWD/tests/ctest_resources.json  # the two fault slots (tests/CMakeLists.txt)
SIDE_NAME="cross-process and fault tests"
if [ ${#side[@]} -gt 0 ]; then
  SIDE_T0=$(now)
  echo "deploy/test.sh: == $SIDE_NAME (labels ${side[*]}, $SIDE_JOBS at a time; output at its end)"
  # shellcheck disable=SC2086
  ( cd "$BUILD_DIR" && exec ctest --output-on-failure --timeout 600 -j "$SIDE_JOBS" \
      --resource-spec-file "$SIDE_RESOURCES" \
      -L "^($(IFS='|'; echo "${side[*]}"))\$" --output-junit "$RESULTS/cross-fault.xml" \
      --test-output-size-passed 262144 \
      ${CTEST_ARGS:-} ) > "$RESULTS/cross-fault.log" 2>&1 &
  SIDE_PID=$!
fi

if [ -n "$SIDE_PID" ]; then
  rc=0
  wait "$SIDE_PID" || rc=$?
  SIDE_PID=""
  cat "$RESULTS/cross-fault.log"
  record "$SIDE_NAME" "$(since "$SIDE_T0")" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" \
    "$SIDE_JOBS at a time"
  if [ $rc -ne 0 ]; then FAILED=1; fi
fi

# The sanitizer tests wait for the cross-process and fault tests: beside them (three fault runs
# and a compose cluster on two cores) the sanitized daemons were starved past their timeouts
# (a 300 s read in FaultInjection.asan, a data node setup call in WriteLogTest). Their build
# still runs beside the tests, at nice 19 once the unit tests are done.
if [ $RUN_ASAN = 1 ]; then
  if [ $ASAN_BESIDE = 0 ]; then start_asan_build; fi
  t0=$(now)
  rc=0
  wait "$ASAN_PID" || rc=$?
  ASAN_PID=""
  asan_took=$(since "$ASAN_T0")
  if [ -s "$RESULTS/asan-build.end" ]; then
    asan_took=$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" \
      "$ASAN_T0" "$(cat "$RESULTS/asan-build.end")")
  fi
  record "sanitizer build" "$asan_took" "$([ $rc -eq 0 ] && echo ok || echo FAILED)" \
    "${ASAN_NOTE:-normal priority$([ $ASAN_BESIDE = 1 ] && echo ', done beside the unit tests')}; the tests waited $(since "$t0") s for it"
  if [ $rc -ne 0 ]; then
    tail -50 "$RESULTS/asan-build.log"
    FAILED=1
  else
    tests "sanitizer tests" "$ASAN_DIR" sanitizer '^sanitizer$'
  fi
elif [ "${SANITIZE:-0}" = "1" ] && wants sanitizer; then
  tests "sanitizer tests" "$BUILD_DIR" sanitizer '^sanitizer$'
fi

if [ $FAILED -ne 0 ]; then
  echo "deploy/test.sh: FAILED (the table below names the failing stages and tests)"
  exit 1
fi
echo "deploy/test.sh: all tests passed"
