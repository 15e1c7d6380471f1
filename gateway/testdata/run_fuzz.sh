#!/bin/bash
# Runs the NBD libFuzzer target (gateway/nbd_fuzz.cc) for a fixed number of inputs, from the seed
# corpus in gateway/testdata/fuzz_corpus/ copied to a scratch directory (the repo copy is never
# modified). A crash fails the test; its input is kept as ./nbd_fuzz_crash-* in the working
# directory (the build tree) for reproduction: `nbd_fuzzer ./nbd_fuzz_crash-...`.
# Usage: run_fuzz.sh FUZZER_BINARY SEED_DIR RUNS
set -euo pipefail
bin=$1
seeds=$2
runs=${3:-200000}
work=$(mktemp -d "${TMPDIR:-/tmp}/nbd_fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp "$seeds"/* "$work/"
# ASan's leak checker needs ptrace, which some sandboxes forbid; leaks are not what this hunts.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
"$bin" -runs="$runs" -seed=1 -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$PWD/nbd_fuzz_" "$work"
