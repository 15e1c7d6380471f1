#!/usr/bin/env bash
# The test command: installs dependencies (Debian packages), configures, builds, and runs every
# test through ctest. Exits non-zero on any failure.
#
#   deploy/test.sh            # Release-with-debug-info build in ./build
#   SANITIZE=1 deploy/test.sh # ASan+UBSan build in ./build-asan
#   JOBS=2 CTEST_ARGS="-R Ring" deploy/test.sh
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
echo "deploy/test.sh: all tests passed"
