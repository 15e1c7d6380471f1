#!/usr/bin/env bash
# Builds the daemons and ringcachectl of an earlier ringcache release from this repository's git
# history, and prints the build directory (the layout of build/: datanode/ringcache-datanode,
# cachenode/ringcache-cachenode, gateway/ringcache-gateway, tools/ctl/ringcachectl), ready for
# RINGCACHE_BIN of deploy/cluster.sh or --old-bin of tests/fault/fault_test.py.
#
#   tests/upgrade/build_release.sh [--release R] [--cache DIR] [--jobs N]
#
# --release R   a release of deploy/releases.txt (default: the last one, the previous release)
# --cache DIR   where builds are kept (default $RINGCACHE_RELEASE_CACHE, else
#               ~/.cache/ringcache/releases); a complete build is reused, keyed by its commit
# --jobs N      parallel compiles (default 2)
#
# The commit comes from deploy/releases.txt, so a clone without tags works; when the clone has
# the tag v<R> it must point at the same commit. The sources are taken with `git archive` (the
# clone needs its history: not a shallow clone). The build goes through ccache when installed,
# at nice 10 so that tests running beside it keep their daemons responsive, with the flags of
# deploy/test.sh (-Werror included: ccache keys on them, and unchanged files then hit). Only the build's
# directory is printed on stdout; progress goes to stderr, the compiler's output to DIR/build.log.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
RELEASE=""
CACHE=${RINGCACHE_RELEASE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ringcache/releases}
JOBS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --release) RELEASE=$2; shift 2 ;;
    --cache) CACHE=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    -h|--help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "build_release.sh: unknown argument '$1' (--help)" >&2; exit 2 ;;
  esac
done

releases=$(grep -v '^\s*#' "$ROOT/deploy/releases.txt" | awk 'NF >= 2 {print $1, $2}')
if [ -z "$RELEASE" ]; then RELEASE=$(tail -1 <<< "$releases" | cut -d' ' -f1); fi
COMMIT=$(awk -v r="$RELEASE" '$1 == r {print $2}' <<< "$releases")
if [ -z "$COMMIT" ]; then
  echo "build_release.sh: release '$RELEASE' is not in deploy/releases.txt (known:" \
       "$(cut -d' ' -f1 <<< "$releases" | tr '\n' ' '))" >&2
  exit 2
fi
if ! git -C "$ROOT" cat-file -e "$COMMIT^{commit}" 2> /dev/null; then
  echo "build_release.sh: commit $COMMIT of release $RELEASE is not in this clone's history" \
       "(a shallow clone? git fetch --unshallow)" >&2
  exit 1
fi
tagged=$(git -C "$ROOT" rev-parse -q --verify "refs/tags/v$RELEASE^{commit}" 2> /dev/null || true)
if [ -n "$tagged" ] && [ "$tagged" != "$COMMIT" ]; then
  echo "build_release.sh: tag v$RELEASE is $tagged, deploy/releases.txt says $COMMIT" >&2
  exit 1
fi

OUT="$CACHE/$RELEASE-${COMMIT:0:12}"
BIN="$OUT/src/build"
TARGETS=(ringcache-datanode ringcache-cachenode ringcache-gateway ringcachectl)
mkdir -p "$CACHE"
exec {LOCK_FD}> "$OUT.lock"
flock "$LOCK_FD"  # one build of a release at a time; a second caller waits and reuses it
if [ -f "$OUT/complete" ]; then
  echo "$BIN"
  exit 0
fi

echo "build_release.sh: building release $RELEASE ($COMMIT) in $OUT" >&2
rm -rf "$OUT"
mkdir -p "$OUT/src"
git -C "$ROOT" archive "$COMMIT" | tar -x -C "$OUT/src"
t0=$(date +%s)
if ! { nice -n 10 cmake -S "$OUT/src" -B "$BIN" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
         -DRINGCACHE_WERROR=ON -DRINGCACHE_DEBUG_INFO=lines \
       && nice -n 10 cmake --build "$BIN" -j "$JOBS" --target "${TARGETS[@]}"; } \
       > "$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log" >&2
  echo "build_release.sh: building release $RELEASE failed (log: $OUT/build.log)" >&2
  exit 1
fi
echo "$RELEASE $COMMIT built in $(($(date +%s) - t0)) s" > "$OUT/complete"
echo "build_release.sh: release $RELEASE built in $(($(date +%s) - t0)) s" >&2
echo "$BIN"
