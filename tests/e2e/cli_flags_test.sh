#!/usr/bin/env bash
# Every program's command line: --version prints "<program> <version>" and then the formats it
# writes and reads, exits 0; --help exits 0; an unknown flag, a missing cluster file and a bad
# one exit 2 (bad configuration); `deploy/cluster.sh --help` exits 0 without creating anything.
# Usage: tests/e2e/cli_flags_test.sh BUILD_DIR
set -uo pipefail
BIN=$(cd "${1:?usage: cli_flags_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VERSION=$(sed -n 's/^project(ringcache VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")
WORK=$(mktemp -d /tmp/cli_flags_test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

expect_rc() {  # want description command...
  local want=$1 what=$2 rc
  shift 2
  "$@" > "$WORK/out" 2>&1
  rc=$?
  [ "$rc" = "$want" ] || { fail "$what: exit $rc, want $want"; sed 's/^/    /' "$WORK/out" | head -5; }
}

for p in gateway/ringcache-gateway cachenode/ringcache-cachenode datanode/ringcache-datanode \
         tools/ringcache-local tools/ctl/ringcachectl tools/sim/ringcache-sim; do
  name=$(basename "$p")
  out=$("$BIN/$p" --version 2>&1)
  rc=$?
  [ "$rc" = 0 ] || fail "$name --version exits $rc"
  [ "$(head -1 <<< "$out")" = "$name $VERSION" ] ||
    fail "$name --version printed '$out', want '$name $VERSION' first"
  [[ "$(sed -n 2p <<< "$out")" == "formats: slot-file "* ]] ||
    fail "$name --version printed '$out', want the formats on its second line"
  expect_rc 0 "$name --help" "$BIN/$p" --help
  expect_rc 2 "$name --no-such-flag" "$BIN/$p" --no-such-flag
done
printf 'nodes:\n  - {role: cachenode, id: x}\n' > "$WORK/bad-value.yaml"
printf 'nodes: [\n' > "$WORK/bad-yaml.yaml"
for p in gateway/ringcache-gateway cachenode/ringcache-cachenode datanode/ringcache-datanode; do
  expect_rc 2 "$(basename "$p") with a missing cluster file" "$BIN/$p" --cluster "$WORK/none.yaml"
  expect_rc 2 "$(basename "$p") with a bad value in the cluster file" \
    "$BIN/$p" --cluster "$WORK/bad-value.yaml" --id 1
  expect_rc 2 "$(basename "$p") with a cluster file that is not YAML" \
    "$BIN/$p" --cluster "$WORK/bad-yaml.yaml" --id 1
done
expect_rc 2 "ringcache-datanode with a bad --config" "$BIN/datanode/ringcache-datanode" \
  --config "$WORK/bad-yaml.yaml"
# A per-address memory budget below one connection's share is refused, naming the flag.
mkdir -p "$WORK/local" && cd "$WORK/local" || exit 1
expect_rc 2 "ringcache-local --nbd-memory-per-peer 1MiB" "$BIN/tools/ringcache-local" \
  --nbd-memory-per-peer 1MiB
grep -q -- "--nbd-memory-per-peer '1MiB'" "$WORK/out" || fail "the refusal does not name the flag"
cd "$ROOT" || exit 1

# cluster.sh --help: exit 0, nothing created in the current directory.
(cd "$WORK" && mkdir empty && cd empty && "$ROOT/deploy/cluster.sh" --help > ../help.txt 2>&1)
rc=$?
[ "$rc" = 0 ] || fail "deploy/cluster.sh --help exits $rc"
grep -q "cluster.sh up" "$WORK/help.txt" || fail "deploy/cluster.sh --help does not show the usage"
[ -z "$(ls -A "$WORK/empty")" ] || fail "deploy/cluster.sh --help created: $(ls -A "$WORK/empty")"
(cd "$WORK/empty" && "$ROOT/deploy/cluster.sh" up --no-such-flag > /dev/null 2>&1)
rc=$?
[ "$rc" = 2 ] || fail "deploy/cluster.sh up --no-such-flag exits $rc, want 2"

if [ $failed = 0 ]; then echo "cli_flags_test: all passed"; fi
exit $failed
