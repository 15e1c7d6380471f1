#!/usr/bin/env bash
# A VDI's cache policy switched live while qemu-io writes and verifies patterns over NBD
# (ringcachectl vdi set-policy; cachenode/policy/README.md, "Per-VDI policies"). ringcache-local
# runs two cache nodes with 4 MiB SSDs each under a 256 MiB VDI, so blocks are evicted, and dirty
# ones destaged, while the policy changes (asserted from /metrics). A loop switches the VDI among orders, admissions,
# bypasses and victims (and back to the default) for as long as the writers run. Asserted: every
# switch succeeds, every pattern reads back after each round and at the end, and the stats show
# the policy last set.
#
#   tests/e2e/policy_switch_test.sh BUILD_DIR
set -euo pipefail
command -v qemu-io > /dev/null || { echo "qemu-io not installed: skipping"; exit 77; }
BUILD=$(cd "${1:?usage: policy_switch_test.sh BUILD_DIR}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
WORK=$(mktemp -d "${TEST_TMPDIR:-/tmp}/rc-policy.XXXXXX")
source "$(dirname "$0")/ports.sh"
pick_base_port  # sets BASE: a port slot of its own
PID="" SWITCHER=""
cleanup() {
  set +e
  [ -n "$SWITCHER" ] && kill "$SWITCHER" 2> /dev/null && wait "$SWITCHER" 2> /dev/null
  [ -n "$PID" ] && kill "$PID" 2> /dev/null && wait "$PID" 2> /dev/null
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
log() { echo "[policy-switch] $(date +%T) $*"; }
fail() { echo "[policy-switch] FAIL: $*" >&2; tail -n 30 "$WORK/local.log" >&2 || true; exit 1; }
CTL=("$BUILD/tools/ctl/ringcachectl" --gateway "127.0.0.1:$((BASE+2))")
qio() { qio_at "nbd://127.0.0.1:$((BASE+1))/disk" "$@"; }  # COMMAND...: tests/e2e/patterns.sh
source "$ROOT/tests/e2e/patterns.sh"  # write_round / check_round SEED
# 32 runs of 2 MiB between the rounds' runs (16k blocks: four times the two SSDs), pattern SEED.
fill() {  # write|read SEED: one qemu-io for the 32 runs (patterns.sh's qio_round)
  local i cmds=()
  for i in $(seq 0 31); do cmds+=("$1 -P $2 $(( i * 8 + 1 ))M 2M"); done
  qio_round "fill $1 $2" "${cmds[@]}"
}

"$BUILD/tools/ringcache-local" --data-dir "$WORK/data" --cache-nodes 2 --data-nodes 2 \
  --replication 2 --ssd-size 4MiB --ram-size 1MiB --create-vdi disk:256MiB \
  --nbd-listen "127.0.0.1:$((BASE+1))" --admin-listen "127.0.0.1:$((BASE+2))" \
  --http-listen "127.0.0.1:$((BASE+3))" --ready-file "$WORK/ready.json" > "$WORK/local.log" 2>&1 &
PID=$!
for _ in $(seq 1 200); do [ -s "$WORK/ready.json" ] && break; sleep 0.1; done
[ -s "$WORK/ready.json" ] || fail "ringcache-local did not start"

# The switcher: one spec after another until told to stop; every switch must succeed.
SPECS=("arc+sieve" "lru" "s3fifo+cmf" "fifo+lcr" "cflru+seqcut" "default" "s3fifo+sieve(threshold=3)")
(
  n=0
  while [ ! -e "$WORK/stop" ]; do
    spec=${SPECS[$((n % ${#SPECS[@]}))]}
    "${CTL[@]}" vdi set-policy disk "$spec" > /dev/null 2>> "$WORK/switch.err" ||
      echo "switch to $spec failed" >> "$WORK/switch.err"
    n=$((n + 1))
    echo "$n" > "$WORK/switches"
    # Several switches a second, each racing the writes: unpaced, the switcher's ringcachectl
    # starts and the rebuilds behind them took half of this test's CPU, and more the longer
    # its neighbours made it run.
    sleep 0.1
  done
) &
SWITCHER=$!

for seed in 3 9 21 40; do
  write_round "$seed"
  fill write "$seed"
  check_round "$seed"
  fill read "$seed"
  log "round $seed written and read back ($(cat "$WORK/switches" 2> /dev/null || echo 0) switches so far)"
done
# At least one full cycle of specs while writing: keep writing until the switcher has done it.
write_round 55
while [ "$(cat "$WORK/switches" 2> /dev/null || echo 0)" -lt "${#SPECS[@]}" ]; do
  write_round 55
done
touch "$WORK/stop"
wait "$SWITCHER"
SWITCHER=""
[ -s "$WORK/switch.err" ] && fail "$(cat "$WORK/switch.err")"
switches=$(cat "$WORK/switches")
log "$switches policy switches, none failed"

"${CTL[@]}" vdi set-policy disk 'arc + sieve' > /dev/null || fail "set-policy arc+sieve"
check_round 55
fill read 40
stats=$("${CTL[@]}" --json stats --vdi disk) || fail "stats"
grep -q '"policy":"arc+sieve"' <<< "$stats" || fail "stats do not show arc+sieve: $stats"
list=$("${CTL[@]}" vdi list) || fail "vdi list"
grep -q "arc+sieve" <<< "$list" || fail "vdi list does not show arc+sieve: $list"
evicted=$(curl -sf "http://127.0.0.1:$((BASE+3))/metrics" |
  awk '/^ringcache_cachenode_evictions_total/ {s += $2} END {print s + 0}')
log "blocks evicted meanwhile: $evicted"
[ "${evicted%.*}" -gt 0 ] || fail "no block was evicted: the test did not stress the policy"
"${CTL[@]}" flush --wait > /dev/null || fail "flush"
check_round 55
fill read 40
log "PASS"
