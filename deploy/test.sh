#!/usr/bin/env bash
# The test command: installs dependencies (Debian packages), configures, builds, and runs every
# test through ctest. Exits non-zero on any failure.
#
#   deploy/test.sh            # Release-with-debug-info build in ./build
#   SANITIZE=1 deploy/test.sh # ASan+UBSan build in ./build-asan
#   JOBS=2 CTEST_ARGS="-R Ring" deploy/test.sh
#   ASAN=0 deploy/test.sh     # skip the sanitizer pass over parser, storage and fault tests
set -euo pipefail
cd "$(dirname "$0")/.."

bash deploy/install-deps.sh

JOBS=${JOBS:-$(nproc)}
if [ "${SANITIZE:-0}" = "1" ]; then
  BUILD_DIR=${BUILD_DIR:-build-asan}
  EXTRA=(-DRINGCACHE_SANITIZE=ON)
else
  BUILD_DIR=${BUILD_DIR:-build}
  EXTRA=()
fi

cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${EXTRA[@]}"
cmake --build "$BUILD_DIR" -j "$JOBS"

export TEST_TMPDIR=${TEST_TMPDIR:-$(mktemp -d /tmp/ringcache-ctest.XXXXXX)}
# Cross-process tests start daemons; two at a time keeps a 2-core machine responsive.
(cd "$BUILD_DIR" && ctest --output-on-failure --timeout 600 -j "${CTEST_JOBS:-2}" ${CTEST_ARGS:-})

# The parser, storage and fault tests again under AddressSanitizer + UndefinedBehaviorSanitizer
# (CONVENTIONS: the parser and fault tests run under the sanitizer build). ASAN=0 skips this.
if [ "${ASAN:-1}" = "1" ] && [ "${SANITIZE:-0}" != "1" ]; then
  ASAN_TESTS=(common/common_test common/tls_test datanode/datanode_test cachenode/cachenode_test
              cachenode/cache_node_test cachenode/write_log_test cachenode/cachenode_service_test
              cachenode/ownership_test cachenode/block_map_test cachenode/destage_planner_test
              gateway/piece_pool_test gateway/data_channel_test
              gateway/nbd_protocol_test gateway/nbd_server_test gateway/nbd_bad_input_test
              gateway/data_rebalancer_test)
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRINGCACHE_SANITIZE=ON
  targets=()
  for t in "${ASAN_TESTS[@]}"; do targets+=("$(basename "$t")"); done
  cmake --build build-asan -j "$JOBS" --target "${targets[@]}" nbd-test-server \
    ringcache-datanode ringcache-cachenode ringcache-gateway ringcachectl
  for t in "${ASAN_TESTS[@]}"; do
    echo "deploy/test.sh: $t under ASan+UBSan"
    (cd build-asan && "./$t" --gtest_brief=1)
  done
  # The fault-injection checker against sanitized daemons (it fails on any sanitizer report in
  # their logs). Fewer faults than the main run: the sanitized daemons are several times slower.
  echo "deploy/test.sh: fault injection against the ASan+UBSan daemons"
  python3 tests/fault/fault_test.py --bin build-asan --faults "${ASAN_FAULTS:-20}"
fi
echo "deploy/test.sh: all tests passed"
