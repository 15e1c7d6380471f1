#!/bin/bash
# The long fuzz run (docs/testing.md, "Fuzzing"): every fuzz target of a build tree for many
# more inputs than CI gives them, with a fresh seed each run, then the libFuzzer NBD target
# (coverage-guided, when clang built it) for a while. Prints one line per target and
# `fuzz: targets=N inputs=M crashes=K`; a crash leaves its input as fuzz-crash-* in the working
# directory, with the command that reproduces it.
#
# Usage: tests/fuzz/fuzz.sh [--build DIR] [--runs N] [--seed S] [--libfuzzer-seconds T]
#   --build DIR   build tree (default: build; a sanitizer tree, build-asan, finds more)
#   --runs N      mutated inputs per target (default 1000000)
#   --seed S      seed of the mutations (default: from the clock; printed)
#   --libfuzzer-seconds T   how long the libFuzzer NBD target runs (default 300; 0: skip)
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$here/build
runs=1000000
seed=$(date +%s)
lf_secs=300
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --libfuzzer-seconds) lf_secs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -d "$build" ] || { echo "fuzz.sh: no build tree at $build (cmake --build first)" >&2; exit 2; }
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
# The targets and their corpora, as ctest registered them (Fuzz.NAME: BINARY --runs N --seed S
# CORPUS).
mapfile -t lines < <(ctest --test-dir "$build" -R '^Fuzz\.' --show-only=json-v1 2>/dev/null |
  python3 -c '
import json, sys
for t in json.load(sys.stdin)["tests"]:
    cmd = t["command"]
    print(cmd[0] + "\t" + cmd[-1])')
[ ${#lines[@]} -gt 0 ] || { echo "fuzz.sh: no Fuzz.* tests in $build" >&2; exit 2; }
targets=0 crashes=0
for line in "${lines[@]}"; do
  bin=${line%%$'\t'*}
  corpus=${line#*$'\t'}
  targets=$((targets + 1))
  start=$(date +%s)
  if "$bin" --runs "$runs" --seed "$seed" "$corpus" > /dev/null; then
    echo "fuzz: $(basename "$bin"): $runs inputs (seed $seed) in $(( $(date +%s) - start )) s: no crash"
  else
    crashes=$((crashes + 1))
    echo "fuzz: $(basename "$bin"): CRASHED (seed $seed; the input and how to reproduce it above)"
  fi
done
inputs=$((targets * runs))
lf=$build/gateway/nbd_fuzzer
if [ "$lf_secs" -gt 0 ] && [ -x "$lf" ]; then
  targets=$((targets + 1))
  work=$(mktemp -d "${TMPDIR:-/tmp}/nbd_fuzz.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  cp "$here"/gateway/testdata/fuzz_corpus/* "$work/"
  if out=$("$lf" -max_total_time="$lf_secs" -seed="$seed" -max_len=8192 -timeout=10 \
      -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$PWD/nbd_fuzz_" "$work" 2>&1); then
    n=$(grep -o 'stat::number_of_executed_units: *[0-9]*' <<< "$out" | grep -o '[0-9]*$' || echo 0)
    inputs=$((inputs + n))
    echo "fuzz: nbd_fuzzer (libFuzzer): $n inputs in $lf_secs s: no crash"
  else
    crashes=$((crashes + 1))
    tail -30 <<< "$out"
    echo "fuzz: nbd_fuzzer (libFuzzer): CRASHED (input kept as nbd_fuzz_crash-*)"
  fi
fi
echo "fuzz: targets=$targets inputs=$inputs crashes=$crashes"
[ "$crashes" -eq 0 ]
